"""Scores of how an answer was typed, from the signals :mod:`hitkit.worker.authenticity` keeps.

:func:`score_answer` gives one answer a score in [0, 1] and the reason behind it; the answer is
flagged at :data:`FLAG_AT` or above. :func:`score_worker` aggregates a worker's answers. Pure
functions over plain data: the database is read in :mod:`hitkit.tables.authenticity`.

Why these thresholds (tuned with ``benchmarks/authenticity.py`` and kept loose on purpose):

- **pasted**: the share of the answer's characters that came from paste or drop events. Quoting a
  link or a phrase pastes a little; pasting a whole message pastes most of it.
- **no input**: the share of the answer's characters that no input event accounts for (text set by a
  script or an extension). Phone keyboards insert by composition and replacement (autocorrect,
  suggestions, swipe), which count as typed, so they are never "no input". Text the page itself offered
  (a task's suggested prompt, such as the arena's drawn prompt, which the instructions let a worker
  send as it is) is known to the server and counts as accounted for (``offered_chars``).
- **too fast**: characters typed or composed per second of composing, above what people sustain
  (about 12 per second is a very fast typist; :data:`FAST_CPS` gives room to spare). Slow typists
  can never be flagged by it.
- Answers shorter than :data:`MIN_CHARS` are scored but never flagged: "ok" pasted proves nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

FLAG_AT = 0.5
"""An answer scoring this or more is flagged for review."""
MIN_CHARS = 15
"""Answers shorter than this are never flagged."""
FAST_CPS = 20.0
"""Characters per second of composing at which typing is flagged as implausibly fast (the score rises
from 0 at half this rate to 1 at one and a half times it)."""
WORKER_FLAG_SHARE = 0.2
"""A worker is flagged when at least this share of their scored answers is flagged ..."""
WORKER_MIN_FLAGGED = 2
"""... and at least this many answers are (one pasted message is not a pattern)."""


@dataclass(frozen=True)
class AnswerScore:
    """One answer's score in [0, 1] (None: no signals came with it), the reason, and whether it is flagged."""

    score: float | None
    reason: str
    flagged: bool


def score_answer(signals: Mapping[str, int] | None, text_chars: int, offered_chars: int = 0) -> AnswerScore:
    """How likely ``signals`` say the answer of ``text_chars`` characters was not typed by the worker;
    ``offered_chars`` of it the page itself put in the box (a suggested prompt sent as offered)."""
    if not signals:
        return AnswerScore(None, "no signals", False)
    length = max(int(text_chars), 1)
    typed = signals.get("typed_chars", 0) + signals.get("composed_chars", 0)
    pasted = signals.get("pasted_chars", 0)
    compose_s = signals.get("compose_ms", 0) / 1000
    parts = {
        "pasted": min(1.0, pasted / length),
        "no input": max(0.0, length - typed - pasted - offered_chars) / length,
        "too fast": 0.0,
    }
    if typed >= MIN_CHARS:
        cps = typed / max(compose_s, 0.001)
        parts["too fast"] = min(1.0, max(0.0, (cps - FAST_CPS / 2) / FAST_CPS))
    reason, score = max(parts.items(), key=lambda item: item[1])
    score = round(score, 3)
    flagged = score >= FLAG_AT and text_chars >= MIN_CHARS
    quiet = "sent as offered" if offered_chars and not typed and not pasted else "typed"
    return AnswerScore(score, reason if score > 0 else quiet, flagged)


@dataclass(frozen=True)
class WorkerScore:
    """A worker's answers with signals: how many, how many flagged, the share, and whether to review them."""

    scored: int
    flagged: int
    share: float | None
    flag: bool
    reasons: dict[str, int]
    """How many flagged answers gave each reason."""

    @property
    def label(self) -> str:
        """A short text for a table cell: ``review: 12 of 18 flagged, mostly pasted`` or ``typed``."""
        if not self.scored:
            return "no signals"
        if not self.flagged:
            return "typed"
        reason = max(self.reasons.items(), key=lambda item: item[1])[0]
        return f"{'review: ' if self.flag else ''}{self.flagged} of {self.scored} flagged, mostly {reason}"


def score_worker(answers: Iterable[AnswerScore]) -> WorkerScore:
    """Aggregate one worker's answer scores: the share flagged, and a flag for review (never for rejection)."""
    scored = flagged = 0
    reasons: dict[str, int] = {}
    for answer in answers:
        if answer.score is None:
            continue
        scored += 1
        if answer.flagged:
            flagged += 1
            reasons[answer.reason] = reasons.get(answer.reason, 0) + 1
    share = round(flagged / scored, 3) if scored else None
    flag = bool(scored) and flagged >= WORKER_MIN_FLAGGED and flagged / scored >= WORKER_FLAG_SHARE
    return WorkerScore(scored, flagged, share, flag, reasons)
