"""The per-pair diagnosis of ``replay_ji.py --pairs``: why a sequence settles a pair of Ji et al.'s run when it
does.

Per pair of systems: the HITs that inform it (those that pass their own QC test and hold both systems),
the within-HIT differences' mean and sd, and three margins on all the data in submission order, |estimate|
/ half-width at α/45 (Bonferroni over the 45 pairs): the bounded sequence hitkit uses (the hedged betting
confidence sequence, :func:`hitkit.analysis.sequential.bounded_interval`), the predictable-plug-in
empirical-Bernstein confidence sequence of Waudby-Smith & Ramdas (JRSS-B 2024, Theorem 2: centre
Σλᵢxᵢ/Σλᵢ, radius (log(2/α) + Σ 4(xᵢ − μ̂ᵢ₋₁)²ψ(λᵢ)) / Σλᵢ, ψ(λ) = (−log(1 − λ) − λ)/4, bets tuned
like hitkit's), and, for scale only, the fixed-sample t interval at α/45 (not anytime-valid). Then, over
the replay's orders, when each sequence first excludes 0: the median share of the run's HITs (``never``
when it does not in half the orders) and the share of orders in which it has by 70 % of the HITs. A pair
with no observations (every HIT holding both systems fails its own QC test, as B–B_p and D–D_p on Free
run 2) is listed as such: it can never settle.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from hitkit.analysis.betting import BET_CAP, bounded_excludes, bounded_interval, bounded_step

ALPHA = 0.05
SHARE = 0.70


def eb_sequence(scaled: np.ndarray, alpha: float, planned: float) -> tuple[np.ndarray, np.ndarray]:
    """Centre and radius of the empirical-Bernstein confidence sequence after every observation (rows:
    orders, columns: observations in [0, 1] in arrival order); bets λᵢ = min(√(2 log(2/α)/(σ̂²ᵢ₋₁ ·
    planned)), BET_CAP) with WSR's σ̂², μ̂ (predictable)."""
    scaled = np.atleast_2d(scaled)
    t = np.arange(scaled.shape[1], dtype=float)
    mu = (0.5 + np.cumsum(scaled, axis=1)) / (t + 2)  # μ̂ after observation i
    ss = np.cumsum((scaled - mu) ** 2, axis=1)
    mu_before = np.concatenate([np.full((scaled.shape[0], 1), 0.5), mu[:, :-1]], axis=1)
    var_before = np.concatenate([np.full((scaled.shape[0], 1), 0.25), ((0.25 + ss) / (t + 2))[:, :-1]], axis=1)
    lam = np.minimum(np.sqrt(2 * math.log(2 / alpha) / (var_before * max(planned, 1.0))), BET_CAP)
    psi = -np.log1p(-lam) - lam  # 4(x − μ̂)² · ψ_E(λ), ψ_E = (−log(1 − λ) − λ)/4
    sl = np.cumsum(lam, axis=1)
    centre = np.cumsum(lam * scaled, axis=1) / sl
    radius = (math.log(2 / alpha) + np.cumsum((scaled - mu_before) ** 2 * psi, axis=1)) / sl
    return centre, radius


