"""Pairwise A/B's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`).

Each vote on systems x and y (x before y by name) is an x-over-y score: 1 when x wins, 0 when y wins,
½ for a tie (an identical pair's automatic tie included). The votes of one HIT (one worker's
assignment) share that worker's taste, so the sequence does not count votes: it counts HITs, each
HIT's mean score on the pair one bounded observation in [0, 1], and watches them with the bounded
(empirical-Bernstein) confidence sequence of :mod:`hitkit.analysis.sequential`, HITs in the order they
were handed in (the ``assignments`` table's order, which :mod:`hitkit.running.stopping` sorts by submission).
What is covered: the crowd's win rate of x over y as the average over HITs of each HIT's expected
score, whatever the workers' tastes, provided each HIT's worker is drawn from the crowd independently
of the HITs before (a worker's second HIT is a new draw of the same taste, which the guarantee still
covers only as far as their HITs are exchangeable with others'). A claim that x beats y then keeps
its level under the null that the crowd's win rate is ½; the earlier per-vote sequence kept it only
under the sharp null that no worker prefers either system (benchmarks/adaptive.py: 9–35 % false
claims at a worker-taste spread of 0.5–1.13 logits, per-HIT ≤ 5 %). Free of scipy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from hitkit.analysis.sequential import Comparison, bounded_comparison

UNIT = "hits"
"""What a comparison's n counts: HITs (assignments) with votes on the pair, each one observation."""

SCORE = {"a": 1.0, "b": 0.0, "tie": 0.5}


def planned(payloads: Sequence[Mapping], config) -> dict[tuple[str, str], float]:
    """HITs each pair's votes arrive in, in the fixed design: its prompts packed ``prompts_per_hit`` to a
    HIT (as an adaptive design packs one pair a HIT), each taken by ``votes_per_prompt`` workers. Fixed
    before the study (the sequence's bets are tuned there, which must not depend on the data)."""
    prompts: dict[tuple[str, str], int] = {}
    for payload in payloads:
        pair = tuple(sorted(payload["systems"]))
        prompts[pair] = prompts.get(pair, 0) + 1
    cfg = config.pairwise
    return {pair: float(math.ceil(k / cfg.prompts_per_hit) * cfg.votes_per_prompt) for pair, k in prompts.items()}


def comparisons(
    tables: Mapping[str, pd.DataFrame], systems: Sequence[str], plan: Mapping[tuple[str, str], float], *, config=None
) -> list[Comparison]:
    """One comparison per pair of systems from the votes so far: each HIT's mean x-over-y score on the
    pair, HITs in the order of the ``assignments`` table (else of their first vote)."""
    votes = tables.get("votes")
    assignments = tables.get("assignments")
    order = list(assignments["assignment_id"].astype(str)) if assignments is not None and len(assignments) else None
    groups: dict[tuple[str, str], pd.DataFrame] = {}
    if votes is not None and len(votes):
        score = votes["vote"].map(SCORE)
        first_wins = score.where(votes["system_a"] < votes["system_b"], 1.0 - score)
        pair = [tuple(sorted(p)) for p in zip(votes["system_a"], votes["system_b"])]
        frame = pd.DataFrame({"pair": pair, "score": first_wins, "hit": votes["assignment_id"].astype(str)}).dropna()
        groups = {key: group for key, group in frame.groupby("pair")}
    out = []
    for x, y in combinations(sorted(systems), 2):
        group = groups.get((x, y))
        values = group["score"].to_numpy() if group is not None else np.zeros(0)
        hits = group["hit"].to_numpy() if group is not None else np.zeros(0)
        out.append(
            bounded_comparison(x, y, values, hits, plan.get((x, y), 0.0), null=0.5, bounds=(0.0, 1.0), order=order)
        )
    return out


def hit_pairs(payloads: Sequence[Mapping]) -> list[tuple[str, str]]:
    """The pairs a HIT's answers inform: its units' pairs."""
    return sorted({tuple(sorted(p["systems"])) for p in payloads})
