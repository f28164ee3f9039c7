"""Spot The Bot survival analysis (METHODS §2, "Survival"): how long a bot goes unspotted.

Every annotation of a bot speaker in a segment of k exchanges is one observation of the time T
(in exchanges) until the bot is spotted: labelled bot → T in (0, k] (interval-censored); human or
unsure → T > k (right-censored at k). :func:`survival_data` builds these intervals,
:func:`turnbull` is the non-parametric maximum-likelihood estimate of the distribution of T
(Turnbull 1976), :func:`survival_curves` gives one survival curve per system, and
:func:`survival_tests` compares every pair of systems with the generalized log-rank test for
interval-censored data (Zhao & Sun 2004; variance as corrected by Huang, Lee & Yu 2008),
corrected for multiple comparisons (Bonferroni, the paper's, by default; Holm or none as options).
:func:`cox_by_system` fits a proportional-hazards model per system with the fluency, sensibleness
and specificity answers as covariates (Finkelstein 1986).

**Clustering** (METHODS §2b). One conversation gives several annotations of each bot, and one
annotator labels many segments; treated as independent, the log-rank test rejects too often.
Given a cluster per observation (conversation by default in the analysis), the log-rank test
uses a cluster-robust (sandwich) variance of its score, and the Cox model a cluster-robust
sandwich covariance; the model-based figures stay beside them (``*_model`` columns).

Intervals are half-open, (left, right]; right = inf is right-censored at left; left == right is
an exact time (not produced by Spot The Bot, accepted so that the estimator can be checked against
Kaplan–Meier).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.inference import DEFAULT_CORRECTION, Correction, adjust, check_correction, cluster_codes
from hitkit.progress import progress
from hitkit.protocols.spot_the_bot.reading import segment_annotations
from hitkit.protocols.spot_the_bot.annotations import FEATURES, HUMAN

SURVIVAL_DATA_COLUMNS = ["system", "left", "right", *FEATURES, "conversation", "worker"]
CURVE_COLUMNS = ["system", "time", "survival"]
TEST_COLUMNS = ["system_a", "system_b", "statistic", "p_value", "p_adjusted", "correction",
                "variance", "statistic_model", "p_model"]

# Endpoint kinds, in the order they sort at one value t: an exact time's left end stands for
# t − ε, every right end for t, an open left end (left < right) for t + ε. So (0, t] and (t, inf)
# do not overlap, and an exact t lies inside (s, t].
_EXACT_LEFT, _RIGHT, _OPEN_LEFT = 0, 1, 2
# Pruning of vanishing Turnbull masses (see _self_consistent).
_PRUNE_EVERY = 20
_PRUNE_BELOW = 1e-4


def survival_data(annotations: pd.DataFrame) -> pd.DataFrame:
    """One row per annotation of a bot speaker: system, left, right, fluency, sensibleness,
    specificity, conversation (study/conversation_id), worker.

    Labelled bot in a segment of k exchanges → (0, k]; human or unsure → (k, inf). Speakers of
    system ``human`` are left out. The features are as this speaker's annotator answered them
    (+1 this speaker did better than the other, 0 same, −1 worse), for the Cox model.
    """
    seg = segment_annotations(annotations)
    sides = []
    for entity, sign in ((0, 1), (1, -1)):
        spotted = (seg[f"label_{entity}"] == "bot").to_numpy()
        k = seg["segment_exchanges"].to_numpy().astype(float)
        sides.append(pd.DataFrame({
            "system": seg[f"system_{entity}"].to_numpy(),
            "left": np.where(spotted, 0.0, k),
            "right": np.where(spotted, k, np.inf),
            **{f: sign * seg[f].to_numpy() for f in FEATURES},
            "conversation": (seg["study"].astype(str) + "/"
                             + seg["conversation_id"].astype(str)).to_numpy(),
            "worker": seg["worker_id"].astype(str).to_numpy(),
        }))
    data = pd.concat(sides, ignore_index=True)
    return data[data["system"] != HUMAN].reset_index(drop=True)[SURVIVAL_DATA_COLUMNS]


def _check_intervals(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    left, right = np.asarray(left, dtype=float), np.asarray(right, dtype=float)
    if left.shape != right.shape or left.ndim != 1:
        raise ValueError(f"left {left.shape} and right {right.shape} must be 1-D of one length")
    bad = np.flatnonzero(~((left >= 0) & np.isfinite(left) & (right >= left) & (right > 0)))
    if len(bad):
        i = bad[0]
        raise ValueError(f"interval {i} is ({left[i]}, {right[i]}]; need 0 <= left <= right, "
                         "right > 0, left finite (right = inf for right-censored)")
    return left, right


def _covers(value_a, kind_a, value_b, kind_b) -> np.ndarray:
    """Endpoint a sorts at or before endpoint b (values, then kinds at equal values)."""
    return (value_a < value_b) | ((value_a == value_b) & (kind_a <= kind_b))


def turnbull_intervals(left: np.ndarray, right: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """Turnbull's innermost intervals and the incidence matrix of the observations.

    Returns (intervals with columns left, right, exact, in time order; ``alpha`` of shape
    [n_observations, n_intervals], True where the observation's interval contains the innermost
    interval). An innermost interval is a left end followed directly by a right end when all
    endpoints are sorted (see the module docstring for ties).
    """
    left, right = _check_intervals(left, right)
    n = len(left)
    exact = left == right
    values = np.concatenate([left, right])
    kinds = np.concatenate([np.where(exact, _EXACT_LEFT, _OPEN_LEFT), np.full(n, _RIGHT)])
    is_left = np.arange(2 * n) < n
    order = np.lexsort((kinds, values))
    start = np.flatnonzero(is_left[order][:-1] & ~is_left[order][1:])
    q, p = order[start], order[start + 1]
    q_value, q_kind, p_value = values[q], kinds[q], values[p]
    alpha = (_covers(left[:, None], np.where(exact, _EXACT_LEFT, _OPEN_LEFT)[:, None],
                     q_value[None], q_kind[None])
             & _covers(p_value[None], _RIGHT, right[:, None], _RIGHT))
    intervals = pd.DataFrame({"left": q_value, "right": p_value, "exact": q_kind == _EXACT_LEFT})
    return intervals, alpha


def _self_consistent(alpha: np.ndarray, weights: np.ndarray, tol: float,
                     max_iter: int) -> np.ndarray:
    """Turnbull's self-consistency (EM) iteration for the interval masses.

    EM creeps towards a mass of zero only sublinearly, and such masses are common here (no bot
    spotted between two segment lengths). So every ``_PRUNE_EVERY`` steps, masses below
    ``_PRUNE_BELOW`` whose gradient says they should shrink are set to zero when that does not
    lower the likelihood; at the end, a zero mass whose gradient says it should grow (the
    Kuhn–Tucker condition of the maximum) is given back a little mass and the iteration goes on.
    """
    total = weights.sum()
    a = alpha.astype(float)

    def gradient(mass: np.ndarray) -> np.ndarray:
        return (a.T @ (weights / (a @ mass))) / total

    def loglik(mass: np.ndarray) -> float:
        with np.errstate(divide="ignore"):
            return float(weights @ np.log(a @ mass))

    mass = np.full(alpha.shape[1], 1.0 / alpha.shape[1])
    for step in range(1, max_iter + 1):
        updated = mass * gradient(mass)
        if step % _PRUNE_EVERY == 0:
            small = (updated > 0) & (updated < _PRUNE_BELOW) & (gradient(updated) < 1)
            if small.any():
                pruned = np.where(small, 0.0, updated)
                pruned /= pruned.sum()
                if loglik(pruned) >= loglik(updated):
                    updated = pruned
        if np.max(np.abs(updated - mass)) < tol:
            grow = (updated == 0) & (gradient(updated) > 1 + 1e-9)
            if not grow.any():
                return updated
            updated = np.where(grow, _PRUNE_BELOW, updated)
            updated /= updated.sum()
        mass = updated
    return mass


def turnbull(left: np.ndarray, right: np.ndarray, weights: np.ndarray | None = None, *,
             tol: float = 1e-12, max_iter: int = 100_000) -> pd.DataFrame:
    """Turnbull's non-parametric estimate: innermost intervals (left, right, exact) with mass.

    Observation i says T in (left_i, right_i] (right = inf: right-censored; left == right: exact).
    The masses maximise the likelihood Π_i P(T in interval i)^{w_i} and are found by the
    self-consistency iteration, run on the distinct intervals (weighted by their counts) until no
    mass moves by ``tol``. With exact and right-censored data only, this is Kaplan–Meier.
    """
    left, right = _check_intervals(left, right)
    w = np.ones(len(left)) if weights is None else np.asarray(weights, dtype=float)
    if len(left) == 0:
        return pd.DataFrame({"left": [], "right": [], "exact": [], "mass": []})
    distinct = pd.DataFrame({"left": left, "right": right, "w": w}).groupby(
        ["left", "right"], sort=True)["w"].sum().reset_index()
    distinct = distinct[distinct["w"] > 0]
    intervals, alpha = turnbull_intervals(distinct["left"].to_numpy(),
                                          distinct["right"].to_numpy())
    intervals["mass"] = _self_consistent(alpha, distinct["w"].to_numpy(), tol, max_iter)
    return intervals


def survival_curve(left: np.ndarray, right: np.ndarray) -> pd.DataFrame:
    """S(t) at 0 and at the right end of every finite Turnbull interval: columns time, survival.

    Inside a Turnbull interval (q, p] the estimate is not determined (only its mass is); the
    table gives S at the interval's right end, i.e. after the whole mass has fallen.
    """
    fit = turnbull(left, right)
    after = 1.0 - np.cumsum(fit["mass"].to_numpy())
    finite = np.isfinite(fit["right"].to_numpy())
    curve = pd.DataFrame({"time": np.concatenate([[0.0], fit["right"].to_numpy()[finite]]),
                          "survival": np.concatenate([[1.0], np.clip(after[finite], 0.0, 1.0)])})
    return curve.drop_duplicates("time", keep="last").reset_index(drop=True)


def survival_curves(data: pd.DataFrame) -> pd.DataFrame:
    """:func:`survival_curve` per system of :func:`survival_data`: system, time, survival."""
    if data.empty:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    curves = [survival_curve(group["left"].to_numpy(), group["right"].to_numpy())
              .assign(system=system) for system, group in data.groupby("system", sort=True)]
    return pd.concat(curves, ignore_index=True)[CURVE_COLUMNS]


# --- the generalized log-rank test (Zhao & Sun 2004) -------------------------------------------

def _conditional_masses(left: np.ndarray, right: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """Pooled Turnbull fit and, per observation, the conditional probability of each interval."""
    fit = turnbull(left, right)
    intervals, alpha = turnbull_intervals(left, right)
    # Same innermost intervals as the fit (distinct observations give the same endpoints).
    mass = fit["mass"].to_numpy()
    joint = alpha * mass[None]
    with np.errstate(invalid="ignore", divide="ignore"):
        prob = joint / joint.sum(axis=1, keepdims=True)
    return intervals, np.nan_to_num(prob)


def _logrank_parts(deaths: np.ndarray, at_risk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log-rank U and hypergeometric variance for group a from [..., 2, times] counts."""
    d, n = deaths.sum(axis=-2), at_risk.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(n > 0, deaths[..., 0, :] - at_risk[..., 0, :] * d / n, 0.0).sum(axis=-1)
        v = np.where(n > 1, at_risk[..., 0, :] * at_risk[..., 1, :] * d * (n - d)
                     / (n * n * (n - 1)), 0.0).sum(axis=-1)
    return u, v


