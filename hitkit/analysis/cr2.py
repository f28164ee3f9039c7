"""Small-sample cluster-robust tests: the CR2 sandwich with Bell–McCaffrey degrees of freedom.

The worker-clustered tests of live chat, rating and pairwise are contrasts of an ordinary least-squares fit
(a difference of two systems' mean z; a win rate among decisive votes) whose observations cluster by worker.
The plain sandwich (CR1: G/(G − 1) Σ_g (x_gᵀ e_g)² with Student's t on G − 1 degrees of freedom) is too small
when a few workers do most of the work: with 30 workers of whom 3 do 10 HITs and the rest 2 it rejected
7.8 % of true nulls at 5 % (``benchmarks/coverage.py``). The correction used here is the one the
literature recommends for few or unbalanced clusters:

- **CR2** (Bell & McCaffrey 2002): each cluster's residuals are rescaled by A_g = (I − H_gg)^(−1/2) before
  they enter the sandwich, H_gg the cluster's block of the hat matrix; under independent homoskedastic errors
  this makes the variance estimate unbiased, where CR1 is biased down most for the busiest workers (whose
  rows pull the fit towards themselves, shrinking their own residuals).
- **Bell–McCaffrey degrees of freedom** (Imbens & Kolesár 2016, "Robust standard errors in small samples",
  REStat 98:701–712; Pustejovsky & Tipton 2018, JBES 36:672–683): the estimated variance of the contrast is a
  quadratic form εᵀ G Gᵀ ε in the errors, with G's column g = (I − H)_{·g} A_g X_g M c (M = (XᵀX)⁻¹, c the
  contrast); under the working model ε ~ N(0, σ² I) it is a weighted sum of χ²₁ with weights the eigenvalues λ
  of GᵀG, and the Satterthwaite approximation gives df = (Σλ)² / Σλ². With balanced clusters and an intercept
  alone this is G − 1 and the test is the one-sample t test of the cluster means; with a few busy workers it
  falls well below G − 1, which is what keeps the level.

These are the estimator and the degrees of freedom of R's clubSandwich (``vcovCR(type = "CR2")`` with
``coef_test(test = "Satterthwaite")``) for an unweighted ``lm``. ``(I − H_gg)`` has rank p at most below its
size, so its inverse square root is taken on H_gg's few non-zero eigenvalues (in the basis of the cluster's cells); where
1 − μ vanishes (a cluster that alone fixes a coefficient) the pseudo-inverse drops that direction, as
clubSandwich does. Pure numpy, on cells (a cluster's rows with the same design row), all clusters at
once; cost O(N log N + G k³ + G² p) for k distinct design rows a cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

SINGULAR = 1e-10
"""Eigenvalues of I − H_gg below this count as zero (the pseudo-inverse square root drops them)."""

PROCEDURE = "CR2 cluster-robust t with Bell–McCaffrey degrees of freedom"
"""How reports and summary.json name the tests of this module."""


@dataclass(frozen=True)
class ContrastTest:
    """A contrast cᵀβ of an OLS fit with its CR2 standard error and Bell–McCaffrey degrees of freedom."""

    estimate: float
    se: float
    df: float
    clusters: int

    def t(self, null: float = 0.0) -> float:
        """The t statistic of the hypothesis cᵀβ = ``null`` (±inf when se is 0 and the estimate differs)."""
        if self.se == 0:
            return 0.0 if self.estimate == null else math.copysign(math.inf, self.estimate - null)
        return (self.estimate - null) / self.se

    def negated(self) -> "ContrastTest":
        """The same test of the opposite contrast (−c)."""
        return ContrastTest(-self.estimate, self.se, self.df, self.clusters)

    def p_greater(self, null: float = 0.0) -> float:
        """One-sided p of cᵀβ = ``null`` against cᵀβ > ``null``."""
        return float(stats.t.sf(self.t(null), self.df))

    def p_two_sided(self, null: float = 0.0) -> float:
        """Two-sided p of cᵀβ = ``null``."""
        return float(min(1.0, 2 * stats.t.sf(abs(self.t(null)), self.df)))

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The two-sided interval that inverts :meth:`p_two_sided`: it excludes a value exactly when that
        value's two-sided p is below 1 − ``level``."""
        half = float(stats.t.ppf(0.5 + level / 2, self.df)) * self.se
        return self.estimate - half, self.estimate + half


