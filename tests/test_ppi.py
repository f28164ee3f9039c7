"""Prediction-powered inference (hitkit.analysis.ppi): PPI++ for a mean and pairwise win rates."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from hitkit.analysis.ppi import (
    WIN_RATE_COLUMNS,
    judge_bias,
    mean_interval,
    optimal_lambda,
    order_averaged,
    ppi_mean,
    win_rates,
)

# A small fixed sample; the reference numbers below are ppi-python 0.2.3's (ppi_py.ppi_mean_ci,
# ppi_mean_pointestimate, classical_mean_ci and _calc_lam_glm on these arrays, alpha = 0.05).
Y = np.array([1, 0, 1, 1, 0.5, 1, 0, 1, 1, 0, 1, 1])
FH = np.array([1, 0.5, 1, 0.5, 0.5, 1, 0, 1, 0.5, 0, 1, 0.5])
FU = np.array([1, 0.5, 0, 1, 1, 0.5, 1, 0, 1, 1, 0.5, 1, 0, 1, 0.5, 1, 1, 0, 1, 0.5])
PPI_PY_LAM_06 = (0.5400845757871755, 0.9365820908794911)
PPI_PY_LAM_HAT = 0.4918598233995585
PPI_PY_TUNED = (0.5351458563128398, 0.9307067926937823)
PPI_PY_TUNED_ESTIMATE = 0.7329263245033111
PPI_PY_CLASSICAL = (0.4644747114608322, 0.9521919552058346)


def test_lambda_zero_is_the_human_only_mean_and_t_interval():
    est = ppi_mean(Y, FH, FU, lam=0)
    human = mean_interval(Y)
    half = stats.t.ppf(0.975, len(Y) - 1) * Y.std(ddof=1) / math.sqrt(len(Y))
    assert est.estimate == human.estimate == pytest.approx(Y.mean(), abs=1e-15)
    assert (est.low, est.high) == pytest.approx((Y.mean() - half, Y.mean() + half), abs=1e-14)
    assert (est.low, est.high) == (human.low, human.high)
    assert est.fallback and est.n_effective == pytest.approx(len(Y))


def test_fewer_than_two_unlabelled_items_or_an_unreadable_judge_give_the_human_only_estimate():
    # With one unlabelled item the judge's variance there cannot be estimated: weighting the judge would
    # drop that term and give an interval narrower than it should be (a referee measured one).
    rng = np.random.default_rng(3)
    y = rng.normal(size=20)
    fh = y + rng.normal(scale=0.3, size=20)
    human = ppi_mean(y, fh, [], lam=0.0)
    for unlabelled in ([], [0.4]):
        one = ppi_mean(y, fh, unlabelled)
        assert one.lam == 0.0 and one.fallback
        assert (one.estimate, one.low, one.high) == pytest.approx((human.estimate, human.low, human.high))
    # A judge whose label is missing (NaN) on the unlabelled items gets λ = 0 and leaves the mean as it is.
    nan_judge = ppi_mean(y, fh, [math.nan] * 5, lam=0.0)
    assert nan_judge.estimate == pytest.approx(y.mean())


def test_matches_ppi_python_with_the_same_lambda():
    """ppi-python's interval is ours with small_sample=False (ddof 0, normal quantile)."""
    fixed = ppi_mean(Y, FH, FU, lam=0.6, small_sample=False)
    assert (fixed.low, fixed.high) == pytest.approx(PPI_PY_LAM_06, abs=1e-12)
    tuned = ppi_mean(Y, FH, FU, lam=PPI_PY_LAM_HAT, small_sample=False)
    assert (tuned.low, tuned.high) == pytest.approx(PPI_PY_TUNED, abs=1e-12)
    assert tuned.estimate == pytest.approx(PPI_PY_TUNED_ESTIMATE, abs=1e-12)
    classical = mean_interval(Y, small_sample=False)
    assert (classical.low, classical.high) == pytest.approx(PPI_PY_CLASSICAL, abs=1e-12)
    # Its λ̂ divides a ddof-0 covariance by a ddof-1 variance, ours ddof 1 by ddof 1.
    n = len(Y)
    assert optimal_lambda(Y, FH, FU) == pytest.approx(PPI_PY_LAM_HAT * n / (n - 1), rel=1e-12)


