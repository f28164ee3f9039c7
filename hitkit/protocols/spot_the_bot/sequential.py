"""Spot The Bot's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`).

Each annotation of a segment in which bots x and y (x before y by name) converse is an x-over-y score
by METHODS §2's win function: 1 when x's label ranks above y's (human > unsure > bot), 0 when below,
½ when equal. The segments of one conversation share its bots' fortunes, so the score's variance is
the conversation-clustered one (n × the sandwich variance of the mean) and the confidence sequence is
the asymptotic one. Self-chat and human–human segments inform no comparison.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from hitkit.analysis.sequential import Comparison, mean_and_variance
from hitkit.protocols.spot_the_bot.annotations import HUMAN

UNIT = "segment annotations"
"""What a comparison's n counts."""


def _pair(payload: Mapping) -> tuple[str, str] | None:
    x, y = payload["systems"]
    return None if x == y or HUMAN in (x, y) else tuple(sorted((x, y)))


def planned(payloads: Sequence[Mapping], config) -> dict[tuple[str, str], float]:
    """Annotations each pair of bots gets in the fixed design: its segments × annotations per segment."""
    out: dict[tuple[str, str], float] = {}
    for payload in payloads:
        pair = _pair(payload)
        if pair is not None:
            out[pair] = out.get(pair, 0.0) + config.spot_the_bot.annotations_per_segment
    return out


def hit_pairs(payloads: Sequence[Mapping]) -> list[tuple[str, str]]:
    """The pairs a HIT's segments inform."""
    return sorted({p for p in map(_pair, payloads) if p is not None})


def comparisons(tables: Mapping[str, pd.DataFrame], systems: Sequence[str],
                plan: Mapping[tuple[str, str], float], *, config=None) -> list[Comparison]:
    """One comparison per pair of bots from the segment annotations so far."""
    from hitkit.protocols.spot_the_bot.reading import segment_annotations

    annotations = tables.get("annotations")
    found: dict[tuple[str, str], tuple[int, float, float]] = {}
    if annotations is not None and len(annotations):
        seg = segment_annotations(annotations)
        seg = seg[(seg["system_0"] != seg["system_1"]) & (seg["system_0"] != HUMAN) & (seg["system_1"] != HUMAN)]
        first = seg["system_0"] < seg["system_1"]
        outcome = np.where(first, seg["outcome"], -seg["outcome"])
        frame = pd.DataFrame({"x": np.where(first, seg["system_0"], seg["system_1"]),
                              "y": np.where(first, seg["system_1"], seg["system_0"]),
                              "score": (outcome + 1) / 2, "conversation": seg["conversation_id"].astype(str)})
        for (x, y), group in frame.groupby(["x", "y"]):
            mean, variance = mean_and_variance(group["score"].to_numpy(), group["conversation"].to_numpy())
            found[(x, y)] = (len(group), mean, variance)
    out = []
    for x, y in combinations(sorted(systems), 2):
        n, mean, variance = found.get((x, y), (0, 0.5, 0.25))
        out.append(Comparison(x, y, n, mean, variance, plan.get((x, y), 0.0), null=0.5))
    return out
