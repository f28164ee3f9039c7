"""Prediction-powered inference: a few human labels and an LLM judge's labels on every item.

A study runs an LLM judge on all N items and asks people about a uniformly random subset of n of
them. Prediction-powered inference (Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, "Prediction-
powered inference", Science 382, 2023) uses the judge's labels where there are no human ones and
corrects them by the judge's error measured on the labelled subset; its intervals are valid
whatever the judge's quality. PPI++ (Angelopoulos, Duchi & Zrnic, "PPI++: Efficient prediction-
powered inference", arXiv:2311.01453, 2023) weights the judge by a power-tuning parameter λ:

    θ̂_λ = mean(Y_h) + λ · (mean(f_u) − mean(f_h)),
    Var(θ̂_λ) = Var(Y − λ f) / n + λ² Var(f) / N_u,

with Y_h the n human labels, f_h the judge's labels on the same items and f_u the judge's labels
on the N_u items without a human label. The λ that minimises the variance is
λ* = Cov(Y, f) / ((1 + n/N_u) · Var(f)) (PPI++ Example 6.1), estimated from the data and clipped to
[0, 1]. λ = 0 is the human-only mean, λ = 1 the original PPI. Because the estimated λ minimises the
estimated variance and λ = 0 is among the candidates, **PPI++ is never asymptotically worse than
the human-only estimate: where the judge does not help, λ̂ → 0 and the estimate falls back to
human-only** (λ = 0 exactly gives the human-only mean and interval; a λ̂ of 0 gives the mean, and the
jackknife interval below may be a little wider). The interval is the normal
one, θ̂ ± z · se. Using the judge's mean over *all* N items, as the issue writes it, is the same
estimator with λ scaled by N_u/N; the form above keeps the two samples independent, as in the papers.

The gain is bounded: the effective human sample size n · Var(human-only) / Var(PPI) is at most
n / (1 − ρ² · N_u/(n + N_u)) for a judge correlating ρ with the human label, and at
most about 2n when the judge is no better than the systems it evaluates (Dorner, Nastl & Hardt,
"Limits to scalable evaluation at the frontier: LLM as a judge won't beat twice the data",
ICLR 2025).

Small samples. A study has few human votes per pair (200 over six pairs: about 33 each), where
the plug-in normal interval is too narrow, and more so with λ̂ fitted on the same votes: the
plug-in variance treats λ̂ as known and at its in-sample minimum. With ``small_sample=True``
(default) the variance is the delete-one jackknife over the human-labelled items with λ̂
re-estimated each time (:func:`jackknife_variance`), plus the judge-only part, and the quantile is
t with n − 1 degrees of freedom, as hitkit's bootstrap intervals use t_{n−1}
(``inference.expanded_tail``). For a fixed λ the jackknife is the ordinary ddof-1 variance, so
λ = 0 gives the human-only t interval exactly. When λ̂ = 0 the estimate is the human-only mean and
the interval also counts the chance that λ̂ could have come out positive, so it can be slightly
wider than the human-only one. Measured by ``benchmarks/judge_ppi.py`` (about 33 votes per
pair, 1,000 replications): the plug-in normal interval covered 91.9 %; the plug-in with a
regression residual variance (ddof 2) and t_{n−2} 93.7 % (a development run); the jackknife t
interval 94.6 %, as often as the human-only t interval, for 4 % more width than the plug-in.
``small_sample=False`` gives ppi-python's interval (``ppi_py.ppi_mean_ci``, the papers' code):
the plug-in variance with population standard deviations (ddof 0) and the normal quantile; with
the same λ the two agree to rounding (``tests/test_ppi.py``). Its λ̂ divides a ddof-0 covariance by
a ddof-1 variance; ours uses ddof 1 for both (a relative difference of 1/n).

Pairwise win rates (METHODS §3): an item is one vote on a pair; Y = the human's score for the
first system of the pair (1 win, 0 loss, ½ tie; the mean when several people voted on the item)
and f = the judge's score for the same system on the same item, run with both display orders and
averaged (:func:`order_averaged`), which cancels the judge's position bias. :func:`win_rates`
gives, per pair, the human-only, judge-only and prediction-powered estimates; :func:`judge_bias`
the judge's bias per system on the labelled items. Any mean over items (mean z per criterion)
goes through :func:`ppi_mean` the same way.

Ratios of means (:func:`ppi_ratio`): Spot The Bot's win rate WINS / (WINS + LOSSES) is E[y] / E[z]
with y an item's share of wins and z its share of decisive outcomes. PPI++ estimates it with one λ
for numerator and denominator, the M-estimator of E[y − θz] = 0; λ is tuned on the linearised
residuals y − θ̂₀z and f − θ̂₀g (θ̂₀ the human-only ratio), where the ratio's variance is a mean's;
λ = 0 is the human-only ratio Σy/Σz exactly. The interval is the delete-one jackknife over the
labelled items with θ̂₀ and λ re-estimated, plus the judge-only part, and t_{n−1}.

The human subset must be a uniformly random sample of the items the judge labelled (or of each
pair's items): PPI's validity rests on it. Items are treated as independent; clustering of votes
by worker is not accounted for here. Pure functions: numpy, scipy and pandas, no database.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.bounded import rate_interval
from hitkit.tables.schema import JUDGE_ESTIMATE_COLUMNS

REFERENCE = (
    "prediction-powered inference with power tuning, PPI++ (Angelopoulos, Duchi & Zrnic "
    "2023; Angelopoulos et al., Science 2023)"
)


@dataclass(frozen=True)
class Interval:
    """A point estimate, its standard error and its normal interval."""

    estimate: float
    se: float
    low: float
    high: float


@dataclass(frozen=True)
class PPIEstimate(Interval):
    """A prediction-powered estimate, with what it used and what it gained over human-only.

    ``lam``: the power-tuning parameter (0 = human-only); ``n``: human labels; ``n_unlabelled``:
    judge labels without a human one; ``n_effective``: n · Var(human-only) / Var(PPI), the number
    of human labels the human-only estimate would need for the same variance; ``human``: the
    human-only estimate from the same n labels.
    """

    lam: float = math.nan
    n: int = 0
    n_unlabelled: int = 0
    n_effective: float = math.nan
    human: Interval = Interval(math.nan, math.nan, math.nan, math.nan)

    @property
    def fallback(self) -> bool:
        """True where the judge did not help (λ̂ = 0): the estimate is the human-only one, its interval that or
        a little wider (the jackknife counts that λ̂ could have come out positive)."""
        return self.lam == 0.0

    def three_ways(self, judge: Interval) -> tuple[float, ...]:
        """Estimate, low and high people only, then ``judge`` only, then prediction-powered: the middle
        columns of a judge table's row."""
        people = (self.human.estimate, self.human.low, self.human.high)
        return (*people, judge.estimate, judge.low, judge.high, self.estimate, self.low, self.high)


