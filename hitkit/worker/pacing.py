"""When a chat reply is released: latency that does not tell the control slot (METHODS.md §1's
degraded bot) from the real ones. Pure policy (:func:`release_delay`) plus a small in-process
record of the real bots' latencies (:class:`Observed`); the hook is :func:`hitkit.worker.chat.answer`,
which waits the delay before storing the reply, so no route can see it sooner.

Why only the control slot draws, and the real slots do not: a real bot's reply already *is* a draw
from the real latency distribution. Padding it with a second draw would make its release time the
larger of two draws, a distribution of its own that a patient worker could tell from the control's
single draw. With ``observed`` the control's release time and a real reply's time come from the same
distribution; with ``fixed`` every slot waits for the same floor (the floor must then exceed the real
bots' latency to hide anything). ``floor_s`` holds every slot in both modes.
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Sequence
from typing import Generic, TypeVar

from hitkit.study.bot_sections import PacingConfig


def release_delay(
    elapsed_s: float, is_control: bool, observed: Sequence[float], settings: PacingConfig, rng: random.Random
) -> float:
    """Seconds to hold a reply that took ``elapsed_s`` before releasing it (0 to release at once).

    ``observed``: latencies of the study's real (non-control) bots seen so far; ``rng``: seeded per
    reply, so a reply's release time is reproducible from the study's seed and what was observed.
    """
    if settings.mode == "off":
        return 0.0
    target = settings.floor_s
    if settings.mode == "observed" and is_control:
        draw = rng.choice(observed) if len(observed) >= settings.min_observed else settings.cold_start_s
        target = max(target, draw)
    return max(0.0, target - elapsed_s)


T = TypeVar("T")


class Observed(Generic[T]):
    """The latest ``window`` observations of real bots (latencies; :mod:`hitkit.worker.pieces`: stream
    shapes), per study, in this process (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_study: dict[object, deque[T]] = {}

    def add(self, study: object, latency_s: T, window: int) -> None:
        with self._lock:
            kept = self._by_study.get(study)
            if kept is None or kept.maxlen != window:
                kept = self._by_study[study] = deque(kept or (), maxlen=window)
            kept.append(latency_s)

    def of(self, study: object) -> tuple[T, ...]:
        with self._lock:
            return tuple(self._by_study.get(study, ()))


OBSERVED: Observed[float] = Observed()
"""This process's record (each web process observes its own replies)."""
