"""Per-request phase timings, for finding where a slow request spent its time.

Off unless ``HITKIT_SERVER_TIMING=1``; then the web tier answers with a standard ``Server-Timing``
header (``store;dur=3.1, bot;dur=501.0, reply;dur=2.2, app;dur=507.0``, milliseconds) that
``benchmarks/load.py`` reads to split a chat turn's round trip into the server's own steps, the bot,
and the time a request waited before the application saw it. Phases are kept in a context
variable, so threads and requests never mix.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

_phases: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("hitkit_phases", default=None)


def enabled() -> bool:
    """Whether this process records phases (HITKIT_SERVER_TIMING=1)."""
    return os.environ.get("HITKIT_SERVER_TIMING") == "1"


def start() -> None:
    """Begin recording this request's phases (no-op unless :func:`enabled`)."""
    if enabled():
        _phases.set({})


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Add the block's wall time to phase ``name`` of the current request, if one is recording."""
    phases = _phases.get()
    if phases is None:
        yield
        return
    began = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + (time.perf_counter() - began) * 1000


def header(total_ms: float) -> str | None:
    """The ``Server-Timing`` value for the phases recorded so far plus ``app`` (the whole request), or None."""
    phases = _phases.get()
    if phases is None:
        return None
    _phases.set(None)
    return ", ".join(f"{name};dur={ms:.1f}" for name, ms in [*phases.items(), ("app", total_ms)])
