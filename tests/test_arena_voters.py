"""The arena's voter test without control battles, the verdicts it gives, and the honest small-arena warnings."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from hitkit.protocols.arena import bradley_terry as bt
from hitkit.protocols.arena.analysis import analyze_battles, worker_table
from hitkit.protocols.arena.exports import left_out_workers
from hitkit.protocols.arena.fastchat_users import flag_users, vote_pvalues
from hitkit.protocols.arena.leaderboard import Battles
from hitkit.protocols.arena.mixed_crowds import bad_kind, mixed_crowd
from hitkit.protocols.arena.simulation import Crowd, Systems, battles, uniform_pairs
from hitkit.protocols.arena.verdicts import FAILED, NOT_JUDGED, PASSED, uninformative, verdicts
from hitkit.protocols.arena.voters import CODES, _design, loo_logits, null_model, voter_table
from tests.test_arena_stats import frame

SYSTEMS = Systems(
    tuple(f"s{i}" for i in range(8)),
    tuple(np.linspace(-1.0, 1.0, 8)),
    tuple(np.geomspace(600, 200, 8)),
    tuple(np.linspace(1.0, 2.0, 8)),
)
CROWD = Crowd(workers=120, taste=0.03, length_bias=1.0, tie_rate=0.2)


@pytest.fixture(scope="module")
def mixed():
    rng = np.random.default_rng(11)
    data = mixed_crowd(SYSTEMS, CROWD, 4000, {"random": 6, "left": 6, "right": 3, "tie": 3, "longer": 4}, 30, rng)
    return data, voter_table(data)


def test_the_voter_test_flags_each_kind_of_bad_voter_within_30_votes_and_spares_honest_ones(mixed):
    data, table = mixed
    kinds = table["worker_id"].map(bad_kind)
    flagged = table.groupby(kinds.fillna("honest"))["flagged"].mean()
    for kind in ("left", "right", "tie", "longer"):
        assert flagged[kind] == 1.0, kind
    assert flagged["random"] >= 0.8
    assert flagged["honest"] <= 0.02
    # The evidence names what a flagged voter votes like.
    bad = table[kinds.notna() & table["flagged"]]
    assert (bad["alternative"] == bad["worker_id"].map(bad_kind)).mean() >= 0.9
    assert (table.loc[table["flagged"], "e_value"] >= 100).all()


def test_honest_voters_are_flagged_no_more_often_than_the_stated_rate():
    # 400 honest workers under the model the test assumes (no length bias, no taste): at α = 0.05 the
    # share flagged stays below α, as Ville's inequality promises (usually far below: e-values shrink).
    rng = np.random.default_rng(5)
    crowd = Crowd(workers=400, taste=0.0, length_bias=0.0, tie_rate=0.2, activity_shape=3.0)
    data = battles(SYSTEMS, crowd, uniform_pairs(8, 12000, rng), rng)
    table = voter_table(data, alpha=0.05)
    assert table["flagged"].mean() <= 0.05
    assert table["e_value"].median() < 1.0


def test_leaving_a_worker_out_by_one_newton_step_matches_refitting_without_them():
    rng = np.random.default_rng(3)
    data = battles(SYSTEMS, CROWD, uniform_pairs(8, 3000, rng), rng)
    arrays = Battles.of(data)
    x = _design(arrays)
    k = len(arrays.systems)
    logits = loo_logits(x, arrays.outcome, arrays.clusters, arrays.n_clusters, k, exact_share=1.0)
    small = int(np.argmin(np.bincount(arrays.clusters) + 1000 * (np.bincount(arrays.clusters) == 0)))
    mine = arrays.clusters == small
    weights = (~mine).astype(float)[None, :]
    exact = bt.fit_logistic(x, arrays.outcome, weights, np.full(x.shape[1], bt.STYLE_REG), centre=k)[0]
    assert np.allclose(logits[mine], x[mine] @ exact, atol=0.01)


def test_the_null_leaves_out_the_workers_own_votes_and_smooths_the_tie_share():
    rows = [("x", "y", "a", "w1")] * 10 + [("x", "y", "tie", "w2")] * 4
    data = frame(rows)
    null = null_model(Battles.of(data), data["vote"].map(CODES).to_numpy(int))
    # w1's null tie share is w2's (4 + 1) / (4 + 2); w2's is w1's (0 + 1) / (10 + 2).
    assert null.probs[0, 2] == pytest.approx(5 / 6) and null.probs[-1, 2] == pytest.approx(1 / 12)
    assert np.allclose(null.probs.sum(axis=1), 1.0)


def test_a_worker_with_too_few_votes_is_not_judged_never_passed():
    rows = [("x", "y", "a", f"w{i}") for i in range(20)] + [("y", "x", "b", "new")] * 2
    table = voter_table(frame(rows)).set_index("worker_id")
    assert not table.at["new", "vote_judged"] and not table.at["new", "flagged"]
    qc = worker_table(frame(rows)).set_index("worker_id")
    assert qc.at["new", "status"] == NOT_JUDGED and pd.isna(qc.at["new", "passed"])
    assert qc.at["new", "reason"].startswith("too few votes to judge (2 leaderboard vote(s)")


def test_verdicts_combine_the_voter_test_with_the_control_battle_test():
    control = pd.DataFrame(
        {
            "worker_id": ["bot_lover", "ok"],
            "control_battles": [6, 6],
            "real_wins": [0, 6],
            "control_wins": [6, 0],
            "ties": [0, 0],
            "p_value": [1.0, 1 / 64],
            "judged": [True, True],
            "passed": pd.array([False, True], dtype="boolean"),
        }
    )
    voters = pd.DataFrame(
        {
            "worker_id": ["ok", "lefty", "quiet", "bot_lover"],
            "votes": [40, 30, 3, 30],
            "e_value": [0.2, 5e6, 1.5, 0.5],
            "alternative": ["random", "left", "tie", "random"],
            "vote_judged": [True, True, False, True],
            "flagged": [False, True, False, False],
        }
    )
    table = verdicts(["ok", "lefty", "quiet", "bot_lover", "qc_only"], control, voters, 0.01).set_index("worker_id")
    assert table["status"].to_dict() == {
        "bot_lover": FAILED,
        "lefty": FAILED,
        "ok": PASSED,
        "qc_only": NOT_JUDGED,
        "quiet": NOT_JUDGED,
    }
    assert "votes for the left reply whatever it says (e-value 5e+06 ≥ 1/α = 100)" == table.at["lefty", "reason"]
    assert table.at["bot_lover", "reason"].startswith("voted for the QC bot 6 times and for the real system 0")
    assert table.at["ok", "reason"] == (
        "votes look like an honest voter's (e-value 0.2); prefers the real system over the QC bot (binomial p = 0.0156)"
    )
    assert table.at["qc_only", "e_value"] == 1.0 and table.at["qc_only", "votes"] == 0
    assert table["judged"].to_dict()["quiet"] == False  # noqa: E712


def test_qc_csv_lists_every_worker_and_the_summary_counts_not_judged(mixed):
    data, _ = mixed
    result = analyze_battles(data, n_boot=0)
    qc = result.tables["qc"]
    assert set(qc["worker_id"]) == set(data["worker_id"])
    assert set(qc["status"]) <= {PASSED, FAILED, NOT_JUDGED} and (qc["status"] == FAILED).sum() >= 18
    counts = qc["status"].value_counts()
    assert result.summary["qc_not_judged"] == counts.get(NOT_JUDGED, 0)
    assert result.summary["qc_failed"] == counts[FAILED] and "false-flag rate ≤ 0.01" in result.summary["qc_method"]


def test_preferences_leave_out_failed_workers_and_unjudged_ones_unless_included():
    rows = [("x", "y", "a", f"w{i}") for i in range(20)] + [("y", "x", "b", "new")] * 2
    rows += [("x", "y", "a", "lefty"), ("y", "x", "a", "lefty")] * 15
    records = frame(rows).to_dict("records")
    config = SimpleNamespace(arena=SimpleNamespace(unjudged="exclude", voter_alpha=0.01))
    excluded = left_out_workers(records, config)
    assert {"new", "lefty"} <= excluded
    config.arena.unjudged = "include"
    included = left_out_workers(records, config)
    assert "lefty" in included and "new" not in included


def test_a_ranking_whose_intervals_outspan_its_ratings_says_it_is_not_yet_informative():
    rng = np.random.default_rng(1)
    small = battles(SYSTEMS, Crowd(workers=2, length_bias=0.0), uniform_pairs(8, 16, rng), rng)
    result = analyze_battles(small, n_boot=50)
    assert any("the ranking is not yet informative" in line for line in result.summary["warnings"])
    board = pd.DataFrame(
        {"rating": [1100.0, 1000.0, 900.0], "rating_lower": [1080.0, 980.0, 880.0], "rating_upper": [1120.0, 1020, 920]}
    )
    assert uninformative(board, style=False) is None


def test_style_coefficients_lie_inside_their_intervals_in_a_small_arena():
    for seed in range(6):
        rng = np.random.default_rng(seed)
        small = battles(SYSTEMS, Crowd(workers=3, length_bias=1.0), uniform_pairs(8, 30, rng), rng)
        style = analyze_battles(small, n_boot=20).tables["style"]
        assert (
            (style["coefficient_lower"] <= style["coefficient"]) & (style["coefficient"] <= style["coefficient_upper"])
        ).all()


def test_fastchats_anomaly_test_flags_a_voter_who_always_picks_the_rarely_preferred_system():
    rows = [("strong", "weak", "a", f"w{i}") for i in range(60)] + [("weak", "strong", "b", f"v{i}") for i in range(60)]
    rows += [("strong", "weak", "b", "odd")] * 30
    data = frame(rows)
    pvalues = vote_pvalues(data)
    # The odd worker's vote for "weak": no other worker's vote was as unusual, so p = 1 / 121.
    assert pvalues[-1] == pytest.approx(1 / 121)
    flags = flag_users(data, alpha=0.01, horizon=30).set_index("worker_id")["flagged"]
    assert flags["odd"] and not flags.drop("odd").any()
    assert math.isclose(pvalues[0], 1.0)


def test_hitkit_analyze_arena_on_a_fastchat_file_judges_every_judge_and_says_who_is_not_judged(tmp_path):
    import json

    from click.testing import CliRunner

    from hitkit.cli import main
    from tests.test_arena_fastchat import fastchat_battles

    votes = fastchat_battles(1500, seed=4)
    for battle in votes[:30]:  # one judge who always votes for the left reply
        battle["judge"], battle["winner"] = "always-left", "model_a"
    votes[30]["judge"] = "newcomer"
    path = tmp_path / "battles.json"
    path.write_text(json.dumps(votes))
    run = CliRunner().invoke(
        main, ["analyze", "arena", str(path), "--out", str(tmp_path / "out"), "--n-boot", "10", "--no-progress"]
    )
    assert run.exit_code == 0, run.output
    assert "judged workers failed" in run.output and "not judged (too few votes to tell)" in run.output
    qc = pd.read_csv(tmp_path / "out" / "qc.csv", keep_default_na=False).set_index("worker_id")
    assert qc.at["always-left", "status"] == FAILED and qc.at["always-left", "alternative"] == "left"
    assert qc.at["newcomer", "status"] == NOT_JUDGED
    assert set(qc.index) == {b["judge"] for b in votes}


def test_the_dashboards_system_page_repeats_the_small_arena_warnings():
    from hitkit.protocols.arena.views import system_scores

    rng = np.random.default_rng(2)
    close = Systems(("p", "q", "r", "s"), (0.04, 0.0, -0.02, -0.04), (300.0, 300.0, 300.0, 300.0))
    data = battles(close, Crowd(workers=1, length_bias=0.0), uniform_pairs(4, 30, rng), rng)
    data["worker_id"] = ["w0"] * 18 + ["w1"] * 6 + ["w2"] * 6
    scores, note = system_scores({"battles": data}, None, "p")
    assert scores and "Read with care: one worker cast 60% of the leaderboard's votes" in note
    assert "the ranking is not yet informative" in note
