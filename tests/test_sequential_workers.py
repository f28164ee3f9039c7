"""The stopping rule's unit is the worker: one observation per worker (their first HIT on the pair), so a
returning worker never adds an independent draw (Spot The Bot: its sign-flip test gets every annotation
with its worker and conversation); the benchmark's vectorised rule is the library's; and with a few heavy
workers the rule keeps its level where the per-HIT one does not."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from benchmarks import heavy_nulls
from hitkit.analysis.contributions import projected, worker_contributions
from hitkit.analysis.sequential import intervals
from hitkit.protocols.arena import sequential as arena
from hitkit.protocols.pairwise import sequential as pairwise
from hitkit.protocols.spot_the_bot import sequential as spot_the_bot


def test_a_returning_workers_later_hits_add_no_observation():
    found = worker_contributions(
        [1.0, 1.0, 0.0, 0.0, 1.0, 0.5],
        ["w1", "w1", "w2", "w1", "w1", "w3"],
        ["h1", "h1", "h2", "h3", "h4", "h5"],
    )
    # w1's HITs h3 and h4 would pull the mean their way: they are left out, spent but not counted
    assert found.workers == ["w1", "w2", "w3"] and found.hits == ["h1", "h2", "h5"]
    assert list(found.means) == [1.0, 0.0, 0.5] and found.spent == 5


def test_the_arrival_order_decides_which_hit_of_a_worker_counts():
    found = worker_contributions([1.0, 0.0], ["w", "w"], ["early", "late"], order=["late", "early"])
    assert found.hits == ["late"] and list(found.means) == [0.0]


def test_missing_worker_ids_are_workers_of_their_own_and_lengths_must_agree():
    found = worker_contributions([1.0, 0.0, 1.0], [None, None, ""], ["h1", "h2", "h3"])
    assert len(found.means) == 3
    with pytest.raises(ValueError, match="3 values, 2 workers"):
        worker_contributions([1.0, 0.0, 1.0], ["a", "b"], ["h1", "h2", "h3"])


def test_a_pairs_horizon_projects_the_share_of_hits_that_gave_an_observation():
    assert projected(0, 0, 100.0) is None
    assert projected(20, 30, 60.0) == pytest.approx(20 + 30 * 30 / 40)
    assert projected(20, 70, 60.0) == 20  # the plan is spent: what it has is all it gets


def _votes(rows):
    """Pairwise votes from (assignment, worker, item, vote) rows on the pair x–y."""
    return pd.DataFrame(
        [
            {"assignment_id": h, "worker_id": w, "item_id": i, "system_a": "x", "system_b": "y", "vote": v}
            for h, w, i, v in rows
        ]
    )


def test_pairwise_counts_a_worker_once_however_many_hits_they_do():
    # a heavy worker who always picks x does 20 HITs; two others pick y once each
    rows = [(f"h{k}", "heavy", f"p{k}", "a") for k in range(20)]
    rows += [("h20", "w1", "p20", "b"), ("h21", "w2", "p21", "b")]
    c = pairwise.comparisons({"votes": _votes(rows)}, ["x", "y"], {("x", "y"): 40.0})[0]
    assert c.n == 3 and c.clusters == (1.0, 0.0, 0.0)
    assert intervals([c], 0.05)[0].winner is None  # twenty HITs of one taste are not twenty draws
    # its horizon: 3 observations from 22 HITs, 18 HITs still planned at (3 + 10) / (22 + 10)
    assert c.expected == pytest.approx(3 + 18 * 13 / 32)


def test_pairwise_takes_its_material_as_fixed_so_workers_on_the_same_prompts_each_count():
    rows = [("h1", "w1", "p1", "a"), ("h1", "w1", "p2", "a"), ("h2", "w2", "p1", "b"), ("h2", "w2", "p2", "b")]
    c = pairwise.comparisons({"votes": _votes(rows)}, ["x", "y"], {("x", "y"): 4.0})[0]
    assert c.n == 2 and c.clusters == (1.0, 0.0)


def test_arena_counts_workers_not_battles():
    battles = pd.DataFrame(
        [
            {
                "assignment_id": f"a{k // 5}",
                "worker_id": "heavy" if k < 10 else f"w{k}",
                "prompt_id": "",
                "system_a": "x",
                "system_b": "y",
                "vote": "a" if k < 10 else "tie",
                "is_control": 0,
                "leak": 0,
            }
            for k in range(15)
        ]
    )
    c = arena.comparisons({"battles": battles}, ["x", "y"], {("x", "y"): 15.0})[0]
    # the heavy worker's two HITs give one observation (their first: five wins); the third HIT another
    assert c.n == 2 and c.clusters == (1.0, 0.5)


def test_arena_plans_hits_that_hold_a_pair():
    config = type("C", (), {"arena": type("A", (), {"hits": 100, "battles_per_hit": 5})()})()
    # 500 battles over 3 pairs: a pair's 166.7 battles reach 1 − (1 − 1/3)^5 of the 100 HITs
    assert arena.planned_hits(500 / 3, config) == pytest.approx(100 * (1 - (2 / 3) ** 5))
    assert arena.planned_hits(40.0, None) == 40.0


def test_spot_the_bot_gives_its_test_every_annotation_and_a_conversation_to_whoever_reached_it_first():
    def annotation(assignment, worker, conversation, label_x, label_y):
        base = {"study": "s", "hit_id": assignment, "assignment_id": assignment, "worker_id": worker}
        base.update(conversation_id=conversation, segment_exchanges=2, elapsed_s=10.0)
        features = {"fluency": 0, "sensibleness": 0, "specificity": 0}  # no feature answered: 0/0
        return [
            {**base, **features, "entity": 0, "system": "x", "label": label_x},
            {**base, **features, "entity": 1, "system": "y", "label": label_y},
        ]

    from hitkit.analysis.signflip import owned
    from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS

    rows = (
        annotation("a1", "w1", "c1", "human", "bot")  # w1 on c1: x wins
        + annotation("a2", "w2", "c1", "bot", "human")  # c1 again: w1's
        + annotation("a3", "w2", "c2", "bot", "human")  # w2's next HIT, a new conversation: w2's
        + annotation("a4", "w1", "c3", "bot", "human")  # w1 returns: a new conversation counts too
        + annotation("a5", "w3", "c4", "human", "bot")  # two new conversations in one HIT: both w3's
        + annotation("a5", "w3", "c5", "bot", "human")
        + annotation("a6", "w4", "c5", "human", "unsure")  # c5 is w3's
        + annotation("a7", "w4", "c1", "human", "bot")  # c1 is w1's
        + annotation("a8", "w4", "c6", "unsure", "bot")  # a new one: w4's
    )
    tables = {"annotations": pd.DataFrame(rows)[list(ANNOTATION_COLUMNS)]}
    c = spot_the_bot.comparisons(tables, ["x", "y"], {("x", "y"): 6.0})[0]
    # every annotation of the pair, x over y, its look the assignment's place (here: first appearance)
    assert c.n == 9 and c.planned == 6.0
    assert c.flip.look.tolist() == [0, 1, 2, 3, 4, 4, 5, 6, 7]
    assert c.flip.worker.tolist() == ["w1", "w2", "w2", "w1", "w3", "w3", "w4", "w4", "w4"]
    assert c.flip.item.tolist() == ["c1", "c1", "c2", "c3", "c4", "c5", "c5", "c1", "c6"]
    assert c.flip.score.tolist() == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    assert owned(c.flip.look, c.flip.worker, c.flip.item).tolist() == [1, 0, 1, 1, 1, 1, 0, 0, 1]
    # the assignments table's order decides who reached c1 first: a2 handed in before a1 makes it w2's
    tables["assignments"] = pd.DataFrame({"assignment_id": ["a2", "a1", "a3", "a4", "a5", "a6", "a7", "a8"]})
    c = spot_the_bot.comparisons(tables, ["x", "y"], {("x", "y"): 6.0})[0]
    assert c.flip.look.tolist()[:2] == [1, 0]
    assert owned(c.flip.look, c.flip.worker, c.flip.item).tolist() == [0, 1, 1, 1, 1, 1, 0, 0, 1]


def _pairwise_tables(scores: np.ndarray, workers: np.ndarray, upto: int) -> dict[str, pd.DataFrame]:
    """A simulated study's first ``upto`` HITs as a votes table: each HIT's mean score as ten votes (its
    points of ½ as ties), every vote on a prompt of its own."""
    rows = []
    for h in range(upto):
        points = round(scores[h] * heavy_nulls.PER_HIT * 2)  # half-points
        wins, ties = divmod(points, 2)
        votes = ["a"] * wins + ["tie"] * ties + ["b"] * (heavy_nulls.PER_HIT - wins - ties)
        rows += [(f"h{h}", f"w{workers[h]}", f"p{h}-{k}", v) for k, v in enumerate(votes)]
    return {"votes": _votes(rows)}


def test_the_benchmarks_per_worker_rule_is_the_librarys_on_simulated_heavy_worker_studies():
    world = heavy_nulls.World("5 workers do 70 %, sd 1.13, equal systems", 5, 0.7, 1.13)
    wide = heavy_nulls.World("20 workers do 50 %, one system far better", 20, 0.5, 0.3)
    rng = np.random.default_rng(5)
    scores, workers, _ = heavy_nulls.simulate(world, 3, rng, hits=120)
    better, better_workers, _ = heavy_nulls.simulate(wide, 3, rng, hits=120)
    better = np.clip(better + 0.3, 0, 1)  # x wins far more often: the rule fires on the way
    scores, workers = np.vstack([scores, better]), np.vstack([workers, better_workers])
    claims = heavy_nulls.bounded_claims(scores, heavy_nulls.first_hits(workers), planned=120, project=True)
    assert claims[3:].any() and not claims[:3].all()
    for s in range(len(scores)):
        for look in (5, 15, 30, 45, 60, 90, 119):
            tables = _pairwise_tables(scores[s], workers[s], look + 1)
            found = intervals(pairwise.comparisons(tables, ["x", "y"], {("x", "y"): 120.0}), 0.05)[0]
            assert (found.winner is not None) == bool(claims[s, look]), (s, look)


def test_with_five_heavy_workers_the_per_hit_rule_fails_and_the_per_worker_rule_keeps_its_level():
    start = time.perf_counter()
    world = heavy_nulls.World("5 workers do 70 %, taste sd 1.13", 5, 0.7, 1.13)
    scores, workers, points = heavy_nulls.simulate(world, 300, np.random.default_rng(2))
    per_hit = heavy_nulls.per_hit_claims(scores).any(axis=1).mean()
    per_battle = heavy_nulls.per_battle_claims(points).any(axis=1).mean()
    per_worker = heavy_nulls.per_worker_claims(scores, workers).any(axis=1).mean()
    assert per_hit > 0.3 and per_battle > 0.3  # the heavy workers' tastes counted again and again
    assert per_worker <= 0.05
    assert time.perf_counter() - start < 20
