"""Live chat's system scores (METHODS §1, steps 6–8): mean z per criterion and overall, one-sided
pairwise significance, clustered bootstrap intervals, and the self-replication of two runs."""

from __future__ import annotations

import itertools
import math
from typing import Literal, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.inference import (
    DEFAULT_CORRECTION,
    Correction,
    adjust,
    bootstrap_interval,
    check_correction,
    cluster_codes,
    cluster_weights,
    clusters_per_column,
    fisher_interval,
)
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA, Criterion

INTERVAL_UNITS: tuple[str, ...] = ("worker", "conversation", "rating")


SignificanceUnit = Literal["worker", "rating", "conversation"]
SIGNIFICANCE_UNITS: tuple[str, ...] = ("worker", "rating", "conversation")
DEFAULT_SIGNIFICANCE_UNIT: SignificanceUnit = "worker"
"""The significance matrix's default test: worker-clustered (valid when workers differ in taste and scale);
``rating`` is Ji et al.'s per-rating Mann–Whitney, which rejected 23.9 % of true nulls at 5 % with worker ×
system and conversation effects (benchmarks/coverage.py measures both)."""


IntervalUnit = Literal["worker", "conversation", "rating"]


def system_scores(kept: pd.DataFrame, criteria: Sequence[Criterion] = DEFAULT_CRITERIA) -> pd.DataFrame:
    """Step 5: per system n, overall z (mean of all its criterion ratings), z per criterion, raw."""
    by_system = kept.groupby("system")
    table = by_system.agg(n=("z", "size"), z=("z", "mean"))
    per_criterion = kept.pivot_table(index="system", columns="criterion", values="z", aggfunc="mean")
    for c in criteria:
        table[c.name] = per_criterion[c.name] if c.name in per_criterion else math.nan
    table["raw"] = by_system["oriented"].mean()
    table = table.sort_values("z", ascending=False)
    table["rank"] = table["z"].rank(ascending=False, method="min").astype(int)
    return table.reset_index()


def worker_clustered_tests(kept: pd.DataFrame, systems: Sequence[str]) -> dict[tuple[str, str], float]:
    """One-sided p that a's mean z exceeds b's for every ordered pair, clustered by worker: the difference of
    the two systems' mean z (all their criterion ratings, as :func:`system_scores`) over its cluster-robust
    (sandwich) standard error, each worker's influence (S_wa − z̄_a·C_wa)/N_a − (S_wb − z̄_b·C_wb)/N_b
    (S: the worker's summed z of the system, C: their count, N: the system's ratings) squared and summed
    × G/(G − 1) over the G workers who rated either, referred to Student's t with G − 1 degrees of freedom.
    A worker's ratings move together (their standardisation, taste and conversations), so this is the
    test that keeps its level when workers differ; conversations are nested in workers, so their effects
    are covered too. NaN where a system has no ratings or fewer than two workers rated the pair."""
    codes, workers = pd.factorize(kept["worker_id"].astype(str))
    column = pd.Index(list(systems)).get_indexer(kept["system"])
    ok = column >= 0
    sums = np.zeros((len(workers), len(systems)))
    counts = np.zeros_like(sums)
    np.add.at(sums, (codes[ok], column[ok]), kept["z"].to_numpy(float)[ok])
    np.add.at(counts, (codes[ok], column[ok]), 1.0)
    totals = counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums.sum(axis=0) / totals
        influence = (sums - means * counts) / totals
    out = {}
    for i, a in enumerate(systems):
        for j, b in enumerate(systems):
            if i == j:
                continue
            rated = (counts[:, i] + counts[:, j]) > 0
            g = int(rated.sum())
            if not (totals[i] > 0 and totals[j] > 0) or g < 2:
                out[(a, b)] = math.nan
                continue
            variance = g / (g - 1) * float(((influence[rated, i] - influence[rated, j]) ** 2).sum())
            diff = float(means[i] - means[j])
            if variance <= 0:
                out[(a, b)] = 0.0 if diff > 0 else 1.0
                continue
            out[(a, b)] = float(stats.t.sf(diff / math.sqrt(variance), g - 1))
    return out


def _observations(kept: pd.DataFrame, unit: SignificanceUnit) -> pd.DataFrame:
    if unit == "rating":
        return kept[["system", "z"]]
    if unit == "conversation":
        return kept.groupby(["system", "conversation_id"], as_index=False)["z"].mean()
    raise ValueError(f"significance unit {unit!r}; use one of {', '.join(SIGNIFICANCE_UNITS)}")


