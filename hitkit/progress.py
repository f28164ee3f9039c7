"""Progress for long steps: bars (off unless a command turns them on), the ETA and a redrawn status line.

Library calls (tests, notebooks) stay quiet by default; the CLI turns bars on for the duration of
one command with :func:`showing_progress` unless the user passed ``--no-progress``. Long loops wrap
their iterable in :func:`progress`, which is a plain pass-through when bars are off.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")

_SHOW: ContextVar[bool] = ContextVar("hitkit_show_progress", default=False)


@contextmanager
def showing_progress(show: bool = True) -> Iterator[None]:
    """Within the block, :func:`progress` draws bars (on stderr) when ``show`` is true."""
    token = _SHOW.set(show)
    try:
        yield
    finally:
        _SHOW.reset(token)


def progress(iterable: Iterable[T], desc: str, total: int | None = None, unit: str = "it") -> Iterable[T]:
    """``iterable`` with a tqdm bar named ``desc`` when bars are on; the iterable itself otherwise."""
    if not _SHOW.get():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit, leave=False, dynamic_ncols=True)


def eta_text(fraction: float, elapsed_s: float) -> str:
    """'ETA 3 min' from the share of the work done and the time it took (pure; '' until it can tell)."""
    if fraction <= 0.01 or fraction >= 1 or elapsed_s < 5:
        return ""
    left = elapsed_s * (1 - fraction) / fraction
    if left < 90:
        return f"ETA {max(5, round(left / 5) * 5):.0f} s"
    if left < 5400:
        return f"ETA {round(left / 60):.0f} min"
    return f"ETA {left / 3600:.1f} h"


class StatusLine:
    """One line redrawn in place on a terminal (stderr), or a plain line every ``every_s`` seconds for
    logs, or nothing. Never a progress bar in a file."""

    def __init__(self, tty: bool, every_s: float | None, stream=None):
        self.stream = stream or sys.stderr
        self.tty, self.every_s = tty, every_s
        self._last_plain = 0.0
        self._width = 0

    @property
    def silent(self) -> bool:
        """Whether nothing is ever shown (no terminal, no log lines): the caller need not build the text."""
        return not self.tty and self.every_s is None

    def show(self, text: str) -> None:
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
            self._width = len(text)
        elif self.every_s is not None and time.monotonic() - self._last_plain >= self.every_s:
            self._last_plain = time.monotonic()
            self.stream.write(time.strftime("%H:%M:%S ") + text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0
