"""Spot The Bot's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`).

Each annotation of a segment in which bots x and y (x before y by name) converse is an x-over-y score
by METHODS §2's win function: 1 when x's label ranks above y's (human > unsure > bot), 0 when below,
½ when equal. The segments of one conversation share its bots' fortunes, so the sequence counts
conversations: each conversation's mean score over its annotations so far is one observation in
[0, 1], watched with the bounded (hedged betting) confidence sequence, conversations in the order of
their first annotation's assignment in the ``assignments`` table (:mod:`hitkit.running.stopping` sorts it by
submission). Nonasymptotic, whatever the conversations' and annotators' effects, for the average over
conversations of each conversation's expected score, provided conversations are exchangeable (a
conversation annotated again later changes its mean, which the guarantee approximates as a fresh
observation). Self-chat and human–human segments inform no comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from hitkit.analysis.sequential import Comparison, bounded_comparison
from hitkit.protocols.spot_the_bot.annotations import HUMAN

UNIT = "conversations"
"""What a comparison's n counts."""


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
    """One comparison per pair of bots from the segment annotations so far."""
    from hitkit.protocols.spot_the_bot.reading import segment_annotations

    annotations = tables.get("annotations")
    assignments = tables.get("assignments")
    order = None
    found: dict[tuple[str, str], pd.DataFrame] = {}
    if annotations is not None and len(annotations):
        seg = segment_annotations(annotations)
        seg = seg[(seg["system_0"] != seg["system_1"]) & (seg["system_0"] != HUMAN) & (seg["system_1"] != HUMAN)]
        first = seg["system_0"] < seg["system_1"]
        outcome = np.where(first, seg["outcome"], -seg["outcome"])
        frame = pd.DataFrame(
            {
                "x": np.where(first, seg["system_0"], seg["system_1"]),
                "y": np.where(first, seg["system_1"], seg["system_0"]),
                "score": (outcome + 1) / 2,
                "conversation": seg["conversation_id"].astype(str),
            }
        )
        if assignments is not None and len(assignments) and "assignment_id" in seg:
            rank = {a: i for i, a in enumerate(assignments["assignment_id"].astype(str))}
            at = seg["assignment_id"].astype(str).map(lambda a: rank.get(a, len(rank))).to_numpy()
            order = list(pd.Series(at, index=frame.index).groupby(frame["conversation"]).min().sort_values().index)
        found = {key: group for key, group in frame.groupby(["x", "y"])}
    out = []
    for x, y in combinations(sorted(systems), 2):
        group = found.get((x, y))
        values = group["score"].to_numpy() if group is not None else np.zeros(0)
        clusters = group["conversation"].to_numpy() if group is not None else np.zeros(0)
        out.append(
            bounded_comparison(x, y, values, clusters, plan.get((x, y), 0.0), null=0.5, bounds=(0.0, 1.0), order=order)
        )
    return out
