"""Style control's intervals undo its penalty's pull toward the mean (bradley_terry.ridge_shift)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from hitkit.protocols.arena import bradley_terry as bt
from hitkit.protocols.arena import robust
from hitkit.protocols.arena.leaderboard import (
    Battles,
    bootstrap,
    leaderboard,
    style_intervals,
)
from hitkit.protocols.arena.simulation import Crowd, Systems, battles, uniform_pairs

SYSTEMS = Systems(
    tuple(f"s{i}" for i in range(6)),
    (-1.0, -0.6, -0.2, 0.2, 0.6, 1.0),
    (1200.0, 800.0, 500.0, 300.0, 200.0, 100.0),
    (1.0, 1.2, 1.4, 1.6, 1.8, 2.0),
)
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


def test_the_style_intervals_are_the_corrected_fit_plus_minus_t_times_the_sandwich_error():
    data = _battles(800)
    fit = _fit(data, bt.STYLE_REG)
    lower, upper, c_lower, c_upper = style_intervals(data, fit, anchor=None)
    theta, _ = bt.ridge_shift(data.first, data.second, data.outcome, 6, data.counts_a, data.counts_b, fit)
    # Centred on the unpenalised (shifted) fit, not on FastChat's penalised point ratings.
    assert np.allclose((lower + upper) / 2, bt.to_rating(fit.theta[0] + theta, data.systems, None))
    # The coefficients' intervals are centred on the reported (FastChat's) coefficients: each lies inside.
    assert np.allclose((c_lower + c_upper) / 2, fit.beta[0])
    assert ((c_lower <= fit.beta[0]) & (fit.beta[0] <= c_upper)).all()
    features, _, _ = bt.style_features(data.counts_a, data.counts_b)
    x = bt.design(data.first, data.second, 6, features)
    cov = robust.covariance(
        x, data.outcome, np.concatenate([fit.theta[0], fit.beta[0]]), data.clusters, data.n_clusters, 6
    )
    centred = np.eye(6) - 1 / 6
    se = 400 * np.sqrt(np.diag(centred @ cov[:6, :6] @ centred))
    t = stats.t.ppf(0.975, data.n_clusters - 1)
    assert np.allclose((upper - lower) / 2, t * se) and np.allclose(
        (c_upper - c_lower) / 2, t * np.sqrt(np.diag(cov)[6:])
    )
    # The leaderboard reports these intervals and the style table these coefficients' intervals.
    board, style, _ = leaderboard(_frame(800), n_boot=60, seed=5, anchor=None)
    rows = board.set_index("system").loc[data.systems]
    assert np.allclose(rows["rating_style_lower"], lower) and np.allclose(rows["rating_style_upper"], upper)
    assert np.allclose(style["coefficient_upper"], c_upper)


def test_the_sandwich_error_is_the_spread_of_the_worker_bootstrap():
    data = _battles(1500)
    fit = _fit(data, bt.STYLE_REG)
    lower, upper, _, _ = style_intervals(data, fit, anchor=None)
    se = (upper - lower) / 2 / stats.t.ppf(0.975, data.n_clusters - 1)
    boot, _ = bootstrap(data, n_boot=300, seed=2, style=True)
    spread = 400 * boot.std(axis=0, ddof=1)
    assert np.all(np.abs(se / spread - 1) < 0.15), (se, spread)
    # Resampling battles instead of workers would miss the workers' shared taste: clustering by battle is narrower.
    by_battle = Battles.of(_frame(1500).assign(worker_id=[f"b{i}" for i in range(1500)]))
    lo_b, hi_b, _, _ = style_intervals(by_battle, fit, anchor=None)
    assert np.mean(hi_b - lo_b) < np.mean(upper - lower)


def test_an_anchored_systems_interval_is_its_point_and_the_others_are_relative_to_it():
    data = _battles(800)
    fit = _fit(data, bt.STYLE_REG)
    lower, upper, _, _ = style_intervals(data, fit, anchor=("s2", 1114.0))
    assert lower[2] == upper[2] == 1114.0
    assert np.all(np.delete(upper - lower, 2) > 0)
    theta, _ = bt.ridge_shift(data.first, data.second, data.outcome, 6, data.counts_a, data.counts_b, fit)
    assert np.allclose((lower + upper) / 2, bt.to_rating(fit.theta[0] + theta, data.systems, ("s2", 1114.0)))


def test_the_summary_and_methods_say_the_style_intervals_are_corrected_for_the_penalty():
    from hitkit.protocols.arena import report
    from hitkit.protocols.arena.analysis import analyze_battles
    from hitkit.report.parts import ReportInput

    result = analyze_battles(_frame(400), n_boot=30, seed=7)
    assert result.summary["style_interval_correction"] == "penalty"
    assert result.summary["style_interval_method"] == "sandwich"
    methods = " ".join(report.methods(ReportInput(task="arena", tables=result.tables, summary=result.summary)))
    assert "penalty's pull toward the mean" in methods and "(H + R)⁻¹·R·φ" in methods
    assert "cluster-robust (sandwich, CR1) standard error" in methods
    unstyled = analyze_battles(_frame(400).assign(tokens_a=float("nan")), n_boot=30, seed=7)
    assert unstyled.summary["style_interval_correction"] is None
    assert unstyled.summary["style_interval_method"] is None
    assert "penalty's pull" not in " ".join(
        report.methods(ReportInput(task="arena", tables=unstyled.tables, summary=unstyled.summary))
    )


def test_a_style_rating_never_lies_outside_its_own_interval_when_a_system_wins_every_battle():
    """A system that won every battle: the penalty pulls its style rating far from the target its interval is
    built around; the interval reaches the reported rating (METHODS: no interval excludes its estimate)."""
    import numpy as np
    import pandas as pd

    from hitkit.protocols.arena.leaderboard import leaderboard

    rng = np.random.default_rng(3)
    rows = []
    for i in range(48):
        a, b = [("anna", "bert"), ("bert", "cleo"), ("anna", "cleo")][i % 3]
        winner = "a" if a == "anna" or (a == "bert" and b == "cleo") else "b"
        rows.append(
            {
                "worker_id": f"w{i % 6}",
                "system_a": a,
                "system_b": b,
                "vote": winner,
                "tokens_a": int(rng.integers(20, 200)),
                "tokens_b": int(rng.integers(20, 200)),
                **{f"{f}_count_{s}": int(rng.integers(0, 4)) for f in ("header", "list", "bold") for s in "ab"},
            }
        )
    board, _, _ = leaderboard(pd.DataFrame(rows), n_boot=50, seed=0)
    inside = (board["rating_style_lower"] <= board["rating_style"] + 1e-9) & (
        board["rating_style"] <= board["rating_style_upper"] + 1e-9
    )
    assert inside.all(), board[["system", "rating_style", "rating_style_lower", "rating_style_upper"]]
