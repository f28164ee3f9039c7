"""A local Hugging Face causal LM served with step-level dynamic batching.

Each model gets one background thread that owns the model and a running batch. HTTP threads
apply the chat template, queue a request and wait. Between two decode steps the thread admits
whatever has queued (up to ``max_batch``): the newcomers are prefilled together (left-padded) and
their key/value cache is stacked under the running batch's (:mod:`hitkit.bots.kvcache`), so a chat
that arrives mid-generation starts at the next step instead of waiting for the whole batch to end.
Every step advances every live sequence by one token with its own temperature, top-p, stop
sequences and token budget; finished sequences leave at once and their callers are woken.

We run our own loop rather than ``model.generate`` because ``generate`` applies one sampling
configuration to the whole batch and cannot admit requests while it runs.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedTokenizerBase

from hitkit.bots import kvcache
from hitkit.bots.base import Backend, BackendClosed, Cancelled, Completion, FinishReason, Ticket
from hitkit.bots.batching import BatchStats, await_ticket, collect, enqueue, first_stop
from hitkit.bots.hf_model import eos_token_ids, load_model
from hitkit.bots.logprobs import TokenLogprob, content, step_logprobs
from hitkit.bots.protocol import ChatCompletionRequest, ProtocolError
from hitkit.bots.sampling import sample_next

log = logging.getLogger(__name__)

if not hasattr(DynamicCache(), "layers"):  # the per-layer cache API our batch surgery relies on
    import transformers

    raise ImportError(
        f"hitkit's bot server needs transformers 5 or newer (per-layer KV caches); found {transformers.__version__}"
    )


@dataclass
class _Pending:
    """A queued request and the slot its HTTP thread waits on."""

    prompt_ids: list[int]
    max_new: int
    temperature: float
    top_p: float
    stop: list[str]
    generator: torch.Generator | None = None  # this request's own, when it sent a seed
    want_logprobs: int | None = None  # alternatives per token the request asked for (None: no logprobs)
    ticket: Ticket = field(default_factory=Ticket)
    generated: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)

    @property
    def done(self) -> threading.Event:
        return self.ticket.done

    def finish(self, result: Completion | None = None, error: BaseException | None = None) -> None:
        self.ticket.finish(result, error)


@dataclass
class _Batch:
    """The running batch: one row per live sequence, in the same order as ``seqs``."""

    seqs: list[_Pending]
    cache: DynamicCache
    mask: torch.Tensor  # [rows, time] 1 where the cache column is a real token
    positions: torch.Tensor  # [rows] position id of the next token to feed
    last: torch.Tensor  # [rows] the token sampled last, not yet fed


class HFBackend(Backend):
    """A Hugging Face causal LM behind a dynamic-batching worker thread."""

    engine_name, gives_logprobs = "transformers", True

    def __init__(
        self,
        name: str,
        model: Any,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_batch: int = 32,
        batch_window_ms: float = 5.0,
        max_queue: int = 1024,
        seed: int = 0,
    ) -> None:
        """Serve ``model`` as ``name``; start the worker thread at once."""
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"model {name!r} has no chat template; use an instruction-tuned model "
                "or set tokenizer.chat_template before serving it"
            )
        self.name = name
        self.model = model
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        self.max_batch = max_batch
        self.batch_window_s = batch_window_ms / 1000.0
        self.max_context = int(getattr(model.config, "max_position_embeddings", 0) or 0) or None
        self.eos_ids = eos_token_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else min(self.eos_ids, default=0)
        self.stats_ = BatchStats()
        self._queue: queue.Queue[_Pending] = queue.Queue(maxsize=max_queue)
        self._tok_lock = threading.Lock()  # fast tokenizers are not safe for concurrent use
        self._closing = threading.Event()
        self._batch: _Batch | None = None
        self._generator = torch.Generator(device=self.device).manual_seed(seed)
        self._thread = threading.Thread(target=self._run, name=f"hitkit-bot-{name}", daemon=True)
        self._thread.start()

    @classmethod
    def load(
        cls, name: str, path: str | Path, gguf_file: str | None = None, device: str = "auto", **options: Any
    ) -> HFBackend:
        """Load a model from disk (see :func:`hitkit.bots.hf_model.load_model`) and serve it."""
        model, tokenizer = load_model(path, gguf_file, device)
        return cls(name, model, tokenizer, **options)

    # ------------------------------------------------------------------ caller side (HTTP threads)

    def encode(self, request: ChatCompletionRequest) -> list[int]:
        """Apply the model's chat template to the request's messages and tokenize."""
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        try:
            with self._tok_lock:
                ids: Any = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        except Exception as exc:  # noqa: BLE001 - template errors are the client's to fix
            raise ProtocolError(
                f"model {self.name!r} chat template rejected the messages: {exc}", param="messages"
            ) from None
        if hasattr(ids, "keys"):  # some versions return a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def submit(self, request: ChatCompletionRequest) -> Ticket:
        """Queue the request for the next batch and return its ticket."""
        if self._closing.is_set():
            raise BackendClosed(f"model {self.name!r} is shutting down")
        prompt = self.encode(request)
        max_new = request.reply_budget
        if self.max_context is not None:
            room = self.max_context - len(prompt)
            if room < 1:
                raise ProtocolError(
                    f"the conversation is {len(prompt)} tokens but model {self.name!r} holds at most "
                    f"{self.max_context}; send a shorter history (BotConfig.context_tokens)",
                    param="messages",
                )
            max_new = min(max_new, room)
        generator = None
        if request.seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(request.seed)
        pending = _Pending(
            prompt, max_new, request.temperature, request.top_p, list(request.stop), generator, request.want_logprobs
        )
        pending.ticket.partial = lambda: self._decode(list(pending.generated))  # the reply so far, for streaming
        enqueue(self._queue, pending, self.name)
        return pending.ticket

    def complete(self, request: ChatCompletionRequest) -> Completion:
        """Queue the request for the next batch and wait for its reply."""
        return await_ticket(self.submit(request), self._thread, self.name)

    def stats(self) -> dict[str, Any]:
        """Batching counters plus what is queued and running now."""
        batch = self._batch
        return {
            "kind": "transformers",
            "device": str(self.device),
            "max_batch": self.max_batch,
            "queued": self._queue.qsize(),
            "running": len(batch.seqs) if batch else 0,
            **self.stats_.snapshot(),
        }

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop after the current step; every unfinished request fails with BackendClosed."""
        self._closing.set()
        self._thread.join(timeout_s)
        self._fail_all(BackendClosed(f"model {self.name!r} shut down before replying"))

    # ------------------------------------------------------------------ worker side (one thread)

    def _run(self) -> None:
        with torch.inference_mode():
            while not self._closing.is_set():
                running = self._batch.seqs if self._batch else []
                # Idle: block briefly for a first request, then give simultaneous chats a few ms to
                # arrive so they share one prefill. Busy: take only what is already waiting.
                fresh = collect(
                    self._queue,
                    self.max_batch - len(running),
                    block_s=None if running else 0.1,
                    window_s=0.0 if running else self.batch_window_s,
                )
                fresh = self._skip_cancelled(fresh)
                try:
                    self._drop_cancelled()
                    if fresh:
                        self._admit(fresh)
                    if self._batch is not None:
                        self._step()
                except Exception as exc:  # noqa: BLE001 - fail these requests, keep serving others
                    log.exception("model %s: generation failed", self.name)
                    victims = fresh + (self._batch.seqs if self._batch else [])
                    self._batch = None
                    for p in {id(p): p for p in victims}.values():
                        if not p.done.is_set():
                            self.stats_.record_done(ok=False)
                            p.finish(error=RuntimeError(f"model {self.name!r} failed to generate: {exc}"))

    def _skip_cancelled(self, fresh: list[_Pending]) -> list[_Pending]:
        """Finish queued requests cancelled before they started; return the others."""
        kept = []
        for p in fresh:
            if p.ticket.cancelled.is_set():
                self.stats_.record_cancelled(0)
                p.finish(error=Cancelled(p.ticket.cancel_reason or "cancelled"))
            else:
                kept.append(p)
        return kept

    def _drop_cancelled(self) -> None:
        """Remove cancelled sequences from the running batch before the next step."""
        b = self._batch
        if b is None or not any(p.ticket.cancelled.is_set() for p in b.seqs):
            return
        keep = []
        for row, p in enumerate(b.seqs):
            if p.ticket.cancelled.is_set():
                self.stats_.record_cancelled(len(p.generated))
                p.finish(error=Cancelled(p.ticket.cancel_reason or "cancelled"))
            else:
                keep.append(row)
        self._keep(keep)

    def _keep(self, keep: list[int]) -> None:
        """Shrink the running batch to rows ``keep`` (none: no batch)."""
        b = self._batch
        assert b is not None
        if not keep:
            self._batch = None
            return
        rows = torch.tensor(keep, device=self.device)
        cache, mask = kvcache.keep_rows(b.cache, b.mask, rows)
        self._batch = _Batch(
            seqs=[b.seqs[r] for r in keep],
            cache=cache,
            mask=mask,
            positions=b.positions.index_select(0, rows),
            last=b.last.index_select(0, rows),
        )

    def _fail_all(self, error: BaseException) -> None:
        victims = list(self._batch.seqs) if self._batch else []
        self._batch = None
        while True:
            try:
                victims.append(self._queue.get_nowait())
            except queue.Empty:
                break
        for p in victims:
            if not p.done.is_set():
                p.finish(error=error)

    def _sampling_params(self, seqs: list[_Pending]) -> tuple[torch.Tensor, torch.Tensor]:
        temps = torch.tensor([p.temperature for p in seqs], dtype=torch.float32, device=self.device)
        top_ps = torch.tensor([p.top_p for p in seqs], dtype=torch.float32, device=self.device)
        return temps, top_ps

    def _admit(self, fresh: list[_Pending]) -> None:
        """Prefill newcomers together and stack them under the running batch."""
        width = max(len(p.prompt_ids) for p in fresh)
        ids = torch.full((len(fresh), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(fresh), width), dtype=torch.long)
        for row, p in enumerate(fresh):
            ids[row, width - len(p.prompt_ids) :] = torch.tensor(p.prompt_ids)
            mask[row, width - len(p.prompt_ids) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        positions = (mask.cumsum(dim=1) - 1).clamp_min(0)
        cache = DynamicCache()
        # logits_to_keep=1: only the last position's logits are needed; skips a vocab-sized matmul
        # per prompt token.
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        temps, top_ps = self._sampling_params(fresh)
        first = sample_next(out.logits[:, -1, :], temps, top_ps, self._generator, [p.generator for p in fresh])
        steps = step_logprobs(out.logits[:, -1, :], first, [p.want_logprobs for p in fresh])
        self.stats_.record_prefill(len(fresh), sum(len(p.prompt_ids) for p in fresh))
        incoming = _Batch(seqs=fresh, cache=out.past_key_values, mask=mask, positions=mask.sum(dim=1), last=first)
        if self._batch is None:
            self._batch = incoming
        else:
            old = self._batch
            cache_, mask_ = kvcache.join(old.cache, old.mask, incoming.cache, incoming.mask)
            self._batch = _Batch(
                seqs=old.seqs + fresh,
                cache=cache_,
                mask=mask_,
                positions=torch.cat([old.positions, incoming.positions]),
                last=torch.cat([old.last, incoming.last]),
            )
        self._accept(first.tolist(), steps, offset=len(self._batch.seqs) - len(fresh))

    def _step(self) -> None:
        """Feed every live sequence its last token and sample the next one."""
        b = self._batch
        assert b is not None
        b.mask = torch.cat([b.mask, b.mask.new_ones((b.mask.shape[0], 1))], dim=1)
        out = self.model(
            input_ids=b.last.unsqueeze(1),
            attention_mask=b.mask,
            position_ids=b.positions.unsqueeze(1),
            past_key_values=b.cache,
            use_cache=True,
        )
        b.cache = out.past_key_values
        b.positions = b.positions + 1
        temps, top_ps = self._sampling_params(b.seqs)
        b.last = sample_next(out.logits[:, -1, :], temps, top_ps, self._generator, [p.generator for p in b.seqs])
        self.stats_.record_step(len(b.seqs))
        steps = step_logprobs(out.logits[:, -1, :], b.last, [p.want_logprobs for p in b.seqs])
        self._accept(b.last.tolist(), steps, offset=0)

    def _accept(self, tokens: list[int], steps: list[TokenLogprob | None], offset: int) -> None:
        """Append the sampled tokens to rows ``offset…``; retire the rows that are finished."""
        b = self._batch
        assert b is not None
        finished: set[int] = set()
        for row, (token, step) in enumerate(zip(tokens, steps), start=offset):
            p = b.seqs[row]
            result = self._check_finished(p, token, step)
            if result is not None:
                finished.add(row)
                self.stats_.record_done(result.completion_tokens)
                p.finish(result)
        if not finished:
            return
        self._keep([r for r in range(len(b.seqs)) if r not in finished])

    def _check_finished(self, p: _Pending, token: int, step: TokenLogprob | None = None) -> Completion | None:
        """Record ``token`` (and its logprobs) for ``p``; return its Completion if that token ends the reply."""
        if token in self.eos_ids:
            return self._completion(p, "stop")
        p.generated.append(token)
        if step is not None:
            p.logprobs.append(step)
        if p.stop:
            text = self._decode(p.generated)
            cut = first_stop(text, p.stop)
            if cut is not None:
                return self._completion(p, "stop", text[:cut])
        if len(p.generated) >= p.max_new:
            return self._completion(p, "length")
        return None

    def _decode(self, ids: list[int]) -> str:
        with self._tok_lock:
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return text if isinstance(text, str) else "".join(text)

    def _completion(self, p: _Pending, reason: FinishReason, text: str | None = None) -> Completion:
        if text is None:
            text = self._decode(p.generated)
        # Leading/trailing whitespace is template residue, never part of what a chat shows.
        return Completion(
            text=text.strip(),
            finish_reason=reason,
            prompt_tokens=len(p.prompt_ids),
            completion_tokens=len(p.generated),
            logprobs=None if p.want_logprobs is None else content(p.logprobs, lambda t: self._decode([t])),
        )
