"""Prediction-powered Bradley–Terry strengths: a few human votes and an LLM judge's labels on every item.

The report ranks pairwise systems by Bradley–Terry strengths (METHODS §3,
:mod:`hitkit.protocols.pairwise.bradley_terry`). With an LLM judge on all items and people on a
uniformly random subset (:mod:`hitkit.analysis.ppi`), the strengths are an M-estimate, and PPI++
for M-estimation (Angelopoulos, Duchi & Zrnic, "PPI++: Efficient prediction-powered inference",
arXiv:2311.01453, 2023, §"M-estimation", the GLM case) combines the two the way
:func:`~hitkit.analysis.ppi.ppi_mean` does for a mean:

    β̂_λ = argmin  mean_h ℓ(Y; β) + λ · (mean_u ℓ(f; β) − mean_h ℓ(f; β)) + P(β)/n,

with ℓ(y; β) = −[y log σ(β_a − β_b) + (1 − y) log σ(β_b − β_a)] the Bradley–Terry loss of one
item on the pair (a, b) with a soft outcome y for a (the human score: 1 win, 0 loss, ½ tie, the
mean of the item's votes; the judge's: its order-averaged score), mean_h over the n human-labelled
items, mean_u over the N_u items without a human label, and P the ranking's own regulariser:
``prior`` virtual tied games on every pair of systems (the BT module's default is one game per
pair, counted in votes; :func:`strengths` takes it in items). Strengths are centred to mean 0 as
in the BT module, so at λ = 0 this is exactly the human-only Bradley–Terry fit
(``tests/test_ppi_bradley_terry.py`` checks it against
:func:`~hitkit.protocols.pairwise.bradley_terry.bradley_terry` to 1e-8). Because ℓ is linear in y,
the λ-loss is a Bradley–Terry log-likelihood with per-pair "wins" ΣY − λΣf_h + λ(n/N_u)Σf_u and
"games" (1 − λ)n_h + λ(n/N_u)n_u (counts per pair), so it is fitted by Newton's method on per-pair
sums, and a leave-one-out fit only changes one pair's sums. The loss is convex for λ ∈ [0, 1]; its
minimum is finite while every pair keeps positive wins both ways, so λ is also capped where a
pair's wins or losses would fall below a quarter of the prior's virtual game (it never binds with
a sensible judge; a pair whose few human votes all contradict the judge could reach it).

Interval: the sandwich Σ = H⁺ [Cov_h(∇ℓ_Y − λ∇ℓ_f)/n + λ² Cov_u(∇ℓ_f)/N_u] H⁺, with H the
Hessian of the λ-loss at β̂_λ (regulariser included) and H⁺ its pseudo-inverse on the sum-zero
strengths (the loss does not change when every strength moves together). λ is tuned as PPI++
tunes it for M-estimators, to minimise the **trace** of that covariance (one λ for all systems,
ppi-python's ``optim_mode="overall"``): λ̂ = Tr(H⁺(C + Cᵀ)H⁺) / (2(1 + n/N_u) Tr(H⁺ B H⁺)),
C = Cov_h(∇ℓ_Y, ∇ℓ_f), B = Cov(∇ℓ_f) over all items, H the all-items Hessian, gradients at the
λ = 1 fit (as ppi-python evaluates them), clipped to [0, 1]. λ̂ = 0 is the human-only fit
(``fallback``). Covariances use ddof 1, as in :mod:`hitkit.analysis.ppi`.

Small samples. As for win rates, the plug-in sandwich treats λ̂ as known, which can make it
too narrow when human items are few. With ``small_sample=True`` (default) the human part of the variance is the
delete-one jackknife over the labelled items, refitting β with λ̂ re-estimated each time, plus λ̂²
H⁺ Cov_u(∇ℓ_f) H⁺ / N_u, and the quantile is t_{n−1}: ppi.py's choice for means. The human-only
interval is the same jackknife at λ = 0. Measured on ``benchmarks/judge_ppi.py``'s simulated
studies (4 systems with strengths ±0.6, ±0.2; 5,000 judged items of which 200 carry a crowd vote; a
judge agreeing 80 % with the crowd and biased +0.3 logits toward one system), 2,000 replications ×
4 systems drawn with seed 2024 (Monte Carlo s.e. 0.002): the jackknife t interval covered the true
strength in 95.6 % of system estimates, the plug-in sandwich with the normal quantile (ppi-
python's, ``small_sample=False``) 95.2 %, the sandwich with t_{n−1} 95.3 %; the human-only
jackknife t interval 95.6 % (its sandwich 95.2 %); the naive judge-only interval covered the biased
system's strength in 0 % (the others about 51 %). λ̂ averaged 0.80, the PPI interval was 0.75 times
as wide as the human-only one, an effective 347–384 human items from 200. With a strength pooled
over all pairs the plug-in is already close to 95 % here; the jackknife is kept for consistency
with the win rates, and it stays ahead with more systems: with 8 systems (strengths evenly from 0.7
to −0.7, 28 pairs, the same 5,000/200 items and judge; 300 replications) the jackknife t covered
92.3 %, the plug-in sandwich 91.5 %, human-only 94.3 %. That shortfall is the prior's, not the
variance's: 28 virtual games against 200 items shrink the extreme strengths by about 0.1 (0.6
standard errors; the standard errors match the estimates' spread), and with ``prior=0.05`` the same
kind of studies (200 replications) cover 95.6 % (human-only 96.0 %). The prior is kept so that the
human-only column is the ranking's fit; with many systems and few human items the intervals are
then a little short at the extremes, as the ranking's own are. The benchmark itself (its first 500
replications, seed 2023) gives 94.8 % for the jackknife t, 94.3 % for the plug-in sandwich and 95.1
% human-only (``bt_coverage_ppi=0.948``, ``bt_coverage_judge=0.000``, ``bt_width_ratio=0.749``).
The jackknife costs n + 1 batched fits (about 20 ms for 200 items and 4 systems).

Items are independent here (clustering of votes by worker is not accounted for), and the human
subset must be a uniformly random sample of the judged items. Pure functions over arrays.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.special import expit

from hitkit.analysis.ppi import _canonical, _quantile
from hitkit.tables.schema import JUDGE_ESTIMATE_COLUMNS

REFERENCE = "PPI++ for M-estimation applied to the Bradley–Terry likelihood (Angelopoulos, Duchi & Zrnic 2023)"
INTERVAL = (
    "delete-one jackknife over the human-labelled items (β refitted, λ re-estimated) plus "
    "the judge-only part, with t on n − 1 degrees of freedom"
)

STRENGTH_COLUMNS = ("system", *JUDGE_ESTIMATE_COLUMNS)


def _design(k: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Every pair (i < j) of k systems and its row e_i − e_j: d = design @ β is β_i − β_j."""
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    design = np.zeros((len(pairs), k))
    for row, (i, j) in enumerate(pairs):
        design[row, i], design[row, j] = 1.0, -1.0
    return design, pairs