NAN = Interval(math.nan, math.nan, math.nan, math.nan)


def _quantile(level: float, df: int | None) -> float:
    """The two-sided ``level`` quantile: t with ``df`` degrees of freedom, normal for None."""
    upper = 0.5 + level / 2
    return float(stats.norm.ppf(upper) if df is None else stats.t.ppf(upper, df))


def _interval(estimate: float, se: float, level: float, df: int | None) -> Interval:
    half = _quantile(level, df) * se
    return Interval(float(estimate), float(se), float(estimate - half), float(estimate + half))


def mean_interval(y, *, level: float = 0.95, small_sample: bool = True) -> Interval:
    """Mean of ``y`` with its interval: the t interval, mean ± t_{n−1} · sd(y) / √n (or with
    ``small_sample=False`` the normal one with the ddof-0 sd, as ppi-python's classical interval):
    the human-only (and the naive judge-only) estimate. NaN with fewer than two values."""
    y = np.asarray(y, dtype=float)
    n = y.size
    if n < 2:
        return NAN
    ddof, df = (1, n - 1) if small_sample else (0, None)
    return _interval(y.mean(), y.std(ddof=ddof) / math.sqrt(n), level, df)


def _tuned(covariance, variance, n, big_n):
    """λ = Cov / ((1 + n/N_u) · Var), clipped to [0, 1]; 0 where Var is not positive (vectorised)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.asarray(covariance) / ((1 + n / big_n) * np.asarray(variance))
    return np.where(np.asarray(variance) > 0, np.clip(np.nan_to_num(lam), 0.0, 1.0), 0.0)


def optimal_lambda(y, f_labelled, f_unlabelled) -> float:
    """PPI++'s power-tuning parameter for a mean, estimated and clipped to [0, 1]:
    λ̂ = Cov(Y, f_h) / ((1 + n/N_u) · Var(f_h ∪ f_u)). 0 where the judge's labels do not vary."""
    y, fh, fu = (np.asarray(a, dtype=float) for a in (y, f_labelled, f_unlabelled))
    n, big_n = y.size, fu.size
    if n < 2 or big_n < 2:  # the judge's variance on the unlabelled items needs two of them
        return 0.0
    variance = np.concatenate([fh, fu]).var(ddof=1)
    return float(_tuned(np.cov(y, fh, ddof=1)[0, 1], variance, n, big_n))


