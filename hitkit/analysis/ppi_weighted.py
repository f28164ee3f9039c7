"""Prediction-powered win rates and Bradley–Terry strengths when the items people labelled were drawn with
unequal, known probabilities π (``judge.select: uncertainty``, or a judge-labels file's
``human_probability``): inverse-probability-weighted PPI++ (:mod:`hitkit.analysis.ppi_active`).

The tables have the columns of the uniform ones (:func:`hitkit.analysis.ppi.win_rates`,
:func:`hitkit.analysis.ppi_bradley_terry.strengths`), so reports and exports read them alike; the
human-only column is the weighted (λ = 0) estimate, the judge-only one the plain mean over every item.

Bradley–Terry (:func:`ipw_strengths`). PPI++ for M-estimation with inverse-probability weights (Zrnic &
Candès 2024, §"M-estimation"; in the Hájek form of :mod:`hitkit.analysis.ppi_active`):

    β̂_λ = argmin  λ · mean_all ℓ(f; β) + Σ_h v_i (ℓ(Y_i; β) − λ ℓ(f_i; β)) / Σ_h v_i + P(β)/N,   v = 1/π,

with ℓ the Bradley–Terry loss of one item and P the ranking's prior (``prior`` virtual tied games per pair,
as :mod:`hitkit.analysis.ppi_bradley_terry`, weighed against n human items: the loss is scaled by n). ℓ is linear in the outcome, so the loss is a Bradley–Terry
log-likelihood with per-pair soft wins and games, fitted by the same Newton steps. Its covariance is the
plug-in sandwich H⁺ V H⁺ with V the variance of the linearised estimating equation —
λ² Cov_all(∇ℓ_f)/N + Σ_h v² (r − r̄)(r − r̄)ᵀ/(Σv)² · n/(n − 1) + the cross term, r = ∇ℓ_Y − λ∇ℓ_f —
the matrix form of :func:`~hitkit.analysis.ppi_active.ipw_ppi_mean`'s variance, and the interval uses
t_{n−1}. λ is the value on a grid of :data:`LAMBDA_GRID` in [0, 1] with the smallest trace of that
covariance (one λ for all systems, as the uniform fit's "overall" tuning). With constant π and λ = 0 it
is the human-only Bradley–Terry fit of the labelled items (``tests/test_ppi_weighted.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit

from hitkit.analysis.bounded import rate_interval
from hitkit.analysis.ppi import _canonical, _quantile, mean_interval
from hitkit.analysis.ppi_active import ipw_ppi_mean
from hitkit.analysis.ppi_bradley_terry import STRENGTH_COLUMNS, _design, _pinv, fit_weighted
from hitkit.tables.schema import JUDGE_ESTIMATE_COLUMNS

REFERENCE = (
    "PPI++ for M-estimation with inverse-probability weights, applied to the Bradley–Terry likelihood "
    "(Zrnic & Candès 2024; Angelopoulos, Duchi & Zrnic 2023), Hájek form"
)
INTERVAL = "plug-in sandwich of the weighted estimating equation, t on n − 1 degrees of freedom"
LAMBDA_GRID = 21
"""Values of λ tried, evenly from 0 to 1."""


def _probabilities(items: pd.DataFrame) -> np.ndarray:
    if "human_probability" not in items.columns:
        raise ValueError("items lack human_probability: each item's probability of going to people")
    return items["human_probability"].to_numpy(float)


def ipw_win_rates(items: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """Per unordered pair (system_a < system_b): the win rate of system_a human-only (weighted), judge-only
    and inverse-probability-weighted PPI++ (:func:`~hitkit.analysis.ppi_active.ipw_ppi_mean`), with the
    columns of :func:`hitkit.analysis.ppi.win_rates`. ``items``: its item columns and ``human_probability``."""
    pi = _probabilities(items)
    canon = _canonical(items).assign(pi=pi)
    rows = []
    for (a, b), pair in canon.groupby(["system_a", "system_b"], sort=True):
        labelled = pair["human"].notna().to_numpy()
        y, f = pair["human"].fillna(0.0).to_numpy(float), pair["judge"].to_numpy(float)
        e = ipw_ppi_mean(y, f, labelled, pair["pi"].to_numpy(float), level=level)
        judge = mean_interval(f, level=level)
        seen = y[labelled]
        rows.append(
            (
                a,
                b,
                int(labelled.sum()),
                len(pair),
                e.human.estimate,
                *rate_interval(seen, e.human.low, e.human.high, level),
                judge.estimate,
                *rate_interval(f, judge.low, judge.high, level),
                e.estimate,
                *rate_interval(seen if e.low == e.high else [], e.low, e.high, level),
                e.lam,
                e.n_effective,
                e.fallback,
            )
        )
    return pd.DataFrame(rows, columns=["system_a", "system_b", *JUDGE_ESTIMATE_COLUMNS])


def _gradients(outcome: np.ndarray, p: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each item's loss gradient −(outcome − σ(β_a − β_b)) x_pair (items × systems)."""
    return -(outcome - p)[:, None] * rows


