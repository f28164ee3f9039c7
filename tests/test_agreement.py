"""Krippendorff's alpha (issue 42): hitkit's own computation equals the ``krippendorff`` package to 1e-9
on random matrices with missing values, every protocol's agreement.csv equals the package on the same
answers read independently from the exported tables, and the bootstrap over workers and units is
seeded, never pairs a worker with their own copy, and gives an interval that contains the estimate."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pandas as pd
import pytest

from hitkit.analysis import agreement as ag
from hitkit.analysis.agreement import AGREEMENT_COLUMNS
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA
from hitkit.protocols.rating.scores import DEFAULT_CRITERIA as RATING_CRITERIA
from tests.studies import REPO

GOLDEN = REPO / "tests" / "data" / "golden"
LEVELS = ("nominal", "ordinal", "interval")


def random_matrix(rng: np.random.Generator, *, integer: bool = True) -> np.ndarray:
    coders, units, values = rng.integers(2, 9), rng.integers(2, 40), rng.integers(2, 7)
    m = rng.integers(0, values, size=(coders, units)).astype(float)
    if not integer:
        m = m * 1.7 + rng.normal(0, 0.3, size=m.shape).round(1)
    m[rng.random(m.shape) < rng.uniform(0.1, 0.6)] = np.nan
    return m


def package_alpha(matrix: np.ndarray, level: str) -> float:
    try:
        with np.errstate(all="ignore"):
            return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level))
    except ValueError:  # "at least one unit with values assigned by at least two coders"
        return math.nan


@pytest.mark.parametrize("level", LEVELS)
def test_alpha_equals_the_krippendorff_package_on_random_matrices_with_missing_values(level):
    rng = np.random.default_rng(42)
    compared = 0
    for trial in range(150):
        matrix = random_matrix(rng, integer=trial % 3 != 0)
        want = package_alpha(matrix, level)
        got = ag.alpha(ag.from_matrix(matrix), level)
        if math.isnan(want):
            assert math.isnan(got)
            continue
        assert got == pytest.approx(want, abs=1e-9)
        compared += 1
    assert compared > 100


@pytest.mark.parametrize("level", LEVELS)
def test_both_ways_of_summing_coincidences_agree_on_resampled_weights(level):
    # Pairs of values and per-unit counts are two routes to one coincidence matrix; interval alpha has a
    # third (moments). On bootstrap weights, duplicates included, all give the same alpha.
    rng = np.random.default_rng(3)
    for _ in range(30):
        data = ag.from_matrix(random_matrix(rng))
        n_c, n_u = len(data.coders), len(data.units)
        coder_w = rng.multinomial(n_c, np.full(n_c, 1 / n_c), size=4).astype(float)
        unit_w = rng.multinomial(n_u, np.full(n_u, 1 / n_u), size=4).astype(float)
        by_pairs = ag._weighted_alphas(data, level, coder_w, unit_w, data.pairs, moments=False)
        by_units = ag._weighted_alphas(data, level, coder_w, unit_w, None, moments=False)
        np.testing.assert_allclose(by_pairs, by_units, atol=1e-9)
        if level == "interval":
            by_moments = ag._weighted_alphas(data, level, coder_w, unit_w, None)
            np.testing.assert_allclose(by_moments, by_pairs, atol=1e-9)


def test_a_worker_drawn_twice_is_never_paired_with_their_own_copy():
    # Two coders who always disagree: alpha < 0. A replicate that draws one of them twice has no pair
    # of different coders left, so no alpha at all (not the perfect agreement of a coder with itself).
    data = ag.from_matrix(np.array([[0, 1, 0, 1], [1, 0, 1, 0]], dtype=float))
    assert ag.alpha(data, "nominal") < 0
    twice_first = np.array([[2.0, 0.0]])
    assert np.isnan(ag._weighted_alphas(data, "nominal", twice_first, np.ones((1, 4)), data.pairs)[0])


def test_the_bootstrap_is_seeded_and_its_interval_contains_the_estimate():
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 5, size=60)
    matrix = np.array([np.where(rng.random(60) < 0.7, truth, rng.integers(0, 5, size=60)) for _ in range(6)], float)
    matrix[rng.random(matrix.shape) < 0.3] = np.nan
    data = ag.from_matrix(matrix)
    estimate = ag.alpha(data, "nominal")
    first = ag.bootstrap(data, "nominal", n_boot=300, seed=9)
    np.testing.assert_array_equal(first, ag.bootstrap(data, "nominal", n_boot=300, seed=9))
    low, high = ag.interval(estimate, first)
    assert low <= package_alpha(matrix, "nominal") <= high
    assert 0.3 < estimate < 0.9 and high - low < 0.5


def test_a_worker_who_answers_against_the_crowd_gets_the_lowest_agreement():
    rows = []
    for unit in range(30):
        truth = unit % 3
        for w in ("w1", "w2", "w3", "w4"):
            rows.append((f"u{unit}", w, truth))
        rows.append((f"u{unit}", "contrarian", (truth + 1) % 3))
    frame = pd.DataFrame(rows, columns=["unit", "worker", "value"])
    table = ag.worker_agreement(frame, level="nominal", unit=["unit"], coder="worker", value="value")
    by_worker = table.set_index("worker_id")
    assert by_worker["agreement_alpha"].idxmin() == "contrarian"
    assert by_worker.loc["contrarian", "agreement_alpha"] < 0 < by_worker.loc["w1", "agreement_alpha"]
    assert (by_worker["agreement_units"] == 30).all()


def overall(result, measure: str | None = None) -> pd.Series:
    table = result.tables["agreement"]
    assert list(table.columns) == list(AGREEMENT_COLUMNS)
    rows = table[(table["scope"] == "all") & ((table["measure"] == measure) if measure else True)]
    assert len(rows) == 1
    row = rows.iloc[0]
    assert row["lower"] <= row["alpha"] <= row["upper"]
    return row


def matrix_of(frame: pd.DataFrame, unit: list[str], value: str) -> np.ndarray:
    """Workers × units of ``frame`` (first value of a worker for a unit), values as numbers."""
    frame = frame.drop_duplicates([*unit, "worker_id"])
    keys = frame[unit[0]].astype(str)
    for column in unit[1:]:
        keys = keys + "|" + frame[column].astype(str)
    codes = frame[value] if pd.api.types.is_numeric_dtype(frame[value]) else pd.factorize(frame[value])[0]
    return (
        pd.DataFrame({"u": keys, "w": frame["worker_id"], "v": np.asarray(codes, dtype=float)})
        .pivot(index="w", columns="u", values="v")
        .to_numpy()
    )


def test_pairwise_alpha_equals_the_package_on_the_same_votes(tmp_path):
    from hitkit.protocols.pairwise.analysis import analyze_pairwise

    rng = np.random.default_rng(1)
    rows = []
    for item in range(12):
        for a, b in (("alpha", "beta"), ("beta", "gamma")):
            for w in range(5):
                better = a if rng.random() < 0.75 else b
                shown = (a, b) if rng.random() < 0.5 else (b, a)  # sides shuffled per worker
                vote = "tie" if rng.random() < 0.1 else ("a" if shown[0] == better else "b")
                rows.append(("s", "h", f"as{w}", f"w{w}", f"q{item}", *shown, vote))
    votes = pd.DataFrame(
        rows, columns=["study", "hit_id", "assignment_id", "worker_id", "item_id", "system_a", "system_b", "vote"]
    )
    votes.to_csv(tmp_path / "votes.csv", index=False)
    result = analyze_pairwise(tmp_path, n_boot=200, seed=0)
    # Independently: the preferred system's name (or tie) per item and unordered pair.
    votes["pair"] = [",".join(sorted(p)) for p in zip(votes["system_a"], votes["system_b"])]
    votes["answer"] = np.where(
        votes["vote"] == "tie", "tie", np.where(votes["vote"] == "a", votes["system_a"], votes["system_b"])
    )
    want = package_alpha(matrix_of(votes, ["item_id", "pair"], "answer"), "nominal")
    assert overall(result)["alpha"] == pytest.approx(want, abs=1e-9)
    assert {"agreement_alpha", "agreement_units"} <= set(result.tables["workers"].columns)
    assert set(result.tables["agreement"]["scope"]) == {"all", "system:alpha", "system:beta", "system:gamma"}


def test_rating_alpha_equals_the_package_per_criterion(tmp_path):
    from hitkit.protocols.rating.analysis import analyze_rating
    from tests.test_rating import _synthetic_export

    _synthetic_export(tmp_path)
    result = analyze_rating(tmp_path, n_boot=100, seed=1)
    ratings = pd.read_csv(tmp_path / "da_ratings.csv", dtype={"worker_id": str})
    intact = ratings[ratings["is_control"] == 0]
    table = result.tables["agreement"].set_index("scope")
    for criterion in RATING_CRITERIA:
        own = intact[intact["criterion"] == criterion.name]
        want = package_alpha(matrix_of(own, ["item_id", "system"], "score"), "interval")
        assert table.loc[f"criterion:{criterion.name}", "alpha"] == pytest.approx(want, abs=1e-9)
    overall(result)


def test_live_chat_alpha_is_over_systems_with_each_workers_mean_rating():
    from hitkit.report.analyze import run_analysis

    export = GOLDEN / "live_chat" / "export"
    result = run_analysis("live_chat", export, options={"n_boot": 100})
    ratings = pd.read_csv(export / "ratings.csv", dtype={"worker_id": str})
    intact = ratings[ratings["is_control"] == 0].copy()
    negative = {c.name for c in DEFAULT_CRITERIA if c.polarity == "negative"}
    intact["oriented"] = np.where(intact["criterion"].isin(negative), 100 - intact["score"], intact["score"])
    means = intact.groupby(["worker_id", "system", "criterion"], as_index=False)["oriented"].mean()
    want = package_alpha(matrix_of(means, ["system", "criterion"], "oriented"), "interval")
    assert overall(result)["alpha"] == pytest.approx(want, abs=1e-9)


def test_spot_the_bot_label_alpha_equals_the_package():
    from hitkit.report.analyze import run_analysis

    export = GOLDEN / "spot_the_bot" / "export"
    result = run_analysis("spot_the_bot", export, options={"n_boot": 100})
    labels = pd.read_csv(export / "annotations.csv", dtype={"worker_id": str})
    want = package_alpha(matrix_of(labels, ["conversation_id", "segment_exchanges", "entity"], "label"), "nominal")
    assert overall(result, "label")["alpha"] == pytest.approx(want, abs=1e-9)
    assert "label_agreement" in result.tables  # the per-label agreement of the paper stays
    assert {"agreement_alpha", "agreement_units"} <= set(result.tables["annotators"].columns)


def test_arena_alpha_equals_the_package_and_workers_get_a_table():
    from hitkit.protocols.arena.analysis import analyze_battles
    from tests.test_arena_stats import frame

    rng = np.random.default_rng(2)
    rows = []
    for prompt in range(15):
        for w in range(4):
            a, b = ("x", "y") if rng.random() < 0.5 else ("y", "x")
            vote = rng.choice(["a", "b", "tie", "both_bad"], p=[0.45, 0.35, 0.1, 0.1])
            rows.append((a, b, vote, f"w{w}", prompt))
    battles = pd.concat(
        [frame([r[:4]], prompt_id=f"p{r[4]}", battle_id=f"b{i}") for i, r in enumerate(rows)], ignore_index=True
    )
    result = analyze_battles(battles, n_boot=50, seed=0)
    battles["answer"] = np.where(
        battles["vote"] == "a",
        battles["system_a"],
        np.where(battles["vote"] == "b", battles["system_b"], battles["vote"]),
    )
    want = package_alpha(matrix_of(battles, ["prompt_id"], "answer"), "nominal")
    assert overall(result)["alpha"] == pytest.approx(want, abs=1e-9)
    workers = result.tables["workers"]
    assert set(workers["worker_id"]) == {"w0", "w1", "w2", "w3"} and (workers["agreement_units"] == 15).all()