def pairwise_significance(
    kept: pd.DataFrame,
    *,
    unit: SignificanceUnit = DEFAULT_SIGNIFICANCE_UNIT,
    order: Sequence[str] | None = None,
    correction: Correction = DEFAULT_CORRECTION,
) -> pd.DataFrame:
    """Step 6: for every ordered pair (a, b), a one-sided p that a's z exceed b's.

    ``unit="worker"`` (default): :func:`worker_clustered_tests`, the difference of mean z with a
    worker-clustered standard error (valid when workers differ). ``"rating"`` (the paper's, for
    reproducing Ji et al.: A's n = 798 criterion ratings): one-sided Mann–Whitney taking each
    criterion rating as one observation; ``"conversation"``: Mann–Whitney on each conversation's mean
    z over criteria. Both Mann–Whitney variants treat observations as independent, which they are not
    (measured under worker × system and conversation effects: 23.9 % and 9.0 % rejections of true
    nulls at 5 %). Columns system_a, system_b, p_value, p_adjusted (``correction`` over all ordered
    pairs: Bonferroni by default, Holm, or none), correction.
    """
    check_correction(correction)
    if unit == "worker":
        systems = list(order) if order is not None else sorted(kept["system"].unique())
        tested = worker_clustered_tests(kept, systems)
        rows = [(a, b, tested[(a, b)]) for a, b in itertools.permutations(systems, 2)]
        table = pd.DataFrame(rows, columns=["system_a", "system_b", "p_value"])
        table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction)
        table["correction"] = correction
        return table
    obs = _observations(kept, unit)
    samples = {s: g["z"].to_numpy() for s, g in obs.groupby("system")}
    systems = list(order) if order is not None else sorted(samples)
    rows = [
        (a, b, float(stats.mannwhitneyu(samples[a], samples[b], alternative="greater", method="asymptotic").pvalue))
        for a, b in itertools.permutations(systems, 2)
    ]
    table = pd.DataFrame(rows, columns=["system_a", "system_b", "p_value"])
    table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction)
    table["correction"] = correction
    return table


def score_intervals(
    kept: pd.DataFrame,
    criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
    *,
    unit: IntervalUnit = "worker",
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Expanded percentile 95 % intervals of every system score, overall and per criterion.

    A bootstrap that resamples ``unit``: ``worker`` (default: a worker's ratings, their
    standardisation and QC verdict move together), ``conversation`` or ``rating`` (the naive
    one). Each resample's score is the mean z of the resampled ratings, as
    :func:`system_scores`. The interval is
    :func:`~hitkit.analysis.inference.bootstrap_interval`'s, expanded for the number of units
    that rated the system. Columns system, criterion ("overall" or a criterion), score, low,
    high, unit.
    """
    if unit not in INTERVAL_UNITS:
        raise ValueError(f"unit={unit!r}; use one of {', '.join(INTERVAL_UNITS)}")
    columns = ["system", "criterion", "score", "low", "high", "unit"]
    if kept.empty:
        return pd.DataFrame(columns=columns)
    systems = sorted(kept["system"].unique())
    names = ["overall"] + [c.name for c in criteria]
    cells, z = [], kept["z"].to_numpy(dtype=float)
    for system in systems:
        own = (kept["system"] == system).to_numpy()
        for name in names:
            cells.append(own if name == "overall" else own & (kept["criterion"] == name).to_numpy())
    member = np.stack(cells, axis=1).astype(float)  # [n_ratings, cells]
    count = member.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = (z @ member) / count
    low = high = np.full(len(cells), math.nan)
    if n_boot > 0:
        labels = {
            "worker": kept["worker_id"].to_numpy(),
            "conversation": (kept["assignment_id"].astype(str) + "/" + kept["conversation_id"].astype(str)).to_numpy(),
            "rating": np.arange(len(kept)),
        }[unit]
        codes, n_clusters = cluster_codes(labels)
        weights = cluster_weights(codes, n_clusters, n_boot, np.random.default_rng([seed, 1]))
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = (weights @ (member * z[:, None])) / (weights @ member)
        low, high = bootstrap_interval(boot, clusters_per_column(codes, member))
    rows = [(system, name) for system in systems for name in names]
    table = pd.DataFrame(rows, columns=["system", "criterion"])
    table["score"], table["low"], table["high"], table["unit"] = score, low, high, unit
    return table[columns]


def _correlate(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan, math.nan, math.nan  # undefined for fewer than 2 points or constant input
    return (
        float(stats.pearsonr(x, y).statistic),
        float(stats.spearmanr(x, y).statistic),
        float(stats.kendalltau(x, y).statistic),
    )


def replication(scores_a: pd.DataFrame, scores_b: pd.DataFrame) -> pd.DataFrame:
    """Step 7: Pearson, Spearman and Kendall of two runs' system scores, overall and per criterion.

    Correlates over the systems both runs scored; criteria are the columns both tables share.
    pearson_low / pearson_high: the Fisher-z 95 % interval of r over the n_systems points (it
    treats each system score as exact: with ~10 systems the number of systems, not the ratings
    behind each score, dominates its width).
    """
    both = scores_a.merge(scores_b, on="system", suffixes=("_a", "_b"))
    fixed = {"system", "n", "z", "raw", "rank"}
    shared = [c for c in scores_a.columns if c not in fixed and c in scores_b.columns]
    rows = []
    for name, column in [("overall", "z"), *[(c, c) for c in shared]]:
        pair = both[[f"{column}_a", f"{column}_b"]].dropna()
        x, y = pair.iloc[:, 0].to_numpy(float), pair.iloc[:, 1].to_numpy(float)
        r = _correlate(x, y)
        rows.append((name, *r, *fisher_interval(r[0], len(pair)), len(pair)))
    return pd.DataFrame(
        rows, columns=["criterion", "pearson", "spearman", "kendall", "pearson_low", "pearson_high", "n_systems"]
    )
