"""Pairwise A/B's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`).

Each vote on systems x and y (x before y by name) is an x-over-y score: 1 when x wins, 0 when y wins,
½ for a tie (an identical pair's automatic tie included). A worker's votes share their taste however
many HITs they do, so the sequence counts neither votes nor HITs but workers: each worker gives one
observation in [0, 1], the mean score of their first HIT that holds the pair
(:func:`hitkit.analysis.contributions.worker_contributions`), HITs in the order they were handed in
(the ``assignments`` table's order, which :mod:`hitkit.running.stopping` sorts by submission), watched
with the bounded (hedged betting) confidence sequence.

What is covered, exactly (in finite samples, at every look), when workers are drawn independently and
who takes which HIT when, with which prompts, does not depend on the answers (a fixed design; an adaptive
one is measured in benchmarks/adaptive.py): whatever the workers' tastes and however many HITs each
does, a claim that x beats y keeps its level under the null that the crowd's win rate of x over y is ½
on every HIT's prompts. The prompts are the study's fixed material, voted on by several workers (as the
default analysis takes them); where the crowd is even only on average over them, the level is
approximate. The per-HIT sequence before it counted a returning worker's HITs as fresh draws: with 5
workers doing 70 % of the HITs it claimed a difference between equal systems in 33–62 % of simulated
studies, the per-worker one in at most 0.5 % (benchmarks/adaptive.py measures both). Free of scipy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd

from hitkit.analysis.per_worker import pair_answers, worker_comparisons
from hitkit.analysis.sequential import Comparison

UNIT = "workers"
"""What a comparison's n counts: workers, each one observation (their first HIT with votes on the pair)."""

SCORE = {"a": 1.0, "b": 0.0, "tie": 0.5}


def planned(payloads: Sequence[Mapping], config) -> dict[tuple[str, str], float]:
    """HITs each pair's votes arrive in, in the fixed design: its prompts packed ``prompts_per_hit`` to a
    HIT (as an adaptive design packs one pair a HIT), each taken by ``votes_per_prompt`` workers. Fixed
    before the study (the bets' horizons are projected from it and from counts of HITs so far, never from
    the answers: :func:`hitkit.analysis.contributions.tuning`)."""
    prompts: dict[tuple[str, str], int] = {}
    for payload in payloads:
        pair = tuple(sorted(payload["systems"]))
        prompts[pair] = prompts.get(pair, 0) + 1
    cfg = config.pairwise
    return {pair: float(math.ceil(k / cfg.prompts_per_hit) * cfg.votes_per_prompt) for pair, k in prompts.items()}


def comparisons(
    tables: Mapping[str, pd.DataFrame], systems: Sequence[str], plan: Mapping[tuple[str, str], float], *, config=None
) -> list[Comparison]:
    """One comparison per pair of systems from the votes so far: each worker's first HIT's mean x-over-y
    score on the pair, HITs in the order of the ``assignments`` table (else of their first vote). Without
    a ``worker_id`` column each HIT is its own worker's."""
    votes = tables.get("votes")
    assignments = tables.get("assignments")
    order = list(assignments["assignment_id"].astype(str)) if assignments is not None and len(assignments) else None
    answers = None
    if votes is not None and len(votes):
        score = votes["vote"].map(SCORE)
        hit = votes["assignment_id"].astype(str)
        answers = pair_answers(
            votes["system_a"],
            votes["system_b"],
            score,
            hit,
            votes["worker_id"] if "worker_id" in votes else hit,
        )
    return worker_comparisons(answers, systems, plan, null=0.5, bounds=(0.0, 1.0), order=order)


def hit_pairs(payloads: Sequence[Mapping]) -> list[tuple[str, str]]:
    """The pairs a HIT's answers inform: its units' pairs."""
    return sorted({tuple(sorted(p["systems"])) for p in payloads})
