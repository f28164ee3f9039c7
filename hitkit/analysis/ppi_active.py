"""Active prediction-powered inference: people label the items the judges are unsure of, and every
estimate is weighted by the inverse of the probability that its item went to people.

With an LLM judge on all N items, :mod:`hitkit.analysis.ppi` asks people about a uniformly random
share. Active statistical inference (Zrnic & Candès, "Active statistical inference", ICML 2024,
arXiv:2403.03208) instead draws each item independently, ξ_i ~ Bernoulli(π_i), with π_i a known
function of what is seen before any person labels (here: the judges' confidence), and corrects the
judge with inverse-probability weights. hitkit uses the power-tuned (PPI++) form in its
self-normalised (Hájek) version:

    θ̂_λ = λ · mean_all(f) + Σ_i v_i (Y_i − λ f_i) / Σ_i v_i,      v_i = ξ_i / π_i,

the second sum over the labelled items. The paper writes the Horvitz–Thompson version,
(1/N) Σ [λ f_i + (Y_i − λ f_i) ξ_i/π_i]; dividing by Σ v_i instead of N removes the variance that
the random number of labels adds and makes a constant π **exactly** PPI++ over all items,
ȳ_h + λ(f̄_all − f̄_h), which is :func:`~hitkit.analysis.ppi.ppi_mean`'s estimate with its
λ_u = λ · N_u/N (``tests/test_ppi_active.py``). Linearised, with r = (Y − θ) − λ(f − μ_f),

    N · Var(θ̂_λ) ≈ Var(Y) + E[(1/π − 1) r²]

(the paper's Var = (1/N)(Var Y + E[(Y − f)²(1/π − 1)]) at λ = 1), minimised by
λ* = E[w (Y − θ)(f − μ_f)] / E[w (f − μ_f)²] with w = 1/π − 1. λ̂ estimates the numerator on the
labelled items with weights v·w and ddof-1 correction, the denominator on all items (f and π are
known everywhere), and is clipped to [0, 1]; with constant π it is PPI++'s Cov_h(Y, f) / Var_all(f).
The variance is the plug-in of the linearisation: λ² Var_all(f)/N + Σ_h v²(e − ē)²/(Σv)² · n/(n − 1)
+ 2λ Σ_h v (f − f̄)(e − ē)/(N Σv), e = Y − λf, ē its weighted mean; the interval uses t_{n−1}.

Which π. For a given expected number of labels B = Σπ_i, E[(1/π − 1) r²] is smallest at
π_i ∝ √E[r² | confidence_i] (the paper's rule), capped at 1. A fixed map from confidence to π cannot
promise anything: a judge whose confidence says nothing would get a non-uniform π and a wider interval.
So hitkit estimates E[(Y − f)² | confidence] from human labels it has anyway — a uniform *pilot*
share of the budget, or an earlier study's export — by bins of confidence, shrunk to the pooled mean
by an empirical-Bayes factor that is 0 when the bins do not differ by more than their noise
(:func:`conditional_error`); then π ∝ √(that), bounded to [π_min, 1] and scaled to the budget
(:func:`inclusion_probabilities`). What is guaranteed: every π_i ≥ π_min > 0, Σπ_i = B exactly
(the expected number of human labels is the budget), and the estimate is unbiased to first order
whatever the judge and its confidence, because π depends only on data independent of the item's own
draw (the pilot of the other half of the items under cross-fitting, :func:`two_phase`). Not
guaranteed: a narrower interval; with uninformative confidence the shrinkage keeps π near uniform
and the cost is the pilot's noise, measured by ``benchmarks/judge_ppi.py`` (labels ratio ≤ 1.05).
"""

from __future__ import annotations

import math

import numpy as np

from hitkit.analysis.ppi import NAN, PPIEstimate, _interval

REFERENCE = (
    "active prediction-powered inference: inverse-probability-weighted PPI++ (Zrnic & Candès 2024; "
    "Angelopoulos, Duchi & Zrnic 2023), Hájek form"
)
PRIOR_LABELS = 2
"""Pseudo-labels of the pooled spread added to each confidence bin's own (:func:`conditional_error`)."""
PI_MIN = 0.02
"""The default floor of every item's probability of going to people: each item can be chosen."""


