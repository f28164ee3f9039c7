"""Spot The Bot ranking stability (METHODS §2): subsampling conversations per pair."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from hitkit.protocols.spot_the_bot import figures
from hitkit.protocols.spot_the_bot.ranking import ranking
from hitkit.protocols.spot_the_bot.stability import ALL_SYSTEMS, conversation_games, smallest_stable_size, stability
from tests.test_analysis_spot_the_bot import simulate


@pytest.fixture(scope="module")
def separated() -> pd.DataFrame:
    return simulate({"good": 0.05, "middle": 0.5, "bad": 0.95}, n_conv=12, seed=5, unsure=0.0, human_human=2)


@pytest.fixture(scope="module")
def identical() -> pd.DataFrame:
    return simulate({"a": 0.4, "b": 0.4, "c": 0.4}, n_conv=12, seed=6, human_human=2)


def test_conversation_games_keep_their_conversation_and_pair(separated):
    g = conversation_games(separated)
    assert len(g) == 3 * 12 * 3 * 2  # pairs × conversations × segment lengths × annotators
    assert set(g["pair"]) == {"bad vs good", "bad vs middle", "good vs middle"}
    assert (g.groupby("conversation")["pair"].nunique() == 1).all()


def test_separated_systems_rank_stably_from_few_conversations(separated):
    table = stability(separated, sizes=[3, 6, 12], n_sub=60, n_boot=20, seed=1)
    overall = table[table["left_out"] == ALL_SYSTEMS].set_index("conversations_per_pair")
    assert overall.loc[6, "top_share"] >= 0.95 and overall.loc[12, "top_share"] >= 0.95
    assert overall.loc[12, "top_ranking"] == "(1,1) good | (2,2) middle | (3,3) bad"
    smallest = smallest_stable_size(table).set_index("left_out")["smallest_size"]
    assert smallest[ALL_SYSTEMS] <= 6
    # Leave-one-system-out rows: two systems each, still clearly ordered.
    assert set(table["left_out"]) == {ALL_SYSTEMS, "good", "middle", "bad"}
    without_middle = table[(table["left_out"] == "middle") & (table["conversations_per_pair"] == 12)].iloc[0]
    assert without_middle["top_ranking"] == "(1,1) good | (2,2) bad"


def test_all_conversations_give_the_full_data_ranking(separated):
    table = stability(separated, sizes=[12], n_sub=5, n_boot=100, seed=0, leave_one_out=False)
    full = ranking(separated, n_boot=200, seed=0)
    want = " | ".join(f"{c} {s}" for s, c in zip(full["system"], full["cluster"]))
    assert table["top_ranking"].iloc[0] == want
    assert not table["with_replacement"].iloc[0]


def test_identical_systems_are_never_ordered(identical):
    # The clustered ranking of identical systems is stable, but only as one cluster: no
    # subsample orders them (which a plain ranking by point estimate would do every time).
    table = stability(identical, sizes=[3, 12], n_sub=60, n_boot=20, seed=2, leave_one_out=False)
    assert list(table["top_ranking"]) == ["(1,3) a b c"] * 2


def test_close_systems_do_not_rank_stably_from_few_conversations():
    close = simulate({"a": 0.3, "b": 0.45, "c": 0.6}, n_conv=12, seed=7, human_human=2)
    table = stability(close, sizes=[3, 6], n_sub=60, n_boot=20, seed=2, leave_one_out=False)
    assert (table["top_share"] < 0.9).all()
    assert (table["rankings"] >= 2).all()
    assert np.isnan(smallest_stable_size(table)["smallest_size"].iloc[0])


def test_more_conversations_than_a_pair_has_are_drawn_with_replacement(separated):
    table = stability(separated, sizes=[12, 13], n_sub=10, n_boot=10, leave_one_out=False)
    assert list(table["with_replacement"]) == [False, True]
    assert list(table["subsamples"]) == [10, 10] and list(table["n_boot"]) == [10, 10]


def test_stability_is_seeded(identical):
    first = stability(identical, sizes=[4], n_sub=30, n_boot=10, seed=3)
    again = stability(identical, sizes=[4], n_sub=30, n_boot=10, seed=3)
    pd.testing.assert_frame_equal(first, again)
    other = stability(identical, sizes=[4], n_sub=30, n_boot=10, seed=4)
    assert not first.equals(other)


def test_runtime_is_bounded(identical):
    start = time.perf_counter()
    stability(identical, sizes=[12], n_sub=200, n_boot=20, leave_one_out=False)
    # 200 × 21 replicates of 216 games: a few tenths of a second vectorised.
    assert time.perf_counter() - start < 5


def test_options_are_checked(identical):
    with pytest.raises(ValueError, match="sizes"):
        stability(identical, sizes=[0])
    with pytest.raises(ValueError, match="n_sub"):
        stability(identical, sizes=[3], n_sub=0)
    with pytest.raises(ValueError, match="by="):
        stability(identical, sizes=[3], by="median")


def test_smallest_stable_size_hand_worked_and_figure(tmp_path):
    table = pd.DataFrame(
        {
            "left_out": [ALL_SYSTEMS] * 3 + ["x"] * 3,
            "conversations_per_pair": [3, 4, 5] * 2,
            "top_share": [0.5, 0.96, 0.94, 0.2, 0.3, 0.95],
        }
    )
    smallest = smallest_stable_size(table)
    assert list(smallest["left_out"]) == [ALL_SYSTEMS, "x"]
    assert list(smallest["smallest_size"]) == [4.0, 5.0]
    assert figures.stability(table)[:4] == b"\x89PNG"


# --- wired into the analysis and the command line ----------------------------------------------


def test_analyze_spot_the_bot_adds_survival_and_stability_on_request(tmp_path, separated):
    from hitkit.protocols.spot_the_bot.analysis import analyze_spot_the_bot

    separated.to_csv(tmp_path / "annotations.csv", index=False)
    plain = analyze_spot_the_bot(tmp_path, n_boot=20)
    assert "survival" not in plain.tables and "stability" not in plain.tables
    full = analyze_spot_the_bot(
        tmp_path,
        n_boot=20,
        survival=True,
        n_imputations=10,
        stability=True,
        stability_sizes=[3, 4],
        n_sub=20,
        stability_boot=10,
    )
    names = {p.name for p in full.write(tmp_path / "out")}
    assert {
        "survival.csv",
        "survival_tests.csv",
        "cox.csv",
        "survival.png",
        "stability.csv",
        "stability_smallest.csv",
        "stability.png",
    } <= names
    assert list(full.tables["stability"]["conversations_per_pair"].unique()) == [3, 4]
    assert full.summary["stability"]["n_sub"] == 20
    assert len(full.tables["survival_tests"]) == 3


def test_cli_spot_the_bot_writes_survival_and_refuses_stability_elsewhere(tmp_path, separated):
    from click.testing import CliRunner

    from hitkit.cli import main

    data = tmp_path / "data"
    data.mkdir()
    separated.to_csv(data / "annotations.csv", index=False)
    run = CliRunner().invoke(main, ["analyze", "spot_the_bot", str(data), "--out", str(tmp_path / "out")])
    assert run.exit_code == 0, run.output
    assert (tmp_path / "out" / "survival.csv").exists()
    assert (tmp_path / "out" / "survival_tests.csv").exists()
    assert (tmp_path / "out" / "cox.csv").exists()
    assert not (tmp_path / "out" / "stability.csv").exists()
    refused = CliRunner().invoke(main, ["analyze", "pairwise", str(data), "--out", str(tmp_path / "o2"), "--stability"])
    assert refused.exit_code != 0 and "--stability" in refused.output


def test_a_variant_with_nothing_left_is_skipped():
    # Three systems, but only pairs with "hub": leaving hub out leaves no games.
    study = simulate({"hub": 0.5, "x": 0.2, "y": 0.8}, n_conv=4, seed=9, human_human=0)
    with_x = set(study.loc[study["system"] == "x", "conversation_id"])
    with_y = set(study.loc[study["system"] == "y", "conversation_id"])
    study = study[~study["conversation_id"].isin(with_x & with_y)]
    table = stability(study, sizes=[3], n_sub=5, n_boot=5)
    assert set(table["left_out"]) == {ALL_SYSTEMS, "x", "y"}


def test_resamples_are_sorted_draws_counted_not_sorted():
    from hitkit.protocols.spot_the_bot.stability import _resample_codes

    # Two subsamples of 5 and 3 games (codes 10…14 and 20…22, padded with 0), 4 resamples each.
    codes_of_sub = np.array([[10, 11, 12, 13, 14], [20, 21, 22, 0, 0]], dtype=np.uint8)
    lengths = np.array([5, 3])
    out = _resample_codes(codes_of_sub, lengths, 4, np.random.default_rng(7))
    assert out.shape == (10, 5)
    # Row 0 and row 5 replay each subsample as it is (the point estimates).
    assert out[0].tolist() == [10, 11, 12, 13, 14] and out[5].tolist() == [20, 21, 22, 0, 0]
    # The resamples: the same uniform draws, sorted by hand, games of their own subsample only.
    u = np.random.default_rng(7).random((8, 5))
    for r in range(8):
        s, n = r // 4, lengths[r // 4]
        want = sorted(codes_of_sub[s, np.floor(u[r, :n] * n).astype(int)])
        assert out[s * 5 + 1 + r % 4, :n].tolist() == want
    assert (out[6:, 3:] == 0).all()  # padding stays padding