def fit_weighted(
    wins: np.ndarray, games: np.ndarray, design: np.ndarray, tol: float = 1e-11, max_iter: int = 200
) -> np.ndarray:
    """Centred strengths maximising Σ_p wins_p d_p − games_p log(1 + e^{d_p}), d = β_a − β_b per pair,
    for a batch (rows of ``wins``/``games``, one column per pair): Newton's method with step halving.

    The Bradley–Terry log-likelihood with soft wins; finite and unique when every pair has
    0 < wins < games (a prior makes it so). Adding 11ᵀ/k to the information fixes the free shift.
    """
    batch, k = wins.shape[0], design.shape[1]
    shift = np.full((k, k), 1.0 / k)

    def value(beta):
        d = beta @ design.T
        return (wins * d - games * np.logaddexp(0.0, d)).sum(axis=-1)

    beta, current = np.zeros((batch, k)), value(np.zeros((batch, k)))
    for _ in range(max_iter):
        p = expit(beta @ design.T)
        gradient = (wins - games * p) @ design
        info = np.einsum("bp,pi,pj->bij", games * p * (1 - p), design, design) + shift
        step = np.linalg.solve(info, gradient[..., None])[..., 0]
        size = np.ones(batch)
        for _ in range(40):
            trial = beta + size[:, None] * step
            new = value(trial)
            worse = new < current - 1e-12 * (1 + np.abs(current))
            if not worse.any():
                break
            size = np.where(worse, size / 2, size)
        beta, current = trial, new
        if np.max(np.abs(size[:, None] * step)) < tol:
            break
    else:
        warnings.warn(
            f"prediction-powered Bradley–Terry fit stopped after {max_iter} Newton steps", RuntimeWarning, stacklevel=2
        )
    return beta - beta.mean(axis=-1, keepdims=True)


