"""A ratio of means (Spot The Bot's win rate WINS / (WINS + LOSSES)) by inverse-probability-weighted
PPI++, when the items people labelled were drawn with unequal, known probabilities π (a judge-labels
file's ``human_probability``).

As :func:`hitkit.analysis.ppi_ratio.ppi_ratio` for a uniform draw, the estimate solves the PPI++
estimating equation of E[y − θz] = 0 with one λ, here in the Hájek form of
:func:`~hitkit.analysis.ppi_active.ipw_ppi_mean`:

    θ̂_λ = m̂_λ(y, f) / m̂_λ(z, g),   m̂_λ(y, f) = λ · mean_all(f) + Σ_h v (y − λ f) / Σ_h v,   v = 1/π,

the ratio of two weighted PPI++ means sharing λ. λ is tuned (:func:`~hitkit.analysis.ppi_active.ipw_lambda`)
on the residuals linearised at the weighted human-only ratio θ̂₀ = Σ_h v y / Σ_h v z, where the ratio's
variance is a mean's; the variance is that mean's plug-in (ipw_ppi_mean's) of Y = y − θ̂z and
F = f − θ̂g at the same λ, divided by m̂_λ(z, g)², and the interval uses t_{n−1}. λ = 0 is the
weighted human-only ratio; with constant π it is Σy/Σz exactly (its interval the delta method's, not
ppi_ratio's jackknife). The items are assumed drawn independently, each with its π: pass the unit that was
drawn — Spot The Bot's conversation, with y, z, f, g its sums over its segments
(:func:`hitkit.protocols.spot_the_bot.judge_analysis.win_rates`) — so that weights and variance are per
conversation; segments of one conversation as items would be taken for independent draws. Pure numpy.
"""

from __future__ import annotations

import math

import numpy as np

from hitkit.analysis.ppi import NAN, PPIEstimate, _interval
from hitkit.analysis.ppi_active import ipw_lambda, ipw_ppi_mean

INTERVAL = "delta method on the inverse-probability-weighted PPI++ means, t on n − 1 degrees of freedom"


def ipw_ratio(y, z, f, g, labelled, pi, *, level: float = 0.95) -> PPIEstimate:
    """θ = E[y]/E[z] with its interval (module docstring). ``f``, ``g``: the judge's numerator and
    denominator on every one of the N items; ``labelled``: which items people labelled; ``y``, ``z``:
    theirs where labelled (anything elsewhere); ``pi``: each item's probability of going to people.
    ``human`` holds the weighted human-only (λ = 0) estimate. NaN with fewer than two labelled items or
    a zero denominator."""
    xi = np.asarray(labelled, dtype=bool)
    y, z = (np.where(xi, np.nan_to_num(np.asarray(a, dtype=float)), 0.0) for a in (y, z))
    f, g = np.asarray(f, dtype=float), np.asarray(g, dtype=float)
    p = np.broadcast_to(np.asarray(pi, dtype=float), f.shape)
    n, big_n = int(xi.sum()), f.size
    v = 1 / p[xi]
    pilot = (v * y[xi]).sum() / (v * z[xi]).sum() if n and (v * z[xi]).sum() > 0 else math.nan
    if n < 2 or not math.isfinite(pilot):
        return PPIEstimate(**vars(NAN), n=n, n_unlabelled=big_n - n, human=NAN)

    def fit(lam: float) -> tuple[float, float]:
        den = ipw_ppi_mean(z, g, xi, p, lam=lam).estimate
        theta = ipw_ppi_mean(y, f, xi, p, lam=lam).estimate / den if den > 0 else math.nan
        if not math.isfinite(theta):
            return math.nan, math.nan
        return theta, ipw_ppi_mean(y - theta * z, f - theta * g, xi, p, lam=lam).se ** 2 / den**2

    lam = ipw_lambda(y - pilot * z, f - pilot * g, xi, p)
    h_est, h_var = fit(0.0)
    human = _interval(h_est, math.sqrt(h_var), level, n - 1) if math.isfinite(h_var) else NAN
    estimate, variance = (h_est, h_var) if lam == 0 else fit(lam)
    if not (math.isfinite(estimate) and math.isfinite(variance)):
        return PPIEstimate(**vars(NAN), lam=lam, n=n, n_unlabelled=big_n - n, human=human)
    effective = n * h_var / variance if variance > 0 else math.inf
    return PPIEstimate(
        **vars(_interval(estimate, math.sqrt(variance), level, n - 1)),
        lam=float(lam),
        n=n,
        n_unlabelled=big_n - n,
        n_effective=float(effective),
        human=human,
    )