def jackknife_variance(y, f_labelled, f_unlabelled) -> float:
    """Variance of the PPI++ estimate with λ̂ re-estimated: the delete-one jackknife over the
    human-labelled items (Quenouille–Tukey, (n−1)/n · Σ(θ̂₋ᵢ − θ̄)²) plus λ̂² Var(f_u)/N_u.

    The plug-in variance treats λ̂ as known; with ~30 labels its choice is noisy and the plug-in
    interval too narrow. For a fixed λ the jackknife part equals Var(Y − λ f)/n (ddof 1) exactly.
    """
    y, fh, fu = (np.asarray(a, dtype=float) for a in (y, f_labelled, f_unlabelled))
    n, big_n = y.size, fu.size
    m = n - 1  # labels left in each leave-one-out sample
    sy, sf, syf, sff = y.sum(), fh.sum(), (y * fh).sum(), (fh * fh).sum()
    covariance = ((syf - y * fh) - (sy - y) * (sf - fh) / m) / (m - 1)
    total, squares, count = sf - fh + fu.sum(), sff - fh * fh + (fu * fu).sum(), m + big_n
    variance = (squares - total**2 / count) / (count - 1)
    lam = _tuned(covariance, variance, m, big_n)
    leave_out = (sy - y) / m + lam * (fu.mean() - (sf - fh) / m)
    jack = m / n * ((leave_out - leave_out.mean()) ** 2).sum()
    return float(jack + optimal_lambda(y, fh, fu) ** 2 * fu.var(ddof=1) / big_n)


def ppi_mean(
    y, f_labelled, f_unlabelled, *, lam: float | None = None, level: float = 0.95, small_sample: bool = True
) -> PPIEstimate:
    """PPI++ estimate of the mean of the human label, with its interval (module docstring).

    ``y`` and ``f_labelled``: the human and the judge's labels on the n labelled items (same
    order); ``f_unlabelled``: the judge's labels on the other items. ``lam``: None (default)
    estimates it (:func:`optimal_lambda`); 0 gives the human-only estimate exactly; 1 is plain
    PPI. NaN with fewer than two human labels; human-only with fewer than two unlabelled items
    (the judge's variance there cannot be estimated).
    ``small_sample``: the jackknife t interval (default) or ppi-python's normal one (module
    docstring).
    """
    y, fh, fu = (np.asarray(a, dtype=float) for a in (y, f_labelled, f_unlabelled))
    if y.shape != fh.shape:
        raise ValueError(
            f"{y.size} human labels but {fh.size} judge labels on the same items; "
            "give the judge's label for every human-labelled item"
        )
    n, big_n = y.size, fu.size
    human = mean_interval(y, level=level, small_sample=small_sample)
    if n < 2:
        return PPIEstimate(**vars(NAN), n=n, n_unlabelled=big_n, human=human)
    fitted = lam is None
    if lam is None:
        lam = optimal_lambda(y, fh, fu)
    if big_n < 2:  # no variance of the judge's labels without a human one to pay for its weight: people only
        lam = 0.0
    estimate = y.mean() + (lam * (fu.mean() - fh.mean()) if lam else 0.0)  # λ = 0: the mean, whatever f holds
    if not small_sample:
        variance, df = (y - lam * fh).var() / n + (lam**2 * fu.var() / big_n if big_n else 0), None
    elif fitted and big_n > 1 and n > 2:
        variance, df = jackknife_variance(y, fh, fu), n - 1
    else:
        variance, df = (y - lam * fh).var(ddof=1) / n, n - 1
        if lam and big_n > 1:
            variance += lam**2 * fu.var(ddof=1) / big_n
    se = math.sqrt(variance)
    human_variance = human.se**2
    effective = n * human_variance / variance if variance > 0 else float(n) if human_variance == 0 else math.inf
    return PPIEstimate(
        **vars(_interval(estimate, se, level, df)),
        lam=float(lam),
        n=n,
        n_unlabelled=big_n,
        n_effective=float(effective),
        human=human,
    )


def order_averaged(first_shown, second_shown):
    """The judge's score for system_a on each item, from its two calls: ``first_shown`` with
    system_a shown first, ``second_shown`` with it shown second, each the judge's score for
    system_a (1 win, 0 loss, ½ tie). Their mean: a preference for a display position counts once
    for each system and cancels."""
    return (np.asarray(first_shown, dtype=float) + np.asarray(second_shown, dtype=float)) / 2