def imputed_logrank(left: np.ndarray, right: np.ndarray, group: np.ndarray,
                    n_imputations: int, seed: int) -> tuple[float, np.ndarray, np.ndarray]:
    """Steps 1–3 of :func:`generalized_logrank`: (U, U^(l) per imputation, V^(l) per imputation)."""
    left, right = _check_intervals(left, right)
    group = np.asarray(group, dtype=bool)
    intervals, prob = _conditional_masses(left, right)
    m = len(intervals)
    members = np.stack([group, ~group]).astype(float)          # [2, n]
    at_risk_prob = np.cumsum(prob[:, ::-1], axis=1)[:, ::-1]   # P(at risk at I_j)
    u, _ = _logrank_parts((members @ prob)[None], (members @ at_risk_prob)[None])
    statistic_u = float(u[0])

    rng = np.random.default_rng(seed)
    censored = ~np.isfinite(right)
    # Exit index: the last interval at which a subject is at risk. Failures exit at the drawn
    # interval; a subject censored at c stays at risk at every interval ending at or before c.
    censor_exit = np.searchsorted(intervals["right"].to_numpy(), left, side="right") - 1
    cdf = np.cumsum(prob, axis=1)
    draws = rng.random((n_imputations, len(left)))
    failed_at = np.minimum((draws[..., None] > cdf[None]).sum(axis=-1), m - 1)
    exit_at = np.where(censored[None], censor_exit[None], failed_at)
    died = np.broadcast_to(~censored[None], exit_at.shape)
    side = np.where(group, 0, 1)[None].repeat(n_imputations, axis=0)
    cell = (np.arange(n_imputations)[:, None] * 2 + side) * (m + 1) + (exit_at + 1)
    exits = np.bincount(cell.ravel(), minlength=n_imputations * 2 * (m + 1)).reshape(
        n_imputations, 2, m + 1)
    deaths = np.bincount(cell[died].ravel(), minlength=n_imputations * 2 * (m + 1)).reshape(
        n_imputations, 2, m + 1)[..., 1:].astype(float)
    at_risk = np.cumsum(exits[..., ::-1], axis=-1)[..., ::-1][..., 1:].astype(float)
    u_imp, v_imp = _logrank_parts(deaths, at_risk)
    return statistic_u, u_imp, v_imp


