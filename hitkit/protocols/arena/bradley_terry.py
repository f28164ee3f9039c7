"""Arena ratings: Bradley–Terry and style-controlled Bradley–Terry, fitted for many bootstrap weightings at once.

Both models are logistic regressions on one row per battle (FastChat's ``compute_bt`` and
``compute_style_control``, ``fastchat/serve/monitor/rating_systems.py``, re-derived here):

* outcome y = 1 when the left system (``system_a``) wins, 0 when the right one does, ½ for a tie or
  a both-bad vote (a tie counts as half a win to each side: the loss y·log p + (1 − y)·log(1 − p));
* logit P(a beats b) = ln 10 · (θ_a − θ_b) [+ Σ_f β_f · x_f for style control], so θ is in units of
  log10-odds and the Arena rating is ``1000 + 400 · θ`` (scale 400, base 10, initial 1000); the
  natural log-strength (``strength``) is ``ln 10 · θ``;
* plain Bradley–Terry is unpenalised (a ridge of :data:`BT_RIDGE` on θ keeps a system that never lost
  finite; on a few thousand battles it moves no rating by as much as 0.01 points); style control
  has FastChat's L2 penalty ``reg/2 · ‖(θ, β)‖²`` with ``reg`` = 0.5 on every parameter.

FastChat's ratings have mean 1000 because its optimiser starts at 0 and every gradient step sums to
zero over the systems; ours are centred to the same mean explicitly, and when FastChat's baseline
model (``mixtral-8x7b-instruct-v0.1``) is among the systems it is pinned at 1114 as FastChat does.

The fitter is damped Newton, vectorised over a batch of battle weightings (``weights`` [B, n]): the
point estimate is the batch of one weighting (all ones), a worker-clustered bootstrap is a batch of
B resampled weightings. Davidson's (1970) tie model is fitted separately (:func:`davidson`).
Pure functions of arrays; no scipy except in :func:`davidson`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

LN10 = math.log(10.0)
SCALE = 400.0
INIT_RATING = 1000.0
FASTCHAT_BASELINE = ("mixtral-8x7b-instruct-v0.1", 1114.0)
"""FastChat's ``scale_and_offset`` pins this model at this rating when it is among the systems."""
BT_RIDGE = 1e-4
"""L2 penalty on plain Bradley–Terry's θ (log10 units): keeps a never-beaten system finite."""
STYLE_REG = 0.5
"""FastChat's ``compute_style_control`` default ``reg``: the L2 penalty on every parameter."""
STYLE_FEATURES = ("length", "headers", "lists", "bold")
"""The style covariates (FastChat's ``STYLE_CONTROL_ELEMENTS_V1``): reply tokens and markdown
header, list-item and bold counts, each as a normalised difference of the two sides."""
OUTCOME = {"a": 1.0, "b": 0.0, "tie": 0.5, "both_bad": 0.5}
"""A vote's outcome for the left system (``system_a``)."""


def style_features(a: np.ndarray, b: np.ndarray, ratio: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standardised style covariates from the two sides' counts ``a``, ``b`` [n, 4] (tokens, headers,
    lists, bold): (features [n, 4], their means, their standard deviations) before standardising.

    Each covariate is (a − b) / (a + b + 1) (``ratio``; FastChat's ``add_one`` and ``apply_ratio``
    defaults), then centred and divided by its population standard deviation (``np.std``, ddof 0).
    A covariate that never varies gives a column of zeros (its coefficient is then 0).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"style counts must be two [n, k] arrays of one shape; got {a.shape} and {b.shape}")
    diff = a - b
    if ratio:
        diff = diff / (a + b + 1.0)
    mean, std = diff.mean(axis=0), diff.std(axis=0)
    safe = np.where(std > 0, std, 1.0)
    features = np.where(std > 0, (diff - mean) / safe, 0.0)
    return features, mean, std