def test_default_interval_is_the_jackknife_over_human_items_by_hand():
    n, big_n = len(Y), len(FU)
    cov = np.cov(Y, FH)[0, 1]
    lam = min(1.0, max(0.0, cov / ((1 + n / big_n) * np.concatenate([FH, FU]).var(ddof=1))))
    leave_out = []
    for i in range(n):
        keep = np.arange(n) != i
        y, f = Y[keep], FH[keep]
        lam_i = np.cov(y, f)[0, 1] / ((1 + (n - 1) / big_n) * np.concatenate([f, FU]).var(ddof=1))
        lam_i = min(1.0, max(0.0, lam_i))
        leave_out.append(y.mean() + lam_i * (FU.mean() - f.mean()))
    leave_out = np.array(leave_out)
    variance = (n - 1) / n * ((leave_out - leave_out.mean()) ** 2).sum() + lam**2 * FU.var(ddof=1) / big_n
    estimate = Y.mean() + lam * (FU.mean() - FH.mean())
    half = stats.t.ppf(0.975, n - 1) * math.sqrt(variance)
    got = ppi_mean(Y, FH, FU)
    assert got.lam == pytest.approx(lam, abs=1e-14)
    assert got.estimate == pytest.approx(estimate, abs=1e-14)
    assert (got.low, got.high) == pytest.approx((estimate - half, estimate + half), abs=1e-12)
    assert got.n_effective == pytest.approx(n * Y.var(ddof=1) / n / variance, rel=1e-12)


def test_a_perfect_judge_is_almost_as_good_as_labelling_everything():
    rng = np.random.default_rng(3)
    y_all = (rng.random(2040) < 0.65).astype(float)
    y, f_u = y_all[:40], y_all[40:]
    est = ppi_mean(y, y, f_u)
    everything = mean_interval(y_all)
    assert est.lam == pytest.approx(1 / (1 + 40 / 2000), rel=0.01)
    # Wider only by t_39 (3 %) and the noise of λ̂ that the jackknife counts.
    assert est.high - est.low < 1.2 * (everything.high - everything.low)
    assert est.n_effective > 25 * 40  # the 40 human votes are worth hundreds
    assert est.low <= 0.65 <= est.high


def test_a_useless_judge_gets_lambda_near_zero_and_costs_almost_nothing():
    rng = np.random.default_rng(4)
    lams, ratios = [], []
    for _ in range(50):
        y = (rng.random(200) < 0.6).astype(float)
        f = order_averaged(rng.random(200) < 0.5, rng.random(200) < 0.5)
        est = ppi_mean(y, f, order_averaged(rng.random(3000) < 0.5, rng.random(3000) < 0.5))
        lams.append(est.lam)
        ratios.append((est.high - est.low) / (est.human.high - est.human.low))
    assert np.mean(lams) < 0.1 and np.mean(np.array(lams) == 0) > 0.3
    assert np.mean(ratios) < 1.03
    constant = ppi_mean(y, np.full(200, 0.5), np.full(3000, 0.5))
    assert constant.lam == 0 and constant.fallback
    assert (constant.low, constant.high) == pytest.approx((constant.human.low, constant.human.high), abs=1e-14)


SYSTEMS = {"a": 0.4, "b": 0.0, "c": -0.4}