ITEM_COLUMNS = ("system_a", "system_b", "human", "judge")
"""One row per item: the pair, the human score for system_a (1/0/½, the mean of several votes;
NaN where no person voted on the item) and the judge's order-averaged score for system_a."""


def _canonical(items: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ITEM_COLUMNS if c not in items.columns]
    if missing:
        raise ValueError(f"items lack column(s) {', '.join(missing)}; need {', '.join(ITEM_COLUMNS)}")
    if items["judge"].isna().any():
        raise ValueError(
            f"{int(items['judge'].isna().sum())} item(s) have no judge score; the "
            "judge labels every item (drop the items it failed on, at random)"
        )
    swap = (items["system_a"] > items["system_b"]).to_numpy()
    out = pd.DataFrame(
        {
            "system_a": np.where(swap, items["system_b"], items["system_a"]),
            "system_b": np.where(swap, items["system_a"], items["system_b"]),
            "human": np.where(swap, 1 - items["human"].to_numpy(float), items["human"].to_numpy(float)),
            "judge": np.where(swap, 1 - items["judge"].to_numpy(float), items["judge"].to_numpy(float)),
        }
    )
    return out


WIN_RATE_COLUMNS = ("system_a", "system_b", *JUDGE_ESTIMATE_COLUMNS)


def win_rates(items: pd.DataFrame, *, level: float = 0.95, small_sample: bool = True) -> pd.DataFrame:
    """Per unordered pair (system_a < system_b by name): the win rate of system_a over system_b,
    human-only, judge-only and prediction-powered, each with its ``level`` interval.

    ``items``: :data:`ITEM_COLUMNS`, either orientation. ``n_human``: labelled items;
    ``n_judge``: all items (the judge labels every one). The judge-only interval is the naive one
    over all items: it ignores the judge's bias, which is what the prediction-powered one corrects.
    ``lam``: PPI++'s λ̂; ``fallback``: λ̂ = 0, the ppi estimate is then the human-only one (its interval that or a
    little wider);
    ``n_effective``: human labels worth as much as the combined estimate.
    """
    canon = _canonical(items)
    rows = []
    for (a, b), pair in canon.groupby(["system_a", "system_b"], sort=True):
        labelled = pair["human"].notna().to_numpy()
        y, f = pair["human"].to_numpy()[labelled], pair["judge"].to_numpy()
        ppi = ppi_mean(y, f[labelled], f[~labelled], level=level, small_sample=small_sample)
        judge = mean_interval(f, level=level, small_sample=small_sample)
        # Win rates live in [0, 1]: intervals clipped there, and 0 (or n) of n wins gets Wilson's, not [0, 0].
        human = rate_interval(y, ppi.human.low, ppi.human.high, level)
        ppi_low, ppi_high = (
            human
            if ppi.lam == 0 and ppi.low == ppi.human.low and ppi.high == ppi.human.high
            else rate_interval(y if ppi.low == ppi.high else [], ppi.low, ppi.high, level)
        )
        rows.append(
            (
                a,
                b,
                int(labelled.sum()),
                len(pair),
                ppi.human.estimate,
                *human,
                judge.estimate,
                *rate_interval(f, judge.low, judge.high, level),
                ppi.estimate,
                ppi_low,
                ppi_high,
                ppi.lam,
                ppi.n_effective,
                ppi.fallback,
            )
        )
    return pd.DataFrame(rows, columns=list(WIN_RATE_COLUMNS))


def judge_bias(items: pd.DataFrame, *, level: float = 0.95, small_sample: bool = True) -> pd.DataFrame:
    """The judge's bias for each system on the human-labelled items: the mean of (judge's score
    for the system − the human's score for it) over the labelled items it took part in, with its
    normal interval. Positive: the judge favours the system (e.g. a verbose one).
    Columns: system, n_human, bias, bias_low, bias_high."""
    canon = _canonical(items)
    labelled = canon[canon["human"].notna()]
    diff = (labelled["judge"] - labelled["human"]).to_numpy()
    rows = []
    for system in sorted(set(canon["system_a"]) | set(canon["system_b"])):
        sign = np.where(labelled["system_a"] == system, 1.0, np.where(labelled["system_b"] == system, -1.0, 0.0))
        d = (sign * diff)[sign != 0]
        est = mean_interval(d, level=level, small_sample=small_sample)
        rows.append((system, int(d.size), est.estimate, est.low, est.high))
    return pd.DataFrame(rows, columns=["system", "n_human", "bias", "bias_low", "bias_high"])
