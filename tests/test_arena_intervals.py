"""Style control's intervals undo its penalty's pull toward the mean (bradley_terry.ridge_shift)."""
from __future__ import annotations

import numpy as np

from hitkit.analysis.inference import bootstrap_interval
from hitkit.protocols.arena import bradley_terry as bt
from hitkit.protocols.arena.leaderboard import (
    Battles,
    bootstrap,
    leaderboard,
    style_intervals,
)
from hitkit.protocols.arena.simulation import Crowd, Systems, battles, uniform_pairs

SYSTEMS = Systems(tuple(f"s{i}" for i in range(6)), (-1.0, -0.6, -0.2, 0.2, 0.6, 1.0),
                  (1200.0, 800.0, 500.0, 300.0, 200.0, 100.0), (1.0, 1.2, 1.4, 1.6, 1.8, 2.0))
CROWD = Crowd(workers=150, activity_shape=3.0, taste=0.03, spammers=0.05, length_bias=6.0, tie_rate=0.2)


def _frame(n: int, seed: int = 3):
    rng = np.random.default_rng(seed)
    return battles(SYSTEMS, CROWD, uniform_pairs(6, n, rng), rng)


def _battles(n: int, seed: int = 3) -> Battles:
    return Battles.of(_frame(n, seed))


def _fit(data: Battles, reg: float) -> bt.Fit:
    return bt.style_control(data.first, data.second, data.outcome, 6, data.counts_a, data.counts_b, reg=reg)


def test_the_ridge_shift_moves_the_penalised_fit_to_the_unpenalised_one():
    data = _battles(1500)
    penalised, free = _fit(data, bt.STYLE_REG), _fit(data, 1e-9)
    theta, beta = bt.ridge_shift(data.first, data.second, data.outcome, 6, data.counts_a, data.counts_b, penalised)
    pull = penalised.theta[0] - free.theta[0]
    # Length is collinear with strength here, so the penalty pulls the extremes by whole rating points...
    assert 400 * np.abs(pull).max() > 2 and np.sign(pull[0]) == 1 and np.sign(pull[-1]) == -1
    # ...and one Newton step takes back nearly all of it, for the ratings and the style coefficients.
    assert np.abs(penalised.theta[0] + theta - free.theta[0]).max() < 0.1 * np.abs(pull).max()
    assert np.abs(penalised.beta[0] + beta - free.beta[0]).max() < 0.1 * np.abs(penalised.beta[0] - free.beta[0]).max()
    assert abs(theta.sum()) < 1e-12  # centred, as the ratings are
    # Without a penalty there is nothing to undo.
    zero, _ = bt.ridge_shift(data.first, data.second, data.outcome, 6, data.counts_a, data.counts_b, free, reg=0.0)
    assert np.abs(zero).max() == 0.0


def test_the_style_intervals_are_the_bootstrap_replicates_shifted_by_the_ridge_shift():
    data = _battles(800)
    fit = _fit(data, bt.STYLE_REG)
    lower, upper, c_lower, c_upper = style_intervals(data, fit, n_boot=60, seed=5, anchor=None)
    boot, betas = bootstrap(data, n_boot=60, seed=5, style=True)
    theta, beta = bt.ridge_shift(data.first, data.second, data.outcome, 6, data.counts_a, data.counts_b, fit)
    want_lo, want_hi = bootstrap_interval(bt.to_rating(boot, data.systems, None), data.n_clusters)
    assert np.allclose(lower, want_lo + 400 * theta) and np.allclose(upper, want_hi + 400 * theta)
    assert np.allclose(c_lower, bootstrap_interval(betas, data.n_clusters)[0] + beta)
    # The leaderboard reports these intervals (same battles, same seed) and the style table these coefficients.
    board, style, _ = leaderboard(_frame(800), n_boot=60, seed=5, anchor=None)
    rows = board.set_index("system").loc[data.systems]
    assert np.allclose(rows["rating_style_lower"], lower) and np.allclose(rows["rating_style_upper"], upper)
    assert np.allclose(style["coefficient_upper"], c_upper)


def test_the_summary_and_methods_say_the_style_intervals_are_corrected_for_the_penalty():
    from hitkit.protocols.arena import report
    from hitkit.protocols.arena.analysis import analyze_battles
    from hitkit.report.parts import ReportInput

    result = analyze_battles(_frame(400), n_boot=30, seed=7)
    assert result.summary["style_interval_correction"] == "penalty"
    methods = " ".join(report.methods(ReportInput(task="arena", tables=result.tables, summary=result.summary)))
    assert "penalty's pull toward the mean" in methods and "(H + R)⁻¹·R·φ" in methods
    unstyled = analyze_battles(_frame(400).assign(tokens_a=float("nan")), n_boot=30, seed=7)
    assert unstyled.summary["style_interval_correction"] is None
    assert "penalty's pull" not in " ".join(report.methods(ReportInput(task="arena", tables=unstyled.tables,
                                                                       summary=unstyled.summary)))
