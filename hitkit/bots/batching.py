"""Pure policies of dynamic batching: who joins the batch, when a reply stops, what is counted.

Kept free of torch so the policy can be read and tested on its own. The model loop in
:mod:`hitkit.bots.engine` calls :func:`collect` between decode steps: when the model is idle it
blocks for the first request and then waits a few milliseconds for company (simultaneous chats
share one prefill); when sequences are already decoding it only takes what is waiting, so nobody
in the running batch is held up.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def collect(source: queue.Queue[T], limit: int, block_s: float | None, window_s: float) -> list[T]:
    """Take up to ``limit`` items from ``source``.

    ``block_s`` is how long to wait for the first item (None: do not wait at all); once one item
    is in hand, keep taking until ``limit`` items or ``window_s`` seconds have passed.
    """
    if limit <= 0:
        return []
    taken: list[T] = []
    try:
        if block_s is None:
            taken.append(source.get_nowait())
        else:
            taken.append(source.get(timeout=block_s))
    except queue.Empty:
        return taken
    deadline = time.monotonic() + window_s
    while len(taken) < limit:
        remaining = deadline - time.monotonic()
        try:
            taken.append(source.get(timeout=remaining) if remaining > 0 else source.get_nowait())
        except queue.Empty:
            break
    return taken


def first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index in ``text`` where the earliest stop sequence begins, or None if none occurs."""
    found = [i for s in stops if (i := text.find(s)) >= 0]
    return min(found) if found else None


class BatchStats:
    """Thread-safe counters of a batching loop, exposed on ``/metrics``.

    ``batch_sizes`` counts decode steps by how many sequences they advanced: the direct evidence
    that concurrent chats were served together.
    """

    def __init__(self) -> None:
        """Start every counter at zero."""
        self._lock = threading.Lock()
        self.requests = 0
        self.completion_tokens = 0
        self.prompt_tokens = 0
        self.prefills = 0
        self.batch_sizes: Counter[int] = Counter()
        self.prefill_sizes: Counter[int] = Counter()
        self.errors = 0
        self.cancelled = 0
        self.cancelled_tokens = 0

    def record_prefill(self, size: int, prompt_tokens: int) -> None:
        """Count one prefill of ``size`` newly admitted requests."""
        with self._lock:
            self.prefills += 1
            self.prefill_sizes[size] += 1
            self.prompt_tokens += prompt_tokens

    def record_step(self, size: int) -> None:
        """Count one decode step that advanced ``size`` sequences by one token each."""
        with self._lock:
            self.batch_sizes[size] += 1

    def record_done(self, completion_tokens: int = 0, ok: bool = True) -> None:
        """Count one finished request and its generated tokens, or one failed request."""
        with self._lock:
            if ok:
                self.requests += 1
                self.completion_tokens += completion_tokens
            else:
                self.errors += 1

    def record_cancelled(self, generated_tokens: int) -> None:
        """Count one request dropped unfinished, and the tokens it had cost before it was dropped."""
        with self._lock:
            self.cancelled += 1
            self.cancelled_tokens += generated_tokens

    def snapshot(self) -> dict[str, Any]:
        """Return a JSON-able copy of the counters."""
        with self._lock:
            steps = sum(self.batch_sizes.values())
            advanced = sum(k * v for k, v in self.batch_sizes.items())
            return {
                "requests": self.requests,
                "errors": self.errors,
                "cancelled": self.cancelled,
                "cancelled_tokens": self.cancelled_tokens,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "decode_steps": steps,
                "prefills": self.prefills,
                "max_batch_size": max(self.batch_sizes, default=0),
                "mean_batch_size": (advanced / steps) if steps else 0.0,
                "batch_sizes": {str(k): v for k, v in sorted(self.batch_sizes.items())},
                "prefill_sizes": {str(k): v for k, v in sorted(self.prefill_sizes.items())},
            }


def enqueue(source: queue.Queue, item, name: str) -> None:
    """Queue one request for a batching engine, or refuse it when the queue is full (429 upstream)."""
    from hitkit.bots.base import BackendOverloaded

    try:
        source.put_nowait(item)
    except queue.Full:
        raise BackendOverloaded(f"model {name!r} has {source.maxsize} requests queued; retry shortly") from None


def await_ticket(ticket, worker: threading.Thread, name: str):
    """Block until ``ticket`` has its outcome; a timed wait, so a request that slipped in while the
    engine's worker thread was stopping cannot hang."""
    from hitkit.bots.base import BackendClosed

    while not ticket.wait(0.5):
        if not worker.is_alive():
            raise BackendClosed(f"model {name!r} shut down before replying")
    return ticket.outcome()


class SeqIds:
    """Sequence ids (one key/value cache stream each) of a batching engine; the lowest free id is
    handed out first, so the ids in use stay one run ``0..n-1`` as chats come and go."""

    def __init__(self, n: int) -> None:
        """Ids ``0..n-1``, all free."""
        self._free = list(range(n))  # a min-heap

    def __bool__(self) -> bool:
        return bool(self._free)

    def take(self) -> int:
        """The lowest free id (IndexError when none is free)."""
        return heapq.heappop(self._free)

    def give(self, seq_id: int) -> None:
        """Free ``seq_id`` again."""
        heapq.heappush(self._free, seq_id)


def sequential_passes(row_seq_ids: Sequence[int]) -> int:
    """Forward passes llama.cpp makes of a batch of one-token rows (decode steps) when every
    sequence owns its own cache stream.

    Its micro-batch split for split caches, ``split_equal(n_ubatch, sequential=true)`` in
    llama.cpp's ``src/llama-batch.cpp`` (called from ``llama_kv_cache::init_batch``), scans the
    unused rows in batch order and accepts a row's sequence only if its id is the last accepted id
    plus one ("accept only increasing sequence ids"); every micro-batch is a pass over all the
    weights. Rows in admission order after chats have come and gone therefore cost about one pass
    per two chats; rows sorted by an unbroken run of ids cost one.
    """
    left = list(row_seq_ids)
    passes = 0
    while left:
        passes += 1
        taken, last = [], None
        for i, seq_id in enumerate(left):
            if last is None or seq_id == last + 1:
                taken.append(i)
                last = seq_id
        left = [s for i, s in enumerate(left) if i not in set(taken)]
    return passes
