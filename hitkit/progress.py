"""Progress bars for long steps, off unless a command turns them on.

Library calls (tests, notebooks) stay quiet by default; the CLI turns bars on for the duration of
one command with :func:`showing_progress` unless the user passed ``--no-progress``. Long loops wrap
their iterable in :func:`progress`, which is a plain pass-through when bars are off.
"""
from __future__ import annotations

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


def progress_shown() -> bool:
    """Whether bars are on in this context."""
    return _SHOW.get()


def progress(iterable: Iterable[T], desc: str, total: int | None = None, unit: str = "it") -> Iterable[T]:
    """``iterable`` with a tqdm bar named ``desc`` when bars are on; the iterable itself otherwise."""
    if not _SHOW.get():
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, desc=desc, total=total, unit=unit, leave=False, dynamic_ncols=True)
