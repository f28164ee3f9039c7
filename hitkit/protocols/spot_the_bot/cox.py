"""Cox proportional hazards on interval-censored data (Finkelstein 1986): per Spot The Bot system, the
effect of the fluency, sensibleness and specificity answers on the time until the bot is spotted, with
a cluster-robust sandwich covariance where observations cluster (METHODS §2, §2b)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.inference import DEFAULT_CORRECTION, Correction, adjust, check_correction, cluster_codes
from hitkit.protocols.spot_the_bot.annotations import FEATURES
from hitkit.protocols.spot_the_bot.survival import check_intervals

COX_COLUMNS = [
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


def _cox_parts(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grid of distinct finite endpoints > 0 and each observation's index into it (−1: time 0,
    len(grid): infinity)."""
    grid = np.unique(np.concatenate([left, right]))
    grid = grid[np.isfinite(grid) & (grid > 0)]
    at_left = np.where(left > 0, np.searchsorted(grid, left), -1)
    at_right = np.where(np.isfinite(right), np.searchsorted(grid, right), len(grid))
    return grid, at_left, at_right


def _cox_loglik(
    params: np.ndarray, x: np.ndarray, at_left: np.ndarray, at_right: np.ndarray, n_grid: int
) -> tuple[float, np.ndarray]:
    """Log-likelihood and gradient of the PH model with a free baseline at the grid points.

    params = (γ_1 … γ_J, β): Λ0(t_j) = Σ_{l ≤ j} exp(γ_l), S(t | x) = exp(−Λ0(t) · exp(x β)); an
    observation (L, R] contributes log(S(L | x) − S(R | x)).
    """
    gamma, beta = params[:n_grid], params[n_grid:]
    cum = np.concatenate([[0.0], np.cumsum(np.exp(gamma)), [np.inf]])  # Λ0 at −1 … J
    a_left, a_right = cum[at_left + 1], cum[at_right + 1]
    risk = np.exp(x @ beta)
    censored = ~np.isfinite(a_right)
    gap = np.where(censored, np.inf, a_right - a_left) * risk
    # log(1 − r) with r = S(R)/S(L) = exp(−gap), stable for small and large gaps.
    log_one_minus_r = np.where(censored, 0.0, np.log(-np.expm1(-np.where(censored, 1.0, gap))))
    loglik = float(np.sum(-a_left * risk + log_one_minus_r))
    ratio = np.where(censored, 0.0, np.exp(-np.where(censored, 0.0, gap) - log_one_minus_r))
    d_left = -risk * (1 + ratio)  # ∂ℓ/∂Λ0(L): −e/(1 − r)
    d_right = np.where(censored, 0.0, risk * ratio)  # ∂ℓ/∂Λ0(R): e·r/(1 − r)
    d_eta = risk * (-a_left * (1 + ratio) + np.where(censored, 0.0, a_right) * ratio)
    # Λ0(t_j) depends on γ_l for every l ≤ j: sum the contributions from j = l upwards.
    at_grid = np.bincount(at_left[at_left >= 0], d_left[at_left >= 0], minlength=n_grid) + np.bincount(
        at_right[~censored], d_right[~censored], minlength=n_grid
    )
    d_gamma = np.exp(gamma) * np.cumsum(at_grid[::-1])[::-1]
    return loglik, np.concatenate([d_gamma, x.T @ d_eta])


def _cox_scores(
    params: np.ndarray, x: np.ndarray, at_left: np.ndarray, at_right: np.ndarray, n_grid: int
) -> np.ndarray:
    """Each observation's gradient of its log-likelihood term: [n, n_grid + n_features]."""
    gamma, beta = params[:n_grid], params[n_grid:]
    cum = np.concatenate([[0.0], np.cumsum(np.exp(gamma)), [np.inf]])
    a_left, a_right = cum[at_left + 1], cum[at_right + 1]
    risk = np.exp(x @ beta)
    censored = ~np.isfinite(a_right)
    gap = np.where(censored, 1.0, a_right - a_left) * risk
    log_one_minus_r = np.where(censored, 0.0, np.log(-np.expm1(-gap)))
    ratio = np.where(censored, 0.0, np.exp(-np.where(censored, 0.0, gap) - log_one_minus_r))
    d_left = -risk * (1 + ratio)
    d_right = np.where(censored, 0.0, risk * ratio)
    d_eta = risk * (-a_left * (1 + ratio) + np.where(censored, 0.0, a_right) * ratio)
    levels = np.arange(n_grid)[None]
    d_gamma = np.exp(gamma)[None] * (
        d_left[:, None] * (at_left[:, None] >= levels) + d_right[:, None] * (at_right[:, None] >= levels)
    )
    return np.concatenate([d_gamma, x * d_eta[:, None]], axis=1)


