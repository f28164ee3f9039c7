"""How a control reply is streamed: in pieces, on the schedule of a real bot's stream (METHODS.md §1).

The degraded control bot answers whole and at once; a real model's reply reaches the page as a
stream of growing texts — a first text after a while, then more every few tens of milliseconds. A
control reply shown whole, or in a stream of another rhythm, would tell the control slot from the
others (issue 40 measured 1 text event against 9–41). So each *streamed* real reply's shape is
measured as it passes (:func:`shape_of`: time to the first text, the gaps between texts, how much
each text added), kept per study in this process (:data:`SHAPES`, the latest ``bots.pacing.window``),
and each control reply replays one of those shapes drawn at random, seeded per reply
(:func:`draw_shape`, :func:`schedule`): its first text and its number of texts then come from the
same distribution as a real reply's. Until ``min_observed`` real shapes are seen, a prior stands in
(:func:`prior_shape`): one word per text, ending near ``cold_start_s``.

Pure functions over numbers and texts, plus the small in-process record; the hook is
:func:`hitkit.worker.chat.answer`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hitkit.study.bot_sections import PacingConfig
from hitkit.worker.pacing import Observed

_WORD = re.compile(r"\s*\S+\s*")


@dataclass(frozen=True)
class Shape:
    """One streamed reply's rhythm: seconds to its first text, seconds between its later texts, and how
    many characters each text added (``sizes[i]`` for the i-th text; one more size than gaps)."""

    first_s: float
    gaps: tuple[float, ...]
    sizes: tuple[int, ...]

    @property
    def pieces(self) -> int:
        return len(self.sizes)

    @property
    def total_s(self) -> float:
        return self.first_s + sum(self.gaps)


def shape_of(seen: Sequence[tuple[float, int]]) -> Shape | None:
    """The shape of a reply whose texts were seen as ``(seconds since asking, length so far)``.

    Only texts that grew count (a retried stream starts again from a shorter text: the shape is then
    that of the attempt that finished); None when no text was seen."""
    kept: list[tuple[float, int]] = []
    for at, length in seen:
        if kept and length < kept[-1][1]:
            kept = []  # a retry began: measure the attempt that finished
        if length > (kept[-1][1] if kept else 0):
            kept.append((at, length))
    if not kept:
        return None
    times = [at for at, _ in kept]
    lengths = [length for _, length in kept]
    return Shape(
        first_s=max(0.0, times[0]),
        gaps=tuple(max(0.0, b - a) for a, b in zip(times, times[1:])),
        sizes=tuple(b - a for a, b in zip([0, *lengths], lengths)),
    )


def prior_shape(text: str, settings: PacingConfig, rng: random.Random) -> Shape:
    """A stand-in shape until enough real ones are seen: one word per text, the first after a seeded share
    (30–60 %) of ``cold_start_s``, the rest spread, with jitter, to end near ``cold_start_s``."""
    words = max(1, len(_WORD.findall(text)))
    first = settings.cold_start_s * rng.uniform(0.3, 0.6)
    mean_gap = (settings.cold_start_s - first) / max(1, words - 1)
    gaps = tuple(mean_gap * rng.uniform(0.5, 1.5) for _ in range(words - 1))
    return Shape(first_s=first, gaps=gaps, sizes=(1,) * words)


def draw_shape(observed: Sequence[Shape], text: str, settings: PacingConfig, rng: random.Random) -> Shape:
    """The shape a control reply is released on: a real one drawn at random, or the prior until
    ``settings.min_observed`` are seen."""
    if len(observed) >= settings.min_observed:
        return rng.choice(list(observed))
    return prior_shape(text, settings, rng)


def allocate(units: int, weights: Sequence[int]) -> list[int]:
    """Split ``units`` into ``len(weights)`` counts of at least 1, in proportion to ``weights``
    (largest remainders); needs ``units >= len(weights) >= 1``."""
    pieces = len(weights)
    if pieces < 1 or units < pieces:
        raise ValueError(f"cannot split {units} unit(s) into {pieces} piece(s) of at least one")
    positive = [max(0, w) for w in weights]
    spare, total = units - pieces, sum(positive)
    shares = [spare * w / total for w in positive] if total else [spare / pieces] * pieces
    counts = [1 + int(share) for share in shares]
    by_remainder = sorted(range(pieces), key=lambda i: (-(shares[i] - int(shares[i])), i))
    for i in by_remainder[: units - sum(counts)]:
        counts[i] += 1
    return counts


def schedule(text: str, shape: Shape) -> list[tuple[float, str]]:
    """``(seconds since asking, text so far)`` of each piece of ``text`` released on ``shape``.

    The text is cut between words when it has at least as many words as the shape has pieces (the
    way a model's tokens arrive), else between characters; a text shorter than the shape's pieces has
    one piece per character. Piece sizes follow the shape's, scaled to this text; the last is the whole text."""
    if not text:
        return [(shape.total_s, text)]
    words = [m.end() for m in _WORD.finditer(text)]
    ends = words if len(words) >= shape.pieces else list(range(1, len(text) + 1))
    pieces = min(shape.pieces, len(ends))
    counts = allocate(len(ends), shape.sizes[:pieces])
    times = [shape.first_s]
    for gap in shape.gaps[: pieces - 1]:
        times.append(times[-1] + gap)
    out, taken = [], 0
    for at, count in zip(times, counts):
        taken += count
        out.append((at, text[: ends[taken - 1]]))
    out[-1] = (out[-1][0], text)
    return out


SHAPES: Observed[Shape] = Observed()
"""This process's record of real streamed replies' shapes, per study (each web process measures its own)."""