def _pinv(h: np.ndarray) -> np.ndarray:
    """Pseudo-inverse of Hessians whose null space is the common shift 1 (batched)."""
    k = h.shape[-1]
    shift = np.full((k, k), 1.0 / k)
    return np.linalg.inv(h + shift) - shift


def _hessian(weights: np.ndarray, p: np.ndarray, design: np.ndarray) -> np.ndarray:
    """Σ_p weights_p σ(1 − σ) x_p x_pᵀ (batched)."""
    return np.einsum("bp,pi,pj->bij", weights * p * (1 - p), design, design)


def _gradient_cov(s_uv, s_u, s_v, count, p, design, total) -> np.ndarray:
    """Covariance (ddof 1) over ``total`` items of the loss gradients −(u − p)x and −(v − p)x, from
    per-pair sums of u·v, u, v and the item count (batched; ``total`` per batch row)."""
    second = s_uv - p * (s_u + s_v) + count * p * p
    mean_u = ((s_u - count * p) @ design) / total[:, None]
    mean_v = ((s_v - count * p) @ design) / total[:, None]
    outer = np.einsum("bp,pi,pj->bij", second, design, design)
    return (outer - total[:, None, None] * mean_u[:, :, None] * mean_v[:, None, :]) / (total - 1)[:, None, None]


def _trace(hinv: np.ndarray, m: np.ndarray) -> np.ndarray:
    return np.einsum("bij,bjk,bki->b", hinv, m, hinv)


class _Sums:
    """Per-pair sums of the labelled items (count, Y, f, Y², f², Yf: rows of ``lab``, each
    [batch, pairs]) and of the unlabelled ones (count, f, f²: ``unl``, [pairs]); ``n`` labelled
    items per batch row and ``big_n`` unlabelled."""

    def __init__(self, lab: np.ndarray, unl: np.ndarray, n: np.ndarray, big_n: int):
        self.lab, self.unl, self.n, self.big_n = lab, unl, n, big_n

    def wins_games(self, lam: np.ndarray, prior: float) -> tuple[np.ndarray, np.ndarray]:
        """The λ-loss as per-pair soft wins and games (counts, prior included)."""
        c, y, f = self.lab[0], self.lab[1], self.lab[2]
        ratio = (self.n / self.big_n)[:, None] if self.big_n else np.zeros((len(self.n), 1))
        lam = lam[:, None]
        wins = y + lam * (ratio * self.unl[1] - f) + prior / 2
        games = (1 - lam) * c + lam * ratio * self.unl[0] + prior
        return wins, games

    def lam_cap(self, prior: float) -> np.ndarray:
        """The largest λ ≤ 1 leaving every pair at least prior/4 wins and losses (a finite fit)."""
        if not self.big_n:
            return np.zeros(len(self.n))
        c, y, f = self.lab[0], self.lab[1], self.lab[2]
        ratio = (self.n / self.big_n)[:, None]
        caps = [np.ones(len(self.n))]
        for start, slope in (
            (y + prior / 2, ratio * self.unl[1] - f),
            (c - y + prior / 2, ratio * (self.unl[0] - self.unl[1]) - (c - f)),
        ):
            with np.errstate(divide="ignore", invalid="ignore"):
                cap = np.where(slope < 0, (start - prior / 4) / -slope, np.inf)
            caps.append(cap.min(axis=-1))
        return np.clip(np.min(caps, axis=0), 0.0, 1.0)


