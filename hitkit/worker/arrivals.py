"""Asking a crowd platform who a visitor is: bounded in time, cached, never inside a transaction.

An arrival check may be a call to the platform (Prolific looks up the visitor's live submission).
The web tier makes it before it opens the arrival's transaction (see :func:`hitkit.worker.admission.admit`), so
a slow or throttled platform costs the arriving visitor a wait and nobody else anything. Here:

- **Bounded:** the check runs on a small thread pool and the request waits at most
  ``HITKIT_ARRIVAL_TIMEOUT_S`` (default 15 s) for it; past that the visitor is told to reload (503).
  A check that finishes late still fills the cache, so the reload is answered at once.
- **Cached and shared:** the same link (provider, study, query parameters) is checked once per
  ``CACHE_S`` seconds; identical arrivals in flight at the same time share one check.
- **Bounded for strangers:** for a provider whose check calls its platform
  (``arrival_calls_platform``), a client address whose arrivals the platform refused
  ``FAILURE_BURST`` times is refused without asking the platform (429) until its budget refills
  (one per ``FAILURE_REFILL_S``), so a stream of made-up links cannot each cost a platform call
  and an audit row.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import TypeVar

from hitkit.errors import FlowError
from hitkit.i18n import N_

T = TypeVar("T")

CACHE_S = 30.0
"""How long one link's confirmed arrival is reused without asking the platform again."""
REFUSED_CACHE_S = 10.0
"""How long a refused arrival is remembered (short: the visitor may have just started on the platform)."""
FAILURE_BURST = 10
"""Refused arrivals one client address may cause before it must wait for its budget to refill."""
FAILURE_REFILL_S = 6.0
"""Seconds for one refused arrival of a client address's budget to come back (10 a minute)."""
MAX_ENTRIES = 10_000
"""Cached links and client budgets kept per process; the oldest go first."""


def timeout_s() -> float:
    """The longest an arrival waits for the platform (HITKIT_ARRIVAL_TIMEOUT_S, default 15 s)."""
    raw = os.environ.get("HITKIT_ARRIVAL_TIMEOUT_S", "").strip()
    try:
        value = float(raw) if raw else 15.0
    except ValueError:
        value = 15.0
    return value if value > 0 else 15.0


class _Budget:
    """Per client address: how many more refused arrivals it may cause now (a token bucket)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, client: str, now: float) -> float:
        tokens, at = self._tokens.get(client, (float(FAILURE_BURST), now))
        return min(float(FAILURE_BURST), tokens + (now - at) / FAILURE_REFILL_S)

    def wait_s(self, client: str) -> float:
        """0 if ``client`` may cause another platform check now, else seconds until it may."""
        with self._lock:
            level = self._level(client, time.monotonic())
        return 0.0 if level >= 1.0 else (1.0 - level) * FAILURE_REFILL_S

    def spend(self, client: str) -> None:
        """Record one refused arrival of ``client``."""
        with self._lock:
            now = time.monotonic()
            self._tokens[client] = (max(0.0, self._level(client, now) - 1.0), now)
            self._tokens.move_to_end(client)
            while len(self._tokens) > MAX_ENTRIES:
                self._tokens.popitem(last=False)


class ArrivalChecks:
    """A process's arrival checks: one pool, one cache, one budget per client address."""

    def __init__(self, workers: int = 16) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hitkit-arrival")
        self._lock = threading.Lock()
        self._done: OrderedDict[tuple, tuple[float, object, FlowError | None]] = OrderedDict()
        self._running: dict[tuple, Future] = {}
        self.budget = _Budget()

    def check(self, key: tuple, ask: Callable[[], T], client: str = "", charge: bool = True) -> T:
        """The result of ``ask()`` for ``key``: from the cache, a check in flight, or a new bounded one.

        FlowError from ``ask`` (the platform refused the visitor) is cached briefly, re-raised and,
        with ``charge``, counted against ``client``'s budget; any other failure is not cached and
        reads as a 503 to retry.
        """
        now = time.monotonic()
        with self._lock:
            hit = self._done.get(key)
            if hit is not None and hit[0] > now:
                if hit[2] is not None:
                    raise FlowError(hit[2].args[0] if hit[2].args else str(hit[2]), hit[2].status)
                return hit[1]  # type: ignore[return-value]
            future = self._running.get(key)
            started = future is None
            if future is None:
                wait = self.budget.wait_s(client) if charge else 0.0
                if wait:
                    raise FlowError(
                        N_(
                            "too many links from your connection could not be confirmed by the crowd "
                            "site; please wait %(wait)s and open the study from the crowd site again",
                            wait=dt.timedelta(seconds=math.ceil(wait)),
                        ),
                        429,
                    )
                future = self._pool.submit(ask)
                self._running[key] = future
        if started:
            # Outside the lock: a future already done runs its callback at once, in this thread.
            future.add_done_callback(partial(self._finished, key, client if charge else None))
        try:
            return future.result(timeout=timeout_s())
        except FutureTimeout:
            raise FlowError(
                N_("the crowd site is slow to confirm who you are; please reload this page in a moment"), 503
            ) from None
        except FlowError:
            raise
        except Exception as exc:  # noqa: BLE001 - the platform or the network failed: not the visitor's fault
            raise FlowError(
                N_("the crowd site could not confirm who you are just now; please reload this page in a moment"), 503
            ) from exc

    def _finished(self, key: tuple, client: str | None, future: Future) -> None:
        exc = future.exception()
        with self._lock:
            self._running.pop(key, None)
            now = time.monotonic()
            if exc is None:
                self._done[key] = (now + CACHE_S, future.result(), None)
            elif isinstance(exc, FlowError) and exc.status < 500:
                self._done[key] = (now + REFUSED_CACHE_S, None, exc)
            else:
                return
            self._done.move_to_end(key)
            while len(self._done) > MAX_ENTRIES:
                self._done.popitem(last=False)
        if client is not None and exc is not None and isinstance(exc, FlowError) and exc.status < 500:
            self.budget.spend(client)

    def forget(self, provider_assignment_id: str | None) -> None:
        """Drop cached arrivals of one provider assignment (its work was submitted or returned here)."""
        if provider_assignment_id is None:
            return
        with self._lock:
            stale = [
                key
                for key, (_, value, _) in self._done.items()
                if getattr(value, "provider_assignment_id", None) == provider_assignment_id
            ]
            for key in stale:
                del self._done[key]

    def clear(self) -> None:
        """Forget every cached result and every address's spent budget (tests, and a study relaunched in
        the same process)."""
        with self._lock:
            self._done.clear()
            self.budget = _Budget()


CHECKS = ArrivalChecks()
"""The process-wide arrival checks (every web thread of a process shares them)."""


def link_key(kind: str, provider: str, study: str, args: Mapping[str, str]) -> tuple:
    """The cache key of one link's check: what is asked, of which provider and study, with which parameters."""
    return (kind, provider, study, tuple(sorted((str(k), str(v)) for k, v in args.items())))
