"""A GGUF model served by llama.cpp with continuous batching across concurrent chats.

One background thread owns a llama.cpp context whose key/value cache is shared by up to
``max_batch`` sequences (one sequence id per request). Between two ``llama_decode`` calls the thread
admits what has queued, drops what was cancelled (its cache cells are freed at once), and builds one
``llama_batch`` holding the next token of every decoding chat plus prompt chunks of newcomers, so a
chat that arrives mid-generation starts at the next step and one that finishes or is abandoned
leaves at the next step. Each request samples with its own chain (temperature, top-p, a seed), stops
at the model's end-of-generation tokens, its stop sequences or its token budget. Speed: docs/BOTS.md.

Prompts are built with the chat template stored in the GGUF file (``tokenizer.chat_template``),
rendered with Jinja2 as transformers renders it (:mod:`hitkit.bots.gguf_text`). Each
sequence owns one stream of the cache (``ctx_tokens`` cells), so chats never compete for cells: a
request waits only for a free sequence id. The C library comes from ``llama-cpp-py-sync`` (see :mod:`hitkit.bots.llamacpp_lib`).
"""

from __future__ import annotations

import logging
import os
import queue
import random
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hitkit.bots.base import Backend, BackendClosed, Cancelled, Completion, FinishReason, Ticket
from hitkit.bots.batching import BatchStats, SeqIds, await_ticket, collect, enqueue, first_stop
from hitkit.bots.gguf_text import GgufText
from hitkit.bots.llamacpp_lib import load
from hitkit.bots.logprobs import TokenLogprob, content, row_logprobs
from hitkit.bots.protocol import ChatCompletionRequest, ProtocolError

log = logging.getLogger(__name__)
_log_callback: Any = None  # kept alive for as long as llama.cpp may call it


def _route_logs(ffi: Any, lib: Any) -> None:
    """Send llama.cpp's log lines to Python logging (debug), instead of stderr."""
    global _log_callback
    if _log_callback is not None:
        return

    @ffi.callback("void(enum ggml_log_level, const char *, void *)")
    def _cb(level: int, text: Any, _user: Any) -> None:
        if text != ffi.NULL and log.isEnabledFor(logging.DEBUG):
            log.debug("llama.cpp: %s", ffi.string(text).decode("utf-8", "replace").rstrip())

    _log_callback = _cb
    lib.llama_log_set(_cb, ffi.NULL)


@dataclass
class _Seq:
    """A request inside the worker: its prompt, budget, sampler and progress."""

    prompt: list[int]
    max_new: int
    temperature: float
    top_p: float
    seed: int
    stop: list[str]
    want_logprobs: int | None = None  # alternatives per token the request asked for (None: no logprobs)
    ticket: Ticket = field(default_factory=Ticket)
    seq_id: int = -1
    fed: int = 0  # prompt tokens already in the cache
    sampler: Any = None
    generated: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    last: int | None = None  # sampled, not yet fed