def cox_interval(
    left: np.ndarray,
    right: np.ndarray,
    x: np.ndarray,
    features: list[str] | None = None,
    cluster: np.ndarray | None = None,
) -> pd.DataFrame:
    """Cox proportional hazards on interval-censored data; columns feature, coef, se,
    hazard_ratio, p_value, variance, se_model, p_model.

    The semiparametric model of Finkelstein (1986): the baseline cumulative hazard Λ0 is free
    at the distinct finite interval endpoints (a piecewise-constant baseline hazard between
    them; only its values at the endpoints enter the likelihood), parametrised by the log of its
    increments so that it stays increasing. All parameters are fitted together by maximum
    likelihood (``scipy.optimize.minimize``, BFGS, analytic gradient); standard errors come from
    the observed information (the negative Hessian, by central differences of the gradient,
    inverted as a whole) and p-values from Wald tests. Features that do not vary get NaN.

    With ``cluster`` (one label per observation: its conversation or annotator), se and p_value
    come from the cluster-robust sandwich H⁻¹ B H⁻¹, B = C/(C − 1) Σ_c s_c s_cᵀ over the clusters'
    summed score vectors s_c (all parameters, baseline included), and variance says "robust";
    se_model and p_model keep the observed-information figures.
    """
    from scipy import optimize

    left, right = check_intervals(left, right)
    x = np.asarray(x, dtype=float).reshape(len(left), -1)
    names = features or [f"x{i}" for i in range(x.shape[1])]
    varies = np.ptp(x, axis=0) > 0 if len(x) else np.zeros(x.shape[1], dtype=bool)
    out = pd.DataFrame(
        {
            "feature": names,
            "coef": np.nan,
            "se": np.nan,
            "hazard_ratio": np.nan,
            "p_value": np.nan,
            "variance": "model" if cluster is None else "robust",
            "se_model": np.nan,
            "p_model": np.nan,
        }
    )
    grid, at_left, at_right = _cox_parts(left, right)
    if not varies.any() or len(grid) == 0:
        return out
    xv = x[:, varies]
    n_grid = len(grid)

    def objective(params):
        loglik, grad = _cox_loglik(params, xv, at_left, at_right, n_grid)
        return -loglik, -grad

    # Start from a constant hazard that spreads the share spotted over the grid.
    start = np.concatenate([np.full(n_grid, math.log(0.5 / n_grid)), np.zeros(xv.shape[1])])
    fit = optimize.minimize(objective, start, jac=True, method="BFGS", options={"gtol": 1e-8, "maxiter": 2000})
    step = 1e-5
    eye = np.eye(len(fit.x))
    hessian = np.stack([(objective(fit.x + step * e)[1] - objective(fit.x - step * e)[1]) / (2 * step) for e in eye])
    hessian = (hessian + hessian.T) / 2
    failure = _not_converged(fit, hessian, len(left), n_grid)
    if failure:  # a stated failure: no coefficient, no standard error and no p-value (never p = 0)
        out.loc[varies, "variance"] = f"none: {failure}"
        return out
    covariance = np.linalg.pinv(hessian)
    beta = fit.x[n_grid:]
    se_model = np.sqrt(np.clip(np.diag(covariance)[n_grid:], 0, None))
    se = se_model
    if cluster is not None:
        codes, n_clusters = cluster_codes(np.asarray(cluster))
        scores = _cox_scores(fit.x, xv, at_left, at_right, n_grid)
        summed = np.stack(
            [np.bincount(codes, scores[:, c], minlength=n_clusters) for c in range(scores.shape[1])], axis=1
        )
        meat = summed.T @ summed * (n_clusters / max(n_clusters - 1, 1))
        robust = covariance @ meat @ covariance
        se = np.sqrt(np.clip(np.diag(robust)[n_grid:], 0, None))
    out.loc[varies, "coef"] = beta
    out.loc[varies, "se"] = se
    out.loc[varies, "se_model"] = se_model
    out.loc[varies, "hazard_ratio"] = np.exp(beta)
    with np.errstate(invalid="ignore", divide="ignore"):
        out.loc[varies, "p_value"] = 2 * stats.norm.sf(np.abs(beta / se))
        out.loc[varies, "p_model"] = 2 * stats.norm.sf(np.abs(beta / se_model))
    return out


