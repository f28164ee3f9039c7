"""Prediction-powered inference for a ratio of means (Spot The Bot's win rate WINS / (WINS + LOSSES)):
the people's ratio Σy/Σz, corrected with the judge's labels on every item, with one tuned λ.

λ = 0 is the human-only ratio Σy/Σz exactly. The interval is the delete-one jackknife over the
labelled items with θ̂₀ and λ re-estimated, plus the judge-only part, and t_{n−1}. The estimator and
its contract are those of :mod:`hitkit.analysis.ppi` (means); this module adds the ratio.
"""

from __future__ import annotations

import math

import numpy as np

from hitkit.analysis.ppi import NAN, Interval, PPIEstimate, _interval, _tuned, optimal_lambda

RATIO_INTERVAL = "jackknife t (over the human-labelled items, λ re-estimated; t with n − 1 degrees of freedom)"


def _ratio_fit(y, z, fh, gh, fu, gu, lam: float | None) -> tuple[float, float, float]:
    """(θ̂, λ, denominator) of the PPI++ ratio estimate (:func:`ppi_ratio`) on one sample.

    λ is tuned at the human-only ratio θ̂₀ = Σy / Σz, the pilot of the linearised problem:
    the residuals Y = y − θ̂₀ z and f = f − θ̂₀ g make the ratio's variance that of a mean, so
    PPI++'s λ for a mean (:func:`optimal_lambda`) applies to them unchanged."""
    if lam is None:
        pilot = y.sum() / z.sum() if z.sum() > 0 else math.nan
        lam = optimal_lambda(y - pilot * z, fh - pilot * gh, fu - pilot * gu) if math.isfinite(pilot) else 0.0
    if fu.size < 2:  # as ppi_mean: people only without two unlabelled items
        lam = 0.0
    den = z.mean() + (lam * (gu.mean() - gh.mean()) if lam else 0.0)
    num = y.mean() + (lam * (fu.mean() - fh.mean()) if lam else 0.0)
    return (num / den if den > 0 else math.nan), float(lam), float(den)


def _ratio_leave_out(y, z, fh, gh, fu, gu, lam: float | None) -> np.ndarray:
    """θ̂₋ᵢ of :func:`_ratio_fit` for each labelled item i left out, θ̂₀ and λ re-estimated in each
    (vectorised from sums of products, as :func:`jackknife_variance` does for means)."""
    m, big_n = y.size - 1, fu.size
    out = lambda total, terms: total.sum() - terms  # noqa: E731  (a sum with item i left out)
    sy, sz, sf, sg = out(y, y), out(z, z), out(fh, fh), out(gh, gh)
    with np.errstate(divide="ignore", invalid="ignore"):
        pilot = sy / sz
        if big_n < 2 or (lam is None and m < 2):  # as optimal_lambda: no λ from one label
            lam = 0.0
        weight: float | np.ndarray
        if lam is None:
            # Y = y − θ₀z and F = f − θ₀g expanded: every sum below is over the m items left.
            syf, syg, szf, szg = out(y * fh, y * fh), out(y * gh, y * gh), out(z * fh, z * fh), out(z * gh, z * gh)
            sum_y, sum_f = sy - pilot * sz, sf - pilot * sg
            covariance = (syf - pilot * (syg + szf) + pilot**2 * szg - sum_y * sum_f / m) / (m - 1)
            sff, sfg, sgg = out(fh * fh, fh * fh), out(fh * gh, fh * gh), out(gh * gh, gh * gh)
            squares = (
                sff
                - 2 * pilot * sfg
                + pilot**2 * sgg
                + (fu * fu).sum()
                - 2 * pilot * (fu * gu).sum()
                + pilot**2 * (gu * gu).sum()
            )
            total, count = sum_f + fu.sum() - pilot * gu.sum(), m + big_n
            variance = (squares - total**2 / count) / (count - 1)
            weight = np.where(np.isfinite(pilot), _tuned(covariance, variance, m, big_n), 0.0)
        else:
            weight = lam
        gap_f = fu.mean() - sf / m if big_n else 0.0
        gap_g = gu.mean() - sg / m if big_n else 0.0
        den = sz / m + weight * gap_g
        return np.where(den > 0, (sy / m + weight * gap_f) / den, np.nan)


def _jackknife(estimates) -> float:
    """Quenouille–Tukey's delete-one variance, (n−1)/n · Σ(θ̂₋ᵢ − θ̄)²; NaN if any θ̂₋ᵢ is NaN."""
    estimates = np.asarray(estimates, dtype=float)
    if estimates.size < 2 or not np.isfinite(estimates).all():
        return math.nan
    return float((estimates.size - 1) / estimates.size * ((estimates - estimates.mean()) ** 2).sum())


