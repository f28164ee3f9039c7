"""Spot The Bot survival (METHODS §2): interval data, Turnbull, generalized log-rank, Holm."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lifelines import KaplanMeierFitter
from lifelines.statistics import logrank_test
from scipy import stats

from hitkit.protocols.spot_the_bot import figures
from hitkit.protocols.spot_the_bot.cox import cox_by_system, cox_interval
from hitkit.protocols.spot_the_bot.logrank import (
    clustered_logrank,
    generalized_logrank,
    holm,
    imputed_logrank,
    logrank_residuals,
    robust_score_variance,
    survival_tests,
)
from hitkit.protocols.spot_the_bot.survival import (
    survival_curve,
    survival_curves,
    survival_data,
    turnbull,
    turnbull_intervals,
)
from tests.test_analysis_spot_the_bot import frame, segment, simulate

INF = np.inf


# --- interval data ------------------------------------------------------------------------------


def test_survival_data_hand_worked():
    ann = frame(
        segment("w1", "c1", "A", "B", "bot", "human", k=3, features=(1, 0, -1)),
        segment("w2", "c1", "A", "B", "unsure", "bot", k=2),
        segment("w3", "c2", "human", "B", "bot", "unsure", k=1),
    )
    data = survival_data(ann)
    assert list(data.columns) == [
        "system",
        "left",
        "right",
        "fluency",
        "sensibleness",
        "specificity",
        "conversation",
        "worker",
    ]
    assert set(data["conversation"]) == {"s1/c1", "s1/c2"}
    rows = {tuple(r) for r in data[["system", "left", "right"]].itertuples(index=False)}
    assert rows == {("A", 0.0, 3.0), ("B", 3.0, INF), ("A", 2.0, INF), ("B", 0.0, 2.0), ("B", 1.0, INF)}
    assert len(data) == 5  # the human speaker is no bot
    first_a = data[(data["system"] == "A") & (data["right"] == 3.0)].iloc[0]
    first_b = data[(data["system"] == "B") & (data["left"] == 3.0)].iloc[0]
    assert tuple(first_a[["fluency", "sensibleness", "specificity"]]) == (1, 0, -1)
    assert tuple(first_b[["fluency", "sensibleness", "specificity"]]) == (-1, 0, 1)


# --- Turnbull -----------------------------------------------------------------------------------


def test_turnbull_intervals_textbook_example():
    # (1,3], (2,4], (5,6]: innermost intervals (2,3] and (5,6], masses 2/3 and 1/3.
    fit = turnbull(np.array([1.0, 2, 5]), np.array([3.0, 4, 6]))
    assert list(zip(fit["left"], fit["right"])) == [(2.0, 3.0), (5.0, 6.0)]
    np.testing.assert_allclose(fit["mass"], [2 / 3, 1 / 3], atol=1e-9)


def test_turnbull_spot_the_bot_shape_hand_worked():
    # Spotted within 1 or within 2, survived 1 or 2, spotted within 3. The likelihood
    # a(a+b)(b+c)c with a+b+c=1 is largest at a = c = 1/2, b = 0 (a mass on the boundary).
    fit = turnbull(np.array([0.0, 0, 1, 2, 0]), np.array([1.0, 2, INF, INF, 3]))
    assert list(zip(fit["left"], fit["right"])) == [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]
    np.testing.assert_allclose(fit["mass"], [0.5, 0.0, 0.5], atol=1e-9)
    # Spotted within 1 twice, survived 1 once, spotted within 2 once. Innermost intervals (0,1]
    # and (1,2] (the survivor's (1,inf) holds only the second); likelihood a²·b·(a+b) = a²(1−a)
    # is largest at a = 2/3.
    fit = turnbull(np.array([0.0, 0, 1, 0]), np.array([1.0, 1, INF, 2]))
    intervals, alpha = turnbull_intervals(np.array([0.0, 0, 1, 0]), np.array([1.0, 1, INF, 2]))
    assert list(zip(intervals["left"], intervals["right"])) == [(0.0, 1.0), (1.0, 2.0)]
    assert alpha.tolist() == [[True, False], [True, False], [False, True], [True, True]]
    np.testing.assert_allclose(fit["mass"], [2 / 3, 1 / 3], atol=1e-9)


def censored_sample(seed: int, n: int):
    rng = np.random.default_rng(seed)
    t, c = rng.integers(1, 8, n).astype(float), rng.integers(1, 8, n).astype(float)
    observed = t <= c
    return np.minimum(t, c), observed


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_turnbull_is_kaplan_meier_on_exact_and_right_censored_data(seed):
    time, observed = censored_sample(seed, 80)
    curve = survival_curve(time, np.where(observed, time, INF))
    km = KaplanMeierFitter().fit(time, observed).survival_function_["KM_estimate"]
    km = km[km.index.isin(curve["time"])]
    np.testing.assert_allclose(curve.set_index("time")["survival"].loc[km.index], km, atol=1e-8)
    # Every event time of Kaplan–Meier is a point of the curve.
    assert set(time[observed]) <= set(curve["time"])


intervals_strategy = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4), st.booleans()), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(intervals_strategy)
def test_turnbull_gives_a_valid_survival_function(rows):
    left = np.array([float(a) for a, _, _ in rows])
    right = np.array([INF if censored else float(max(a + w, 1)) for a, w, censored in rows])
    fit = turnbull(left, right)
    assert (fit["mass"] >= -1e-12).all()
    assert fit["mass"].sum() == pytest.approx(1.0)
    curve = survival_curve(left, right)
    assert curve["survival"].iloc[0] == 1.0 and curve["time"].iloc[0] == 0.0
    assert (np.diff(curve["survival"]) <= 1e-12).all() and (curve["survival"] >= 0).all()
    assert curve["time"].is_monotonic_increasing
    # The masses maximise the likelihood: no small move towards another distribution helps.
    _, alpha = turnbull_intervals(left, right)
    mass = fit["mass"].to_numpy()

    def loglik(m):
        return np.log(alpha.astype(float) @ m).sum()

    rng = np.random.default_rng(len(rows))
    for _ in range(5):
        other = rng.dirichlet(np.ones(len(mass)))
        assert loglik(0.99 * mass + 0.01 * other) <= loglik(mass) + 1e-7


def test_turnbull_rejects_bad_intervals():
    with pytest.raises(ValueError, match="interval 1"):
        turnbull(np.array([0.0, 3.0]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="left finite"):
        turnbull(np.array([INF]), np.array([INF]))
    with pytest.raises(ValueError, match="right > 0"):
        turnbull(np.array([0.0]), np.array([0.0]))


def test_survival_curves_per_system_and_figure(tmp_path):
    study = simulate({"easy": 0.85, "hard": 0.15}, n_conv=30, seed=1)
    curves = survival_curves(survival_data(study))
    assert list(curves.columns) == ["system", "time", "survival"]
    assert set(curves["system"]) == {"easy", "hard"}
    at_3 = curves[curves["time"] == 3.0].set_index("system")["survival"]
    assert at_3["easy"] < at_3["hard"]
    assert figures.survival(curves)[:4] == b"\x89PNG"


# --- generalized log-rank and Holm --------------------------------------------------------------


def spotting(rng, hazard: float, n: int, segments=(1, 2, 3)):
    """Geometric spotting time per exchange; each annotation sees one of ``segments`` exchanges."""
    t = rng.geometric(hazard, n).astype(float)
    k = rng.choice(np.asarray(segments, dtype=float), n)
    spotted = t <= k
    return np.where(spotted, 0.0, k), np.where(spotted, k, INF)


def two_groups(rng, hazard_a, hazard_b, n=150, segments=(1, 2, 3)):
    la, ra = spotting(rng, hazard_a, n, segments)
    lb, rb = spotting(rng, hazard_b, n, segments)
    return np.r_[la, lb], np.r_[ra, rb], np.r_[np.ones(n, bool), np.zeros(n, bool)]


def test_logrank_size_under_the_null():
    # 200 seeded null data sets of Spot-The-Bot shape (segments of 1, 2, 3, 5 exchanges): the
    # rejection rate at 5 % lies in a band of about ±3 binomial standard errors around 5 %.
    # (benchmarks/logrank_validation.py runs the same check on 1000 data sets.)
    rng = np.random.default_rng(11)
    p = np.array(
        [generalized_logrank(*two_groups(rng, 0.3, 0.3, segments=(1, 2, 3, 5)), seed=r)[1] for r in range(200)]
    )
    assert 0.015 <= (p < 0.05).mean() <= 0.10
    assert p.max() > 0.5  # not degenerate
    # Uniform-ish p-values: the lower half holds about half of them (not all piled near 1).
    assert 0.35 <= (p < 0.5).mean() <= 0.65


def test_logrank_detects_a_clear_difference():
    rng = np.random.default_rng(12)
    chi2, p = generalized_logrank(*two_groups(rng, 0.5, 0.15), seed=0)
    assert p < 0.01 and chi2 > 6.6


def test_logrank_is_the_log_rank_test_on_exact_data():
    # Without interval censoring there is nothing to impute: the statistic is the log-rank test's.
    time_a, seen_a = censored_sample(5, 60)
    time_b, seen_b = censored_sample(6, 60)
    time_b = np.minimum(time_b + seen_b, 8)
    left = np.r_[time_a, time_b]
    right = np.where(np.r_[seen_a, seen_b], left, INF)
    chi2, p = generalized_logrank(left, right, np.r_[np.ones(60, bool), np.zeros(60, bool)])
    want = logrank_test(time_a, time_b, event_observed_A=seen_a, event_observed_B=seen_b)
    assert chi2 == pytest.approx(want.test_statistic, rel=1e-6)
    assert p == pytest.approx(want.p_value, rel=1e-5)


def test_logrank_score_is_the_expected_imputed_score_and_variance_subtracts_the_between_part():
    left, right, group = two_groups(np.random.default_rng(8), 0.3, 0.45)
    u, u_imp, v_imp = imputed_logrank(left, right, group, 4000, seed=1)
    # Sun's U (expected counts under the pooled Turnbull fit) is close to the mean score of
    # data sets imputed from that fit.
    assert u == pytest.approx(u_imp.mean(), abs=0.1 * u_imp.std())
    assert u_imp.std() > 0 and (v_imp > 0).all()
    # Huang, Lee & Yu's correction of Zhao & Sun's variance: mean within-imputation variance
    # minus the (ddof 1) between-imputation variance of the imputed scores.
    _, small_u, small_v = imputed_logrank(left, right, group, 20, seed=2)
    chi2, p = generalized_logrank(left, right, group, n_imputations=20, seed=2)
    variance = small_v.mean() - small_u.var(ddof=1)
    assert 0 < variance < small_v.mean()
    assert chi2 == pytest.approx(u**2 / variance, rel=1e-12)
    assert p == pytest.approx(stats.chi2.sf(chi2, 1), rel=1e-12)


def test_logrank_falls_back_to_the_within_variance_when_the_difference_is_not_positive():
    # Hand-picked tiny data set where, with M = 2, the two imputed scores (−1 and 0.5) spread
    # more (between variance 1.125) than the mean within variance (≈ 0.898).
    left = np.array([0, 0, 0, 2, 1, 1, 1, 0, 0, 0, 1, 0], dtype=float)
    right = np.array([2, 1, 1, INF, INF, INF, INF, 2, 1, 2, INF, 3])
    group = np.arange(12) < 6
    u, u_imp, v_imp = imputed_logrank(left, right, group, 2, seed=23)
    assert v_imp.mean() - u_imp.var(ddof=1) <= 0 < v_imp.mean()
    chi2, _ = generalized_logrank(left, right, group, n_imputations=2, seed=23)
    assert chi2 == pytest.approx(u**2 / v_imp.mean(), rel=1e-12)


def test_logrank_is_seeded_and_checks_imputations():
    data = two_groups(np.random.default_rng(3), 0.3, 0.4)
    assert generalized_logrank(*data, seed=4) == generalized_logrank(*data, seed=4)
    with pytest.raises(ValueError, match="n_imputations"):
        generalized_logrank(*data, n_imputations=1)


def test_two_systems_solved_by_hand():
    # A is spotted within 1 exchange by both annotators; B survives 1 exchange both times.
    ann = frame(segment("w1", "c1", "A", "B", "bot", "human", k=1), segment("w2", "c1", "A", "B", "bot", "unsure", k=1))
    data = survival_data(ann)
    curves = survival_curves(data).set_index(["system", "time"])["survival"]
    assert curves[("A", 0.0)] == 1.0 and curves[("A", 1.0)] == pytest.approx(0.0, abs=1e-9)
    assert list(curves.loc["B"].index) == [0.0]  # nothing known about B beyond 1 exchange
    # Pooled Turnbull: (0,1] and (1,inf), mass 1/2 each. Sun's U for A: at (0,1] A has 2 of the
    # 4 at risk and both expected failures, 2 − 2·2/4 = 1; at (1,inf) A has no one at risk: 0.
    # Imputed data (every imputation alike): A fails at 1 twice, B is censored at 1 twice, so
    # the between variance is 0 and V = n_A n_B d (n − d) / (n² (n − 1)) = 2·2·2·2 / (16·3) = 1/3.
    u, u_imp, v_imp = imputed_logrank(
        data["left"].to_numpy(), data["right"].to_numpy(), (data["system"] == "A").to_numpy(), 5, seed=0
    )
    assert u == pytest.approx(1.0) and np.allclose(u_imp, 1.0) and np.allclose(v_imp, 1 / 3)
    table = survival_tests(data, n_imputations=5)
    row = table.iloc[0]
    assert (row["system_a"], row["system_b"]) == ("A", "B")
    assert row["statistic"] == pytest.approx(3.0)
    # One pair: nothing to correct, whichever correction.
    assert row["p_value"] == pytest.approx(stats.chi2.sf(3.0, 1)) == pytest.approx(row["p_adjusted"])
    assert row["correction"] == "bonferroni" and row["variance"] == "model (imputation)"


def test_holm_hand_worked():
    np.testing.assert_allclose(holm(np.array([0.01, 0.04, 0.03, 0.5])), [0.04, 0.09, 0.09, 0.5])
    assert list(holm(np.array([0.3, 0.3]))) == [0.6, 0.6]


def test_survival_tests_every_pair():
    study = simulate({"easy": 0.85, "twin1": 0.4, "twin2": 0.4}, n_conv=40, seed=2)
    table = survival_tests(survival_data(study), n_imputations=20, seed=1)
    assert list(table.columns) == [
        "system_a",
        "system_b",
        "statistic",
        "p_value",
        "p_adjusted",
        "correction",
        "variance",
        "statistic_model",
        "p_model",
    ]
    assert [tuple(r) for r in table[["system_a", "system_b"]].itertuples(index=False)] == [
        ("easy", "twin1"),
        ("easy", "twin2"),
        ("twin1", "twin2"),
    ]
    by = table.set_index(["system_a", "system_b"])
    assert by.loc[("easy", "twin1"), "p_adjusted"] < 0.01
    assert by.loc[("twin1", "twin2"), "p_value"] > 0.01
    # Bonferroni (the default, the paper's): three pairs, p × 3 capped at 1.
    np.testing.assert_allclose(table["p_adjusted"], np.minimum(1, 3 * table["p_value"]))
    holm_table = survival_tests(survival_data(study), n_imputations=20, seed=1, correction="holm")
    np.testing.assert_allclose(holm_table["p_adjusted"], holm(table["p_value"].to_numpy()))
    assert (holm_table["p_adjusted"] <= table["p_adjusted"]).all()
    pd.testing.assert_frame_equal(table, survival_tests(survival_data(study), n_imputations=20, seed=1))


def test_logrank_residuals_sum_to_the_score_and_give_the_usual_variance():
    rng = np.random.default_rng(5)
    n = 400
    k = rng.choice([1.0, 2.0, 3.0], n)
    spotted = rng.random(n) < 0.5
    left, right = np.where(spotted, 0.0, k), np.where(spotted, k, INF)
    group = rng.random(n) < 0.5
    u = logrank_residuals(left, right, group)
    score, _, v_imp = imputed_logrank(left, right, group, 20, seed=0)
    assert u.sum() == pytest.approx(score, abs=1e-9)
    # One observation per cluster: the sandwich estimates the same variance as the model.
    robust = robust_score_variance(u, np.arange(n))
    assert 0.8 < robust / v_imp.mean() < 1.25


def test_clustered_logrank_is_unmoved_by_copies_the_naive_one_is_fooled_by():
    rng = np.random.default_rng(6)
    n = 120
    k = rng.choice([2.0, 3.0, 5.0], n)
    spotted = rng.random(n) < np.where(np.arange(n) < n // 2, 0.45, 0.6)
    left, right = np.where(spotted, 0.0, k), np.where(spotted, k, INF)
    group = np.arange(n) < n // 2
    chi2, _ = clustered_logrank(left, right, group, np.arange(n))
    # Every annotation three times, in one conversation: no new information.
    rep = np.repeat(np.arange(n), 3)
    chi2_copies, _ = clustered_logrank(left[rep], right[rep], group[rep], rep)
    assert chi2_copies == pytest.approx(chi2, rel=1e-9)
    naive, _ = generalized_logrank(left, right, group, n_imputations=30, seed=0)
    naive_copies, _ = generalized_logrank(left[rep], right[rep], group[rep], n_imputations=30, seed=0)
    assert naive_copies > 2.5 * naive


def test_survival_tests_with_a_cluster_use_the_robust_variance():
    study = simulate({"easy": 0.85, "twin1": 0.4}, n_conv=30, seed=4)
    data = survival_data(study)
    table = survival_tests(data, n_imputations=20, seed=1, cluster="conversation")
    row = table.iloc[0]
    assert row["variance"] == "robust (conversation)"
    pair = data[data["system"].isin(["easy", "twin1"])]
    want, _ = clustered_logrank(
        pair["left"].to_numpy(),
        pair["right"].to_numpy(),
        (pair["system"] == "easy").to_numpy(),
        pair["conversation"].to_numpy(),
    )
    assert row["statistic"] == pytest.approx(want)
    naive = survival_tests(data, n_imputations=20, seed=1)
    assert row["statistic_model"] == pytest.approx(naive.iloc[0]["statistic"])
    with pytest.raises(ValueError, match="cluster"):
        survival_tests(data, cluster="segment")


# --- Cox proportional hazards -------------------------------------------------------------------


def ph_sample(rng, beta, n, base=0.4):
    """Exponential spotting times with hazard base · exp(x β), seen in segments of 1–3."""
    x = rng.integers(-1, 2, size=(n, len(beta))).astype(float)
    t = rng.exponential(1 / (base * np.exp(x @ np.asarray(beta))))
    k = rng.choice([1.0, 2.0, 3.0], n)
    spotted = t <= k
    return np.where(spotted, 0.0, k), np.where(spotted, k, INF), x


def test_cox_recovers_a_known_effect():
    left, right, x = ph_sample(np.random.default_rng(21), [0.8, 0.0, -0.5], 3000)
    table = cox_interval(left, right, x, ["fluency", "sensibleness", "specificity"])
    by = table.set_index("feature")
    assert by.loc["fluency", "coef"] == pytest.approx(0.8, abs=0.12)
    assert by.loc["specificity", "coef"] == pytest.approx(-0.5, abs=0.12)
    assert abs(by.loc["sensibleness", "coef"]) < 0.12
    assert by.loc["fluency", "p_value"] < 1e-6 and by.loc["specificity", "p_value"] < 1e-6
    assert by.loc["sensibleness", "p_value"] > 0.01
    np.testing.assert_allclose(by["hazard_ratio"], np.exp(by["coef"]))


def test_cox_standard_errors_match_the_spread_of_estimates():
    rng = np.random.default_rng(22)
    fits = [cox_interval(*ph_sample(rng, [0.5], 500)) for _ in range(30)]
    coefs = np.array([f["coef"].iloc[0] for f in fits])
    ses = np.array([f["se"].iloc[0] for f in fits])
    assert abs(coefs.mean() - 0.5) < 0.05
    assert 0.7 < coefs.std(ddof=1) / ses.mean() < 1.4


def test_cox_by_system_and_constant_features():
    rng = np.random.default_rng(23)
    left, right, x = ph_sample(rng, [0.7, 0.0, 0.0], 800)
    x[:, 2] = 0  # never varies: no estimate
    data = pd.DataFrame(
        {
            "system": "A",
            "left": left,
            "right": right,
            "fluency": x[:, 0],
            "sensibleness": x[:, 1],
            "specificity": x[:, 2],
        }
    )
    table = cox_by_system(data)
    assert list(table.columns) == [
        "system",
        "feature",
        "coef",
        "se",
        "hazard_ratio",
        "p_value",
        "p_adjusted",
        "correction",
        "variance",
        "se_model",
        "p_model",
    ]
    assert (table["variance"] == "model").all()
    np.testing.assert_allclose(
        table["p_adjusted"].iloc[:2], np.minimum(1, 2 * table["p_value"].iloc[:2])
    )  # 2 real tests
    assert list(table["feature"]) == ["fluency", "sensibleness", "specificity"]
    assert table["coef"].iloc[0] > 0.4 and table["p_value"].iloc[0] < 1e-4
    assert table.iloc[2][["coef", "p_value"]].isna().all()


def test_cox_robust_se_matches_model_se_without_clustering_and_sees_copies():
    rng = np.random.default_rng(24)
    left, right, x = ph_sample(rng, [0.5, -0.3], 1500)
    table = cox_interval(left, right, x, cluster=np.arange(len(left)))
    ratio = table["se"] / table["se_model"]
    assert ((ratio > 0.85) & (ratio < 1.15)).all()
    # Each observation four times within its own cluster: the model-based SE halves (it thinks
    # there is 4× the data), the cluster-robust SE does not move.
    rep = np.repeat(np.arange(len(left)), 4)
    copies = cox_interval(left[rep], right[rep], x[rep], cluster=rep)
    np.testing.assert_allclose(copies["coef"], table["coef"], atol=1e-4)
    np.testing.assert_allclose(copies["se_model"], table["se_model"] / 2, rtol=0.02)
    np.testing.assert_allclose(copies["se"], table["se"], rtol=0.02)
    assert (copies["variance"] == "robust").all()


def test_cox_fit_that_does_not_converge_is_a_stated_failure_without_p_value():
    # fluency separates perfectly: every annotation rated +1 was spotted at once, every −1 never, so the
    # likelihood grows without end as the coefficient runs off; a Wald p from where BFGS stopped was 0
    rng = np.random.default_rng(24)
    x = rng.choice([-1.0, 1.0], size=(200, 1))
    k = rng.choice([1.0, 2.0, 3.0], 200)
    left, right = np.where(x[:, 0] > 0, 0.0, k), np.where(x[:, 0] > 0, k, INF)
    row = cox_interval(left, right, x, ["fluency"]).iloc[0]
    assert row["variance"].startswith("none: the fit did not converge")
    assert np.isnan(row["p_value"]) and np.isnan(row["coef"]) and np.isnan(row["se"])
    data = pd.DataFrame(
        {
            "system": "A",
            "left": left,
            "right": right,
            "fluency": x[:, 0],
            "sensibleness": 0.0,
            "specificity": 0.0,
            "conversation": np.arange(200) // 4,
        }
    )
    table = cox_by_system(data, cluster="conversation")
    assert table.iloc[0]["variance"].startswith("none:") and np.isnan(table.iloc[0]["p_adjusted"])