def _estimate(sums: _Sums, prior: float, design: np.ndarray, lam: float | None):
    """β̂_λ for each batch row, with λ tuned (None) or fixed, and the sandwich's pieces at β̂_λ:
    (β̂, λ, H⁺, Cov_h(∇ℓ_Y − λ∇ℓ_f), Cov_u(∇ℓ_f)), all batched."""
    c, y, f, yy, ff, yf = sums.lab
    n, big_n, rows = sums.n, sums.big_n, len(sums.n)
    cap = sums.lam_cap(prior)
    if lam is not None or big_n < 2:  # as ppi.ppi_mean: people only without two unlabelled items
        lam_hat = np.minimum(np.full(rows, float(lam or 0.0) if big_n >= 2 else 0.0), cap)
    else:
        # PPI++'s tuning: gradients and Hessian at the λ = 1 fit (capped), trace criterion.
        p = expit(fit_weighted(*sums.wins_games(cap, prior), design) @ design.T)
        cross = _gradient_cov(yf, y, f, c, p, design, n)
        count_all, total = c + sums.unl[0], n + big_n
        judge_cov = _gradient_cov(
            ff + sums.unl[2], f + sums.unl[1], f + sums.unl[1], count_all, p, design, total.astype(float)
        )
        hinv = _pinv(_hessian(count_all, p, design) / total[:, None, None])
        numerator = _trace(hinv, cross + np.swapaxes(cross, -1, -2))
        denominator = 2 * (1 + n / big_n) * _trace(hinv, judge_cov)
        with np.errstate(divide="ignore", invalid="ignore"):
            lam_hat = np.where(denominator > 0, numerator / denominator, 0.0)
        lam_hat = np.clip(np.nan_to_num(lam_hat), 0.0, cap)
    wins, games = sums.wins_games(lam_hat, prior)
    beta = fit_weighted(wins, games, design)
    p = expit(beta @ design.T)
    hinv = _pinv(_hessian(games, p, design) / n[:, None, None])
    human = _gradient_cov(yy, y, y, c, p, design, n)
    cross = _gradient_cov(yf, y, f, c, p, design, n)
    judge = _gradient_cov(ff, f, f, c, p, design, n)
    lam3 = lam_hat[:, None, None]
    residual = human - lam3 * (cross + np.swapaxes(cross, -1, -2)) + lam3**2 * judge
    unlabelled = (
        _gradient_cov(
            sums.unl[2][None],
            sums.unl[1][None],
            sums.unl[1][None],
            sums.unl[0][None],
            p,
            design,
            np.full(rows, float(big_n)),
        )
        if big_n > 1
        else np.zeros_like(human)
    )
    return beta, lam_hat, hinv, residual, unlabelled


def _variance(
    sums: _Sums, item_sums: np.ndarray | None, prior: float, design: np.ndarray, lam: float | None, small_sample: bool
) -> tuple[np.ndarray, float, np.ndarray]:
    """(β̂, λ̂, covariance of β̂) for the full sample: the sandwich, or (``small_sample``) the
    delete-one jackknife over labelled items with λ refitted, plus the unlabelled part."""
    beta, lam_hat, hinv, residual, unlabelled = _estimate(sums, prior, design, lam)
    n, big_n = int(sums.n[0]), sums.big_n
    outside = (lam_hat[0] ** 2 * hinv[0] @ unlabelled[0] @ hinv[0] / big_n) if big_n > 1 else 0.0
    if not small_sample:
        return beta[0], float(lam_hat[0]), hinv[0] @ residual[0] @ hinv[0] / n + outside
    if item_sums is None:
        raise ValueError("the jackknife variance needs each labelled item's sums (item_sums)")
    leave_out = _Sums(sums.lab[:, 0][:, None, :] - item_sums, sums.unl, np.full(n, n - 1.0), big_n)
    betas = _estimate(leave_out, prior, design, lam)[0]
    centred = betas - betas.mean(axis=0)
    jackknife = (n - 1) / n * centred.T @ centred
    return beta[0], float(lam_hat[0]), jackknife + outside


