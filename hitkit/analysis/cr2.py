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
size, so its inverse square root is taken on H_gg's few non-zero eigenvalues (a thin QR of X_g); where
1 − μ vanishes (a cluster that alone fixes a coefficient) the pseudo-inverse drops that direction, as
clubSandwich does. Pure numpy; cost O(N p² + G² p).
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


def _inverse_sqrt_adjust(q: np.ndarray, mu: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """A_g vec with A_g = (I − H_gg)^(−1/2), H_gg = q diag(mu) qᵀ (q orthonormal columns); pseudo-inverse."""
    one_minus = 1.0 - mu
    scale = np.where(one_minus > SINGULAR, 1.0 / np.sqrt(np.clip(one_minus, SINGULAR, None)), 0.0) - 1.0
    return vec + q @ (scale * (q.T @ vec))


def cr2_contrast(y: np.ndarray, x: np.ndarray, cluster: np.ndarray, contrast: np.ndarray) -> ContrastTest:
    """The CR2 test of ``contrast``·β in the OLS fit of ``y`` [N] on ``x`` [N, p], clustered by ``cluster``
    [N] (any labels). NaN standard error and degrees of freedom with fewer than two clusters.

    ``x`` must have full column rank (a contrast of a rank-deficient fit is not identified): ValueError.
    """
    y = np.asarray(y, dtype=float)
    x = np.asarray(x, dtype=float).reshape(len(y), -1)
    c = np.asarray(contrast, dtype=float)
    codes, index = np.unique(np.asarray(cluster), return_inverse=True)
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
    v = m @ c
    order = np.argsort(index, kind="stable")
    bounds = np.searchsorted(index[order], np.arange(n_clusters + 1))
    z = np.empty((n_clusters, x.shape[1]))  # z_g = X_gᵀ a_g
    a_norm = np.empty(n_clusters)  # |a_g|²
    variance = 0.0
    for g in range(n_clusters):
        rows = order[bounds[g] : bounds[g + 1]]
        xg = x[rows]
        q, r = np.linalg.qr(xg)
        mu, vecs = np.linalg.eigh(r @ m @ r.T)
        a = _inverse_sqrt_adjust(q @ vecs, mu, xg @ v)
        variance += float(a @ resid[rows]) ** 2
        z[g] = xg.T @ a
        a_norm[g] = float(a @ a)
    # GᵀG = diag(|a_g|²) − Z M Zᵀ (the hat matrix's share, expanded with M XᵀX M = M).
    gram = np.diag(a_norm) - z @ m @ z.T
    df = float(np.trace(gram) ** 2 / np.sum(gram * gram)) if np.any(gram) else math.nan
    return ContrastTest(estimate, math.sqrt(max(variance, 0.0)), df, n_clusters)
