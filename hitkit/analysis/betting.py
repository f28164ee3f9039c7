"""The bounded confidence sequence of :mod:`hitkit.analysis.sequential`: the hedged betting confidence
sequence for the mean of bounded observations (Waudby-Smith & Ramdas, "Estimating means of bounded random
variables by betting", JRSS-B 86(1), 2024, Theorem 3, with predictable plug-in bets), valid in finite
samples at every look at once whenever each observation has the same conditional mean given those before
it. Pure numpy; vectorised where a benchmark runs many studies at once."""

from __future__ import annotations

import math

import numpy as np

BET_CAP = 0.75
"""c of the bets' truncation λ ≤ c/m (or c/(1 − m)): Waudby-Smith & Ramdas (2024) use ½ or ¾."""
GRID = 2001
"""Candidate means a bounded interval is found on (evenly over the range, the null added)."""


def _bets(t, sx, ss, alpha: float, planned):
    """The predictable plug-in bet before the next observation, from the running count, sum and
    Σ(x_i − μ̂_i)²: √(2 log(2/α) / (σ̂² · planned)), σ̂² = (¼ + Σ(x_i − μ̂_i)²)/(t + 1)."""
    var = (0.25 + ss) / (t + 1)
    return np.sqrt(2 * math.log(2 / alpha) / (var * np.maximum(planned, 1.0)))


def bounded_step(state: np.ndarray, x, alpha: float, planned, m: float = 0.5) -> np.ndarray:
    """Add one observation ``x`` in [0, 1] to the hedged capital at the candidate mean ``m``
    (vectorised: ``state`` is [..., 5] = count t, Σx, Σ(x_i − μ̂_i)², log K⁺, log K⁻; returns the new
    state). K⁺ = Π(1 + λ⁺_i(x_i − m)) bets that the mean exceeds m, K⁻ = Π(1 − λ⁻_i(x_i − m)) that it
    falls short, λ⁺ = min(λ, c/m), λ⁻ = min(λ, c/(1 − m)), λ the predictable plug-in bet (:func:`_bets`),
    tuned to be narrowest near ``planned`` observations (any predictable bet keeps validity)."""
    t, sx, ss, kp, km = np.moveaxis(np.asarray(state, dtype=float), -1, 0)
    x = np.asarray(x, dtype=float)
    lam = _bets(t, sx, ss, alpha, planned)
    kp = kp + np.log1p(np.minimum(lam, BET_CAP / m) * (x - m))
    km = km + np.log1p(-np.minimum(lam, BET_CAP / (1 - m)) * (x - m))
    t, sx = t + 1, sx + x
    ss = ss + (x - (0.5 + sx) / (t + 1)) ** 2
    return np.stack([t, sx, ss, kp, km], axis=-1)


def bounded_excludes(state: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Whether the sequence at ``state`` (:func:`bounded_step`) excludes its m: (above, below) = the
    hedged capital max(K⁺, K⁻)/2 reached 1/α with K⁺ (the mean is above m) or with K⁻ (below)."""
    state = np.asarray(state, dtype=float)
    level = math.log(2 / alpha)
    kp, km = state[..., 3], state[..., 4]
    return (kp >= level) & (kp >= km), (km >= level) & (km > kp)


def bounded_interval(
    values: np.ndarray, lo: float, hi: float, alpha: float, planned: float | np.ndarray, null: float | None = None
) -> tuple[float, float]:
    """(low, high) of the two-sided (1 − α) hedged betting confidence sequence (Waudby-Smith & Ramdas
    2024, Theorem 3, predictable plug-in bets) for the mean of observations in [lo, hi] that arrive in
    this order, at its last look: the candidate means m whose hedged capital max(K⁺(m), K⁻(m))/2 stays
    below 1/α, found on :data:`GRID` points (and ``null``, so that whether it is excluded is exact).
    ``planned``: the horizon the bets are tuned to, one for all or one per observation (each fixed before
    its observation arrives). Infinite before the first observation."""
    if hi <= lo:
        raise ValueError(f"bounds [{lo}, {hi}]: the upper bound must exceed the lower one")
    scaled = (np.asarray(values, dtype=float) - lo) / (hi - lo)
    if len(scaled) and (scaled.min() < -1e-12 or scaled.max() > 1 + 1e-12):
        raise ValueError(f"an observation lies outside its bounds [{lo}, {hi}]")
    if not len(scaled):
        return -math.inf, math.inf
    x = np.clip(scaled, 0.0, 1.0)
    grid = np.linspace(0.0, 1.0, GRID)[1:-1]
    if null is not None and lo < null < hi:
        grid = np.union1d(grid, [(null - lo) / (hi - lo)])
    t = np.arange(len(x), dtype=float)
    sx = np.concatenate([[0.0], np.cumsum(x)[:-1]])
    mu = (0.5 + np.cumsum(x)) / (t + 2)
    ss = np.concatenate([[0.0], np.cumsum((x - mu) ** 2)[:-1]])
    lam = _bets(t, sx, ss, alpha, planned)[:, None]
    d = x[:, None] - grid[None, :]
    kp = np.log1p(np.minimum(lam, BET_CAP / grid) * d).sum(axis=0)
    km = np.log1p(-np.minimum(lam, BET_CAP / (1 - grid)) * d).sum(axis=0)
    inside = grid[np.maximum(kp, km) < math.log(2 / alpha)]
    if not len(inside):  # every candidate excluded (coarse grid): the interval is the best-supported point
        inside = grid[[int(np.argmin(np.maximum(kp, km)))]]
    return lo + (hi - lo) * float(inside.min()), lo + (hi - lo) * float(inside.max())


def bounded_radius(n, variance, alpha: float, planned, m: float = 0.5):
    """The half-width (in [0, 1] units) the bounded sequence is expected to have after ``n`` observations
    of this variance around the candidate mean ``m``, its bets at their planned value λ (:func:`_bets`,
    truncated as :func:`bounded_step` truncates them, at c/max(m, 1 − m)): where the capital's expected
    log-growth at distance r from the mean, to second order n(λr − λ²σ²/2), reaches log(2/α), i.e.
    r = log(2/α)/(nλ) + λσ²/2. For futility and ``undecided``, an approximation (vectorised over ``n``,
    ``variance`` and ``planned``)."""
    n = np.asarray(n, dtype=float)
    variance = np.maximum(np.asarray(variance, dtype=float), 1e-12)
    cap = BET_CAP / max(m, 1 - m)
    lam = np.minimum(np.sqrt(2 * math.log(2 / alpha) / (variance * np.maximum(planned, 1.0))), cap)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = math.log(2 / alpha) / (n * lam) + lam * variance / 2
    return np.where(n > 0, r, np.inf)