class LlamaCppBackend(Backend):
    """A GGUF chat model in llama.cpp, continuously batched on one worker thread."""

    engine_name, gives_logprobs = "llama.cpp", True

    def __init__(
        self,
        name: str,
        path: str | Path,
        *,
        max_batch: int = 32,
        ctx_tokens: int | None = None,
        threads: int | None = None,
        batch_window_ms: float = 5.0,
        max_queue: int = 1024,
        seed: int = 0,
        kv_unified: bool = False,
    ) -> None:
        """Load ``path`` (a .gguf file) and start the worker thread."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file {path} does not exist")
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.ffi, self.lib = ffi, lib = load()
        _route_logs(ffi, lib)
        lib.llama_backend_init()
        self.name, self.path = name, path
        self.max_batch = max_batch
        self.batch_window_s = batch_window_ms / 1000.0
        model_params = lib.llama_model_default_params()
        model_params.n_gpu_layers = 0  # the CPU wheel; keeps behaviour the same on any machine
        self._model = lib.llama_model_load_from_file(str(path).encode(), model_params)
        if self._model == ffi.NULL:
            raise ValueError(f"llama.cpp could not load {path}: not a GGUF model it supports")
        self._vocab = lib.llama_model_get_vocab(self._model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self._vocab))
        template = lib.llama_model_chat_template(self._model, ffi.NULL)
        if template == ffi.NULL:
            self.close_model()
            raise ValueError(
                f"model {name!r} ({path.name}) has no chat template in its GGUF metadata; "
                "use an instruction-tuned model"
            )
        self.text = GgufText(ffi, lib, self._vocab, ffi.string(template).decode("utf-8"), name)
        train_ctx = int(lib.llama_model_n_ctx_train(self._model))
        # By default each sequence owns a stream of the key/value cache (as llama-server does), so
        # attention runs over each chat's own cells only. ``ctx_tokens`` is per chat.
        per_chat = ctx_tokens or min(train_ctx, 2048) if train_ctx > 0 else (ctx_tokens or 2048)
        self.n_batch = min(2048, per_chat * max_batch)
        params = lib.llama_context_default_params()
        params.n_ctx = per_chat * max_batch
        params.n_batch = self.n_batch
        params.n_ubatch = min(512, self.n_batch)
        params.n_seq_max = max_batch
        params.kv_unified, params.no_perf = kv_unified, True
        self.threads = threads or os.cpu_count() or 1
        params.n_threads = params.n_threads_batch = self.threads
        self._ctx = lib.llama_init_from_model(self._model, params)
        if self._ctx == ffi.NULL:
            self.close_model()
            raise ValueError(
                f"llama.cpp could not create a context of {max_batch} x {per_chat} tokens for {name!r}; lower max_batch"
            )
        self.max_context = int(lib.llama_n_ctx_seq(self._ctx))
        self._memory = lib.llama_get_memory(self._ctx)
        self._batch = lib.llama_batch_init(self.n_batch, 0, 1)
        self._rng = random.Random(seed)
        self.stats_ = BatchStats()
        self._queue: queue.Queue[_Seq] = queue.Queue(maxsize=max_queue)
        self._waiting: deque[_Seq] = deque()
        self._running: list[_Seq] = []
        self._free_ids = SeqIds(max_batch)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"hitkit-llamacpp-{name}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ caller side (HTTP threads)

    def submit(self, request: ChatCompletionRequest) -> Ticket:
        """Queue the request for the next decode step and return its ticket."""
        if self._closing.is_set():
            raise BackendClosed(f"model {self.name!r} is shutting down")
        prompt = self.text.encode(request)
        room = self.max_context - len(prompt)
        if room < 1:
            raise ProtocolError(
                f"the conversation is {len(prompt)} tokens but model {self.name!r} holds at most "
                f"{self.max_context}; send a shorter history (BotConfig.context_tokens)",
                param="messages",
            )
        seed = request.seed if request.seed is not None else self._rng.getrandbits(32)
        budget = min(request.reply_budget, room)
        seq = _Seq(prompt, budget, request.temperature, request.top_p, seed, list(request.stop), request.want_logprobs)
        # The reply so far, for streaming: a copy of the token list, detokenized on the caller's thread.
        seq.ticket.partial = lambda: self.text.detokenize(list(seq.generated))
        enqueue(self._queue, seq, self.name)
        return seq.ticket

    def complete(self, request: ChatCompletionRequest) -> Completion:
        """Generate one reply, blocking until it is ready."""
        return await_ticket(self.submit(request), self._thread, self.name)

    def stats(self) -> dict[str, Any]:
        """Batching counters plus what is queued and running now."""
        return {
            "kind": "llamacpp",
            "device": "cpu",
            "threads": self.threads,
            "max_batch": self.max_batch,
            "ctx_tokens": self.max_context,
            "queued": self._queue.qsize() + len(self._waiting),
            "running": len(self._running),
            **self.stats_.snapshot(),
        }

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop after the current step; unfinished requests fail with BackendClosed; free memory."""
        self._closing.set()
        self._thread.join(timeout_s)
        error = BackendClosed(f"model {self.name!r} shut down before replying")
        for seq in list(self._running):
            self._retire(seq, error=error)
        while self._waiting:
            self._waiting.popleft().ticket.finish(error=error)
        while True:
            try:
                self._queue.get_nowait().ticket.finish(error=error)
            except queue.Empty:
                break
        if self._thread.is_alive():
            return  # still inside llama_decode: leave the memory to the process exit
        if self._batch is not None:
            self.lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            self.lib.llama_free(self._ctx)
            self._ctx = None
        self.close_model()

    def close_model(self) -> None:
        """Free the model weights (after the context)."""
        if getattr(self, "_model", None) is not None and self._model != self.ffi.NULL:
            self.lib.llama_model_free(self._model)
        self._model = None

    # ------------------------------------------------------------------ worker side (one thread)

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                self._drop_cancelled()
                busy = bool(self._running)
                fresh = collect(
                    self._queue,
                    self.max_batch,
                    block_s=None if busy or self._waiting else 0.1,
                    window_s=0.0 if busy else self.batch_window_s,
                )
                self._waiting.extend(fresh)
                self._admit()
                if self._running:
                    self._step()
            except Exception as exc:  # noqa: BLE001 - fail these requests, keep serving others
                log.exception("model %s: generation failed", self.name)
                for seq in list(self._running):
                    self.stats_.record_done(ok=False)
                    self._retire(seq, error=RuntimeError(f"model {self.name!r} failed to generate: {exc}"))

    def _drop_cancelled(self) -> None:
        """Free the cache cells and slots of cancelled requests, queued or running."""
        for seq in [s for s in self._running if s.ticket.cancelled.is_set()]:
            self.stats_.record_cancelled(len(seq.generated))
            self._retire(seq, error=Cancelled(seq.ticket.cancel_reason or "cancelled"))
        if any(s.ticket.cancelled.is_set() for s in self._waiting):
            keep: deque[_Seq] = deque()
            for seq in self._waiting:
                if seq.ticket.cancelled.is_set():
                    self.stats_.record_cancelled(0)
                    seq.ticket.finish(error=Cancelled(seq.ticket.cancel_reason or "cancelled"))
                else:
                    keep.append(seq)
            self._waiting = keep

    def _admit(self) -> None:
        """Give waiting requests a free sequence id (its own cache stream), first come first served."""
        while self._waiting and self._free_ids:
            seq = self._waiting.popleft()
            seq.seq_id = self._free_ids.take()
            seq.sampler = self._make_sampler(seq)
            self._running.append(seq)

    def _make_sampler(self, seq: _Seq) -> Any:
        lib = self.lib
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if seq.temperature <= 0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
        else:
            # Temperature first, then the nucleus of the tempered distribution (as the transformers
            # engine does), then a draw from this request's own seeded generator.
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(seq.temperature))
            if seq.top_p < 1:
                lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(seq.top_p, 1))
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(seq.seed))
        return chain

    def _step(self) -> None:
        """One llama_decode over every decoding chat's next token and prompt chunks of newcomers,
        laid out in sequence-id order: see :func:`~hitkit.bots.batching.sequential_passes` for why
        (in admission order, 32 chats ran slower than 8)."""
        batch = self._batch
        n = 0
        outputs: list[tuple[_Seq, int]] = []
        prefill_rows = prefill_tokens = 0
        decoding = 0
        owed = sum(1 for s in self._running if s.last is not None)  # decode rows still to place
        for seq in sorted(self._running, key=lambda s: s.seq_id):
            if seq.last is not None:
                owed -= 1
                self._put(n, seq.last, len(seq.prompt) + len(seq.generated) - 1, seq.seq_id, True)
                outputs.append((seq, n))
                n += 1
                decoding += 1
                continue
            take = min(len(seq.prompt) - seq.fed, self.n_batch - n - owed)
            if take <= 0:
                continue
            for i in range(take):
                pos = seq.fed + i
                last = pos == len(seq.prompt) - 1
                self._put(n, seq.prompt[pos], pos, seq.seq_id, last)
                if last:
                    outputs.append((seq, n))
                n += 1
            seq.fed += take
            prefill_rows += 1
            prefill_tokens += take
        batch.n_tokens = n
        lib = self.lib
        rc = lib.llama_decode(self._ctx, batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")
        if prefill_rows:
            self.stats_.record_prefill(prefill_rows, prefill_tokens)
        if decoding:
            self.stats_.record_step(decoding)
        for seq, index in outputs:
            row = None  # the step's logits, copied before the sampler sees them (logprobs asked for)
            if seq.want_logprobs is not None:
                row = np.frombuffer(self.ffi.buffer(lib.llama_get_logits_ith(self._ctx, index), 4 * self.n_vocab), "f4")
                row = row.copy()
            token = int(lib.llama_sampler_sample(seq.sampler, self._ctx, index))
            step = None if row is None else row_logprobs(row, token, seq.want_logprobs or 0)
            result = self._check_finished(seq, token, step)
            if result is not None:
                self.stats_.record_done(result.completion_tokens)
                self._retire(seq, result=result)

    def _put(self, i: int, token: int, pos: int, seq_id: int, logits: bool) -> None:
        b = self._batch
        b.token[i] = token
        b.pos[i] = pos
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq_id
        b.logits[i] = 1 if logits else 0

    def _check_finished(self, seq: _Seq, token: int, step: TokenLogprob | None = None) -> Completion | None:
        """Record ``token`` (and its logprobs) for ``seq``; return its Completion if that token ends the reply."""
        if self.lib.llama_vocab_is_eog(self._vocab, token):
            return self._completion(seq, "stop")
        seq.generated.append(token)
        if step is not None:
            seq.logprobs.append(step)
        seq.last = token
        if seq.stop:
            text = self.text.detokenize(seq.generated)
            cut = first_stop(text, seq.stop)
            if cut is not None:
                return self._completion(seq, "stop", text[:cut])
        if len(seq.generated) >= seq.max_new:
            return self._completion(seq, "length")
        return None

    def _completion(self, seq: _Seq, reason: FinishReason, text: str | None = None) -> Completion:
        if text is None:
            text = self.text.detokenize(seq.generated)
        # Leading/trailing whitespace is template residue, never part of what a chat shows.
        return Completion(
            text=text.strip(),
            finish_reason=reason,
            prompt_tokens=len(seq.prompt),
            completion_tokens=len(seq.generated),
            logprobs=None if seq.want_logprobs is None else content(seq.logprobs, lambda t: self.text.detokenize([t])),
        )

    def _retire(self, seq: _Seq, result: Completion | None = None, error: BaseException | None = None) -> None:
        """Remove a sequence: free its cache cells, sampler and id; wake its caller."""
        if seq in self._running:
            self._running.remove(seq)
            if self._ctx is not None:
                self.lib.llama_memory_seq_rm(self._memory, seq.seq_id, -1, -1)
            self._free_ids.give(seq.seq_id)
        if seq.sampler is not None:
            self.lib.llama_sampler_free(seq.sampler)
            seq.sampler = None
        if not seq.ticket.done.is_set():
            seq.ticket.finish(result, error)