def logrank_residuals(left: np.ndarray, right: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Each observation's share u_i of the expected-count log-rank score U (Σ u_i = U).

    u_i = Σ_j (g_i − ā_j)(ρ_ij − r_ij d_j / n_j), with ρ_ij the probability that i fails in
    innermost interval j, r_ij that it is at risk there (both under the pooled Turnbull fit),
    g_i = 1 in group a, ā_j = n_aj / n_j: the log-rank score residual (the Cox score residual at
    β = 0; Lin & Wei 1989) with counts replaced by their conditional expectations.
    """
    left, right = _check_intervals(left, right)
    g = np.asarray(group, dtype=bool).astype(float)
    _, prob = _conditional_masses(left, right)
    at_risk = np.cumsum(prob[:, ::-1], axis=1)[:, ::-1]
    d, n, n_a = prob.sum(axis=0), at_risk.sum(axis=0), g @ at_risk
    with np.errstate(invalid="ignore", divide="ignore"):
        hazard = np.where(n > 0, d / n, 0.0)
        share = np.where(n > 0, n_a / n, 0.0)
    return ((g[:, None] - share[None]) * (prob - at_risk * hazard[None])).sum(axis=1)


def robust_score_variance(residuals: np.ndarray, cluster: np.ndarray) -> float:
    """Cluster-robust variance of a score Σ u_i: C/(C − 1) · Σ_c (Σ_{i in c} u_i)²."""
    codes, n_clusters = cluster_codes(cluster)
    if n_clusters < 2:
        return 0.0
    sums = np.bincount(codes, residuals, minlength=n_clusters)
    return float(n_clusters / (n_clusters - 1) * np.sum(sums * sums))


def clustered_logrank(left: np.ndarray, right: np.ndarray, group: np.ndarray,
                      cluster: np.ndarray) -> tuple[float, float]:
    """Generalized log-rank test with a cluster-robust variance; returns (chi², p).

    The score U is Sun's expected-count score of :func:`generalized_logrank`; its variance is
    the sandwich :func:`robust_score_variance` of the score residuals
    (:func:`logrank_residuals`) summed within clusters (conversations, workers), which stays
    valid when observations of one cluster are dependent. χ² = U² / V on 1 df.
    ``benchmarks/logrank_validation.py`` checks its level under conversation-level clustering.
    """
    u = logrank_residuals(left, right, group)
    variance = robust_score_variance(u, np.asarray(cluster))
    if variance <= 0:
        return 0.0, 1.0
    chi2 = float(u.sum()) ** 2 / variance
    return chi2, float(stats.chi2.sf(chi2, 1))


def generalized_logrank(left: np.ndarray, right: np.ndarray, group: np.ndarray, *,
                        n_imputations: int = 50, seed: int = 0) -> tuple[float, float]:
    """Two-sample generalized log-rank test for interval-censored data; returns (chi², p).

    Zhao & Sun (2004): U = Σ_j (d_aj − n_aj d_j / n_j) with failure and at-risk counts replaced by
    their conditional expectations under the pooled Turnbull fit; its variance by multiple
    imputation (``n_imputations`` right-censored data sets drawn from the conditional masses),
    V = mean within-imputation hypergeometric variance − between-imputation variance of the
    imputed scores (Huang, Lee & Yu 2008; the ``interval`` R package's ``wsr.HLY``); χ² = U²/V on
    1 df. If V ≤ 0, the within part alone (conservative); if that is 0, χ² = 0, p = 1. On exact
    and right-censored data this is the ordinary log-rank test. ``group`` is True for group a;
    seeded with ``numpy.random.default_rng(seed)``. Its validation (level and power on simulated
    Spot The Bot data) is ``benchmarks/logrank_validation.py``; for clustered data use
    :func:`clustered_logrank`.
    """
    if n_imputations < 2:
        raise ValueError(f"n_imputations={n_imputations!r}; the between-imputation variance "
                         "needs at least 2")
    statistic_u, u_imp, v_imp = imputed_logrank(left, right, group, n_imputations, seed)
    within = float(v_imp.mean())
    variance = within - float(u_imp.var(ddof=1))
    if variance <= 0:  # see the docstring: fall back to the (conservative) within part
        variance = within
    if variance <= 0:
        return 0.0, 1.0
    chi2 = statistic_u ** 2 / variance
    return chi2, float(stats.chi2.sf(chi2, 1))


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error), in the input order."""
    return adjust(p_values, "holm")


def _pair_seed(seed: int, i: int, j: int) -> int:
    return int(np.random.SeedSequence([seed, i, j]).generate_state(1)[0])


def survival_tests(data: pd.DataFrame, *, n_imputations: int = 50, seed: int = 0,
                   correction: Correction = DEFAULT_CORRECTION,
                   cluster: str | None = None) -> pd.DataFrame:
    """:func:`generalized_logrank` for every pair of systems in :func:`survival_data`, corrected.

    Columns system_a, system_b (alphabetical), statistic (χ², 1 df), p_value, p_adjusted
    (``correction`` over all pairs: Bonferroni by default, as the paper; Holm; none),
    correction, variance, statistic_model, p_model. With ``cluster`` (a column of ``data``:
    ``conversation`` or ``worker``) statistic and p_value are :func:`clustered_logrank`'s and
    variance says ``robust (<cluster>)``; the model-based (imputation) test stays in the
    ``*_model`` columns. Without it both are the model-based test. Each pair imputes with its
    own generator, seeded from (``seed``, positions of the two systems).
    """
    check_correction(correction)
    if cluster is not None and cluster not in data.columns:
        raise ValueError(f"cluster={cluster!r} is not a column of the survival data; use "
                         "'conversation' or 'worker'")
    systems = sorted(set(data["system"]))
    pairs = [(i, a, j, b) for i, a in enumerate(systems)
             for j, b in enumerate(systems[i + 1:], start=i + 1)]
    rows = []
    for i, a, j, b in progress(pairs, "log-rank tests", total=len(pairs), unit="pair"):
        pair = data[data["system"].isin([a, b])]
        left, right = pair["left"].to_numpy(), pair["right"].to_numpy()
        group = (pair["system"] == a).to_numpy()
        chi2, p = generalized_logrank(left, right, group, n_imputations=n_imputations,
                                      seed=_pair_seed(seed, i, j))
        row = {"system_a": a, "system_b": b, "statistic_model": chi2, "p_model": p,
               "statistic": chi2, "p_value": p, "variance": "model (imputation)"}
        if cluster is not None:
            row["statistic"], row["p_value"] = clustered_logrank(left, right, group,
                                                                 pair[cluster].to_numpy())
            row["variance"] = f"robust ({cluster})"
        rows.append(row)
    table = pd.DataFrame(rows, columns=[c for c in TEST_COLUMNS
                                        if c not in ("p_adjusted", "correction")])
    table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction) if len(table) else []
    table["correction"] = correction
    return table[TEST_COLUMNS]


# --- Cox proportional hazards on interval-censored data ----------------------------------------

COX_COLUMNS = ["system", "feature", "coef", "se", "hazard_ratio", "p_value", "p_adjusted",
               "correction", "variance", "se_model", "p_model"]


def _cox_parts(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grid of distinct finite endpoints > 0 and each observation's index into it (−1: time 0,
    len(grid): infinity)."""
    grid = np.unique(np.concatenate([left, right]))
    grid = grid[np.isfinite(grid) & (grid > 0)]
    at_left = np.where(left > 0, np.searchsorted(grid, left), -1)
    at_right = np.where(np.isfinite(right), np.searchsorted(grid, right), len(grid))
    return grid, at_left, at_right


def _cox_loglik(params: np.ndarray, x: np.ndarray, at_left: np.ndarray, at_right: np.ndarray,
                n_grid: int) -> tuple[float, np.ndarray]:
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
    d_left = -risk * (1 + ratio)            # ∂ℓ/∂Λ0(L): −e/(1 − r)
    d_right = np.where(censored, 0.0, risk * ratio)                  # ∂ℓ/∂Λ0(R): e·r/(1 − r)
    d_eta = risk * (-a_left * (1 + ratio) + np.where(censored, 0.0, a_right) * ratio)
    # Λ0(t_j) depends on γ_l for every l ≤ j: sum the contributions from j = l upwards.
    at_grid = (np.bincount(at_left[at_left >= 0], d_left[at_left >= 0], minlength=n_grid)
               + np.bincount(at_right[~censored], d_right[~censored], minlength=n_grid))
    d_gamma = np.exp(gamma) * np.cumsum(at_grid[::-1])[::-1]
    return loglik, np.concatenate([d_gamma, x.T @ d_eta])


def _cox_scores(params: np.ndarray, x: np.ndarray, at_left: np.ndarray, at_right: np.ndarray,
                n_grid: int) -> np.ndarray:
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
    d_gamma = np.exp(gamma)[None] * (d_left[:, None] * (at_left[:, None] >= levels)
                                     + d_right[:, None] * (at_right[:, None] >= levels))
    return np.concatenate([d_gamma, x * d_eta[:, None]], axis=1)


def cox_interval(left: np.ndarray, right: np.ndarray, x: np.ndarray,
                 features: list[str] | None = None,
                 cluster: np.ndarray | None = None) -> pd.DataFrame:
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

    left, right = _check_intervals(left, right)
    x = np.asarray(x, dtype=float).reshape(len(left), -1)
    names = features or [f"x{i}" for i in range(x.shape[1])]
    varies = np.ptp(x, axis=0) > 0 if len(x) else np.zeros(x.shape[1], dtype=bool)
    out = pd.DataFrame({"feature": names, "coef": np.nan, "se": np.nan, "hazard_ratio": np.nan,
                        "p_value": np.nan, "variance": "model" if cluster is None else "robust",
                        "se_model": np.nan, "p_model": np.nan})
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
    fit = optimize.minimize(objective, start, jac=True, method="BFGS",
                            options={"gtol": 1e-8, "maxiter": 2000})
    step = 1e-5
    eye = np.eye(len(fit.x))
    hessian = np.stack([(objective(fit.x + step * e)[1] - objective(fit.x - step * e)[1])
                        / (2 * step) for e in eye])
    hessian = (hessian + hessian.T) / 2
    covariance = np.linalg.pinv(hessian)
    beta = fit.x[n_grid:]
    se_model = np.sqrt(np.clip(np.diag(covariance)[n_grid:], 0, None))
    se = se_model
    if cluster is not None:
        codes, n_clusters = cluster_codes(np.asarray(cluster))
        scores = _cox_scores(fit.x, xv, at_left, at_right, n_grid)
        summed = np.stack([np.bincount(codes, scores[:, c], minlength=n_clusters)
                           for c in range(scores.shape[1])], axis=1)
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


def cox_by_system(data: pd.DataFrame, *, cluster: str | None = None,
                  correction: Correction = DEFAULT_CORRECTION) -> pd.DataFrame:
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
    tables = [cox_interval(group["left"].to_numpy(), group["right"].to_numpy(),
                           group[list(FEATURES)].to_numpy(), list(FEATURES),
                           cluster=None if cluster is None else group[cluster].to_numpy())
              .assign(system=system)
              for system, group in data.groupby("system", sort=True)]
    if not tables:
        return pd.DataFrame(columns=COX_COLUMNS)
    table = pd.concat(tables, ignore_index=True)
    table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction)
    table["correction"] = correction
    if cluster is not None:
        table["variance"] = f"robust ({cluster})"
    return table[COX_COLUMNS]
