"""Pairwise A/B analysis (METHODS §3): hand-worked counts, Bradley–Terry, agreement, bad inputs."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from hitkit.analysis.inference import DuplicateRowsWarning
from hitkit.errors import InputError
from hitkit.protocols.pairwise.agreement import cohen_weighted_kappa, worker_agreement
from hitkit.protocols.pairwise.analysis import analyze_pairwise, data_warnings, pair_table
from hitkit.protocols.pairwise.bradley_terry import bradley_terry
from hitkit.protocols.pairwise.reading import read_votes

VOTE_HEADER = "study,hit_id,assignment_id,worker_id,item_id,system_a,system_b,vote\n"
ASSIGNMENT_HEADER = "study,hit_id,assignment_id,worker_id,status,work_time_s\n"


def votes_frame(rows) -> pd.DataFrame:
    """Votes from (worker_id, item_id, system_a, system_b, vote) tuples."""
    table = pd.DataFrame(rows, columns=["worker_id", "item_id", "system_a", "system_b", "vote"])
    table.insert(0, "study", "s1")
    table.insert(1, "hit_id", "h1")
    table.insert(2, "assignment_id", "as-" + table["worker_id"])
    return table


def repeat(n, worker, item, a, b, vote):
    """n votes of one kind, each on its own item so they never overlap."""
    return [(f"{worker}{i}", f"{item}{i}", a, b, vote) for i in range(n)]


def simulate(strengths: dict[str, float], n: int, seed: int, tie_share: float = 0.1) -> pd.DataFrame:
    """n votes on random pairs in random display order, outcomes drawn by Bradley–Terry."""
    rng = np.random.default_rng(seed)
    names = list(strengths)
    s = np.array([strengths[x] for x in names])
    i = rng.integers(0, len(names), n)
    j = (i + rng.integers(1, len(names), n)) % len(names)
    p_a = 1 / (1 + np.exp(s[j] - s[i]))
    vote = np.where(rng.random(n) < tie_share, "tie", np.where(rng.random(n) < p_a, "a", "b"))
    workers = rng.integers(0, 8, n)
    return votes_frame(
        [(f"w{w}", f"item{k}", names[x], names[y], v) for k, (w, x, y, v) in enumerate(zip(workers, i, j, vote))]
    )


def crowd(seed: int, n_items: int = 40, accuracy: float = 0.85, spammer: bool = True) -> pd.DataFrame:
    """Every item × pair voted by 3 of 6 honest workers (and a spammer voting uniformly at random).

    Honest workers give the item's true preference (in canonical orientation) with ``accuracy``,
    otherwise one of the two other answers; display order is random for every vote.
    """
    rng = np.random.default_rng(seed)
    systems = ["p", "q", "r", "s"]
    workers = [f"honest{i}" for i in range(6)] + (["spammer"] if spammer else [])
    rows = []
    for item in range(n_items):
        for x in range(len(systems)):
            for y in range(x + 1, len(systems)):
                truth = rng.choice(["first", "tie", "second"], p=[0.45, 0.1, 0.45])
                for worker in rng.choice(workers, size=3, replace=False):
                    if worker == "spammer":
                        answer = rng.choice(["first", "tie", "second"])
                    elif rng.random() < accuracy:
                        answer = truth
                    else:
                        answer = rng.choice([o for o in ["first", "tie", "second"] if o != truth])
                    shown = (systems[x], systems[y]) if rng.random() < 0.5 else (systems[y], systems[x])
                    if answer == "tie":
                        vote = "tie"
                    else:
                        preferred = systems[x] if answer == "first" else systems[y]
                        vote = "a" if shown[0] == preferred else "b"
                    rows.append((worker, f"item{item}", shown[0], shown[1], vote))
    return votes_frame(rows)


def write_study(tmp_path, votes: str, assignments: str | None = None):
    (tmp_path / "votes.csv").write_text(VOTE_HEADER + votes)
    if assignments is not None:
        (tmp_path / "assignments.csv").write_text(ASSIGNMENT_HEADER + assignments)
    return tmp_path


# --- pair_table -------------------------------------------------------------------------------


def test_vote_a_counts_for_the_system_shown_first_whatever_its_name():
    votes = votes_frame(
        [
            ("w1", "i1", "X", "Y", "a"),  # X wins
            ("w2", "i1", "Y", "X", "a"),  # Y wins: shown first
            ("w3", "i1", "Y", "X", "b"),  # X wins
            ("w4", "i2", "X", "Y", "tie"),
        ]
    )
    row = pair_table(votes).iloc[0]
    assert (row["system_a"], row["system_b"]) == ("X", "Y")
    assert (row["wins_a"], row["wins_b"], row["ties"]) == (2, 1, 1)


def test_pair_table_has_one_row_per_unordered_pair_in_sorted_order():
    votes = votes_frame(
        [
            ("w1", "i1", "c", "a", "a"),
            ("w1", "i2", "b", "a", "b"),
            ("w1", "i3", "a", "c", "tie"),
            ("w1", "i4", "c", "b", "b"),
        ]
    )
    table = pair_table(votes)
    assert list(table.columns) == [
        "system_a",
        "system_b",
        "wins_a",
        "wins_b",
        "ties",
        "gain",
        "p_value",
        "p_adjusted",
        "correction",
        "gain_low",
        "gain_high",
        "interval_unit",
    ]
    assert list(zip(table["system_a"], table["system_b"])) == [("a", "b"), ("a", "c"), ("b", "c")]
    # c beat a once, tied once; a beat b once; b beat c once.
    assert table[["wins_a", "wins_b", "ties"]].to_numpy().tolist() == [[1, 0, 0], [0, 1, 1], [1, 0, 0]]


def test_gain_is_win_margin_over_decisive_votes_ignoring_ties():
    votes = votes_frame(
        repeat(6, "w", "i", "X", "Y", "a") + repeat(2, "v", "j", "Y", "X", "a") + repeat(5, "u", "k", "X", "Y", "tie")
    )
    row = pair_table(votes).iloc[0]
    assert (row["wins_a"], row["wins_b"], row["ties"]) == (6, 2, 5)
    assert row["gain"] == pytest.approx((6 - 2) / 8)


def test_sign_test_p_value_is_the_exact_two_sided_binomial():
    # 9 wins against 1: P = 2 · (C(10,9) + C(10,10)) / 2^10 = 22 / 1024.
    lopsided = votes_frame(
        repeat(9, "w", "i", "X", "Y", "a") + repeat(1, "v", "j", "X", "Y", "b") + repeat(3, "u", "k", "X", "Y", "tie")
    )
    assert pair_table(lopsided, test="vote").iloc[0]["p_value"] == pytest.approx(22 / 1024)
    # 2 against 1: every outcome at least as extreme, p = 1.
    close = votes_frame(repeat(2, "w", "i", "X", "Y", "a") + repeat(1, "v", "j", "X", "Y", "b"))
    assert pair_table(close, test="vote").iloc[0]["p_value"] == pytest.approx(1.0)


def test_the_default_pair_test_is_clustered_by_worker_by_hand():
    # four workers, each with their own taste: 5-1, 4-2, 3-3 and 6-0 for X. Every worker casts as many votes,
    # so CR2 is the plain sandwich × G/(G − 1) and Bell–McCaffrey's degrees of freedom are G − 1.
    def worker(name, wins, losses):
        return [(name, f"{name}-i{k}", "X", "Y", "a" if k < wins else "b") for k in range(wins + losses)]

    votes = votes_frame(worker("w1", 5, 1) + worker("w2", 4, 2) + worker("w3", 3, 3) + worker("w4", 6, 0))
    rate = 18 / 24
    influence = np.array([5 - rate * 6, 4 - rate * 6, 3 - rate * 6, 6 - rate * 6]) / 24
    se = np.sqrt(4 / 3 * (influence**2).sum())
    row = pair_table(votes).iloc[0]
    assert row["p_value"] == pytest.approx(2 * stats.t.sf((rate - 0.5) / se, 3))
    assert row["p_value"] > pair_table(votes, test="vote").iloc[0]["p_value"]  # 24 votes, but only 4 tastes


def unequal_crowd_votes(seed):
    """Three systems, 12 workers of whom 2 cast most votes, each with a taste for X or Y of their own."""
    rng = np.random.default_rng(seed)
    rows = []
    for w, n in enumerate([40, 25] + [3] * 10):
        for k in range(n):
            x, y = rng.choice(["X", "Y", "Z"], 2, replace=False)
            taste = rng.normal(0, 0.8) + (0.4 if x == "X" else 0)
            vote = "tie" if rng.random() < 0.1 else ("a" if rng.random() < 1 / (1 + np.exp(-taste)) else "b")
            rows.append((f"w{w}", f"i{w}-{k}", x, y, vote))
    return votes_frame(rows)


@pytest.mark.parametrize("test", ["worker", "vote"])
def test_gain_interval_excludes_zero_exactly_when_p_is_below_five_percent(test):
    # p and interval from one procedure: NCM–Cakechat once showed p = 0.060 beside [−0.68, −0.14].
    checked = 0
    for seed in range(25):
        table = pair_table(unequal_crowd_votes(seed), test=test, correction="none").dropna(subset=["gain_low"])
        excludes = (table["gain_low"] > 0) | (table["gain_high"] < 0)
        assert (excludes == (table["p_value"] < 0.05)).all()
        assert ((table["gain_low"] <= table["gain"]) & (table["gain"] <= table["gain_high"])).all()
        checked += len(table)
    assert checked > 50


def test_the_worker_test_is_cr2_with_bell_mccaffrey_df_when_a_few_workers_cast_most_votes():
    from hitkit.analysis.cr2 import cr2_contrast

    votes = unequal_crowd_votes(0)
    row = pair_table(votes, correction="none").iloc[0]
    decisive = votes[votes["vote"] != "tie"]
    pair = decisive[
        decisive["system_a"].isin([row["system_a"], row["system_b"]])
        & decisive["system_b"].isin([row["system_a"], row["system_b"]])
    ]
    first_won = np.where(pair["vote"] == "a", pair["system_a"], pair["system_b"]) == row["system_a"]
    test = cr2_contrast(first_won.astype(float), np.ones((len(pair), 1)), pair["worker_id"], np.array([1.0]))
    assert test.df < pair["worker_id"].nunique() - 1  # busy workers cost degrees of freedom
    assert row["p_value"] == pytest.approx(test.p_two_sided(0.5))


def test_pair_with_only_ties_has_nan_gain_and_p_value_one():
    row = pair_table(votes_frame(repeat(3, "w", "i", "X", "Y", "tie"))).iloc[0]
    assert math.isnan(row["gain"])
    assert row["p_value"] == 1.0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("ABCD"), st.sampled_from("ABCD"), st.sampled_from(["a", "b", "tie"]), st.booleans()),
        min_size=1,
        max_size=30,
    )
)
def test_pair_table_is_the_same_whichever_way_round_each_pair_was_shown(draws):
    draws = [d for d in draws if d[0] != d[1]]
    if not draws:
        return
    shown = votes_frame([("w", f"i{k}", x, y, v) for k, (x, y, v, _) in enumerate(draws)])
    # The same preferences with the display order swapped where the flag says so.
    swap = {"a": "b", "b": "a", "tie": "tie"}
    flipped = votes_frame(
        [("w", f"i{k}", *((y, x, swap[v]) if flip else (x, y, v))) for k, (x, y, v, flip) in enumerate(draws)]
    )
    pd.testing.assert_frame_equal(pair_table(shown), pair_table(flipped))


# --- Bradley–Terry ----------------------------------------------------------------------------


def test_two_systems_score_gap_is_the_log_odds_of_the_win_share():
    votes = votes_frame(
        repeat(15, "w", "i", "X", "Y", "a") + repeat(15, "v", "j", "Y", "X", "b") + repeat(10, "u", "k", "Y", "X", "a")
    )  # X 30 wins, Y 10
    ranking = bradley_terry(votes, n_boot=0, prior=1e-9).set_index("system")
    assert ranking.at["X", "score"] - ranking.at["Y", "score"] == pytest.approx(math.log(3))
    assert ranking.at["X", "score"] + ranking.at["Y", "score"] == pytest.approx(0, abs=1e-12)
    # The default prior adds one virtual tie to the pair: half a win to each side.
    shrunk = bradley_terry(votes, n_boot=0).set_index("system")
    assert shrunk.at["X", "score"] - shrunk.at["Y", "score"] == pytest.approx(math.log(30.5 / 10.5))


def test_ties_count_half_a_win_each_or_are_dropped():
    votes = votes_frame(
        repeat(3, "w", "i", "X", "Y", "a") + repeat(1, "v", "j", "X", "Y", "b") + repeat(4, "u", "k", "Y", "X", "tie")
    )
    half = bradley_terry(votes, n_boot=0, ties="half").set_index("system")["score"]
    drop = bradley_terry(votes, n_boot=0, ties="drop").set_index("system")["score"]
    assert half["X"] - half["Y"] == pytest.approx(math.log((3 + 2 + 0.5) / (1 + 2 + 0.5)))
    assert drop["X"] - drop["Y"] == pytest.approx(math.log((3 + 0.5) / (1 + 0.5)))


def test_bradley_terry_recovers_the_true_order_of_simulated_systems():
    truth = {"best": 1.2, "good": 0.6, "middle": 0.0, "weak": -0.6, "worst": -1.2}
    ranking = bradley_terry(simulate(truth, 1500, seed=7), n_boot=200, seed=1)
    assert list(ranking["system"]) == list(truth)
    assert list(ranking["rank"]) == [1, 2, 3, 4, 5]
    estimated = ranking.set_index("system")["score"]
    assert np.abs(estimated[list(truth)].to_numpy() - np.array(list(truth.values()))).max() < 0.3


def test_bradley_terry_gives_identical_numbers_for_the_same_seed():
    votes = simulate({"a": 0.5, "b": 0.0, "c": -0.5}, 300, seed=3)
    first = bradley_terry(votes, n_boot=300, seed=11)
    pd.testing.assert_frame_equal(first, bradley_terry(votes, n_boot=300, seed=11))
    other_seed = bradley_terry(votes, n_boot=300, seed=12)
    pd.testing.assert_series_equal(first["score"], other_seed["score"])
    assert not np.allclose(first["ci_low"], other_seed["ci_low"])


def test_bootstrap_interval_contains_the_point_estimate():
    votes = simulate({"a": 0.8, "b": 0.3, "c": 0.0, "d": -0.4, "e": -0.7}, 400, seed=5)
    ranking = bradley_terry(votes, n_boot=500, seed=0)
    assert (ranking["ci_low"] < ranking["score"]).all()
    assert (ranking["score"] < ranking["ci_high"]).all()
    assert list(ranking.columns) == ["system", "score", "ci_low", "ci_high", "rank"]


def test_system_that_never_loses_gets_a_finite_top_score():
    votes = votes_frame(
        repeat(10, "w", "i", "champ", "X", "a")
        + repeat(10, "v", "j", "Y", "champ", "b")
        + repeat(5, "u", "k", "X", "Y", "a")
        + repeat(5, "t", "l", "X", "Y", "b")
    )
    ranking = bradley_terry(votes, n_boot=100, seed=0)
    assert ranking.iloc[0]["system"] == "champ"
    assert np.isfinite(ranking[["score", "ci_low", "ci_high"]].to_numpy()).all()


def test_systems_with_equal_scores_share_the_better_rank():
    # A beats B, B beats C, C beats A, equally often: all three equally strong.
    votes = votes_frame(
        repeat(4, "w", "i", "A", "B", "a")
        + repeat(4, "v", "j", "C", "B", "b")
        + repeat(4, "u", "k", "A", "C", "b")
        + repeat(6, "t", "l", "A", "D", "a")
        + repeat(6, "s", "m", "D", "B", "b")
        + repeat(6, "r", "n", "C", "D", "a")
    )
    ranking = bradley_terry(votes, n_boot=0)
    assert list(ranking["system"]) == ["A", "B", "C", "D"]
    assert list(ranking["rank"]) == [1, 1, 1, 4]


def test_thousand_bootstrap_resamples_of_300_votes_take_well_under_two_seconds():
    votes = simulate({f"s{i}": 0.3 * i for i in range(10)}, 300, seed=2)
    start = time.perf_counter()
    bradley_terry(votes, n_boot=1000, seed=0)
    assert time.perf_counter() - start < 2.0


def test_bradley_terry_rejects_an_unknown_tie_rule_and_a_zero_prior():
    votes = votes_frame([("w", "i", "X", "Y", "a")])
    with pytest.raises(ValueError, match="ties"):
        bradley_terry(votes, ties="win")
    with pytest.raises(ValueError, match="prior"):
        bradley_terry(votes, prior=0)


# --- reading the tables -----------------------------------------------------------------------


def test_missing_votes_file_is_named(tmp_path):
    with pytest.raises(InputError, match="votes.csv.*not found"):
        read_votes(tmp_path)


def test_missing_vote_column_is_named_with_its_file(tmp_path):
    (tmp_path / "votes.csv").write_text(
        "study,hit_id,assignment_id,worker_id,item_id,system_a,system_b\ns,h,a1,w1,i1,X,Y\n"
    )
    with pytest.raises(InputError, match=r"votes.csv.*missing column.*'vote'"):
        read_votes(tmp_path)


def test_invalid_vote_value_names_its_line(tmp_path):
    write_study(tmp_path, "s,h,a1,w1,i1,X,Y,a\ns,h,a1,w1,i2,X,Y,maybe\n")
    with pytest.raises(InputError, match=r"votes.csv line 3: vote 'maybe'"):
        read_votes(tmp_path)


def test_empty_system_names_its_column_and_line(tmp_path):
    write_study(tmp_path, "s,h,a1,w1,i1,X,Y,a\ns,h,a1,w1,i2,X,,b\n")
    with pytest.raises(InputError, match=r"votes.csv line 3: system_b is empty"):
        read_votes(tmp_path)


def test_same_system_on_both_sides_names_its_line(tmp_path):
    write_study(tmp_path, "s,h,a1,w1,i1,X,X,a\n")
    with pytest.raises(InputError, match=r"votes.csv line 2: .*both 'X'"):
        read_votes(tmp_path)


def test_missing_status_column_is_named_with_assignments_file(tmp_path):
    write_study(tmp_path, "s,h,a1,w1,i1,X,Y,a\n")
    (tmp_path / "assignments.csv").write_text("study,hit_id,assignment_id,worker_id,work_time_s\ns,h,a1,w1,30\n")
    with pytest.raises(InputError, match=r"assignments.csv.*missing column.*'status'"):
        read_votes(tmp_path)


def test_vote_of_an_unknown_assignment_is_refused(tmp_path):
    write_study(tmp_path, "s,h,a1,w1,i1,X,Y,a\ns,h,a9,w9,i1,X,Y,b\n", "s,h,a1,w1,approved,30\n")
    with pytest.raises(InputError, match=r"votes.csv line 3: assignment_id 'a9'"):
        read_votes(tmp_path)


def test_only_votes_of_handed_in_assignments_count_rejected_included(tmp_path):
    write_study(
        tmp_path,
        "s,h,a1,w1,i1,X,Y,A\ns,h,a2,w2,i1,Y,X,b\ns,h,a3,w3,i1,X,Y,b\ns,h,a4,w4,i1,X,Y,b\ns,h,a5,w5,i1,X,Y,tie\n",
        "s,h,a1,w1,submitted,30\ns,h,a2,w2,approved,31\ns,h,a3,w3,rejected,5\n"
        "s,h,a4,w4,returned,0\ns,h,a5,w5,expired,0\n",
    )
    votes = read_votes(tmp_path)
    assert list(votes["assignment_id"]) == ["a1", "a2", "a3"]  # a rejection is an outcome, not an input
    assert list(votes["vote"]) == ["a", "b", "b"]  # case normalised
    (tmp_path / "assignments.csv").unlink()
    assert len(read_votes(tmp_path)) == 5  # no assignments.csv: every vote counts


def test_system_names_stay_text(tmp_path):
    write_study(tmp_path, "s,h,a1,w1,i1,NA,007,a\n")
    votes = read_votes(tmp_path)
    assert (votes.at[0, "system_a"], votes.at[0, "system_b"]) == ("NA", "007")


# --- agreement --------------------------------------------------------------------------------


def test_kappa_is_one_when_workers_agree_however_the_pair_was_shown():
    rng = np.random.default_rng(0)
    rows = []
    for item in range(30):
        preferred = ["X", "Y", None][item % 3]
        for worker in ("w1", "w2", "w3"):
            shown = ("X", "Y") if rng.random() < 0.5 else ("Y", "X")
            vote = "tie" if preferred is None else ("a" if shown[0] == preferred else "b")
            rows.append((worker, f"i{item}", *shown, vote))
    assert cohen_weighted_kappa(votes_frame(rows)) == pytest.approx(1.0)


def test_kappa_is_near_zero_for_workers_voting_at_random():
    rng = np.random.default_rng(1)
    rows = [(f"w{w}", f"i{item}", "X", "Y", rng.choice(["a", "b", "tie"])) for item in range(1500) for w in range(3)]
    assert abs(cohen_weighted_kappa(votes_frame(rows))) < 0.05


def test_kappa_matches_a_hand_worked_table():
    # Ordered pairs: (F,F)×2, (F,T)×2, (T,F)×2; observed 4/6, chance 7/9, kappa −0.5.
    votes = votes_frame([("w1", "i1", "X", "Y", "a"), ("w2", "i1", "Y", "X", "b"), ("w3", "i1", "X", "Y", "tie")])
    assert cohen_weighted_kappa(votes) == pytest.approx(-0.5)


def test_kappa_is_nan_without_two_workers_on_the_same_item_and_pair():
    # Different items, a different pair on i3, and one worker's two votes on i3: no pairs.
    votes = votes_frame(
        [
            ("w1", "i1", "X", "Y", "a"),
            ("w2", "i2", "X", "Y", "b"),
            ("w1", "i3", "X", "Y", "a"),
            ("w1", "i3", "Y", "X", "a"),
            ("w3", "i3", "X", "Z", "b"),
        ]
    )
    assert math.isnan(cohen_weighted_kappa(votes))


def test_worker_agreement_compares_with_the_majority_of_the_other_workers():
    votes = votes_frame(
        [
            ("w1", "i1", "X", "Y", "a"),
            ("w2", "i1", "Y", "X", "b"),
            ("w3", "i1", "X", "Y", "b"),
            ("w1", "i2", "X", "Y", "a"),
            ("w2", "i2", "X", "Y", "a"),
            ("w3", "i2", "Y", "X", "b"),
        ]
    )
    table = worker_agreement(votes).set_index("worker_id")
    # On i1 only w3 has a majority among the others (X, X) and disagrees; on i2 everyone agrees.
    assert table["votes"].tolist() == [2, 2, 2]
    assert table["compared"].tolist() == [1, 1, 2]
    assert table["agree_with_majority"].tolist() == [1.0, 1.0, 0.5]
    # Chance for w1 is the pooled agreement of w2 and w3: (1 + 1) / (1 + 2).
    assert table.at["w1", "expected_by_chance"] == pytest.approx(2 / 3)
    assert table.at["w3", "expected_by_chance"] == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_voter_is_flagged_and_consistent_workers_are_not(seed):
    table = worker_agreement(crowd(seed)).set_index("worker_id")
    assert table.at["spammer", "flagged"]
    assert table.at["spammer", "agree_with_majority"] < 0.5
    honest = table.drop(index="spammer")
    assert not honest["flagged"].any()
    assert (honest["agree_with_majority"] > 0.7).all()


def test_careful_crowd_has_substantial_kappa():
    assert cohen_weighted_kappa(crowd(3, accuracy=0.95, spammer=False)) > 0.6


def test_equally_careful_workers_are_flagged_only_at_the_test_level():
    # Among workers who all behave alike the test is calibrated: about alpha = 5 % are flagged.
    flagged = pd.concat(
        [worker_agreement(crowd(100 + seed, n_items=30, spammer=False))["flagged"] for seed in range(20)]
    )
    assert len(flagged) == 120
    assert flagged.mean() <= 0.12


# --- the whole analysis -----------------------------------------------------------------------


def test_analyze_pairwise_returns_tables_summary_and_figure_and_repeats_exactly(tmp_path):
    study = tmp_path / "study"
    study.mkdir()
    votes = crowd(4, n_items=10)
    votes.to_csv(study / "votes.csv", index=False)
    assignments = votes[["study", "hit_id", "assignment_id", "worker_id"]].drop_duplicates()
    assignments = assignments.assign(status="approved", work_time_s=60)
    assignments.loc[assignments["worker_id"] == "spammer", "status"] = "rejected"
    assignments.to_csv(study / "assignments.csv", index=False)
    # the spammer's rejection counts as an outcome; leaving their work out takes an exclusion with its reason
    excluded = assignments[assignments["worker_id"] == "spammer"].assign(reason="rejected by the coordinator: spam")
    excluded[["study", "assignment_id", "worker_id", "reason"]].to_csv(study / "exclusions.csv", index=False)

    result = analyze_pairwise(study, n_boot=200, seed=3)
    again = analyze_pairwise(study, n_boot=200, seed=3)
    for name in ("pairs", "ranking", "workers"):
        pd.testing.assert_frame_equal(result.tables[name], again.tables[name])
    assert result.summary == again.summary

    counted = votes[votes["worker_id"] != "spammer"]
    assert result.summary["votes"] == len(counted)
    assert result.summary["workers"] == 6
    assert result.summary["items"] == 10
    assert result.summary["systems"] == 4
    assert (result.summary["seed"], result.summary["n_boot"]) == (3, 200)
    assert result.summary["kappa"] == pytest.approx(cohen_weighted_kappa(counted))
    assert "spammer" not in set(result.tables["workers"]["worker_id"])
    assert result.tables["pairs"][["wins_a", "wins_b", "ties"]].to_numpy().sum() == len(counted)

    written = {p.name for p in result.write(tmp_path / "out")}
    assert written == {
        "pairs.csv",
        "ranking.csv",
        "workers.csv",
        "agreement.csv",
        "fragility.csv",
        "summary.json",
        "ranking.png",
    }
    assert (tmp_path / "out" / "ranking.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json.loads((tmp_path / "out" / "summary.json").read_text())


def test_analyze_pairwise_refuses_a_study_without_counted_votes(tmp_path):
    write_study(tmp_path, "s,h,a1,w1,i1,X,Y,a\n", "s,h,a1,w1,returned,30\n")
    with pytest.raises(InputError, match="no votes"):
        analyze_pairwise(tmp_path, n_boot=10)


# --- issue 19: corrections, clustered intervals, warnings --------------------------------------


def test_sign_tests_are_corrected_over_the_pairs():
    votes = simulate({"a": 1.0, "b": 0.5, "c": 0.0, "d": -0.5}, 600, seed=4)
    table = pair_table(votes)
    np.testing.assert_allclose(table["p_adjusted"], np.minimum(1, 6 * table["p_value"]))
    holm = pair_table(votes, correction="holm")
    assert (holm["p_adjusted"] <= table["p_adjusted"] + 1e-15).all()
    assert (pair_table(votes, correction="none")["p_adjusted"] == table["p_value"]).all()
    with pytest.raises(ValueError, match="correction"):
        pair_table(votes, correction="sidak")


def worker_effect_votes(seed: int) -> pd.DataFrame:
    """Two systems of equal strength; each of 10 workers has a strong taste of their own."""
    rng = np.random.default_rng(seed)
    rows = []
    for w in range(10):
        taste = rng.normal(0, 1.5)
        for i in range(60):
            prefer_x = rng.random() < 1 / (1 + np.exp(-taste))
            rows.append((f"w{w}", f"it{w}-{i}", "X", "Y", "a" if prefer_x else "b"))
    return votes_frame(rows)


def test_worker_clustered_intervals_are_wider_when_workers_differ():
    votes = worker_effect_votes(1)
    by_vote = bradley_terry(votes, n_boot=400, seed=0, resample="vote")
    by_worker = bradley_terry(votes, n_boot=400, seed=0, resample="worker")
    pd.testing.assert_series_equal(by_vote["score"], by_worker["score"])
    width = lambda t: float((t["ci_high"] - t["ci_low"]).mean())  # noqa: E731
    assert width(by_worker) > 1.5 * width(by_vote)
    pairs = pair_table(votes)
    naive = pair_table(votes, test="vote")
    assert (pairs["interval_unit"].iloc[0], naive["interval_unit"].iloc[0]) == ("worker", "vote")
    assert (pairs["gain_high"] - pairs["gain_low"]).iloc[0] > 1.5 * (naive["gain_high"] - naive["gain_low"]).iloc[0]
    assert pairs["gain_low"].iloc[0] <= pairs["gain"].iloc[0] <= pairs["gain_high"].iloc[0]
    items = bradley_terry(votes, n_boot=50, seed=0, resample="item")
    assert items["ci_low"].notna().all()
    with pytest.raises(ValueError, match="resample"):
        bradley_terry(votes, resample="hit")


def test_referee_warnings_repeated_votes_dominant_worker_and_chance_agreement():
    rows = [
        ("w1", "i1", "X", "Y", "a"),
        ("w1", "i2", "X", "Y", "b"),
        ("w2", "i1", "Y", "X", "a"),
        ("w1", "i3", "X", "Y", "a"),
    ]
    votes = votes_frame(rows)
    votes.loc[3, ["item_id", "assignment_id"]] = ["i1", "as-w1-again"]  # w1 votes i1 again
    counts, lines = data_warnings(votes, kappa=0.05)
    assert counts == {"repeated_votes": 1, "top_worker_share": 0.75}
    assert len(lines) == 3
    assert "1 vote(s) repeat" in lines[0] and "75%" in lines[1] and "chance" in lines[2]
    assert data_warnings(votes_frame(rows[:3]), kappa=0.6)[1] == [
        "one worker cast 67% of the votes; the results mostly say what that worker thinks "
        "(the worker-clustered intervals account for it)"
    ]


def test_repeated_rows_of_one_assignment_follow_the_policy(tmp_path):
    write_study(tmp_path, "s1,h1,as1,w1,i1,X,Y,a\ns1,h1,as1,w1,i1,Y,X,a\ns1,h1,as2,w2,i1,X,Y,b\n")
    with pytest.warns(DuplicateRowsWarning, match="removed 1 row"):
        result = analyze_pairwise(tmp_path, n_boot=20)
    assert result.summary["duplicates"] == {"policy": "first", "keys": 1, "rows_removed": 1}
    assert result.tables["pairs"][["wins_a", "wins_b"]].iloc[0].tolist() == [1, 1]
    assert result.summary["multiple_comparisons"] == "bonferroni"
    assert result.summary["interval_unit"] == "worker"
    with pytest.raises(InputError, match="repeats"):
        read_votes(tmp_path, duplicates="error")


def test_a_repeated_assignment_id_in_assignments_csv_is_counted_not_refused(tmp_path):
    # as1 twice in assignments.csv: first returned, then approved (two exports pasted together).
    write_study(
        tmp_path,
        "s1,h1,as1,w1,i1,X,Y,a\ns1,h1,as2,w2,i1,X,Y,b\ns1,h1,as3,w3,i1,X,Y,a\n",
        "s1,h1,as1,w1,returned,60\ns1,h1,as2,w2,approved,60\ns1,h1,as3,w3,approved,60\ns1,h1,as1,w1,approved,60\n",
    )
    with pytest.warns(DuplicateRowsWarning, match="assignment .*removed 1 row"):
        first = analyze_pairwise(tmp_path, n_boot=20)
    assert first.summary["assignment_duplicates"] == {"policy": "first", "keys": 1, "rows_removed": 1}
    assert first.summary["votes"] == 2  # the first row says returned: as1's vote does not count
    assert any("assignment_id(s) of assignments.csv repeat" in w for w in first.summary["warnings"])
    with pytest.warns(DuplicateRowsWarning):
        assert analyze_pairwise(tmp_path, n_boot=20, duplicates="last").summary["votes"] == 3
    with pytest.raises(InputError, match="assignments.csv.*repeats") as info:
        read_votes(tmp_path, duplicates="error")
    assert info.value.line == 5
