"""transformers' own continuous batching, fed by concurrent chats: the reference row of bot_serving.py.

Kept apart from ``bot_serving.py`` so that script stays one screenful of measurement logic; imported
by it only when the ``transformers`` row runs (running ``python benchmarks/bot_serving.py`` puts this
folder on ``sys.path``).
"""

from __future__ import annotations

import threading
import time


class TransformersCB:
    """transformers' continuous-batching manager, fed by concurrent chats through a router thread."""

    def __init__(
        self, model, tokenizer, max_tokens: int, eos_ids: set[int], max_batch: int, prompts: list[str]
    ) -> None:
        from transformers import ContinuousBatchingConfig, GenerationConfig

        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.eos_ids = eos_ids
        config = GenerationConfig(
            max_new_tokens=max_tokens,
            do_sample=False,
            eos_token_id=sorted(eos_ids),
            pad_token_id=tokenizer.pad_token_id,
        )
        cb = ContinuousBatchingConfig(max_requests_per_batch=max_batch)
        self.manager = model.init_continuous_batching(generation_config=config, continuous_batching_config=cb)
        self.manager.start()
        self._waiting: dict[str, tuple[threading.Event, list]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._router = threading.Thread(target=self._route, daemon=True)
        self._router.start()
        self._ids = [self._encode(p) for p in prompts]

    def _encode(self, prompt: str) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)

    def _route(self) -> None:
        while not self._stop.is_set():
            result = self.manager.get_result(timeout=0.05)
            if result is None or not result.is_finished():
                continue
            with self._lock:
                event, box = self._waiting.pop(result.request_id)
            box.append(result)
            event.set()

    def send(self, i: int) -> int:
        """One request through the manager; blocks until it is finished."""
        event, box = threading.Event(), []
        request_id = f"bench-{i}-{threading.get_ident()}-{time.perf_counter_ns()}"
        with self._lock:
            self._waiting[request_id] = (event, box)
        self.manager.add_request(self._ids[i % len(self._ids)], request_id=request_id, max_new_tokens=self.max_tokens)
        event.wait()
        result = box[0]
        if result.error:
            raise RuntimeError(result.error)
        return sum(1 for t in result.generated_tokens if t not in self.eos_ids), None

    def close(self) -> None:
        """Stop the router and the manager."""
        self._stop.set()
        self._router.join()
        self.manager.stop(block=True, timeout=30)
