"""Anytime-valid confidence sequences for the comparisons a study's stopping rule watches, and the rule.

A stopping rule looks at the data after every HIT. A fixed-sample test looked at that often rejects a
true null far more often than its α; a *confidence sequence* does not: its intervals cover the true
value at every look at once with probability ≥ 1 − α, so a study may stop the moment an interval
excludes the null, and the claim keeps its level (Howard, Ramdas, McAuliffe & Sekhon, "Time-uniform,
nonparametric, nonasymptotic confidence sequences", Annals of Statistics 49(2), 2021).

The boundary is Robbins' two-sided normal mixture (Howard et al. 2021, eq. (14)): for a running sum
``S_t`` of ``t`` observations of mean ``μ`` and variance proxy ``σ²`` (``V_t = tσ²``),

    |S_t − tμ| < sqrt((V_t + ρ) · log((V_t + ρ) / (ρ α²)))   for every t, with probability ≥ 1 − α.

Three sequences:

* **exact** (``Comparison.exact``): the observations are bounded, so ``σ²`` is a known bound
  (a win score in [0, 1] is 1/4-sub-Gaussian, Hoeffding); the sequence is valid in finite samples
  whatever the look times (pairwise votes, where the A/B side is a fresh coin flip each time).
* **asymptotic**: ``σ²`` is estimated from the data so far (a cluster-robust variance where
  observations share a worker or a conversation); this is the asymptotic confidence sequence of
  Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas ("Time-uniform central limit theory and asymptotic
  confidence sequences", Annals of Statistics, 2024, Theorem 2.2), whose ``ρ`` is ours as 1/ρ².
* **bounded** (``Comparison.clusters``): bounded observations in a known range, in arrival order,
  each with the same conditional expectation given those before it; the interval is the hedged betting
  confidence sequence of Waudby-Smith & Ramdas ("Estimating means of bounded random variables by
  betting", JRSS-B 86(1), 2024, Theorem 3, predictable plug-in bets; :func:`bounded_interval`), valid in
  finite samples at every look at once. The protocols' stopping rules (Spot The Bot's aside) feed it
  **one observation per worker** (:func:`hitkit.analysis.per_worker.worker_comparison`,
  :mod:`hitkit.analysis.contributions`): the mean score of the worker's first HIT that holds the pair,
  because a worker's answers share their taste however many HITs they do. Counting each HIT as a fresh
  draw claimed a difference between equal systems in 33–62 % of simulated studies when 5 workers did
  70 % of the HITs; per worker, at most 0.5 % (benchmarks/adaptive.py). The exact guarantee and its
  assumptions (independent workers, a design that does not depend on the answers) are in
  :mod:`hitkit.analysis.contributions`. It adapts to the observations' variance (and, betting, to a
  large effect within a few observations).
* **Spot The Bot's test** (``Comparison.flip``): not a sequence but the group-sequential worker sign-flip
  test of :mod:`hitkit.analysis.signflip` over every annotation a worker gives on the conversations they
  reached first; its interval is the estimate ± the distance from ½ the test needed, so it excludes ½
  exactly when the test claims.

``ρ`` makes the interval narrowest at the planned number of observations (:func:`rho_for`): for the
exact sequence it is fixed before the study; for the asymptotic one it scales with the variance
estimated so far, which is asymptotically harmless. Any fixed ρ gives a valid sequence. A family of comparisons shares α by
Bonferroni (α/K each), which keeps every sequence simultaneously valid.

The rule (:func:`settle`, :mod:`hitkit.analysis.decisions`) says when a pre-registered decision is made:
``best`` (one system's intervals against every other exclude the null in its favour), ``pairs`` (every
pair either differs or is not expected to differ by the end of the design: futility never adds a false
claim), ``pair`` (one named pair, likewise) or ``clear`` (every pair differs, is futile, or is undecided:
at its present estimate it would not differ by the end of the design; undecided pairs are reported as
such). "By the end of the design" is a comparison's horizon: the observations it can still expect
(:attr:`Comparison.horizon`), computed online from the data so far, never from data still to come.
Pure functions: no database, no scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from hitkit.analysis.betting import (  # noqa: F401 - re-exported: the bounded sequence's statistics
    BET_CAP,
    GRID,
    bounded_excludes,
    bounded_interval,
    bounded_radius,
    bounded_step,
)
from hitkit.analysis.decisions import (  # noqa: F401 - re-exported: the rule's decisions
    DECISIONS,
    Decision,
    RuleState,
    as_table,
    leader,
    settle,
)

REFERENCE = (
    "Robbins' normal-mixture confidence sequence (Howard et al., Annals of Statistics 2021; "
    "asymptotic form: Waudby-Smith et al., Annals of Statistics 2024)"
)
BOUNDED_REFERENCE = (
    "hedged betting confidence sequence, predictable plug-in bets (Waudby-Smith & Ramdas, JRSS-B 2024, Theorem 3)"
)


def radius(t, variance, alpha: float, rho: float):
    """Half-width of the confidence sequence for a mean after ``t`` observations of this variance
    (proxy); vectorised over ``t`` and ``variance``. Infinite before the first observation."""
    t = np.asarray(t, dtype=float)
    v = t * np.asarray(variance, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt((v + rho) * np.log((v + rho) / (rho * alpha**2))) / t
    return np.where(t > 0, r, np.inf)


@lru_cache(maxsize=64)
def _rho_factor(alpha: float) -> float:
    """c minimising (1 + c)·(log((1 + c)/c) + 2 log(1/α)): with ρ = c·V*, the boundary is narrowest at V*."""
    lo, hi = math.log(1e-4), math.log(1e2)
    g = lambda lc: (1 + math.exp(lc)) * (math.log((1 + math.exp(lc)) / math.exp(lc)) + 2 * math.log(1 / alpha))  # noqa: E731
    for _ in range(100):  # golden-section search on log c
        a, b = lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618
        lo, hi = (lo, b) if g(a) < g(b) else (a, hi)
    return math.exp((lo + hi) / 2)


def rho_for(planned_t: float, variance: float, alpha: float) -> float:
    """The ρ that makes the sequence narrowest after ``planned_t`` observations of this variance."""
    return _rho_factor(alpha) * max(planned_t, 1.0) * max(variance, 1e-12)


@dataclass(frozen=True)
class Comparison:
    """One watched comparison of systems a and b: the mean of an a-over-b score so far.

    ``null`` is the score's value when a and b are equal (0.5 for a win score, 0 for a difference in
    mean z); ``n`` counts the sequence's observations (votes, HITs, annotations); ``variance`` is per
    observation, a known bound when ``exact`` or an estimate (cluster-robust) when not; ``planned``
    is the number of observations the fixed design would give it (ρ is tuned there)."""

    a: str
    b: str
    n: int
    estimate: float
    variance: float
    planned: float
    null: float = 0.0
    exact: bool = False
    clusters: tuple[float, ...] | None = None
    """The bounded sequence's observations: each cluster's mean score, in arrival order (then ``n`` is
    their count, ``planned`` the clusters the fixed design gives the pair, ``variance`` their
    variance so far, and ``estimate`` their mean)."""
    bounds: tuple[float, float] = (0.0, 1.0)
    """The range every cluster mean lies in (the bounded sequence only)."""
    expected: float | None = None
    """The observations the comparison is expected to have when the fixed design is done, projected from
    the data so far (live chat: ``n`` + the HITs still planned to hold the pair × the share of HITs so far
    that pass their own QC test, since a HIT that fails adds no observation; at the end of the design,
    ``n``); the horizon of futility and of ``undecided``. None: ``planned``.
    The bets are tuned at :attr:`tuning` where given, else at ``planned``."""
    tuning: tuple[float, ...] | None = None
    """The bounded sequence only: per observation, the horizon its bet was tuned to, fixed when it arrived
    from counts of what came before (:func:`hitkit.analysis.contributions.tuning`), so the bets stay
    predictable. None: every bet tuned at ``planned``."""

    flip: object | None = None
    """Spot The Bot's rule (:mod:`hitkit.analysis.signflip`): the pair's annotations as a
    :class:`~hitkit.analysis.signflip.FlipRows`; its interval comes from the sign-flip test, not a sequence."""

    @property
    def horizon(self) -> float:
        """The observations the pair can still expect by the end of the budget: :attr:`expected`, else
        :attr:`planned`."""
        return self.planned if self.expected is None else self.expected


@dataclass(frozen=True)
class Interval:
    """A comparison's confidence-sequence interval now, and what it says."""

    a: str
    b: str
    n: int
    estimate: float
    low: float
    high: float
    null: float
    futile: bool = False
    undecided: bool = False
    """The ``clear`` decision's relaxed futility: after :data:`MIN_UNDECIDED` observations, an estimate that
    stayed where it is would not exclude the null at the comparison's horizon (:attr:`Comparison.horizon`:
    the observations it can still expect by the end of the design; no allowance for what is still to
    come). Never a claim: an undecided pair is reported as such."""

    @property
    def winner(self) -> str | None:
        """The system the interval shows better (it excludes the null), or None."""
        if self.low > self.null:
            return self.a
        if self.high < self.null:
            return self.b
        return None

    @property
    def settled(self) -> bool:
        return self.winner is not None or self.futile