def ratio_interval(y, z, *, level: float = 0.95) -> Interval:
    """Σy / Σz over n items with its jackknife t_{n−1} interval: the human-only (and the naive
    judge-only) ratio estimate; :func:`ppi_ratio` with λ = 0 gives exactly this. NaN with fewer
    than two items or Σz = 0."""
    y, z = np.asarray(y, dtype=float), np.asarray(z, dtype=float)
    return ppi_ratio(y, z, y, z, [], [], lam=0.0, level=level).human


def ppi_ratio(
    y, z, f_labelled, g_labelled, f_unlabelled, g_unlabelled, *, lam: float | None = None, level: float = 0.95
) -> PPIEstimate:
    """PPI++ estimate of a ratio of means θ = E[y] / E[z], with its interval.

    ``y``, ``z``: the human numerator and denominator on the n labelled items; ``f_labelled``,
    ``g_labelled``: the judge's on the same items; ``f_unlabelled``, ``g_unlabelled``: the judge's
    on the N_u other items. Spot The Bot's win rate is one: y = the item's share of wins, z = its
    share of decisive annotations (wins + losses), so θ = WINS / (WINS + LOSSES).

    The estimate shares one λ between numerator and denominator,

        θ̂_λ = [mean(y) + λ (mean(f_u) − mean(f_h))] / [mean(z) + λ (mean(g_u) − mean(g_h))],

    the solution of the PPI++ estimating equation for E[y − θ z] = 0 (Angelopoulos, Duchi & Zrnic
    2023, §3: an M-estimator with the rectified loss). Linearised at θ,
    θ̂_λ − θ ≈ [mean(Y_h) + λ (mean(F_u) − mean(F_h))] / E[z] with Y = y − θ z and F = f − θ g, so
    Var(θ̂_λ) ≈ [Var(Y − λF)/n + λ² Var(F)/N_u] / E[z]², minimised by
    λ* = Cov(Y, F) / ((1 + n/N_u) Var(F)): PPI++'s λ for a mean, on the residuals. It is
    estimated at the human-only ratio θ̂₀ = Σy/Σz (:func:`_ratio_fit`) and clipped to [0, 1].
    ``lam``: None estimates it; 0 gives the human-only ratio Σy/Σz exactly, and its interval.

    The interval: the delete-one jackknife over the labelled items with θ̂₀ and λ̂ re-estimated in
    each (as :func:`jackknife_variance` for means), plus the judge-only part λ̂² Var(F_u) / (N_u ·
    denominator²), and t with n − 1 degrees of freedom. NaN with fewer than two labelled items or
    a zero denominator (every labelled item a tie).
    """
    y, z, fh, gh, fu, gu = (
        np.asarray(a, dtype=float) for a in (y, z, f_labelled, g_labelled, f_unlabelled, g_unlabelled)
    )
    if not (y.shape == z.shape == fh.shape == gh.shape) or fu.shape != gu.shape:
        raise ValueError(
            f"ppi_ratio needs y, z and the judge's f, g on the same {y.size} labelled items, and "
            f"f, g of equal length on the unlabelled ones; got {z.size}, {fh.size}, {gh.size} and "
            f"{fu.size}, {gu.size}"
        )
    n, big_n = y.size, fu.size
    if n < 2:
        return PPIEstimate(**vars(NAN), n=n, n_unlabelled=big_n, human=NAN)

    def fitted(lam_given):
        estimate, lam_used, den = _ratio_fit(y, z, fh, gh, fu, gu, lam_given)
        variance = _jackknife(_ratio_leave_out(y, z, fh, gh, fu, gu, lam_given))
        if lam_used and big_n > 1 and math.isfinite(estimate):
            variance += lam_used**2 * (fu - estimate * gu).var(ddof=1) / big_n / den**2
        if not (math.isfinite(estimate) and math.isfinite(variance)):
            return NAN, lam_used, variance
        return _interval(estimate, math.sqrt(variance), level, n - 1), lam_used, variance

    human, _, human_variance = fitted(0.0)
    if lam is not None and float(lam) == 0.0:
        ppi, lam_used, variance = human, 0.0, human_variance
    else:
        ppi, lam_used, variance = fitted(lam)
    if not (math.isfinite(variance) and math.isfinite(human_variance)):
        effective = math.nan
    else:
        effective = n * human_variance / variance if variance > 0 else float(n) if human_variance == 0 else math.inf
    return PPIEstimate(**vars(ppi), lam=lam_used, n=n, n_unlabelled=big_n, n_effective=float(effective), human=human)
