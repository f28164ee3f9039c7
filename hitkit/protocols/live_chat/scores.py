"""Live chat's system scores (METHODS §1, steps 6–8): mean z per criterion and overall, one-sided
pairwise significance, clustered bootstrap intervals, and the self-replication of two runs."""

from __future__ import annotations

import itertools
import math
from typing import Literal, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.cr2 import PROCEDURE, cr2_contrast
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
    """One-sided p of the null "a's mean z is no greater than b's" against "a's is greater", for every ordered
    pair, clustered by worker: the difference of the two systems' mean z (all their criterion ratings, as
    :func:`system_scores`) is the contrast of a least-squares fit of z on the system, over the two systems'
    ratings, tested with the CR2 cluster-robust standard error and Bell–McCaffrey degrees of freedom
    (:mod:`hitkit.analysis.cr2`: right when a few workers do most of the ratings, where the plain sandwich with
    G − 1 degrees of freedom rejected 7.8 % of true nulls at 5 %). A worker's ratings move together (their
    standardisation, taste and conversations), so the worker is the cluster; conversations are nested in
    workers, so their effects are covered too. NaN where a system has no ratings or fewer than two workers
    rated the pair."""
    workers = pd.factorize(kept["worker_id"].astype(str))[0]
    column = pd.Index(list(systems)).get_indexer(kept["system"])
    z = kept["z"].to_numpy(float)
    out: dict[tuple[str, str], float] = {}
    for (i, a), (j, b) in itertools.combinations(enumerate(systems), 2):
        rows = (column == i) | (column == j)
        is_a = (column[rows] == i).astype(float)
        if not 0 < is_a.sum() < len(is_a):  # a system without ratings
            out[(a, b)] = out[(b, a)] = math.nan
            continue
        design = np.column_stack([np.ones(len(is_a)), is_a])
        test = cr2_contrast(z[rows], design, workers[rows], np.array([0.0, 1.0]))
        if math.isnan(test.se):  # one worker rated the pair
            out[(a, b)] = out[(b, a)] = math.nan
            continue
        out[(a, b)], out[(b, a)] = test.p_greater(), test.negated().p_greater()
    return out


def significance_procedure(unit: str) -> dict[str, str]:
    """What summary.json records of the significance matrix's procedure for ``unit`` (the report's words
    follow it): the worker-clustered test's name; nothing for the Mann–Whitney units, whose summaries stay
    as they were (the Ji et al. reproduction is byte-identical)."""
    return {"significance_procedure": PROCEDURE} if unit == "worker" else {}


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