def _arrays(y, f, labelled, pi):
    f = np.asarray(f, dtype=float)
    y = np.asarray(y, dtype=float)
    xi = np.asarray(labelled, dtype=bool)
    p = np.broadcast_to(np.asarray(pi, dtype=float), f.shape)
    if not (y.shape == f.shape == xi.shape):
        raise ValueError(f"y, f and labelled must cover the same items; got {y.size}, {f.size} and {xi.size}")
    if np.isnan(f).any():
        raise ValueError(f"{int(np.isnan(f).sum())} item(s) have no judge score; the judge labels every item")
    if np.isnan(y[xi]).any():
        raise ValueError(f"{int(np.isnan(y[xi]).sum())} labelled item(s) have no human label")
    if ((p <= 0) | (p > 1) | np.isnan(p)).any():
        bad = p[(p <= 0) | (p > 1) | np.isnan(p)][0]
        raise ValueError(f"inclusion probability {bad!r} is not in (0, 1]: every item must be choosable")
    return y, f, xi, p


def ipw_lambda(y, f, labelled, pi) -> float:
    """λ̂ = E[w (Y − θ)(f − μ_f)] / E[w (f − μ_f)²], w = 1/π − 1, clipped to [0, 1] (module docstring);
    0 with fewer than two labels or where w (f − μ_f)² has no mass (every item labelled for sure)."""
    y, f, xi, p = _arrays(y, f, labelled, pi)
    n = int(xi.sum())
    w = 1 / p - 1
    den = (w * (f - f.mean()) ** 2).sum() / w.size * f.size / max(f.size - 1, 1)
    if n < 2 or den <= 0:
        return 0.0
    v = 1 / p[xi]
    yh, fh, wh = y[xi], f[xi], w[xi]
    ybar, fbar = (v * yh).sum() / v.sum(), (v * fh).sum() / v.sum()
    num = (v * wh * (yh - ybar) * (fh - fbar)).sum() / v.sum() * n / (n - 1)
    return float(np.clip(num / den, 0.0, 1.0))


def _fit(y, f, xi, p, lam: float) -> tuple[float, float]:
    """(θ̂_λ, variance) of the Hájek IPW PPI++ estimate at a given λ."""
    n, big_n = int(xi.sum()), f.size
    v = 1 / p[xi]
    e = y[xi] - lam * f[xi]
    ebar = (v * e).sum() / v.sum()
    estimate = lam * f.mean() + ebar
    variance = (v**2 * (e - ebar) ** 2).sum() / v.sum() ** 2 * n / (n - 1)
    if lam:
        variance += lam**2 * f.var(ddof=1) / big_n
        variance += 2 * lam * (v * (f[xi] - f.mean()) * (e - ebar)).sum() / (big_n * v.sum())
    return float(estimate), float(max(variance, 0.0))


def ipw_ppi_mean(y, f, labelled, pi, *, lam: float | None = None, level: float = 0.95) -> PPIEstimate:
    """Inverse-probability-weighted PPI++ estimate of the mean human label, with its t_{n−1} interval.

    ``f``: the judge's score on every one of the N items; ``labelled``: which items people labelled
    (ξ); ``y``: the human label where labelled (anything elsewhere); ``pi``: each item's probability of
    having been sent to people (a number: uniform). ``lam``: None tunes it (:func:`ipw_lambda`), 0 is
    the weighted human-only mean. ``human`` holds that human-only (λ = 0) estimate; ``n_effective``
    the labels it would need for the same variance. NaN with fewer than two labels."""
    y, f, xi, p = _arrays(y, f, labelled, pi)
    n, big_n = int(xi.sum()), f.size
    if n < 2:
        return PPIEstimate(**vars(NAN), n=n, n_unlabelled=big_n - n, human=NAN)
    lam = ipw_lambda(y, f, xi, p) if lam is None else float(lam)
    h_est, h_var = _fit(y, f, xi, p, 0.0)
    human = _interval(h_est, math.sqrt(h_var), level, n - 1)
    estimate, variance = _fit(y, f, xi, p, lam)
    effective = n * h_var / variance if variance > 0 else math.inf
    return PPIEstimate(
        **vars(_interval(estimate, math.sqrt(variance), level, n - 1)),
        lam=lam,
        n=n,
        n_unlabelled=big_n - n,
        n_effective=float(effective),
        human=human,
    )