def _fit(y, f, labelled, pi, pair, design, prior: float, lam: float):
    """(β̂_λ, covariance) of the weighted λ-loss (module docstring)."""
    n_pairs, big_n, n = design.shape[0], f.size, int(labelled.sum())
    v = np.where(labelled, 1 / pi, 0.0)
    # Counted in human items (the weighted human part sums to n), so that the prior weighs as in the uniform fit.
    human_scale, judge_scale = n / v.sum(), n / big_n
    wins = np.bincount(pair, v * human_scale * (np.nan_to_num(y) - lam * f), n_pairs)
    wins += lam * judge_scale * np.bincount(pair, f, n_pairs)
    games = np.bincount(pair, v * human_scale * (1 - lam), n_pairs) + lam * judge_scale * np.bincount(
        pair, None, n_pairs
    )
    beta = fit_weighted((wins + prior / 2)[None], (games + prior)[None], design)[0]
    rows = design[pair]
    p = expit(rows @ beta)
    q = expit(design @ beta)
    hessian = (design.T * ((games + prior) * q * (1 - q))) @ design / n
    g_f = _gradients(f, p, rows)
    h = labelled
    r = _gradients(np.nan_to_num(y[h]), p[h], rows[h]) - lam * g_f[h]
    w = v[h]
    r_bar = (w[:, None] * r).sum(axis=0) / w.sum()
    human = ((w**2)[:, None, None] * np.einsum("ij,ik->ijk", r - r_bar, r - r_bar)).sum(axis=0) / w.sum() ** 2
    human *= n / (n - 1)
    variance = human
    if lam:
        g_bar = g_f.mean(axis=0)
        variance = variance + lam**2 * np.cov(g_f, rowvar=False, ddof=1) / big_n
        cross = (w[:, None, None] * np.einsum("ij,ik->ijk", g_f[h] - g_bar, r - r_bar)).sum(axis=0) / (big_n * w.sum())
        variance = variance + lam * (cross + cross.T)
    hinv = _pinv(hessian[None])[0]
    return beta, hinv @ variance @ hinv


def ipw_strengths(items: pd.DataFrame, *, level: float = 0.95, prior: float = 1.0) -> pd.DataFrame:
    """Per system: Bradley–Terry strength human-only (weighted, λ = 0), judge-only and
    inverse-probability-weighted PPI++ (module docstring), with the columns of
    :func:`hitkit.analysis.ppi_bradley_terry.strengths`, best first. ``items``: its item columns and
    ``human_probability``. NaN intervals with fewer than three human items."""
    pi = _probabilities(items)
    canon = _canonical(items)
    systems = sorted(set(canon["system_a"]) | set(canon["system_b"]))
    k = len(systems)
    design, _ = _design(k)
    first = np.searchsorted(systems, canon["system_a"].to_numpy())
    second = np.searchsorted(systems, canon["system_b"].to_numpy())
    pair = first * k - first * (first + 1) // 2 + second - first - 1
    labelled = canon["human"].notna().to_numpy()
    y, f = canon["human"].to_numpy(float), canon["judge"].to_numpy(float)
    n = int(labelled.sum())
    judge_beta, judge_var = _fit(f, f, np.ones(f.size, bool), np.ones(f.size), pair, design, prior, 0.0)
    nan = np.full(k, np.nan)
    if n < 3:
        human_beta = _fit(y, f, labelled, pi, pair, design, prior, 0.0)[0] if n else nan
        human_var = ppi_var = None
        ppi_beta, lam = human_beta, 0.0
    else:
        human_beta, human_var = _fit(y, f, labelled, pi, pair, design, prior, 0.0)
        fits = [_fit(y, f, labelled, pi, pair, design, prior, lam) for lam in np.linspace(0, 1, LAMBDA_GRID)]
        best = int(np.argmin([np.trace(var) for _, var in fits]))
        lam = float(np.linspace(0, 1, LAMBDA_GRID)[best])
        ppi_beta, ppi_var = fits[best]

    def bounds(beta, var, df):
        if var is None:
            return nan, nan
        half = _quantile(level, df) * np.sqrt(np.clip(np.diag(var), 0, None))
        return beta - half, beta + half

    takes_part = np.equal.outer(np.arange(k), first) | np.equal.outer(np.arange(k), second)
    with np.errstate(divide="ignore", invalid="ignore"):
        effective = nan if ppi_var is None or human_var is None else n * np.diag(human_var) / np.diag(ppi_var)
    table = pd.DataFrame(
        {
            "system": systems,
            "n_human": (takes_part & labelled).sum(axis=1),
            "n_judge": takes_part.sum(axis=1),
            "human": human_beta,
            **dict(zip(("human_low", "human_high"), bounds(human_beta, human_var, n - 1))),
            "judge": judge_beta,
            **dict(zip(("judge_low", "judge_high"), bounds(judge_beta, judge_var, f.size - 1))),
            "ppi": ppi_beta,
            **dict(zip(("ppi_low", "ppi_high"), bounds(ppi_beta, ppi_var, n - 1))),
            "lam": lam,
            "n_effective": effective,
            "fallback": lam == 0.0,
        },
        columns=list(STRENGTH_COLUMNS),
    )
    return table.sort_values(["ppi", "system"], ascending=[False, True], ignore_index=True)