def first_claims(
    positions: np.ndarray, hits: np.ndarray, x: np.ndarray, each: float, planned: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per order, the share of the run's HITs at which the betting and the empirical-Bernstein sequences first
    exclude 0 (inf when never)."""
    orders, total = positions.shape
    at = positions[:, hits]
    order = np.argsort(at, axis=1)
    at = np.take_along_axis(at, order, axis=1)
    scaled = (x[order] + 1) / 2
    state = np.zeros((orders, 5))
    betting = np.zeros(scaled.shape, dtype=bool)
    for k in range(scaled.shape[1]):
        state = bounded_step(state, scaled[:, k], each, planned)
        above, below = bounded_excludes(state, each)
        betting[:, k] = above | below
    centre, radius = eb_sequence(scaled, each, planned)
    eb = np.abs(centre - 0.5) > radius

    def first(claimed):
        k = np.argmax(claimed, axis=1)
        return np.where(claimed.any(axis=1), (np.take_along_axis(at, k[:, None], axis=1)[:, 0] + 1) / total, np.inf)

    return first(betting), first(eb)


def diagnose(obs: dict, plan: dict, positions: np.ndarray, margin: dict, holm: frozenset, full: frozenset) -> None:
    """Print the per-pair table (the module's docstring), pairs by the betting sequence's margin."""
    each = ALPHA / len(obs)
    t = stats.t.ppf(1 - each / 2, df=max(2, int(np.mean([len(v) for _, v in obs.values()])) - 1))
    print(
        f"per pair (α/{len(obs)} each; margins |estimate| / half-width on all the data; 'first' = median share of "
        f"the HITs at the first claim over {len(positions)} orders, 'by70' = share of orders claimed by 70 %):"
    )
    level = math.log(2 / each)
    print(
        f"{'pair':<10} {'n':>3} {'mean':>7} {'sd':>6} {'betting':>7} {'EB':>6} {'fixed t':>7}  "
        f"{'first bet':>9} {'by70':>5}  {'first EB':>8} {'by70':>5}  {'oracle':>6}  {'sign':>5} {'by70':>5}  "
        f"holm full"
    )
    rows = []
    for (a, b), (hits, x) in obs.items():
        n = len(x)
        if not n:  # planned, but no HIT holding both passed its own QC test: the pair can never settle
            rows.append(
                (-1.0, f"{a + '-' + b:<10} {0:>3}  no observations (no HIT holding both passes QC): never settles")
            )
            continue
        scaled = (x + 1) / 2
        centre, radius = eb_sequence(scaled[None, :], each, plan[(a, b)])
        eb_margin = abs(centre[0, -1] - 0.5) / radius[0, -1]
        sd = float(np.std(x, ddof=1)) if n > 1 else math.nan
        fixed = abs(float(np.mean(x))) / (t * sd / math.sqrt(n)) if n > 1 and sd > 0 else math.nan
        bet, eb = first_claims(positions, hits, x, each, plan[(a, b)])
        # the best constant bet known in advance: observations it needs to reach 2/α, as a share of the pair's
        grid = np.linspace(-1.99, 1.99, 399)
        growth = np.log1p(grid[:, None] * (scaled[None, :] - 0.5)).mean(axis=1).max()
        oracle = level / growth / n if growth > 0 else math.inf
        sign = (np.sign(x) + 1) / 2  # the within-HIT rank: x above y 1, tie ½, below 0
        s_low, s_high = bounded_interval(sign, 0.0, 1.0, each, plan[(a, b)], 0.5)
        s_margin = abs(sign.mean() - 0.5) / ((s_high - s_low) / 2)
        s_first, _ = first_claims(positions, hits, sign * 2 - 1, each, plan[(a, b)])
        verdict = "yes" if (a, b) in holm or (b, a) in holm else "-"
        mine = "yes" if (a, b) in full or (b, a) in full else "-"
        rows.append(
            (
                margin[(a, b)],
                f"{a + '-' + b:<10} {n:>3} {np.mean(x):>7.3f} {sd:>6.3f} {margin[(a, b)]:>7.2f} "
                f"{eb_margin:>6.2f} {fixed:>7.2f}  {_median(bet):>9} {np.mean(bet <= SHARE):>5.2f}  "
                f"{_median(eb):>8} {np.mean(eb <= SHARE):>5.2f}  {oracle:>6.2f}  {s_margin:>5.2f} "
                f"{np.mean(s_first <= SHARE):>5.2f}  {verdict:>4} {mine:>4}",
            )
        )
    for _, row in sorted(rows, key=lambda r: -r[0]):
        print(row)
    low, high = bounded_interval(np.array([0.0, 1.0]), 0.0, 1.0, each, 1.0)  # the sequence's width at its start
    print(f"(the betting interval after one 0 and one 1: [{low:.2f}, {high:.2f}])")


def _median(shares: np.ndarray) -> str:
    m = float(np.median(shares))
    return "never" if not math.isfinite(m) else f"{m:.3f}"
