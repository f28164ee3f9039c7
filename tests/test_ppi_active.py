"""Inverse-probability-weighted PPI++ (hitkit.analysis.ppi_active): unbiased, covering, PPI++ when π is
constant, and a selection rule that keeps every item choosable within the budget."""

from __future__ import annotations

import numpy as np
import pytest

from hitkit.analysis.ppi import ppi_mean
from hitkit.analysis.ppi_active import (
    agreement_confidence,
    conditional_error,
    inclusion_probabilities,
    ipw_lambda,
    ipw_ppi_mean,
    two_phase,
)


def _items(rng, n=2000):
    x = rng.random(n)
    y = (rng.random(n) < x).astype(float)
    f = np.clip(x + rng.normal(0, 0.1, n), 0, 1)
    return x, y, f


def test_constant_probability_is_classic_ppi_plus_plus_exactly():
    rng = np.random.default_rng(1)
    _, y, f = _items(rng, 500)
    labelled = np.zeros(500, bool)
    labelled[rng.choice(500, 60, replace=False)] = True
    active = ipw_ppi_mean(y, f, labelled, 0.12)
    classic = ppi_mean(y[labelled], f[labelled], f[~labelled])
    assert active.estimate == pytest.approx(classic.estimate, abs=1e-12)
    # The all-items λ is PPI++'s λ_u scaled by N/N_u: the same estimator.
    assert active.lam == pytest.approx(classic.lam * 500 / 440, abs=1e-12)
    assert active.human.estimate == pytest.approx(y[labelled].mean(), abs=1e-12)
    assert active.human.se == pytest.approx(classic.human.se, rel=1e-9)
    assert active.se == pytest.approx(classic.se, rel=0.1)  # plug-in here, jackknife there


def test_uncertainty_weighted_estimate_is_unbiased_and_covers():
    rng = np.random.default_rng(2024)
    truth = 0.5  # E[x] for x uniform on [0, 1]
    estimates, covered = [], []
    for _ in range(400):
        x, y, f = _items(rng)
        pi = inclusion_probabilities(np.sqrt(x * (1 - x)) + 0.01, 150)
        labelled = rng.random(x.size) < pi
        e = ipw_ppi_mean(y, f, labelled, pi)
        estimates.append(e.estimate)
        covered.append(e.low <= truth <= e.high)
    estimates = np.array(estimates)
    assert abs(estimates.mean() - truth) < 3 * estimates.std() / np.sqrt(estimates.size)
    assert 0.92 <= np.mean(covered) <= 0.98


def test_lambda_zero_is_the_weighted_human_mean():
    rng = np.random.default_rng(3)
    _, y, f = _items(rng, 300)
    pi = rng.uniform(0.1, 0.6, 300)
    labelled = rng.random(300) < pi
    e = ipw_ppi_mean(y, f, labelled, pi, lam=0.0)
    w = 1 / pi[labelled]
    assert e.estimate == pytest.approx((w * y[labelled]).sum() / w.sum())
    assert e.estimate == e.human.estimate


def test_useless_judge_gets_lambda_near_zero():
    rng = np.random.default_rng(4)
    _, y, _ = _items(rng, 3000)
    f = rng.random(3000)
    labelled = rng.random(3000) < 0.2
    assert ipw_lambda(y, f, labelled, 0.2) < 0.15


def test_probabilities_meet_the_budget_and_the_floor():
    rng = np.random.default_rng(5)
    need = rng.exponential(size=1000) ** 2
    pi = inclusion_probabilities(need, 120, pi_min=0.03)
    assert pi.sum() == pytest.approx(120, rel=1e-9)
    assert pi.min() >= 0.03 - 1e-12 and pi.max() <= 1.0
    assert np.all(np.diff(pi[np.argsort(need)]) >= -1e-12)  # more need, no smaller π
    assert np.allclose(inclusion_probabilities(np.ones(10), 4), 0.4)
    assert np.allclose(inclusion_probabilities(np.zeros(10), 4), 0.4)


def test_impossible_budget_says_what_is_needed():
    with pytest.raises(ValueError, match=r"needs 20 <= budget <= 1000"):
        inclusion_probabilities(np.ones(1000), 10, pi_min=0.02)
    with pytest.raises(ValueError, match="not in \\(0, 1\\]"):
        ipw_ppi_mean([1.0, 0.0], [0.5, 0.5], [True, True], [0.0, 1.0])


def test_uninformative_confidence_shrinks_to_uniform():
    rng = np.random.default_rng(6)
    confidence = rng.random(4000)
    pilot = rng.random(4000) < 0.05
    sq = rng.exponential(0.1, 4000)  # errors independent of confidence
    v = conditional_error(confidence[pilot], sq[pilot], confidence)
    assert v.max() / v.min() < 1.3
    informative = (1 - confidence) ** 2 * rng.exponential(1, 4000)
    v2 = conditional_error(confidence[pilot], informative[pilot], confidence)
    assert v2[confidence < 0.2].mean() > 5 * v2[confidence > 0.8].mean()


def test_two_phase_draws_within_budget_and_floor():
    rng = np.random.default_rng(7)
    confidence = rng.random(3000)
    labelled, pi = two_phase(rng, confidence, 300, label=lambda i: (1 - confidence[i]) ** 2, pi_min=0.02)
    assert pi.sum() == pytest.approx(300, rel=1e-6)
    assert pi.min() >= 0.02 - 1e-9
    assert pi[confidence < 0.2].mean() > pi[confidence > 0.8].mean()
    assert 200 < labelled.sum() < 400


def test_agreement_confidence():
    calls = np.array([[1, 1, 1, 1], [1, 0, 1, 0], [0, 0, 0, 1]], float)
    assert agreement_confidence(calls).tolist() == [1.0, 0.0, 0.5]
