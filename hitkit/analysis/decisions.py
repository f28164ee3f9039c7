"""The stopping rule's decisions over a study's confidence-sequence intervals
(:func:`hitkit.analysis.sequential.intervals`): whether a pre-registered decision is made, what is left
open and how much each open pair needs (:func:`settle`), and the intervals as table rows (:func:`as_table`).
Split from :mod:`hitkit.analysis.sequential`, which re-exports every name; the intervals say what each
pair shows, this module what the study may conclude from all of them. Pure functions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    from hitkit.analysis.sequential import Interval

Decision = Literal["best", "pairs", "pair", "clear"]

DECISIONS: dict[str, str] = {
    "best": "which system is best: one system beats every other",
    "pairs": "every pair of systems: differs, or is not expected to differ within the study's size",
    "pair": "one named pair of systems: differs, or is not expected to differ within the study's size",
    "clear": "every pair that looks clear differs; the rest are declared undecided (at their present estimate "
    "they would not differ by the end of the study's design, counting only the observations still "
    "expected)",
}


@dataclass(frozen=True)
class RuleState:
    """Where a decision stands: ``fired`` when it is made, with the outcome in words; ``open`` lists the
    pairs still to settle; ``weights`` says how much more data each open pair needs (for an adaptive
    design: post what most serves the open pairs)."""

    decision: str
    fired: bool
    outcome: str
    intervals: list[Interval]
    open: list[tuple[str, str]] = field(default_factory=list)
    weights: dict[tuple[str, str], float] = field(default_factory=dict)
    leader: str | None = None


def _pair(i: Interval) -> tuple[str, str]:
    return (i.a, i.b)


def leader(found: Sequence[Interval], systems: Sequence[str]) -> str | None:
    """The system not yet shown worse than another with the best average score against the others
    (ties: the first named)."""
    beaten = {i.b if i.winner == i.a else i.a for i in found if i.winner is not None}
    score: dict[str, list[float]] = {s: [] for s in systems}
    for i in found:
        if i.n:
            score.setdefault(i.a, []).append(i.estimate - i.null)
            score.setdefault(i.b, []).append(i.null - i.estimate)
    alive = [s for s in systems if s not in beaten] or list(systems)
    return max(alive, key=lambda s: (float(np.mean(score[s])) if score.get(s) else 0.0, -list(systems).index(s)))


def settle(
    found: Sequence[Interval], decision: Decision, systems: Sequence[str], pair: tuple[str, str] | None = None
) -> RuleState:
    """Whether the decision is made by these intervals, and what is left open (and how much it needs)."""

    def need(i: Interval) -> float:
        # Fewer observations and a narrower margin need more; settled pairs need nothing.
        return 0.0 if i.settled else 1.0 / (1.0 + i.n)

    if decision == "best":
        top = leader(found, systems)
        against = [i for i in found if top in (i.a, i.b)]
        wins = [i for i in against if i.winner == top]
        if against and len(wins) == len(systems) - 1:
            return RuleState(decision, True, f"{top} is best: it beats every other system", list(found), leader=top)
        # The claim is that the leader beats every other system itself, so a challenger that a third
        # system has already beaten still has to meet it: leaving such pairs out of the open ones left
        # an adaptive design with nothing to post and a decision that could never be made.
        open_pairs = [i for i in against if i.winner is None]
        weights = {_pair(i): 1.0 / (1.0 + i.n) for i in open_pairs}
        return RuleState(
            decision, False, f"not yet: {top} leads", list(found), [_pair(i) for i in open_pairs], weights, top
        )
    watched = [i for i in found if pair is None or {i.a, i.b} == set(pair)] if decision == "pair" else list(found)
    if decision == "clear":
        open_pairs = [i for i in watched if not (i.settled or i.undecided)]
        if watched and not open_pairs:
            differ = [f"{i.winner} > {i.b if i.winner == i.a else i.a}" for i in watched if i.winner is not None]
            rest = [f"{i.a}–{i.b}" for i in watched if i.winner is None]
            return RuleState(
                decision,
                True,
                (("differ: " + ", ".join(differ)) if differ else "no pair differs")
                + ((f"; undecided: {', '.join(rest)}") if rest else ""),
                list(found),
            )
        return RuleState(
            decision,
            False,
            f"not yet: {len(open_pairs)} of {len(watched)} pairs look clear but are not settled",
            list(found),
            [_pair(i) for i in open_pairs],
            {_pair(i): need(i) for i in open_pairs},
        )
    open_pairs = [i for i in watched if not i.settled]
    if watched and not open_pairs:
        differ = [f"{i.winner} > {i.b if i.winner == i.a else i.a}" for i in watched if i.winner is not None]
        return RuleState(
            decision,
            True,
            ("differ: " + ", ".join(differ)) if differ else "no pair can come to differ within the study's size",
            list(found),
        )
    return RuleState(
        decision,
        False,
        f"not yet: {len(open_pairs)} of {len(watched)} pairs open",
        list(found),
        [_pair(i) for i in open_pairs],
        {_pair(i): need(i) for i in open_pairs},
    )


def as_table(state: RuleState) -> list[Mapping[str, object]]:
    """The intervals as rows for a table (dashboard, export)."""
    return [
        {
            "system_a": i.a,
            "system_b": i.b,
            "n": i.n,
            "estimate": round(i.estimate, 4),
            "low": round(i.low, 4) if math.isfinite(i.low) else None,
            "high": round(i.high, 4) if math.isfinite(i.high) else None,
            "null": i.null,
            "winner": i.winner,
            "futile": i.futile,
            "undecided": i.undecided,
            "open": (i.a, i.b) in state.open,
        }
        for i in state.intervals
    ]
