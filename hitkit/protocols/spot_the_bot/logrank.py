"""The generalized log-rank test for interval-censored data (Zhao & Sun 2004; variance as corrected by
Huang, Lee & Yu 2008): multiple imputations from the pooled Turnbull fit, with a cluster-robust
(sandwich) variance of the score where observations cluster (conversations by default), for every
pair of Spot The Bot systems (METHODS §2, §2b)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.inference import DEFAULT_CORRECTION, Correction, adjust, check_correction, cluster_codes
from hitkit.progress import progress
from hitkit.protocols.spot_the_bot.survival import check_intervals, turnbull, turnbull_intervals

TEST_COLUMNS = [
    "system_a",
    "system_b",
    "statistic",
    "p_value",
    "p_adjusted",
    "correction",
    "variance",
    "statistic_model",
    "p_model",
]


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
        v = np.where(n > 1, at_risk[..., 0, :] * at_risk[..., 1, :] * d * (n - d) / (n * n * (n - 1)), 0.0).sum(axis=-1)
    return u, v


def imputed_logrank(
    left: np.ndarray, right: np.ndarray, group: np.ndarray, n_imputations: int, seed: int
) -> tuple[float, np.ndarray, np.ndarray]:
    """Steps 1–3 of :func:`generalized_logrank`: (U, U^(l) per imputation, V^(l) per imputation)."""
    left, right = check_intervals(left, right)
    group = np.asarray(group, dtype=bool)
    intervals, prob = _conditional_masses(left, right)
    m = len(intervals)
    members = np.stack([group, ~group]).astype(float)  # [2, n]
    at_risk_prob = np.cumsum(prob[:, ::-1], axis=1)[:, ::-1]  # P(at risk at I_j)
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
    exits = np.bincount(cell.ravel(), minlength=n_imputations * 2 * (m + 1)).reshape(n_imputations, 2, m + 1)
    deaths = (
        np.bincount(cell[died].ravel(), minlength=n_imputations * 2 * (m + 1))
        .reshape(n_imputations, 2, m + 1)[..., 1:]
        .astype(float)
    )
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
    left, right = check_intervals(left, right)
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


def clustered_logrank(
    left: np.ndarray, right: np.ndarray, group: np.ndarray, cluster: np.ndarray
) -> tuple[float, float]:
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


def generalized_logrank(
    left: np.ndarray, right: np.ndarray, group: np.ndarray, *, n_imputations: int = 50, seed: int = 0
) -> tuple[float, float]:
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
        raise ValueError(f"n_imputations={n_imputations!r}; the between-imputation variance needs at least 2")
    statistic_u, u_imp, v_imp = imputed_logrank(left, right, group, n_imputations, seed)
    within = float(v_imp.mean())
    variance = within - float(u_imp.var(ddof=1))
    if variance <= 0:  # see the docstring: fall back to the (conservative) within part
        variance = within
    if variance <= 0:
        return 0.0, 1.0
    chi2 = statistic_u**2 / variance
    return chi2, float(stats.chi2.sf(chi2, 1))


def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error), in the input order."""
    return adjust(p_values, "holm")


def _pair_seed(seed: int, i: int, j: int) -> int:
    return int(np.random.SeedSequence([seed, i, j]).generate_state(1)[0])


def survival_tests(
    data: pd.DataFrame,
    *,
    n_imputations: int = 50,
    seed: int = 0,
    correction: Correction = DEFAULT_CORRECTION,
    cluster: str | None = None,
) -> pd.DataFrame:
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
        raise ValueError(f"cluster={cluster!r} is not a column of the survival data; use 'conversation' or 'worker'")
    systems = sorted(set(data["system"]))
    pairs = [(i, a, j, b) for i, a in enumerate(systems) for j, b in enumerate(systems[i + 1 :], start=i + 1)]
    rows = []
    for i, a, j, b in progress(pairs, "log-rank tests", total=len(pairs), unit="pair"):
        pair = data[data["system"].isin([a, b])]
        left, right = pair["left"].to_numpy(), pair["right"].to_numpy()
        group = (pair["system"] == a).to_numpy()
        chi2, p = generalized_logrank(left, right, group, n_imputations=n_imputations, seed=_pair_seed(seed, i, j))
        row = {
            "system_a": a,
            "system_b": b,
            "statistic_model": chi2,
            "p_model": p,
            "statistic": chi2,
            "p_value": p,
            "variance": "model (imputation)",
        }
        if cluster is not None:
            row["statistic"], row["p_value"] = clustered_logrank(left, right, group, pair[cluster].to_numpy())
            row["variance"] = f"robust ({cluster})"
        rows.append(row)
    table = pd.DataFrame(rows, columns=[c for c in TEST_COLUMNS if c not in ("p_adjusted", "correction")])
    table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction) if len(table) else []
    table["correction"] = correction
    return table[TEST_COLUMNS]