NOT_CONVERGED = "the fit did not converge"
"""How the ``variance`` column of a Cox row starts when its fit failed (its coef, se and p are NaN)."""


def _not_converged(fit, hessian: np.ndarray, n: int, n_grid: int) -> str | None:
    """Why a Cox fit cannot be reported, or None when it converged: the optimiser stopped away from a
    stationary point (its gradient not ≈ 0; BFGS's "precision loss" at a stationary point is fine),
    or a coefficient runs off toward ±∞ (|coef| > 15, a hazard ratio beyond e¹⁵, as when one feature
    separates spotted from unspotted annotations) or has no finite positive variance (the likelihood
    is flat there). A Wald p-value from such a fit would be 0 or 1 for no reason."""
    gradient = float(np.max(np.abs(fit.jac))) if getattr(fit, "jac", None) is not None else math.inf
    if not np.all(np.isfinite(fit.x)) or not (fit.success or gradient <= 1e-4 * max(n, 1)):
        return f"{NOT_CONVERGED} ({fit.message}; largest gradient {gradient:.2g})"
    beta = fit.x[n_grid:]
    if np.any(np.abs(beta) > 15):
        return f"{NOT_CONVERGED} (a coefficient diverges: {float(np.max(np.abs(beta))):.3g} and growing)"
    with np.errstate(invalid="ignore"):
        variance = np.diag(np.linalg.pinv(hessian))[n_grid:] if np.all(np.isfinite(hessian)) else [np.nan]
    if not np.all(np.isfinite(variance)) or np.any(np.asarray(variance) <= 0):
        return f"{NOT_CONVERGED} (the likelihood is flat in a coefficient: no finite variance)"
    return None


def cox_by_system(
    data: pd.DataFrame, *, cluster: str | None = None, correction: Correction = DEFAULT_CORRECTION
) -> pd.DataFrame:
    """:func:`cox_interval` per system of :func:`survival_data` with covariates fluency,
    sensibleness, specificity (+1 / 0 / −1): COX_COLUMNS.

    A hazard ratio above 1 means the bot is spotted sooner when annotators rated that feature
    better than the other speaker's. ``cluster`` (``conversation`` or ``worker``, a column of
    ``data``) gives cluster-robust standard errors (variance names it); p_adjusted corrects the
    Wald p-values over every system × feature test (``correction``).
    """
    check_correction(correction)
    if cluster is not None and cluster not in data.columns:
        raise ValueError(f"cluster={cluster!r} is not a column of the survival data")
    tables = [
        cox_interval(
            group["left"].to_numpy(),
            group["right"].to_numpy(),
            group[list(FEATURES)].to_numpy(),
            list(FEATURES),
            cluster=None if cluster is None else group[cluster].to_numpy(),
        ).assign(system=system)
        for system, group in data.groupby("system", sort=True)
    ]
    if not tables:
        return pd.DataFrame(columns=COX_COLUMNS)
    table = pd.concat(tables, ignore_index=True)
    table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction)
    table["correction"] = correction
    if cluster is not None:
        ok = ~table["variance"].astype(str).str.startswith("none:")
        table.loc[ok, "variance"] = f"robust ({cluster})"
    return table[COX_COLUMNS]
