"""The bot server's requests in flight: one generation per reply, however often the client retries.

A client that times out and retries the same reply sends the same ``Idempotency-Key``. The retry
re-attaches to the generation already running for that key (or gets its finished reply, kept for a
short while) instead of starting a second one, so retries never stack generations. A generation is
cancelled when nobody waits for it any more: its last waiter left (client disconnected) and no retry
re-attached within a short grace period, or its deadline passed. Requests without a key are
cancelled as soon as their client leaves.

:class:`ServerStats` keeps the counters ``/health`` and ``/v1/hitkit/stats`` show: in flight,
deduplicated retries, cancellations by cause, deadline timeouts, and recent latency.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hitkit.bots.base import Ticket

IDEMPOTENCY_HEADER = "Idempotency-Key"
DEADLINE_HEADER = "X-Hitkit-Deadline-S"
"""Seconds, counted from arrival, after which the client will no longer read the reply."""
GRACE_S = 5.0
"""How long an abandoned keyed generation waits for its client's retry before it is cancelled."""
KEEP_DONE_S = 120.0
"""How long a finished keyed reply is kept for a retry that arrives after it finished."""


@dataclass
class Job:
    """One generation and the HTTP handlers waiting for it."""

    key: str | None
    model: str
    ticket: Ticket
    deadline: float | None
    waiters: int = 0
    orphaned_at: float | None = None
    created: float = field(default_factory=time.monotonic)


class ServerStats:
    """Thread-safe counters of the HTTP layer; latency over the last 200 replies."""

    def __init__(self) -> None:
        """All counters at zero."""
        self._lock = threading.Lock()
        self.requests = 0
        self.completed = 0
        self.failed = 0
        self.deduplicated = 0
        self.cancelled: dict[str, int] = {"disconnected": 0, "deadline": 0}
        self.timeouts = 0
        self._latency: deque[float] = deque(maxlen=200)
        self._tps: deque[float] = deque(maxlen=200)

    def count(self, what: str, reason: str | None = None) -> None:
        """Add one to a counter (``cancelled`` takes a reason)."""
        with self._lock:
            if what == "cancelled":
                self.cancelled[reason or "other"] = self.cancelled.get(reason or "other", 0) + 1
            else:
                setattr(self, what, getattr(self, what) + 1)

    def reply(self, latency_s: float, tokens: int) -> None:
        """Record one finished reply: its latency and the decode rate its chat saw."""
        with self._lock:
            self.completed += 1
            self._latency.append(latency_s)
            if tokens > 0 and latency_s > 0:
                self._tps.append(tokens / latency_s)

    def tokens_per_s(self) -> float | None:
        """Median per-chat rate (reply tokens / reply latency) of recent replies, if any."""
        with self._lock:
            rates = sorted(self._tps)
        return rates[len(rates) // 2] if rates else None

    def snapshot(self, in_flight: int) -> dict[str, Any]:
        """JSON-able counters."""
        with self._lock:
            lat = sorted(self._latency)
            pick = (lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 3)) if lat else (lambda q: None)
            return {
                "requests": self.requests,
                "completed": self.completed,
                "failed": self.failed,
                "in_flight": in_flight,
                "deduplicated": self.deduplicated,
                "cancelled": dict(self.cancelled),
                "cancelled_total": sum(self.cancelled.values()),
                "timeouts": self.timeouts,
                "latency_s": {"p50": pick(0.5), "p95": pick(0.95), "max": lat[-1] if lat else None, "n": len(lat)},
            }


class JobRegistry:
    """Generations in flight, keyed by idempotency key; cancels the ones nobody waits for."""

    def __init__(self, stats: ServerStats, grace_s: float = GRACE_S, keep_done_s: float = KEEP_DONE_S) -> None:
        """Empty registry; ``grace_s`` and ``keep_done_s`` as in the module docstring."""
        self.stats = stats
        self.grace_s = grace_s
        self.keep_done_s = keep_done_s
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._anonymous = 0

    def attach(self, key: str | None, model: str, deadline: float | None, start: Callable[[], Ticket]) -> Job:
        """The job for ``key`` (a retry re-attaches to it), or a new one started with ``start()``."""
        with self._lock:
            self._expire()
            job = self._jobs.get(key) if key else None
            if (
                job is not None
                and job.model == model
                and not (job.ticket.cancelled.is_set() and not job.ticket.done.is_set())
            ):
                job.waiters += 1
                job.orphaned_at = None
                if deadline is not None:
                    job.deadline = deadline if job.deadline is None else max(job.deadline, deadline)
                self.stats.count("deduplicated")
                return job
        # Started outside the lock: encoding the prompt takes a while and may raise (bad request).
        job = Job(key, model, start(), deadline, waiters=1)
        with self._lock:
            if key:
                self._jobs[key] = job
            else:
                self._anonymous += 1
        return job

    def detach(self, job: Job, reason: str | None) -> None:
        """One waiter leaves; ``reason`` (disconnected/deadline) says why, None when it got the reply."""
        with self._lock:
            job.waiters -= 1
            if job.key is None:
                self._anonymous -= 1
            if job.waiters > 0 or job.ticket.done.is_set() or reason is None:
                return
            if reason == "deadline" or job.key is None:
                self._cancel(job, reason)
            else:
                job.orphaned_at = time.monotonic()  # a retry may still come for it
        if job.orphaned_at is not None:
            timer = threading.Timer(self.grace_s, self._reap)
            timer.daemon = True
            timer.start()

    def _cancel(self, job: Job, reason: str) -> None:
        if not job.ticket.done.is_set() and not job.ticket.cancelled.is_set():
            job.ticket.cancel(reason)
            self.stats.count("cancelled", reason)

    def _reap(self) -> None:
        with self._lock:
            self._expire()

    def _expire(self) -> None:
        """Cancel orphans past their grace or deadline; forget finished jobs past keep_done_s."""
        now = time.monotonic()
        for key, job in list(self._jobs.items()):
            done = job.ticket.done.is_set()
            if not done and job.waiters == 0 and job.orphaned_at is not None and now - job.orphaned_at >= self.grace_s:
                self._cancel(job, "disconnected")
            elif not done and job.deadline is not None and now > job.deadline:
                self._cancel(job, "deadline")
            if (done or job.ticket.cancelled.is_set()) and job.waiters == 0 and now - job.created > self.keep_done_s:
                del self._jobs[key]
            elif job.ticket.cancelled.is_set() and job.waiters == 0 and done:
                del self._jobs[key]  # a cancelled reply has nothing to give a later retry

    def in_flight(self) -> int:
        """Unfinished generations someone waits for or may still retry."""
        with self._lock:
            keyed = sum(1 for j in self._jobs.values() if not j.ticket.done.is_set())
            return keyed + self._anonymous