def inclusion_probabilities(need, budget: float, *, pi_min: float = PI_MIN) -> np.ndarray:
    """π_i = min(1, max(π_min, c · need_i)) with c such that Σπ_i = ``budget`` (found by bisection):
    each item's probability of going to people, proportional to its ``need`` (√ of the expected squared
    error) within [π_min, 1]. All needs equal (or all zero) gives the uniform budget/N.

    Raises ValueError unless N·π_min ≤ budget ≤ N."""
    need = np.asarray(need, dtype=float)
    big_n = need.size
    if not (big_n * pi_min <= budget + 1e-9 and budget <= big_n + 1e-9):
        raise ValueError(
            f"a budget of {budget:g} human labels over {big_n} items with a floor of {pi_min:g} per item "
            f"needs {big_n * pi_min:g} <= budget <= {big_n}"
        )
    if (need < 0).any() or np.isnan(need).any():
        raise ValueError("the need of every item must be a number >= 0")
    if need.max() <= 0 or np.allclose(need, need[0]):
        return np.full(big_n, budget / big_n)
    lo, hi = 0.0, 1.0 / need[need > 0].min()
    for _ in range(60):  # Σ clip(c·need) is increasing in c: bisection to 2^-60 of the bracket
        c = (lo + hi) / 2
        if np.clip(c * need, pi_min, 1.0).sum() < budget:
            lo = c
        else:
            hi = c
    # Bisection finds which items are clipped; with those fixed, Σπ is linear in c and meets the budget exactly.
    pi = np.clip(hi * need, pi_min, 1.0)
    free = (pi > pi_min) & (pi < 1.0)
    if free.any():
        c = (budget - pi[~free].sum()) / need[free].sum()
        pi = np.where(free, np.clip(c * need, pi_min, 1.0), pi)
    return pi


def conditional_error(confidence_pilot, sq_error_pilot, confidence, *, bins: int = 5, weights_pilot=None) -> np.ndarray:
    """E[(Y − f)² | confidence] for every item, from pilot items with known squared error: bins of the
    items' confidence (quantiles, ties kept together), each bin's mean shrunk to the pooled mean by an
    empirical-Bayes factor τ²/(τ² + s_b²/n_b), with τ² the between-bin variance beyond the bins' own
    noise (0, so uniform, when the bins differ by no more than chance). ``weights_pilot``: the pilot's
    inverse-probability weights, if it was not uniform."""
    cp, sq, c = (np.asarray(a, dtype=float) for a in (confidence_pilot, sq_error_pilot, confidence))
    wp = np.ones_like(sq) if weights_pilot is None else np.asarray(weights_pilot, dtype=float)
    if sq.size < 2:
        return np.full(c.size, float(sq.mean()) if sq.size else 1.0)
    pooled = float((wp * sq).sum() / wp.sum())
    edges = np.unique(np.quantile(c, np.linspace(0, 1, bins + 1)[1:-1]))
    bin_all, bin_pilot = np.searchsorted(edges, c, side="right"), np.searchsorted(edges, cp, side="right")
    k = edges.size + 1
    count = np.bincount(bin_pilot, minlength=k).astype(float)
    wsum = np.bincount(bin_pilot, weights=wp, minlength=k)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(wsum > 0, np.bincount(bin_pilot, weights=wp * sq, minlength=k) / wsum, pooled)
    seen = count > 1
    if seen.sum() < 2:
        return np.full(c.size, pooled)
    # Each bin's noise from its own spread, steadied by two pseudo-labels of the spread pooled over bins: a bin
    # whose few labels happen to agree is not taken for a certain one, nor a calm bin for a noisy one.
    spread = np.bincount(bin_pilot, weights=wp * (sq - mean[bin_pilot]) ** 2, minlength=k) / np.maximum(wsum, 1e-300)
    within = float((wp * (sq - mean[bin_pilot]) ** 2).sum() / wp.sum()) * sq.size / max(sq.size - seen.sum(), 1)
    spread = (count * spread + PRIOR_LABELS * within) / (np.maximum(count - 1, 0) + PRIOR_LABELS)
    noise = np.where(seen, spread / np.maximum(count, 1), np.inf)
    between = float(np.average((mean[seen] - pooled) ** 2, weights=count[seen]))
    tau2 = max(0.0, between - float(np.average(noise[seen], weights=count[seen])))
    shrink = np.where(seen & (tau2 > 0), tau2 / (tau2 + np.where(seen, noise, 1.0)), 0.0)
    return np.maximum(pooled + shrink * (mean - pooled), 0.0)[bin_all]


