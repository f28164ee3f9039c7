"""Pairwise A/B's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`).

Each vote on systems x and y (x before y by name) is an x-over-y score: 1 when x wins, 0 when y wins,
½ for a tie (an identical pair's automatic tie included). The score is bounded in [0, 1], so its
confidence sequence is the exact one (variance bound ¼). Under the sharp null (no worker prefers
either system on any prompt) each vote scores ½ on average given everything seen before, because its
A/B sides are a fresh coin flip, so a claim that x beats y keeps its level exactly; away from that
null, one worker's several votes in a HIT are correlated and the sequence covers the running average
of the votes' conditional means (Howard et al. 2021), the crowd's win rate when workers are drawn
independently. Free of scipy.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import pandas as pd

from hitkit.analysis.sequential import Comparison

UNIT = "votes"
"""What a comparison's n counts."""

SCORE = {"a": 1.0, "b": 0.0, "tie": 0.5}


def planned(payloads: Sequence[Mapping], config) -> dict[tuple[str, str], float]:
    """Votes each pair gets in the fixed design: its prompts × votes per prompt."""
    out: dict[tuple[str, str], float] = {}
    for payload in payloads:
        pair = tuple(sorted(payload["systems"]))
        out[pair] = out.get(pair, 0.0) + config.pairwise.votes_per_prompt
    return out


def comparisons(tables: Mapping[str, pd.DataFrame], systems: Sequence[str],
                plan: Mapping[tuple[str, str], float], *, config=None) -> list[Comparison]:
    """One comparison per pair of systems from the votes so far."""
    votes = tables.get("votes")
    stats: dict[tuple[str, str], tuple[int, float]] = {}
    if votes is not None and len(votes):
        score = votes["vote"].map(SCORE)
        first_wins = score.where(votes["system_a"] < votes["system_b"], 1.0 - score)
        pair = [tuple(sorted(p)) for p in zip(votes["system_a"], votes["system_b"])]
        frame = pd.DataFrame({"pair": pair, "score": first_wins}).dropna()
        for key, group in frame.groupby("pair"):
            stats[key] = (len(group), float(group["score"].mean()))
    out = []
    for x, y in combinations(sorted(systems), 2):
        n, mean = stats.get((x, y), (0, 0.5))
        out.append(Comparison(x, y, n, mean, 0.25, plan.get((x, y), 0.0), null=0.5, exact=True))
    return out


def hit_pairs(payloads: Sequence[Mapping]) -> list[tuple[str, str]]:
    """The pairs a HIT's answers inform: its units' pairs."""
    return sorted({tuple(sorted(p["systems"])) for p in payloads})
