"""Spot The Bot's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`).

Each annotation of a segment in which bots x and y (x before y by name) converse is an x-over-y score
by METHODS §2's win function: 1 when x's label ranks above y's (human > unsure > bot), 0 when below,
½ when equal. Two things make annotations depend on each other: the conversation (the segments of one
conversation share its bots' fortunes, and go to several annotators) and the annotator (one worker's
labels share their taste, over however many HITs). The rule is the group-sequential worker sign-flip test
of :mod:`hitkit.analysis.signflip` (its docstring states exactly what is guaranteed): a conversation
counts for the worker who reached it first, every annotation that worker gives on it counts, and each
worker's block is flipped as one. HITs come in the order of the ``assignments`` table
(:mod:`hitkit.running.stopping` sorts it by submission).

It replaced the per-worker betting sequence the other protocols use (one observation per annotator: the
first HIT's mean on fresh conversations), which on simulated data with clear differences and 30 Zipf
workers settled the least-settled clear pair by 70 % of the units in 11–22 % of orders on three data
sets; this rule, in 67–86 % (benchmarks/replay_clear.py). The earlier sequence before that took each
conversation's mean over its annotations so far and revised it after betting on it: approximate, and
blind to annotators who return.
Self-chat and human–human segments inform no comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from hitkit.analysis.sequential import Comparison
from hitkit.analysis.signflip import REFERENCE
from hitkit.protocols.spot_the_bot.annotations import HUMAN

METHOD = REFERENCE
"""The rule's name in the stop summary and the report's methods paragraph."""
GUARANTEE = (
    "Each watched pair was tested by flipping whole workers: a conversation counted for the worker who "
    "reached it first, with all that worker's annotations of it, so with probability at least 1 − α no pair "
    "was claimed different when its two bots were exchangeable (swapping their names leaves every worker's "
    "labels' distribution unchanged), whatever the workers' tastes and however many HITs each did, provided "
    "workers and conversations were independent and who annotated which segments when did not depend on the "
    "labels (a Monte Carlo randomisation test: the level holds on average over its seeded flips). It is a "
    "test, not an interval for the mean: a pair's bounds are its estimate ± the distance from ½ the test "
    "needed at that look."
)
"""What the rule guarantees, for the report's methods paragraph."""
BOUNDS = "the estimate ± the distance from ½ the sign-flip test needed at that look, not a confidence interval"
"""What a pair's low and high are, for the report's table of the rule's state."""
UNIT = "workers"
"""What a comparison's n counts: annotators whose annotations of the conversations they reached first the
test counts."""


def _pair(payload: Mapping) -> tuple[str, str] | None:
    x, y = payload["systems"]
    return None if x == y or HUMAN in (x, y) else tuple(sorted((x, y)))


def planned(payloads: Sequence[Mapping], config) -> dict[tuple[str, str], float]:
    """Conversations each pair of bots has in the fixed design (the sequence's observations)."""
    out: dict[tuple[str, str], set] = {}
    for payload in payloads:
        pair = _pair(payload)
        if pair is not None:
            out.setdefault(pair, set()).add(str(payload["conversation"]))
    return {pair: float(len(conversations)) for pair, conversations in out.items()}


def hit_pairs(payloads: Sequence[Mapping]) -> list[tuple[str, str]]:
    """The pairs a HIT's segments inform."""
    return sorted({p for p in map(_pair, payloads) if p is not None})


def comparisons(
    tables: Mapping[str, pd.DataFrame], systems: Sequence[str], plan: Mapping[tuple[str, str], float], *, config=None
) -> list[Comparison]:
    """One comparison per pair of bots from the segment annotations so far, for the sign-flip test.
    ``plan`` counts the pair's conversations (:func:`planned`): its α is spent as they are seen."""
    from hitkit.protocols.spot_the_bot.reading import segment_annotations

    annotations = tables.get("annotations")
    assignments = tables.get("assignments")
    order = list(assignments["assignment_id"].astype(str)) if assignments is not None and len(assignments) else None
    answers = None
    if annotations is not None and len(annotations):
        seg = segment_annotations(annotations)
        seg = seg[(seg["system_0"] != seg["system_1"]) & (seg["system_0"] != HUMAN) & (seg["system_1"] != HUMAN)]
        first = seg["system_0"] < seg["system_1"]
        outcome = np.where(first, seg["outcome"], -seg["outcome"])
        answers = pd.DataFrame(
            {
                "x": np.where(first, seg["system_0"], seg["system_1"]),
                "y": np.where(first, seg["system_1"], seg["system_0"]),
                "score": (outcome + 1) / 2,
                "hit": seg["assignment_id"].astype(str).to_numpy(),
                "worker": seg["worker_id"].to_numpy(),
                "item": seg["conversation_id"].astype(str).to_numpy(),
            }
        )
    return flip_comparisons(answers, systems, plan, order)


def flip_comparisons(
    answers: pd.DataFrame | None, systems: Sequence[str], plan: Mapping[tuple[str, str], float], order: list | None
) -> list[Comparison]:
    """One comparison per pair of bots (x before y by name), its rows for the sign-flip test: each
    annotation's look is its HIT's place in ``order`` (the assignments as handed in; HITs missing from it
    come after, in their rows' order)."""
    from itertools import combinations

    from hitkit.analysis.signflip import FlipRows

    rank = {a: i for i, a in enumerate(order or [])}
    out = []
    groups = dict(tuple(answers.groupby(["x", "y"]))) if answers is not None and len(answers) else {}
    for x, y in combinations(sorted(systems), 2):
        group = groups.get((x, y))
        planned = float(plan.get((x, y), 0.0))
        if group is None or not len(group):
            rows = FlipRows(np.zeros(0, int), np.zeros(0), np.zeros(0), np.zeros(0))
            out.append(Comparison(x, y, 0, 0.5, 0.0, planned, null=0.5, flip=rows))
            continue
        hits = group["hit"].astype(str)
        late = {h: len(rank) + i for i, h in enumerate(dict.fromkeys(h for h in hits if h not in rank))}
        look = np.array([rank.get(h, late.get(h, 0)) for h in hits], dtype=int)
        score = group["score"].to_numpy(float)
        rows = FlipRows(look, group["worker"].astype(str).to_numpy(), group["item"].astype(str).to_numpy(), score)
        out.append(Comparison(x, y, len(score), float(score.mean()), 0.0, planned, null=0.5, flip=rows))
    return out