def two_phase(
    rng: np.random.Generator,
    confidence: np.ndarray,
    budget: float,
    label,
    *,
    pilot: float = 0.3,
    pi_min: float = PI_MIN,
    bins: int = 5,
) -> tuple[np.ndarray, np.ndarray]:
    """The uncertainty rule within one study, cross-fitted: (labelled ξ, π) over the N items.

    A ``pilot`` share of the budget is drawn uniformly (π₀ = pilot·budget/N); ``label(index)`` gives the
    squared judge error (Y − f)² of the items it names once people labelled them. The items are split
    in two random halves; each half's second-phase probabilities come from :func:`conditional_error`
    on the *other* half's pilot, so an item's π never depends on its own draw (validity of the
    weights), and are scaled (:func:`inclusion_probabilities`) so that the expected number of labels
    is the budget. π_i = π₀ + (1 − π₀)·π₂ᵢ; an item already in the pilot costs nothing more."""
    confidence = np.asarray(confidence, dtype=float)
    big_n = confidence.size
    pi0 = pilot * budget / big_n
    first = rng.random(big_n) < pi0
    half = rng.random(big_n) < 0.5
    sq = np.full(big_n, np.nan)
    sq[first] = label(np.flatnonzero(first))
    pi = np.full(big_n, pi0)
    rest = (1 - pilot) * budget / (1 - pi0)  # Σ(1 − π₀)π₂ = (1 − pilot)·budget
    floor = max(0.0, (pi_min - pi0) / (1 - pi0))
    for side in (half, ~half):
        other = ~side & first
        need = np.sqrt(conditional_error(confidence[other], sq[other], confidence[side], bins=bins))
        share = rest * side.sum() / big_n
        pi2 = inclusion_probabilities(need, min(share, side.sum()), pi_min=min(floor, share / side.sum()))
        pi[side] = pi0 + (1 - pi0) * pi2
    second = rng.random(big_n) < (pi - pi0) / (1 - pi0)
    return first | second, pi


def second_wave(
    confidence,
    sq_error,
    pilot,
    half,
    stratum,
    budget: dict,
    *,
    pi_min: float = PI_MIN,
    bins: int = 5,
) -> tuple[np.ndarray, np.ndarray]:
    """A study's second wave after a uniform pilot: (π₂, π) over its N items, the probability of each
    item's second-wave draw and of its going to people at all.

    ``pilot`` marks the items sent to people first (a uniform sample within each stratum); ``sq_error``
    is (Y − f)² where people labelled them (NaN elsewhere: a pilot item nobody answered tells nothing); ``half`` splits the items in two (cross-fitting, as
    :func:`two_phase`): each half's need √E[(Y − f)² | confidence] comes from :func:`conditional_error` on
    the other half's pilot, pooled over the strata, and each stratum's half is scaled
    (:func:`inclusion_probabilities`) so that Σπ over stratum s is ``budget[s]`` (its expected number of
    human-labelled items), with π_i = π₀ₛ + (1 − π₀ₛ)·π₂ᵢ, π₀ₛ the stratum's pilot fraction, and every
    π_i ≥ min(``pi_min``, what the budget allows). A pilot item drawn again costs nothing more."""
    c, sq = np.asarray(confidence, dtype=float), np.asarray(sq_error, dtype=float)
    first, side_of, strata = np.asarray(pilot, dtype=bool), np.asarray(half, dtype=bool), np.asarray(stratum)
    pi2 = np.zeros(c.size)
    pi = np.zeros(c.size)
    for side in (side_of, ~side_of):
        other = ~side & first & np.isfinite(sq)
        need = np.sqrt(conditional_error(c[other], sq[other], c[side], bins=bins)) if side.any() else np.zeros(0)
        need_all = np.zeros(c.size)
        need_all[side] = need
        for s in np.unique(strata):
            everyone = strata == s
            pi0, items = first[everyone].mean(), everyone & side
            if pi0 >= 1 or not items.any():
                pi[items] = 1.0 if pi0 >= 1 else pi[items]
                continue
            rest = max(0.0, budget[s] - first[everyone].sum()) / (1 - pi0)
            share = min(rest * items.sum() / everyone.sum(), items.sum())
            floor = min(max(0.0, (pi_min - pi0) / (1 - pi0)), share / items.sum())
            pi2[items] = inclusion_probabilities(need_all[items], share, pi_min=floor)
            pi[items] = pi0 + (1 - pi0) * pi2[items]
    return pi2, pi


def agreement_confidence(calls) -> np.ndarray:
    """Confidence from the agreement of several calls (orders, samples or judges) on each item:
    |2·mean − 1| for scores in [0, 1] (1: all calls name the same winner; 0: split evenly). ``calls``:
    items × calls."""
    calls = np.asarray(calls, dtype=float)
    return np.abs(2 * np.nanmean(calls, axis=1) - 1)
