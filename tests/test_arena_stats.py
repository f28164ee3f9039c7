"""The arena's statistics on small data: ratings, style control, intervals, ranks, win rates, QC, reading."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from hitkit.errors import InputError
from hitkit.protocols.arena import bradley_terry as bt
from hitkit.protocols.arena.analysis import (
    analyze,
    analyze_battles,
    qc_table,
    read_battles,
    worker_qc,
)
from hitkit.protocols.arena.leaderboard import (
    components,
    leaderboard,
    rank_ranges,
    win_rates,
)
from hitkit.protocols.arena.reading import BATTLE_COLUMNS, check_battles
from hitkit.protocols.arena.simulation import Crowd, Systems, battles, uniform_pairs


def frame(rows: list[tuple], **extra) -> pd.DataFrame:
    """Battles from (system_a, system_b, vote[, worker]) tuples, style counts all 10 unless given."""
    data = []
    for i, row in enumerate(rows):
        a, b, vote = row[:3]
        worker = row[3] if len(row) > 3 else "w1"
        record = {c: "" for c in BATTLE_COLUMNS}
        record.update(
            study="s",
            worker_id=worker,
            battle_id=f"b{i}",
            assignment_id=f"a{i}",
            system_a=a,
            system_b=b,
            vote=vote,
            turns=1,
            is_control=0,
            leak=0,
        )
        for c in (
            "tokens_a",
            "tokens_b",
            "header_count_a",
            "list_count_a",
            "bold_count_a",
            "header_count_b",
            "list_count_b",
            "bold_count_b",
        ):
            record[c] = 10
        record.update(extra)
        data.append(record)
    return check_battles(pd.DataFrame(data, columns=list(BATTLE_COLUMNS)), "battles.csv").assign(source="s")


def test_a_tie_counts_as_half_a_win():
    # x: 1 win, 2 ties, 0 losses against y = 2 of 3 points: P(x beats y) = 2/3, 400·log10(2) apart.
    fit = bt.bradley_terry([0, 0, 1], [1, 1, 0], [1.0, 0.5, 0.5], 2)
    assert 400 * (fit.theta[0, 0] - fit.theta[0, 1]) == pytest.approx(400 * math.log10(2), abs=0.05)
    assert fit.theta[0].mean() == pytest.approx(0.0, abs=1e-12)


def test_ratings_are_on_the_arena_scale_with_fastchats_anchor():
    theta = np.array([0.25, -0.25])
    assert bt.to_rating(theta, ["x", "y"]).tolist() == [1100.0, 900.0]
    anchored = bt.to_rating(theta, ["x", bt.FASTCHAT_BASELINE[0]])
    assert anchored.tolist() == [1314.0, 1114.0]
    assert bt.to_rating(theta, ["x", bt.FASTCHAT_BASELINE[0]], anchor=None).tolist() == [1100.0, 900.0]


def test_weights_are_replicated_battles_and_replicates_fit_independently():
    first, second, outcome = [0, 1, 0, 2, 1], [1, 2, 2, 0, 0], [1.0, 1.0, 0.0, 0.5, 1.0]
    doubled = bt.bradley_terry(first + first[:2], second + second[:2], outcome + outcome[:2], 3).theta[0]
    batch = bt.bradley_terry(first, second, outcome, 3, weights=[[1, 1, 1, 1, 1], [2, 2, 1, 1, 1]]).theta
    alone = bt.bradley_terry(first, second, outcome, 3).theta[0]
    assert np.allclose(batch[0], alone, atol=1e-8) and np.allclose(batch[1], doubled, atol=1e-8)


def test_a_system_that_never_lost_stays_finite():
    fit = bt.bradley_terry([0, 0, 0, 1], [1, 2, 1, 2], [1.0, 1.0, 1.0, 0.5], 3)
    assert np.isfinite(fit.theta).all() and fit.theta[0, 0] > fit.theta[0, 1]


def test_style_features_are_normalised_differences_standardised():
    a = np.array([[30, 0, 1, 0], [10, 2, 1, 0]])
    b = np.array([[10, 0, 1, 0], [30, 0, 3, 0]])
    features, mean, std = bt.style_features(a, b)
    raw_length = np.array([20 / 41, -20 / 41])
    assert mean[0] == pytest.approx(raw_length.mean()) and std[0] == pytest.approx(raw_length.std())
    assert features[:, 0] == pytest.approx([1.0, -1.0])
    assert (features[:, 3] == 0).all()  # bold never varies: a zero column, not a division by zero


def test_style_control_removes_a_pure_length_preference():
    # Two equal systems, sides at random; the longer reply wins 80 % of battles and y's is the longer in 80 %
    # of them: plain Bradley–Terry puts y about 130 points up, style control sees no difference.
    rng = np.random.default_rng(0)
    n = 4000
    y_left = rng.random(n) < 0.5
    y_longer = rng.random(n) < 0.8
    y_tokens, x_tokens = np.where(y_longer, 800, 200), np.where(y_longer, 200, 800)
    zeros = np.zeros(n)
    counts_a = np.column_stack([np.where(y_left, y_tokens, x_tokens), zeros, zeros, zeros])
    counts_b = np.column_stack([np.where(y_left, x_tokens, y_tokens), zeros, zeros, zeros])
    longer_wins = rng.random(n) < 0.8
    left_wins = np.where(counts_a[:, 0] > counts_b[:, 0], longer_wins, ~longer_wins).astype(float)
    first, second = np.where(y_left, 1, 0), np.where(y_left, 0, 1)
    plain = bt.bradley_terry(first, second, left_wins, 2).theta[0]
    styled = bt.style_control(first, second, left_wins, 2, counts_a, counts_b)
    assert 400 * (plain[1] - plain[0]) > 100
    assert abs(400 * (styled.theta[0, 1] - styled.theta[0, 0])) < 20
    assert styled.beta[0, 0] > 0.5 and styled.beta[0, 1:].tolist() == [0.0, 0.0, 0.0]


def test_davidson_ties_estimate_the_tie_parameter():
    # Equal systems, one third ties: P(tie) = ν / (2 + ν) = 1/3, so ν = 1.
    first, second = [0] * 300, [1] * 300
    outcome = [1.0] * 100 + [0.0] * 100 + [0.5] * 100
    theta, nu = bt.davidson(first, second, outcome, 2)
    assert nu[0] == pytest.approx(1.0, rel=1e-3) and theta[0] == pytest.approx([0.0, 0.0], abs=1e-4)


def test_rank_ranges_claim_an_order_only_where_intervals_separate():
    lower, upper = np.array([1100.0, 1050.0, 900.0]), np.array([1200.0, 1150.0, 1000.0])
    best, worst = rank_ranges(lower, upper, np.array([1, 1, 1]))
    assert best.tolist() == [1, 1, 3] and worst.tolist() == [2, 2, 3]


def test_systems_never_connected_get_no_order_between_them():
    rows = [("x", "y", "a")] * 5 + [("y", "x", "b")] * 3 + [("u", "v", "a")] * 5 + [("v", "u", "tie")] * 3
    table, _, _ = leaderboard(frame(rows), n_boot=0)
    table = table.set_index("system")
    assert table.loc[["x", "y"], "component"].nunique() == 1
    assert table.at["x", "component"] != table.at["u", "component"]
    assert table["rank"].max() == 2  # each group ranks its own two systems only
    assert components(["a", "b", "c"], np.array([0]), np.array([1])).tolist() == [1, 1, 2]


def test_win_rates_count_ties_and_both_bad_as_half():
    rows = [("x", "y", "a"), ("y", "x", "a"), ("x", "y", "tie"), ("x", "y", "both_bad")]
    table = win_rates(frame(rows)).set_index(["system", "opponent"])
    assert table.loc[("x", "y")].to_dict() == {"battles": 4, "wins": 1, "losses": 1, "ties": 2, "win_rate": 0.5}
    assert ("x", "z") not in table.index


def test_leaderboard_leaves_out_qc_battles_and_leaks_unless_asked():
    good = frame([("x", "y", "a", "w1"), ("y", "x", "b", "w2"), ("x", "y", "b", "w3")] * 4)
    leak = frame([("y", "x", "a", "w4")] * 6, leak=1)
    control = frame([("x", "qc-bot", "a", "w5")] * 5, is_control=1)
    both = pd.concat([good, leak, control], ignore_index=True)
    result = analyze_battles(both, n_boot=0)
    board = result.tables["leaderboard"].set_index("system")
    assert "qc-bot" not in board.index and int(board["battles"].sum()) == 2 * 12
    assert result.summary["leaks"] == 6 and any("identity leaks" in w for w in result.summary["warnings"])
    with_leaks = analyze_battles(both, n_boot=0, include_leaks=True).tables["leaderboard"].set_index("system")
    assert int(with_leaks["battles"].sum()) == 2 * 18 and with_leaks.at["y", "rating"] > board.at["y", "rating"]
    assert result.summary["control_systems"] == ["qc-bot"]


def test_the_bootstrap_resamples_workers_whole_and_is_seeded():
    # Two workers who disagree entirely: resampling workers gives a wide interval, resampling battles a narrow one.
    rows = [("x", "y", "a", "w1")] * 20 + [("x", "y", "b", "w2")] * 20 + [("x", "y", "a", "w3"), ("x", "y", "b", "w3")]
    battles_ = frame(rows)
    worker = analyze_battles(battles_, n_boot=300, seed=4).tables["leaderboard"].set_index("system")
    again = analyze_battles(battles_, n_boot=300, seed=4).tables["leaderboard"].set_index("system")
    battle = analyze_battles(battles_, n_boot=300, seed=4, cluster="battle").tables["leaderboard"].set_index("system")
    assert worker.equals(again)
    wide = worker.at["x", "rating_upper"] - worker.at["x", "rating_lower"]
    narrow = battle.at["x", "rating_upper"] - battle.at["x", "rating_lower"]
    assert wide > 2 * narrow


def test_category_leaderboards_need_enough_battles():
    rng = np.random.default_rng(1)
    rows = [("x", "y", "a" if rng.random() < 0.7 else "b", f"w{i % 7}") for i in range(40)]
    battles_ = frame(rows)
    battles_["category"] = ["code"] * 30 + ["poetry"] * 10
    result = analyze_battles(battles_, n_boot=20)
    assert set(result.tables["categories"]["category"]) == {"code"}
    assert any("poetry (10 battles" in w for w in result.summary["warnings"])


def test_qc_passes_a_worker_who_prefers_the_real_system_significantly():
    rows = (
        [("real", "qc", "a", "good")] * 3
        + [("qc", "real", "b", "good")] * 2
        + [("qc", "real", "tie", "good")]
        + [("real", "qc", "a", "meh")] * 4
        + [("qc", "real", "a", "meh")]
        + [("real", "qc", "b", "bad")] * 5
    )
    battles_ = frame(rows, is_control=1)
    table = qc_table(battles_, {"qc"}).set_index("worker_id")
    assert table.at["good", "real_wins"] == 5 and table.at["good", "ties"] == 1
    assert table.at["good", "p_value"] == pytest.approx(1 / 32)
    assert table.at["meh", "p_value"] == pytest.approx(6 / 32)
    assert table["passed"].to_dict() == {"bad": False, "good": True, "meh": False}
    # The bot is the system met only in QC battles (here the real system has a leaderboard battle too).
    everything = pd.concat([battles_, frame([("real", "other", "a")])], ignore_index=True)
    method, by_worker = worker_qc({"battles": everything})
    # w1's one leaderboard vote is too few for the voter test: not judged (None), never passed.
    assert by_worker == {"bad": False, "good": True, "meh": False, "w1": None} and "binomial" in method
    assert worker_qc({"battles": frame([("x", "y", "a")])})[1] == {"w1": None}
    assert worker_qc({"battles": frame([("x", "y", "a")]).iloc[:0]}) is None


def test_reading_names_the_line_of_bad_input(tmp_path):
    good = frame([("x", "y", "a")] * 2).drop(columns="source")
    for column, value, words in (
        ("vote", "left", "vote 'left' is not one of"),
        ("system_b", "x", "system_a and system_b are both 'x'"),
        ("tokens_a", "-3", "tokens_a is '-3'"),
        ("leak", "maybe", "leak is 'maybe'"),
    ):
        bad = good.astype(str).copy()
        bad.loc[1, column] = value
        folder = tmp_path / column
        folder.mkdir()
        bad.to_csv(folder / "battles.csv", index=False)
        with pytest.raises(InputError, match=f"battles.csv line 3: {words}"):
            read_battles(folder)
    (tmp_path / "fc.json").write_text(json.dumps([{"model_a": "x", "model_b": "y", "winner": "draw"}]))
    with pytest.raises(InputError, match="battle 0: winner 'draw' is not one of"):
        read_battles(tmp_path / "fc.json")


def test_analyze_puts_a_study_and_fastchat_battles_on_one_scale(tmp_path):
    study = tmp_path / "export"
    study.mkdir()
    frame([("x", "y", "a", f"w{i}") for i in range(6)] + [("y", "z", "b", "w9")] * 4).drop(columns="source").to_csv(
        study / "battles.csv", index=False
    )
    public = [
        {
            "model_a": "z",
            "model_b": "x",
            "winner": w,
            "judge": f"u{i}",
            "conv_metadata": {
                "sum_assistant_a_tokens": 10,
                "sum_assistant_b_tokens": 12,
                "header_count_a": {"h1": 1},
                "header_count_b": {"h1": 0},
                "list_count_a": {"ordered": 0, "unordered": 2},
                "list_count_b": {"ordered": 1},
                "bold_count_a": {"**": 0, "__": 0},
                "bold_count_b": {"**": 1, "__": 0},
            },
        }
        for i, w in enumerate(["model_a", "model_b", "tie (bothbad)", "model_b"])
    ]
    (tmp_path / "public.json").write_text("\n".join(json.dumps(b) for b in public))  # JSON lines
    result = analyze(study, seed=0, options={"n_boot": 10, "add": [tmp_path / "public.json"]})
    assert result.summary["sources"] == ["public", "s"]
    assert result.summary["battles"] == 14 and result.summary["components"] == 1
    out = tmp_path / "out"
    result.write(out)
    board = pd.read_csv(out / "leaderboard.csv")
    for column in (
        "system",
        "rating",
        "rating_lower",
        "rating_upper",
        "rating_style",
        "rating_style_lower",
        "rating_style_upper",
        "rank",
        "battles",
    ):
        assert column in board.columns
    assert sorted(board["system"]) == ["x", "y", "z"] and (out / "leaderboard.png").stat().st_size > 1000


def test_simulated_battles_are_seeded_and_lean_to_longer_replies():
    systems = Systems(("p", "q"), (0.0, 0.0), (100.0, 400.0))
    crowd = Crowd(workers=20, length_bias=3.0, tie_rate=0.0)
    one = battles(systems, crowd, uniform_pairs(2, 2000, np.random.default_rng(5)), np.random.default_rng(6))
    two = battles(systems, crowd, uniform_pairs(2, 2000, np.random.default_rng(5)), np.random.default_rng(6))
    assert one.equals(two)
    longer_won = np.where(one["tokens_a"] > one["tokens_b"], one["vote"] == "a", one["vote"] == "b")
    assert longer_won.mean() > 0.7
    assert list(one.columns[: len(BATTLE_COLUMNS)]) == list(BATTLE_COLUMNS)


def test_report_section_and_methods_state_what_was_done():
    from hitkit.protocols.arena import report
    from hitkit.report.parts import ReportInput

    systems = Systems(("p", "q", "r"), (0.2, 0.0, -0.2), (200.0, 400.0, 800.0))
    rng = np.random.default_rng(2)
    data = battles(systems, Crowd(workers=25, length_bias=1.0), uniform_pairs(3, 400, rng), rng)
    qc = frame([("p", "qc-bot", "a", "w1")] * 5 + [("qc-bot", "q", "a", "w2")] * 5, is_control=1)
    result = analyze_battles(pd.concat([data, qc], ignore_index=True), n_boot=30, seed=7)
    inp = ReportInput(task="arena", tables=result.tables, summary=result.summary)
    sections = report.sections(inp)
    titles = [s.title for s in sections]
    assert titles[:3] == ["Leaderboard", "Style control", "Win rates"] and "Quality control" in titles
    assert sections[0].figures[0].png[:4] == b"\x89PNG"
    text = " ".join(sections[-1].text)
    assert "1 of 2 judged workers failed quality control" in text and "w2: voted for the QC bot 5 times" in text
    # The crowd's 25 workers cast about 16 votes each on three close systems: too few for the voter test.
    assert "23 worker(s) had too few votes for either test to judge them" in text
    methods = " ".join(report.methods(inp))
    assert "10 battles against the QC bot never do" in methods and "30 bootstrap resamples of the workers" in methods
    assert "seed 7" in methods and "compute_style_control" in methods


def test_davidson_ties_and_the_cli_options_reach_the_analysis():
    from hitkit.protocols.arena.analysis import cli_options

    rows = (
        [("x", "y", "a", f"w{i}") for i in range(6)]
        + [("x", "y", "tie", f"w{i}") for i in range(6)]
        + [("y", "x", "a", f"w{i}") for i in range(3)]
    )
    half = analyze_battles(frame(rows), n_boot=0).tables["leaderboard"].set_index("system")
    davidson = analyze_battles(frame(rows), n_boot=0, ties="davidson")
    board = davidson.tables["leaderboard"].set_index("system")
    assert davidson.summary["ties"] == "davidson" and board.at["x", "rating"] > board.at["y", "rating"]
    assert board.at["x", "rating"] != pytest.approx(half.at["x", "rating"], abs=0.5)
    assert cli_options(None, {"ties": "davidson", "include_leaks": True, "add": None, "resample": "game"}) == {
        "ties": "davidson",
        "include_leaks": True,
    }


def test_qc_gives_no_verdict_to_a_worker_with_too_few_qc_votes_to_pass():
    """Two decisive QC votes for the real system give p = 1/4: no worker could pass on them, so the worker
    is not judged (no verdict, not a failure), and the report's counts say so."""
    from hitkit.protocols.arena.analysis import qc_counts

    rows = [("real", "qc", "a", "new")] * 2 + [("real", "qc", "b", "bad")] * 5
    table = qc_table(frame(rows, is_control=1), {"qc"}).set_index("worker_id")
    assert table.at["new", "judged"] == False and pd.isna(table.at["new", "passed"])  # noqa: E712
    assert table.at["bad", "judged"] == True and table.at["bad", "passed"] == False  # noqa: E712
    assert qc_counts(table.reset_index()) == (1, 1, 1)
    everything = pd.concat([frame(rows, is_control=1), frame([("real", "other", "a")])], ignore_index=True)
    assert worker_qc({"battles": everything})[1] == {"bad": False, "new": None, "w1": None}