def simulated_items(
    rng: np.random.Generator, n_items: int = 1200, n_human: int = 120, bias_toward: str | None = None, bias: float = 0.0
) -> tuple[pd.DataFrame, dict]:
    """Three systems; the crowd votes Bernoulli(σ(s_a − s_b)); each of the judge's two calls flips
    the crowd's vote with probability 0.2 (then shifted by ``bias`` logits toward one system);
    ``n_human`` items at random carry the crowd's vote. Rows in random orientation."""
    names = sorted(SYSTEMS)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    truth = {p: 1 / (1 + math.exp(SYSTEMS[p[1]] - SYSTEMS[p[0]])) for p in pairs}
    k = rng.integers(0, len(pairs), n_items)
    a = np.array([pairs[i][0] for i in k])
    b = np.array([pairs[i][1] for i in k])
    y = (rng.random(n_items) < np.array([truth[pairs[i]] for i in k])).astype(float)
    lean = np.where(a == bias_toward, 1.0, np.where(b == bias_toward, -1.0, 0.0))
    logit = np.where(y == 1, math.log(4), -math.log(4)) + bias * lean
    calls = rng.random((2, n_items)) < 1 / (1 + np.exp(-logit))
    human = np.full(n_items, np.nan)
    chosen = rng.choice(n_items, n_human, replace=False)
    human[chosen] = y[chosen]
    items = pd.DataFrame({"system_a": a, "system_b": b, "human": human, "judge": order_averaged(calls[0], calls[1])})
    flip = rng.random(n_items) < 0.5
    items.loc[flip, ["system_a", "system_b"]] = items.loc[flip, ["system_b", "system_a"]].to_numpy()
    items.loc[flip, ["human", "judge"]] = 1 - items.loc[flip, ["human", "judge"]]
    return items, truth


def test_prediction_powered_win_rates_cover_the_crowds_value():
    """300 simulated studies × 3 pairs, ~40 human votes per pair: 900 intervals, standard error
    of the coverage about 0.007. The plug-in normal interval (ppi-python's) covers 0.928 here and
    would fail."""
    rng = np.random.default_rng(2023)
    hits, widths = [], []
    for _ in range(300):
        items, truth = simulated_items(rng)
        table = win_rates(items)
        want = np.array([truth[(a, b)] for a, b in zip(table["system_a"], table["system_b"])])
        hits += list((table["ppi_low"] <= want) & (want <= table["ppi_high"]))
        widths.append((table["ppi_high"] - table["ppi_low"]).mean() / (table["human_high"] - table["human_low"]).mean())
    assert 0.93 <= np.mean(hits) <= 0.97
    assert np.mean(widths) < 0.9


def test_win_rate_table_and_the_judges_bias_toward_a_verbose_system():
    rng = np.random.default_rng(8)
    items, truth = simulated_items(rng, n_items=30_000, n_human=6000, bias_toward="b", bias=1.0)
    table = win_rates(items)
    assert tuple(table.columns) == WIN_RATE_COLUMNS
    assert list(zip(table["system_a"], table["system_b"])) == list(truth)
    assert table["n_judge"].sum() == 30_000 and table["n_human"].sum() == 6000
    ab = table.iloc[0]  # a–b: the judge favours b, so its win rate for a is too low
    assert ab["judge_high"] < truth[("a", "b")] and ab["ppi_low"] <= truth[("a", "b")] <= ab["ppi_high"]
    bias = judge_bias(items).set_index("system")
    assert bias.loc["b", "bias_low"] > 0.02
    assert bias.loc["a", "bias_high"] < 0 and bias.loc["c", "bias_high"] < 0
    assert list(bias["n_human"]) == [
        int(((items["system_a"] == s) | (items["system_b"] == s))[items["human"].notna()].sum()) for s in "abc"
    ]


def test_order_averaging_cancels_a_position_preference():
    # A judge that always picks the first shown scores 1 for a shown first, 0 shown second.
    assert order_averaged([1.0, 1.0], [0.0, 0.0]).tolist() == [0.5, 0.5]
    assert order_averaged([1, 0.5], [1, 0]).tolist() == [1.0, 0.25]


def test_bad_items_are_refused_with_what_to_do():
    items = pd.DataFrame({"system_a": ["a"], "system_b": ["b"], "human": [1.0], "judge": [np.nan]})
    with pytest.raises(ValueError, match="no judge score"):
        win_rates(items)
    with pytest.raises(ValueError, match="lack column"):
        win_rates(items.drop(columns="judge"))
    with pytest.raises(ValueError, match="judge labels on the same items"):
        ppi_mean([1, 0, 1], [1, 0], [0.5])
    assert math.isnan(ppi_mean([1], [1], [0, 1]).estimate)
