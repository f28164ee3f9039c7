"""Humans where the judge is unsure: the uncertainty rule against the uniform rule (``benchmarks/judge_ppi.py``
runs it; :mod:`hitkit.analysis.ppi_active`).

The simulated world (one replication; seeded):

- **Items**: ``N_ITEMS`` comparisons of one pair of systems. A share ``HARD`` of them is *hard*: the
  crowd's probability of preferring system a is uniform on [0.2, 0.8]. The others are *easy*: 0.99 for a
  (60 % of them) or 0.01. Y = the mean of three crowd votes (hitkit's three workers per prompt). The
  target is the crowd's win rate θ = E[Y] over items.
- **Judge whose errors concentrate on hard items** (``informative``): it reports a probability that a
  wins (from its log-probabilities): on easy items uniform in [0.95, 1] toward the crowd's side, on
  hard ones 0.5 + 0.3·(p − 0.5) + N(0, 0.08²), clipped: its verdict is wrong on many hard items and
  it is unsure there. Confidence = |2f − 1|.
- **Judge whose confidence says nothing** (``uninformative``): the same judge scores, but the
  confidence it reports is a uniform random number, independent of everything.

Rules, each with an expected ``BUDGET`` human-labelled items: *uniform* — every item Bernoulli(B/N);
*uncertainty* — :func:`~hitkit.analysis.ppi_active.two_phase` (a 30 % uniform pilot, then π ∝ the
square root of the judge's squared error by confidence, estimated cross-fitted on the other half's
pilot, bounded below). Both are analysed with :func:`~hitkit.analysis.ppi_active.ipw_ppi_mean`
(with a constant π it is PPI++'s estimate).

Reported per world: ``width_ratio``: mean width of the uncertainty rule's intervals / the uniform
rule's, both at the same budget; ``labels_ratio``: the budget, as a share of the uniform rule's,
at which the uncertainty rule's mean width equals the uniform rule's (interpolated on the log scale
between budgets of the grid ``GRID``, then run again at that budget); ``coverage``: share of the
uncertainty rule's intervals, at that equal-width budget, that contain θ.
"""

from __future__ import annotations

import numpy as np

from hitkit.analysis.ppi_active import ipw_ppi_mean, two_phase

N_ITEMS, BUDGET, HARD, PILOT = 5000, 600, 0.2, 0.3
EASY_A, P_EASY = 0.6, 0.99
THETA = (1 - HARD) * (EASY_A * P_EASY + (1 - EASY_A) * (1 - P_EASY)) + HARD * 0.5
GRID = (0.55, 0.65, 0.8, 1.0, 1.15)
"""Budgets (shares of ``BUDGET``) the uncertainty rule is run at to find its equal-width budget."""


def world(rng: np.random.Generator, informative: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Y, f, confidence) of one simulated study's items (module docstring)."""
    hard = rng.random(N_ITEMS) < HARD
    p = np.where(hard, rng.uniform(0.2, 0.8, N_ITEMS), np.where(rng.random(N_ITEMS) < EASY_A, P_EASY, 1 - P_EASY))
    y = rng.binomial(3, p) / 3
    unsure = np.clip(0.5 + 0.3 * (p - 0.5) + rng.normal(0, 0.08, N_ITEMS), 0, 1)
    sure = np.where(p > 0.5, rng.uniform(0.95, 1, N_ITEMS), rng.uniform(0, 0.05, N_ITEMS))
    f = np.where(hard, unsure, sure)
    confidence = np.abs(2 * f - 1) if informative else rng.random(N_ITEMS)
    return y, f, confidence


def _active(rng, y, f, confidence, budget: float) -> tuple[float, bool, int]:
    labelled, pi = two_phase(rng, confidence, budget, label=lambda i: (y[i] - f[i]) ** 2, pilot=PILOT)
    e = ipw_ppi_mean(y, f, labelled, pi)
    return e.high - e.low, bool(e.low <= THETA <= e.high), int(labelled.sum())


def _runs(seed: int, reps: int, informative: bool, shares) -> tuple[np.ndarray, np.ndarray]:
    """Uniform-rule (width, covered) per replication and the uncertainty rule's per budget share."""
    rng = np.random.default_rng(seed)
    uniform, active = [], []
    for _ in range(reps):
        y, f, confidence = world(rng, informative)
        labelled = rng.random(N_ITEMS) < BUDGET / N_ITEMS
        e = ipw_ppi_mean(y, f, labelled, BUDGET / N_ITEMS)
        uniform.append((e.high - e.low, e.low <= THETA <= e.high))
        active.append([_active(rng, y, f, confidence, BUDGET * s) for s in shares])
    return np.array(uniform, dtype=float), np.array(active, dtype=float)


def equal_width_share(widths: np.ndarray, target: float, shares=GRID) -> float:
    """The budget share at which the mean width crosses ``target``, interpolated on log–log scales
    (widths fall with the budget); the grid's end where it does not cross."""
    logw, logs = np.log(widths), np.log(np.asarray(shares))
    order = np.argsort(logw)
    return float(np.exp(np.interp(np.log(target), logw[order], logs[order])))


def compare(seed: int, reps: int, informative: bool) -> dict[str, float]:
    """One world's figures: width ratio at equal budget, labels ratio and coverage at equal width."""
    uniform, grid = _runs(seed, reps, informative, GRID)
    target = uniform[:, 0].mean()
    share = equal_width_share(grid[:, :, 0].mean(axis=0), target)
    _, at = _runs(seed + 1, reps, informative, (share,))
    return {
        "width_ratio": grid[:, GRID.index(1.0), 0].mean() / target,
        "labels_ratio": float(at[:, 0, 2].mean() / BUDGET),
        "coverage": float(at[:, 0, 1].mean()),
        "width_at_share": float(at[:, 0, 0].mean() / target),
        "coverage_uniform": float(uniform[:, 1].mean()),
        "coverage_equal_budget": float(grid[:, GRID.index(1.0), 1].mean()),
    }