def _cells(x: np.ndarray, index: np.ndarray, n_clusters: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows grouped into cells (one cluster, one distinct design row): each row's cell, each cell's
    (cluster, slot within its cluster) as a [2, cells] array, and the cells' design rows [cells, p]."""
    code = index.astype(np.int64)
    for column in x.T:  # cluster, then each column: one key per distinct (cluster, row), sorted by cluster
        values, inverse = np.unique(column, return_inverse=True)
        code = np.unique(code * len(values) + inverse.reshape(-1), return_inverse=True)[1].reshape(-1)
    n_cells = int(code.max()) + 1
    first_row = np.full(n_cells, len(code))
    np.minimum.at(first_row, code, np.arange(len(code)))
    owner = index[first_row]
    first = np.searchsorted(owner, np.arange(n_clusters))
    slot = np.arange(n_cells) - first[owner]
    return code, np.vstack([owner, slot]), x[first_row]


def cr2_contrast(y: np.ndarray, x: np.ndarray, cluster: np.ndarray, contrast: np.ndarray) -> ContrastTest:
    """The CR2 test of ``contrast``·β in the OLS fit of ``y`` [N] on ``x`` [N, p], clustered by ``cluster``
    [N] (any labels). NaN standard error and degrees of freedom with fewer than two clusters.

    ``x`` must have full column rank (a contrast of a rank-deficient fit is not identified): ValueError.

    Computed on cells, the rows of one cluster with the same design row: within a cluster the normalised
    cell indicators are an orthonormal basis Q_g with X_g = Q_g R_g (R_g's rows √n_c · x_c), so H_gg, A_g and
    every quantity of the test live in that small basis and all clusters are done at once (a difference of
    two systems' means has two cells a worker, whatever their number of ratings).
    """
    y = np.asarray(y, dtype=float)
    x = np.asarray(x, dtype=float).reshape(len(y), -1)
    c = np.asarray(contrast, dtype=float)
    codes, index = np.unique(np.asarray(cluster), return_inverse=True)
    index = index.reshape(-1)
    n_clusters = len(codes)
    xtx = x.T @ x
    if np.linalg.matrix_rank(xtx) < x.shape[1]:
        raise ValueError(f"cr2: the design's {x.shape[1]} columns are not linearly independent")
    m = np.linalg.inv(xtx)
    beta = m @ (x.T @ y)
    estimate = float(c @ beta)
    if n_clusters < 2:
        return ContrastTest(estimate, math.nan, math.nan, n_clusters)
    resid = y - x @ beta
    cell, (owner, slot), design = _cells(x, index, n_clusters)
    size = np.bincount(cell).astype(float)
    width = int(slot.max()) + 1
    r = np.zeros((n_clusters, width, x.shape[1]))  # R_g, padded with zero rows
    r[owner, slot] = np.sqrt(size)[:, None] * design
    f = np.zeros((n_clusters, width))  # Q_gᵀ e_g
    f[owner, slot] = np.bincount(cell, weights=resid) / np.sqrt(size)
    mu, vecs = np.linalg.eigh(np.einsum("gkp,pq,glq->gkl", r, m, r))
    one_minus = 1.0 - mu
    # (I − H_gg)^(−1/2) on the cluster's cells: 1/√(1 − μ), 0 where it vanishes (the pseudo-inverse).
    scale = np.where(one_minus > SINGULAR, 1.0 / np.sqrt(np.clip(one_minus, SINGULAR, None)), 0.0)
    w = scale * np.einsum("gkl,gk->gl", vecs, r @ (m @ c))  # Vᵀ A_g-coordinates of a_g = A_g X_g M c
    variance = float(np.sum(np.einsum("gl,gl->g", w, np.einsum("gkl,gk->gl", vecs, f)) ** 2))
    z = np.einsum("gkp,gk->gp", r, np.einsum("gkl,gl->gk", vecs, w))  # z_g = X_gᵀ a_g
    # GᵀG = diag(|a_g|²) − Z M Zᵀ (the hat matrix's share, expanded with M XᵀX M = M).
    gram = np.diag(np.sum(w * w, axis=1)) - z @ m @ z.T
    df = float(np.trace(gram) ** 2 / np.sum(gram * gram)) if np.any(gram) else math.nan
    return ContrastTest(estimate, math.sqrt(max(variance, 0.0)), df, n_clusters)