def design(first: np.ndarray, second: np.ndarray, k: int, features: np.ndarray | None = None) -> np.ndarray:
    """The regression's design matrix [n, k (+ f)]: ln 10 at the left system's column, −ln 10 at the
    right one's, then the style features."""
    n = len(first)
    x = np.zeros((n, k))
    rows = np.arange(n)
    x[rows, first] += LN10
    x[rows, second] -= LN10
    return x if features is None else np.hstack([x, np.asarray(features, dtype=float)])


def _loss(x: np.ndarray, y: np.ndarray, w: np.ndarray, theta: np.ndarray, reg: np.ndarray) -> np.ndarray:
    eta = theta @ x.T  # [B, n]
    # −[y log σ(η) + (1 − y) log σ(−η)] = softplus(η) − y·η, stable for large |η|
    nll = (w * (np.logaddexp(0.0, eta) - y * eta)).sum(axis=1)
    return nll + 0.5 * (reg * theta**2).sum(axis=1)


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    weights: np.ndarray,
    reg: np.ndarray,
    *,
    centre: int = 0,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> np.ndarray:
    """Minimise Σ w·logloss(y, σ(x·θ)) + ½ Σ reg·θ² for each row of ``weights`` [B, n]: θ [B, p].

    ``centre`` > 0 adds the penalty ½·(Σ θ[:centre])², zero at the optimum of a loss that shifting
    those columns together leaves unchanged (ratings), which makes the Hessian invertible there.
    Damped Newton: a step that does not lower a replicate's loss is halved (up to 40 times).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    w = np.atleast_2d(np.asarray(weights, dtype=float))
    n, p = x.shape
    if y.shape != (n,) or w.shape[1] != n:
        raise ValueError(f"design [{n}, {p}], outcomes {y.shape} and weights {w.shape} do not match")
    reg = np.broadcast_to(np.asarray(reg, dtype=float), (p,))
    b = w.shape[0]
    ones = np.zeros(p)
    ones[:centre] = 1.0
    outer = np.einsum("ni,nj->nij", x, x).reshape(n, p * p) if n * p * p <= 5e7 else None
    theta = np.zeros((b, p))
    loss = _loss(x, y, w, theta, reg)
    active = np.ones(b, dtype=bool)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if not len(idx):
            break
        t, wa = theta[idx], w[idx]
        eta = t @ x.T
        prob = 0.5 * (1.0 + np.tanh(0.5 * eta))  # σ(η) without overflow
        grad = -(wa * (y - prob)) @ x + reg * t + (t @ ones)[:, None] * ones
        v = wa * prob * (1.0 - prob)
        if outer is not None:
            hess = (v @ outer).reshape(len(idx), p, p)
        else:
            hess = np.stack([(x.T * vi) @ x for vi in v])
        hess += np.diag(reg) + np.outer(ones, ones)
        hess += 1e-12 * np.eye(p)
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        scale = np.ones(len(idx))
        new = t - step
        new_loss = _loss(x, y, wa, new, reg) + 0.5 * (new @ ones) ** 2
        old_loss = loss[idx] + 0.5 * (t @ ones) ** 2
        for _ in range(40):
            worse = new_loss > old_loss + 1e-12 * np.abs(old_loss)
            if not worse.any():
                break
            scale[worse] *= 0.5
            new[worse] = t[worse] - scale[worse, None] * step[worse]
            new_loss[worse] = _loss(x, y, wa[worse], new[worse], reg) + 0.5 * (new[worse] @ ones) ** 2
        theta[idx], loss[idx] = new, _loss(x, y, wa, new, reg)
        done = np.abs(scale[:, None] * step).max(axis=1) < tol
        active[idx[done]] = False
    else:
        warnings.warn(
            f"the rating fit stopped after {max_iter} Newton steps in {int(active.sum())} replicate(s)",
            RuntimeWarning,
            stacklevel=2,
        )
    return theta


@dataclass(frozen=True)
class Fit:
    """θ (log10 units) of each system per weighting [B, k], and the style coefficients [B, f] (none
    for plain Bradley–Terry), with the standardisation of the style covariates."""

    theta: np.ndarray
    beta: np.ndarray
    feature_mean: np.ndarray | None = None
    feature_std: np.ndarray | None = None


def bradley_terry(
    first: np.ndarray,
    second: np.ndarray,
    outcome: np.ndarray,
    k: int,
    weights: np.ndarray | None = None,
    ridge: float = BT_RIDGE,
) -> Fit:
    """Plain Bradley–Terry (ties half a win) for each weighting; battles are pooled into cells of
    (left, right, outcome) first, which leaves the likelihood unchanged and makes replicates cheap."""
    first, second, outcome = np.asarray(first), np.asarray(second), np.asarray(outcome, dtype=float)
    w = np.ones((1, len(first))) if weights is None else np.atleast_2d(np.asarray(weights, dtype=float))
    keys = np.stack([first, second, np.rint(outcome * 2)], axis=1).astype(np.int64)
    cells, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    pooled = np.zeros((w.shape[0], len(cells)))
    for j in range(w.shape[0]):  # bincount per replicate: exact and fast
        pooled[j] = np.bincount(inverse, weights=w[j], minlength=len(cells))
    x = design(cells[:, 0], cells[:, 1], k)
    theta = fit_logistic(x, cells[:, 2] / 2.0, pooled, np.full(k, ridge), centre=k)
    theta -= theta.mean(axis=1, keepdims=True)
    return Fit(theta, np.zeros((w.shape[0], 0)))


def style_control(
    first: np.ndarray,
    second: np.ndarray,
    outcome: np.ndarray,
    k: int,
    counts_a: np.ndarray,
    counts_b: np.ndarray,
    weights: np.ndarray | None = None,
    reg: float = STYLE_REG,
) -> Fit:
    """Style-controlled Bradley–Terry (FastChat's contextual BT) for each weighting; the covariates are
    standardised once on all battles (:func:`style_features`), as FastChat's bootstrap does."""
    features, mean, std = style_features(counts_a, counts_b)
    w = np.ones((1, len(first))) if weights is None else np.atleast_2d(np.asarray(weights, dtype=float))
    x = design(np.asarray(first), np.asarray(second), k, features)
    params = fit_logistic(x, np.asarray(outcome, dtype=float), w, np.full(x.shape[1], reg), centre=k)
    theta = params[:, :k] - params[:, :k].mean(axis=1, keepdims=True)
    return Fit(theta, params[:, k:], mean, std)


def ridge_shift(
    first: np.ndarray,
    second: np.ndarray,
    outcome: np.ndarray,
    k: int,
    counts_a: np.ndarray,
    counts_b: np.ndarray,
    fit: Fit,
    reg: float = STYLE_REG,
) -> tuple[np.ndarray, np.ndarray]:
    """How far style control's L2 penalty pulls its estimates, to be undone in the intervals: (θ shift [k],
    centred, log10 units; β shift [f]) of the point fit ``fit`` (its first weighting).

    The penalty ``reg/2 · ‖(θ, β)‖²`` shrinks ratings toward the mean; with reply length collinear with
    strength (weaker systems writing longer) the information left for θ is small and the pull reaches a
    few rating points at the extremes of a few thousand battles, while the fit to many battles, which the
    intervals are for, has none. At the penalised optimum the unpenalised loss's gradient is −R·φ
    (φ = (θ, β), R = reg·I), so one Newton step toward the unpenalised optimum moves φ by
    (H + R)⁻¹·R·φ, H the logistic information at φ (plus the centring term); the penalised Hessian keeps
    the step finite where battles are few (it is never larger than φ itself)."""
    features, _, _ = style_features(counts_a, counts_b)
    x = design(np.asarray(first), np.asarray(second), k, features)
    params = np.concatenate([fit.theta[0], fit.beta[0]])
    prob = 0.5 * (1.0 + np.tanh(0.5 * (x @ params)))
    ones = np.zeros(x.shape[1])
    ones[:k] = 1.0
    penalty = np.full(x.shape[1], float(reg))
    hess = (x.T * (prob * (1.0 - prob))) @ x + np.diag(penalty) + np.outer(ones, ones)
    step = np.linalg.solve(hess, penalty * params)
    return step[:k] - step[:k].mean(), step[k:]


def davidson(
    first: np.ndarray,
    second: np.ndarray,
    outcome: np.ndarray,
    k: int,
    weights: np.ndarray | None = None,
    ridge: float = BT_RIDGE,
) -> tuple[np.ndarray, np.ndarray]:
    """Davidson's (1970) tie model for each weighting: P(a) ∝ π_a, P(b) ∝ π_b, P(tie) ∝ ν·√(π_a π_b),
    π = 10^θ. Returns θ [B, k] (centred, log10 units) and ν [B]. Fitted by L-BFGS (scipy) on cells."""
    from scipy.optimize import minimize

    first, second = np.asarray(first), np.asarray(second)
    code = np.rint(np.asarray(outcome, dtype=float) * 2).astype(int)  # 2 a, 1 tie, 0 b
    w = np.ones((1, len(first))) if weights is None else np.atleast_2d(np.asarray(weights, dtype=float))
    keys = np.stack([first, second, code], axis=1)
    cells, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    fa, fb, fc = cells[:, 0], cells[:, 1], cells[:, 2]
    thetas, nus = np.zeros((w.shape[0], k)), np.zeros(w.shape[0])
    for j in range(w.shape[0]):
        cw = np.bincount(inverse, weights=w[j], minlength=len(cells))

        def nll(params: np.ndarray, cw: np.ndarray) -> tuple[float, np.ndarray]:
            s, log_nu = params[:k] * LN10, params[k]
            sa, sb = s[fa], s[fb]
            terms = np.stack([sa, sb, log_nu + 0.5 * (sa + sb)])
            log_d = np.logaddexp.reduce(terms, axis=0)
            chosen = np.where(fc == 2, sa, np.where(fc == 0, sb, terms[2]))
            value = -(cw * (chosen - log_d)).sum() + 0.5 * ridge * (params[:k] ** 2).sum()
            probs = np.exp(terms - log_d)  # [3, cells]
            d_sa = np.where(fc == 2, 1.0, np.where(fc == 1, 0.5, 0.0)) - probs[0] - 0.5 * probs[2]
            d_sb = np.where(fc == 0, 1.0, np.where(fc == 1, 0.5, 0.0)) - probs[1] - 0.5 * probs[2]
            grad = np.zeros(k + 1)
            np.add.at(grad, fa, -cw * d_sa * LN10)
            np.add.at(grad, fb, -cw * d_sb * LN10)
            grad[:k] += ridge * params[:k]
            grad[k] = -(cw * ((fc == 1) - probs[2])).sum()
            return value, grad

        res = minimize(
            nll, np.zeros(k + 1), args=(cw,), jac=True, method="L-BFGS-B", options={"maxiter": 1000, "gtol": 1e-9}
        )
        thetas[j] = res.x[:k] - res.x[:k].mean()
        nus[j] = math.exp(res.x[k])
    return thetas, nus


def to_rating(
    theta: np.ndarray, systems: list[str], anchor: tuple[str, float] | None = FASTCHAT_BASELINE
) -> np.ndarray:
    """Arena ratings ``1000 + 400·θ``; where ``anchor``'s system is present, shifted so that it has the
    anchor's rating (FastChat's baseline). Works on [k] or [B, k]."""
    rating = INIT_RATING + SCALE * np.asarray(theta, dtype=float)
    if anchor is not None and anchor[0] in systems:
        i = systems.index(anchor[0])
        rating = rating + (anchor[1] - rating[..., [i]])
    return rating