MIN_UNDECIDED = 20
"""Observations a pair needs before the ``clear`` decision may declare it undecided."""

MIN_ASYMPTOTIC = 20
"""Observations an asymptotic sequence needs before its interval is finite. Its variance is estimated,
and from a handful of HITs the estimate can be near zero, collapsing the interval: with three equal
live-chat systems and a look after every HIT, an interval from the second HIT on made a false claim in
about 17 % of simulated studies at α = 0.05 (tests/test_stopping.py measures the rate with this floor)."""


def intervals(comparisons: Sequence[Comparison], alpha: float) -> list[Interval]:
    """Every comparison's interval, α shared among them by Bonferroni; each pair also says whether it
    is futile: even at its horizon (:attr:`Comparison.horizon`, the planned size or what the pair can
    still expect), an interval around an estimate this close to the null (plus two standard errors of
    what is left to observe) would still hold the null. For a bounded comparison the interval it will
    have there is :func:`bounded_radius`'s approximation."""
    k = max(len(comparisons), 1)
    each = alpha / k
    out = []
    for c in comparisons:
        if c.flip is not None:
            out.append(_flip_interval(c, each))
            continue
        if c.clusters is not None:
            lo, hi = c.bounds
            width = hi - lo
            tuned = c.planned if c.tuning is None else np.asarray(c.tuning, dtype=float)
            low, high = bounded_interval(np.asarray(c.clusters, dtype=float), lo, hi, each, tuned, c.null)
            r_plan = width * float(
                bounded_radius(
                    max(c.horizon, c.n),
                    c.variance / width**2,
                    each,
                    c.planned if c.tuning is None else max(c.horizon, c.n),  # tuned as the bets are
                    min(max((c.null - lo) / width, 0.01), 0.99),
                )
            )
            inside = low <= c.null <= high
            # at or past its horizon the interval it will have is the one it has: inside, it is futile
            futile = inside and c.n > 0 if c.n >= c.horizon else _futile(c, inside, r_plan)
            out.append(
                Interval(c.a, c.b, c.n, c.estimate, low, high, c.null, futile, futile or _undecided(c, inside, r_plan))
            )
            continue
        rho = rho_for(c.planned, c.variance, each)
        known = c.n > 0 and c.variance > 0 and (c.exact or c.n >= MIN_ASYMPTOTIC)
        r = float(radius(c.n, c.variance, each, rho)) if known else math.inf
        r_plan = float(radius(max(c.horizon, c.n), c.variance, each, rho)) if c.variance > 0 else math.inf
        inside = math.isfinite(r) and abs(c.estimate - c.null) < r
        out.append(
            Interval(
                c.a,
                c.b,
                c.n,
                c.estimate,
                c.estimate - r,
                c.estimate + r,
                c.null,
                _futile(c, inside, r_plan),
                _undecided(c, inside, r_plan),
            )
        )
    return out


