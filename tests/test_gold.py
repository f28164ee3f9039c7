"""Gold items (issue 42): each worker's accuracy on known-answer items with an exact Clopper–Pearson
interval, in the workers table of rating (degraded copies), live chat (the QC bot), the arena (control
battles) and Spot The Bot (human–human conversations), and in the summary and report."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from hitkit.analysis.gold import below_chance, clopper_pearson, gold_accuracy
from tests.studies import REPO

GOLDEN = REPO / "tests" / "data" / "golden"


@pytest.mark.parametrize("k,n", [(0, 5), (5, 5), (3, 7), (1, 40), (12, 13)])
def test_the_interval_is_scipys_exact_clopper_pearson(k, n):
    low, high = clopper_pearson(np.array([k]), np.array([n]))
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert (low[0], high[0]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert low[0] <= k / n <= high[0] and high[0] - low[0] > 0


def test_accuracy_counts_each_workers_items_and_flags_only_a_worker_surely_below_half():
    answers = pd.DataFrame(
        {
            "worker_id": ["good"] * 10 + ["bad"] * 12 + ["few"] * 2,
            "correct": [True] * 9 + [False] + [False] * 12 + [False] * 2,
        }
    )
    table = gold_accuracy(answers).set_index("worker_id")
    assert table.loc["good", ["gold_items", "gold_correct"]].tolist() == [10, 9]
    assert table.loc["bad", "gold_accuracy"] == 0 and table.loc["bad", "gold_high"] < 0.5
    assert table.loc["few", "gold_high"] > 0.5  # 0 of 2 cannot show a worker is worse than a coin
    assert below_chance(table.reset_index(), 0.5) == ["bad"]


def test_rating_scores_degraded_copies_as_gold(tmp_path):
    from hitkit.protocols.rating.analysis import analyze_rating
    from tests.test_rating import _synthetic_export

    _synthetic_export(tmp_path)
    result = analyze_rating(tmp_path, n_boot=0)
    workers = result.tables["workers"].set_index("worker_id")
    assert (workers.loc[["d0", "d1", "d2", "d3"], "gold_accuracy"] == 1.0).all()
    assert (workers["gold_items"] == 3).all()  # every worker rated 3 degraded copies
    assert workers.loc["constant", "gold_correct"] == 0  # the same score everywhere is never "below"
    assert result.summary["gold"]["workers"] == 6 and "degraded" in result.summary["gold"]["items"]


def test_spot_the_bot_gold_is_the_human_human_speakers():
    from hitkit.report.analyze import run_analysis

    result = run_analysis("spot_the_bot", GOLDEN / "spot_the_bot" / "export", options={"n_boot": 0})
    annotators = result.tables["annotators"]
    assert (annotators["gold_items"] == annotators["hh_entities"]).all()
    assert (annotators["gold_correct"] == annotators["hh_correct"]).all()
    seen = annotators[annotators["gold_items"] > 0]
    assert (seen["gold_low"] <= seen["gold_accuracy"]).all() and (seen["gold_accuracy"] <= seen["gold_high"]).all()


def test_arena_gold_is_the_control_battles():
    from hitkit.protocols.arena.analysis import analyze_battles
    from tests.test_arena_stats import frame

    rows = [("real", "qc", "a", "w1")] * 4 + [("qc", "real", "b", "w1")] * 2 + [("real", "qc", "b", "w2")] * 3
    control = frame(rows, is_control=1)
    real = frame([("real", "other", "a", "w1"), ("other", "real", "tie", "w2")] * 3)
    result = analyze_battles(pd.concat([control, real], ignore_index=True), n_boot=0)
    workers = result.tables["workers"].set_index("worker_id")
    assert workers.loc["w1", ["gold_items", "gold_correct"]].tolist() == [6, 6]
    assert workers.loc["w2", ["gold_items", "gold_correct"]].tolist() == [3, 0]