def strengths(
    items: pd.DataFrame, *, level: float = 0.95, small_sample: bool = True, prior: float = 1.0, lam: float | None = None
) -> pd.DataFrame:
    """Per system: Bradley–Terry strength (log-strength, mean 0) human-only, judge-only and
    prediction-powered, each with its ``level`` interval (:data:`STRENGTH_COLUMNS`), by PPI
    strength, best first.

    ``items``: :data:`hitkit.analysis.ppi.ITEM_COLUMNS`, either orientation, ``human`` NaN where
    nobody voted. ``prior``: virtual tied games per pair, in items (the analysis passes one game in
    votes: 1 / mean votes per voted item). ``lam``: None tunes λ (module docstring), 0 gives the
    human-only fit. ``judge``: the fit on the judge's labels over every item, its naive sandwich
    interval ignoring the judge's bias. ``n_effective``: human items the human-only estimate
    would need for the PPI estimate's variance, per system; ``fallback``: λ̂ = 0. With fewer than
    three human items the intervals are NaN and λ = 0.
    """
    if not prior > 0:
        raise ValueError(f"prior={prior!r}; it must be > 0 so that every strength is finite")
    canon = _canonical(items)
    systems = sorted(set(canon["system_a"]) | set(canon["system_b"]))
    if not systems:
        raise ValueError("no items to fit; the judge labels every item")
    k = len(systems)
    design, pairs = _design(k)
    first = np.searchsorted(systems, canon["system_a"].to_numpy())
    second = np.searchsorted(systems, canon["system_b"].to_numpy())
    pair = first * k - first * (first + 1) // 2 + second - first - 1  # the row of (first, second)
    labelled = canon["human"].notna().to_numpy()
    y, f = canon["human"].to_numpy(float), canon["judge"].to_numpy(float)
    n, big_n = int(labelled.sum()), int((~labelled).sum())

    def per_pair(where, *values):
        return np.stack([np.bincount(pair[where], weights=v[where], minlength=len(pairs)) for v in values])

    ones = np.ones(len(canon))
    item_values = np.stack([ones, y, f, y * y, f * f, y * f])[:, labelled]  # [6, n]
    onehot = np.eye(len(pairs))[pair[labelled]]  # [n, P]
    item_sums = item_values[:, :, None] * onehot[None]  # [6, n, P]
    lab = item_sums.sum(axis=1)[:, None, :]
    unl = per_pair(~labelled, ones, f, f * f)
    sums = _Sums(lab, unl, np.array([float(n)]), big_n)

    everything = np.ones(len(canon), dtype=bool)
    judge_lab = per_pair(everything, ones, f, f, f * f, f * f, f * f)[:, None, :]
    judge_sums = _Sums(judge_lab, np.zeros((3, len(pairs))), np.array([float(len(canon))]), 0)
    if len(canon) < 2:
        judge_beta, judge_var = fit_weighted(*judge_sums.wins_games(np.zeros(1), prior), design)[0], None
    else:
        judge_beta, _, judge_var = _variance(judge_sums, None, prior, design, 0.0, small_sample=False)
    judge_df = len(canon) - 1 if small_sample else None

    nan = np.full(k, np.nan)
    if n < 3:
        human_beta = fit_weighted(*sums.wins_games(np.zeros(1), prior), design)[0]
        ppi_beta, lam_hat, human_var, ppi_var, df = human_beta, 0.0, None, None, None
    else:
        human_beta, _, human_var = _variance(sums, item_sums, prior, design, 0.0, small_sample)
        ppi_beta, lam_hat, ppi_var = _variance(sums, item_sums, prior, design, lam, small_sample)
        df = n - 1 if small_sample else None

    def bounds(beta, var, df_):
        if var is None:
            return nan, nan
        half = _quantile(level, df_) * np.sqrt(np.clip(np.diag(var), 0, None))
        return beta - half, beta + half

    human_low, human_high = bounds(human_beta, human_var, df)
    judge_low, judge_high = bounds(judge_beta, judge_var, judge_df)
    ppi_low, ppi_high = bounds(ppi_beta, ppi_var, df)
    if human_var is None or ppi_var is None:
        effective = nan
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            effective = n * np.diag(human_var) / np.diag(ppi_var)
    takes_part = np.equal.outer(np.arange(k), first) | np.equal.outer(np.arange(k), second)
    table = pd.DataFrame(
        {
            "system": systems,
            "n_human": (takes_part & labelled).sum(axis=1),
            "n_judge": takes_part.sum(axis=1),
            "human": human_beta,
            "human_low": human_low,
            "human_high": human_high,
            "judge": judge_beta,
            "judge_low": judge_low,
            "judge_high": judge_high,
            "ppi": ppi_beta,
            "ppi_low": ppi_low,
            "ppi_high": ppi_high,
            "lam": lam_hat,
            "n_effective": effective,
            "fallback": lam_hat == 0.0,
        }
    )
    return table.sort_values(["ppi", "system"], ascending=[False, True], ignore_index=True)