def _flip_interval(c: Comparison, each: float) -> Interval:
    """Spot The Bot's pair by its sign-flip test at α ``each``: futile (and undecided) once every planned
    conversation is seen without a claim."""
    from hitkit.analysis.signflip import verdict

    found = verdict(c.a, c.b, c.flip, c.planned, each, c.null)  # type: ignore[arg-type]
    return Interval(
        c.a, c.b, found.workers, found.estimate, found.low, found.high, c.null, found.finished, found.finished
    )


def _undecided(c: Comparison, inside: bool, r_planned: float) -> bool:
    """:attr:`Interval.undecided`: enough observations, the null inside the interval, and the estimate
    closer to the null than the planned-size radius."""
    return bool(inside and c.n >= MIN_UNDECIDED and math.isfinite(r_planned) and abs(c.estimate - c.null) < r_planned)


def _futile(c: Comparison, inside: bool, r_planned: float) -> bool:
    """True when the comparison cannot be expected to exclude its null by its horizon: its
    estimate (``inside`` its interval now), moved toward the far side by two standard errors of its own
    uncertainty and of what is still to be observed, stays inside the interval it will have then
    (radius ``r_planned``)."""
    if c.n <= 0 or not inside or c.variance <= 0 or not math.isfinite(r_planned):
        return False
    planned = max(c.horizon, c.n)
    left = planned - c.n
    sd = math.sqrt(c.variance)
    reach = 2 * sd * math.sqrt(left) / planned + 2 * sd / math.sqrt(c.n) * left / planned
    return abs(c.estimate - c.null) + reach < r_planned


def from_means(
    a: str,
    b: str,
    means: np.ndarray,
    planned: float,
    *,
    null: float,
    bounds: tuple[float, float],
    expected: float | None = None,
    tuning: np.ndarray | None = None,
) -> Comparison:
    """The bounded sequence's comparison of a and b from its observations in arrival order (``tuning``:
    :attr:`Comparison.tuning`, one horizon per observation)."""
    if not len(means):
        return Comparison(a, b, 0, null, 0.0, planned, null=null, clusters=(), bounds=bounds, expected=expected)
    if tuning is not None and len(tuning) != len(means):
        raise ValueError(f"{a}–{b}: {len(tuning)} bet horizons for {len(means)} observations")
    variance = float(np.var(means, ddof=1)) if len(means) > 1 else 0.0
    return Comparison(
        a,
        b,
        len(means),
        float(np.mean(means)),
        variance,
        planned,
        null=null,
        clusters=tuple(float(m) for m in means),
        bounds=bounds,
        expected=expected,
        tuning=None if tuning is None else tuple(float(h) for h in tuning),
    )
