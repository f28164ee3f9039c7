"""Bounds on the chat requests that wait on a bot, so that no worker can hold the web server's threads.

A chat request that asks a bot (a message, a retry, a stream) holds one of the web server's threads for
as long as the bot takes, and a stream holds it to the reply's end; a worker opening dozens of them
while the bots hang would leave none for anyone else (issue 40: 60 streams held all 16 threads of the
embedded server and a bystander's page waited 38 s). So each such request must be *admitted* first:
at most :data:`PER_ASSIGNMENT` at once per assignment (2: the arena asks both sides at once) and
:data:`PER_WORKER` per worker, across their assignments; the excess is refused at once with HTTP 429
and a sentence the page shows, before anything is stored. A request holds its place until it is over,
for a stream until the reply is stored or given up *and* the page stopped reading
(:mod:`hitkit.worker.chat_stream` ends a stream at its deadline).

The counts are per web process (as the threads they protect are): :func:`refusal` is the policy,
:class:`StreamLimits` the thread-safe record.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Hashable

from hitkit.errors import FlowError

PER_ASSIGNMENT = 2
"""Bot-waiting requests one assignment may have at once: the arena's two sides."""
PER_WORKER = 4
"""Bot-waiting requests one worker may have at once, over all their assignments."""
BUSY = "too many replies are being written at once for you; please wait a moment and try again"
"""What a refused worker reads: the same whichever bot, so it tells nothing of the design."""


class TooManyStreams(FlowError):
    """A chat request over its assignment's or worker's bound (HTTP 429); nothing was stored."""

    def __init__(self, message: str = BUSY):
        super().__init__(message, 429)


def refusal(held_by_assignment: int, held_by_worker: int, per_assignment: int, per_worker: int) -> str | None:
    """Why one more request is refused given what the assignment and the worker hold now; None to admit it."""
    if held_by_assignment >= per_assignment:
        return f"assignment holds {held_by_assignment} of {per_assignment}"
    if held_by_worker >= per_worker:
        return f"worker holds {held_by_worker} of {per_worker}"
    return None


class Lease:
    """One admitted request's place; :meth:`release` gives it back (once, however often it is called)."""

    def __init__(self, limits: StreamLimits, assignment: Hashable, worker: Hashable) -> None:
        self._limits, self._keys = limits, (assignment, worker)
        self._released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._limits._give_back(*self._keys)


class StreamLimits:
    """The bot-waiting requests held now, per assignment and per worker, in this process (thread-safe)."""

    def __init__(self, per_assignment: int = PER_ASSIGNMENT, per_worker: int = PER_WORKER) -> None:
        if per_assignment < 1 or per_worker < 1:
            raise ValueError(f"stream bounds must be at least 1, got {per_assignment} and {per_worker}")
        self.per_assignment, self.per_worker = per_assignment, per_worker
        self._lock = threading.Lock()
        self._assignments: Counter[Hashable] = Counter()
        self._workers: Counter[Hashable] = Counter()
        self.refused = 0
        """Requests refused so far (for tests and benchmarks)."""

    def admit(self, assignment: Hashable, worker: Hashable) -> Lease:
        """A place for one more request of ``assignment`` by ``worker``; :class:`TooManyStreams` if over a bound."""
        with self._lock:
            why = refusal(self._assignments[assignment], self._workers[worker], self.per_assignment, self.per_worker)
            if why is not None:
                self.refused += 1
                raise TooManyStreams()
            self._assignments[assignment] += 1
            self._workers[worker] += 1
        return Lease(self, assignment, worker)

    def held(self) -> int:
        """Requests holding a place now, all workers together."""
        with self._lock:
            return sum(self._assignments.values())

    def _give_back(self, assignment: Hashable, worker: Hashable) -> None:
        with self._lock:
            for counts, key in ((self._assignments, assignment), (self._workers, worker)):
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]
