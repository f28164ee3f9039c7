"""Live chat + Direct Assessment (Ji et al., ACL 2022): METHODS §1 "Analysis", steps 1–8.

Reads the tidy tables of METHODS §4 from one folder (``assignments.csv``, ``ratings.csv``) and
returns an :class:`~hitkit.analysis.base.AnalysisResult` with these tables (column contract v1):

- ``workers``: worker_id, assignments, passed, p_value, mean_raw, sd_raw: every worker with a
  counted (submitted or approved) assignment, the empty submission included (it fails).
  mean_raw / sd_raw are the μ and σ the worker was standardised with (reversed scores, ddof = 1).
- ``systems``: system, n, z, one column per criterion (mean z), raw, rank: real systems only,
  passed workers only. ``z`` is the mean of all the system's criterion ratings, ``n`` their count,
  ``raw`` the mean reversed 0–100 score (higher = better, like z), rank 1 = highest z.
- ``significance``: system_a, system_b, p_value, p_adjusted, correction: one-sided Mann–Whitney
  U that a's z exceed b's, for every ordered pair of real systems; p_adjusted is corrected over
  all the ordered pairs (Bonferroni by default; Holm or none).
- ``score_intervals``: system, criterion, score, low, high, unit: 95 % intervals of every system
  score (overall and per criterion) from a bootstrap that resamples workers (default).
- ``replication`` (only with ``replicate_dir``): criterion ("overall" and each criterion),
  pearson, spearman, kendall, pearson_low, pearson_high, n_systems: system scores of this run
  against the other run's, with the Fisher-z interval of r.

The summary holds workers, passed, pass_rate, hits (counted assignments: one worker's HIT each),
hits_passed (those done by workers who passed QC), minutes_per_conversation_passed / _failed,
systems, systems_per_hit and control_per_hit (:func:`hit_design`), and the options used. The
figure ``significance`` is the p-value matrix, row beats column.

Each step is a small pure function, so a notebook can rerun one with another choice.
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Literal, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.base import AnalysisResult, common_options, png
from hitkit.analysis.inference import (DEFAULT_CORRECTION, DEFAULT_DUPLICATES, INTERVAL_METHOD,
                                       Correction, DuplicatePolicy, adjust, apply_duplicate_policy,
                                       bootstrap_interval, check_correction, correction_label, cluster_codes,
                                       cluster_weights, clusters_per_column, duplicate_warnings,
                                       fisher_interval)
from hitkit.analysis.tables import ASSIGNMENT_DUPLICATES, counted, read_assignments, read_table
from hitkit.errors import InputError
from hitkit.protocols.live_chat import figures
from hitkit.protocols.live_chat.criteria import (DEFAULT_CRITERIA, RATING_COLUMNS, Criterion, check_criteria)

QcMethod = Literal["asymptotic", "exact", "auto"]
SignificanceUnit = Literal["rating", "conversation"]
IntervalUnit = Literal["worker", "conversation", "rating"]
INTERVAL_UNITS: tuple[str, ...] = ("worker", "conversation", "rating")

_ID_COLUMNS = ("study", "hit_id", "assignment_id", "worker_id", "conversation_id", "system",
               "criterion", "status")


def _unknown_criteria(ratings: pd.DataFrame, criteria: Sequence[Criterion]) -> list[str]:
    known = {c.name for c in criteria}
    return sorted(set(ratings["criterion"].unique()) - known)


def read_ratings(in_dir: str | Path, criteria: Sequence[Criterion] = DEFAULT_CRITERIA, *,
                 duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.DataFrame:
    """Read and check ``ratings.csv``: known criteria, scores within 0–100, is_control 0/1.

    A second rating of one criterion in one conversation of one assignment is resolved by the
    ``duplicates`` policy (first by default; last, drop or error), with a warning that counts
    it; the report is in ``table.attrs["duplicates"]``.
    """
    check_criteria(criteria)
    path = Path(in_dir) / "ratings.csv"
    text_ids = {c: str for c in _ID_COLUMNS if c in RATING_COLUMNS}
    table = read_table(path, RATING_COLUMNS, text_ids)[list(RATING_COLUMNS)]
    unknown = _unknown_criteria(table, criteria)
    if unknown:
        raise InputError(path, f"unknown criterion {unknown[0]!r}"
                         + (f" (and {unknown[1:]})" if len(unknown) > 1 else "")
                         + f"; configured criteria are {[c.name for c in criteria]}. "
                         "Add it to the study's criteria or fix the export")
    score = pd.to_numeric(table["score"], errors="coerce")
    bad = table.index[score.isna() | (score < 0) | (score > 100)]
    if len(bad):
        i = bad[0]
        raise InputError(path, f"score '{table.at[i, 'score']}' is not a number within 0–100",
                         line=int(i) + 2)
    control = table["is_control"].astype(str).str.strip().str.lower()
    bad = table.index[~control.isin(["0", "1", "true", "false"])]
    if len(bad):
        i = bad[0]
        raise InputError(path, f"is_control '{table.at[i, 'is_control']}' is not 0 or 1",
                         line=int(i) + 2)
    table["score"] = score.astype(float)
    table["is_control"] = control.isin(["1", "true"])
    key = ["assignment_id", "conversation_id", "criterion"]
    table, report = apply_duplicate_policy(table, key, duplicates, what="rating (same assignment, "
                                           "conversation, criterion)", source=path)
    table = table.copy()
    table.attrs["duplicates"] = report
    return table


def reverse_negative(ratings: pd.DataFrame, criteria: Sequence[Criterion] = DEFAULT_CRITERIA
                     ) -> pd.DataFrame:
    """Step 1: add ``oriented`` = score, or 100 − score for negative criteria (higher = better)."""
    unknown = _unknown_criteria(ratings, criteria)
    if unknown:
        raise ValueError(f"ratings have criteria {unknown} not among the configured "
                         f"{[c.name for c in criteria]}")
    negative = {c.name for c in criteria if c.polarity == "negative"}
    out = ratings.copy()
    out["oriented"] = np.where(out["criterion"].isin(negative), 100.0 - out["score"], out["score"])
    return out


def standardise_per_worker(ratings: pd.DataFrame, ddof: int = 1) -> pd.DataFrame:
    """Step 2: add ``z`` = (oriented − μ)/σ over all of the worker's ratings; NaN where σ is 0."""
    by_worker = ratings.groupby("worker_id")["oriented"]
    mu = by_worker.transform("mean")
    sigma = by_worker.transform("std", ddof=ddof)
    out = ratings.copy()
    out["z"] = (out["oriented"] - mu) / sigma.where(sigma > 0)
    return out


def wilcoxon_qc(z_ratings: pd.DataFrame, criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
                alpha: float = 0.05, *, method: QcMethod = "asymptotic") -> pd.DataFrame:
    """Step 3: per worker, one-sided Mann–Whitney U that QC-bot z < real-system z on qc criteria.

    Returns worker_id, n_control, n_system, p_value, passed (p < alpha). σ = 0 or no QC (or no
    real-system) ratings → p NaN, fails. ``method`` is scipy's: "asymptotic" (default) is the
    normal approximation with tie-corrected variance and continuity correction, which is also
    what scipy's "auto" and R's ``wilcox.test`` use once scores tie (nearly every worker's do).
    """
    qc_names = {c.name for c in criteria if c.qc}
    rows = []
    for worker, own in z_ratings.groupby("worker_id", sort=True):
        own = own[own["criterion"].isin(qc_names)]
        control = own.loc[own["is_control"], "z"].to_numpy()
        system = own.loc[~own["is_control"], "z"].to_numpy()
        p = math.nan
        if len(control) and len(system) and not (np.isnan(control).any()
                                                 or np.isnan(system).any()):
            p = float(stats.mannwhitneyu(control, system, alternative="less", method=method).pvalue)
        rows.append((worker, len(control), len(system), p, bool(p < alpha)))
    return pd.DataFrame(rows, columns=["worker_id", "n_control", "n_system", "p_value", "passed"])


def worker_table(assignments: pd.DataFrame, z_ratings: pd.DataFrame, qc: pd.DataFrame
                 ) -> pd.DataFrame:
    """Step 4: one row per worker with a counted assignment; workers without ratings fail."""
    n_assignments = assignments.groupby("worker_id").size().rename("assignments")
    moments = z_ratings.groupby("worker_id")["oriented"].agg(mean_raw="mean", sd_raw="std")
    table = (n_assignments.to_frame().join(qc.set_index("worker_id")[["passed", "p_value"]])
             .join(moments).reset_index())
    table["passed"] = table["passed"].astype("boolean").fillna(False).astype(bool)
    return table[["worker_id", "assignments", "passed", "p_value", "mean_raw", "sd_raw"]]


def passed_ratings(z_ratings: pd.DataFrame, workers: pd.DataFrame) -> pd.DataFrame:
    """The ratings of real systems (not the QC bot) by workers who passed QC."""
    ok = set(workers.loc[workers["passed"], "worker_id"])
    keep = z_ratings["worker_id"].isin(ok) & ~z_ratings["is_control"]
    return z_ratings[keep].reset_index(drop=True)


def system_scores(kept: pd.DataFrame, criteria: Sequence[Criterion] = DEFAULT_CRITERIA
                  ) -> pd.DataFrame:
    """Step 5: per system n, overall z (mean of all its criterion ratings), z per criterion, raw."""
    by_system = kept.groupby("system")
    table = by_system.agg(n=("z", "size"), z=("z", "mean"))
    per_criterion = kept.pivot_table(index="system", columns="criterion", values="z",
                                     aggfunc="mean")
    for c in criteria:
        table[c.name] = per_criterion[c.name] if c.name in per_criterion else math.nan
    table["raw"] = by_system["oriented"].mean()
    table = table.sort_values("z", ascending=False)
    table["rank"] = table["z"].rank(ascending=False, method="min").astype(int)
    return table.reset_index()


def _observations(kept: pd.DataFrame, unit: SignificanceUnit) -> pd.DataFrame:
    if unit == "rating":
        return kept[["system", "z"]]
    if unit == "conversation":
        return kept.groupby(["system", "conversation_id"], as_index=False)["z"].mean()
    raise ValueError(f"significance unit {unit!r}; use 'rating' or 'conversation'")


def pairwise_significance(kept: pd.DataFrame, *, unit: SignificanceUnit = "rating",
                          order: Sequence[str] | None = None,
                          correction: Correction = DEFAULT_CORRECTION) -> pd.DataFrame:
    """Step 6: for every ordered pair (a, b), one-sided Mann–Whitney p that a's z exceed b's.

    ``unit="rating"`` (default, the paper's: A's n = 798 criterion ratings) takes each criterion
    rating as one observation; ``"conversation"`` takes each conversation's mean z over criteria
    (the ratings of one conversation are not independent: the clustered choice). Columns
    system_a, system_b, p_value (as the paper), p_adjusted (``correction`` over all ordered
    pairs: Bonferroni by default, Holm, or none), correction.
    """
    check_correction(correction)
    obs = _observations(kept, unit)
    samples = {s: g["z"].to_numpy() for s, g in obs.groupby("system")}
    systems = list(order) if order is not None else sorted(samples)
    rows = [(a, b, float(stats.mannwhitneyu(samples[a], samples[b], alternative="greater",
                                            method="asymptotic").pvalue))
            for a, b in itertools.permutations(systems, 2)]
    table = pd.DataFrame(rows, columns=["system_a", "system_b", "p_value"])
    table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction)
    table["correction"] = correction
    return table


def score_intervals(kept: pd.DataFrame, criteria: Sequence[Criterion] = DEFAULT_CRITERIA, *,
                    unit: IntervalUnit = "worker", n_boot: int = 1000, seed: int = 0
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
    member = np.stack(cells, axis=1).astype(float)           # [n_ratings, cells]
    count = member.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = (z @ member) / count
    low = high = np.full(len(cells), math.nan)
    if n_boot > 0:
        labels = {"worker": kept["worker_id"].to_numpy(),
                  "conversation": (kept["assignment_id"].astype(str) + "/"
                                   + kept["conversation_id"].astype(str)).to_numpy(),
                  "rating": np.arange(len(kept))}[unit]
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
    return (float(stats.pearsonr(x, y).statistic), float(stats.spearmanr(x, y).statistic),
            float(stats.kendalltau(x, y).statistic))


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
    return pd.DataFrame(rows, columns=["criterion", "pearson", "spearman", "kendall",
                                       "pearson_low", "pearson_high", "n_systems"])


def _mean_or_none(values: pd.Series) -> float | None:
    values = values.dropna()
    return float(values.mean()) if len(values) else None


def hit_design(ratings: pd.DataFrame) -> dict:
    """How many real systems a HIT held, from the ratings: ``systems`` (real systems rated at
    all), ``systems_per_hit`` {median, min, max} of the distinct real systems per assignment and
    ``control_per_hit`` (median QC-bot conversations per assignment). Ji et al.'s HIT holds 5 of
    their 10 systems and the QC bot, so "every worker chatted with every system" is not a given."""
    real = ratings[~ratings["is_control"]]
    per_hit = real.groupby("assignment_id")["system"].nunique()
    control = (ratings[ratings["is_control"]].groupby("assignment_id")["conversation_id"].nunique()
               .reindex(per_hit.index, fill_value=0))
    return {"systems": int(real["system"].nunique()),
            "systems_per_hit": ({"median": float(per_hit.median()), "min": int(per_hit.min()),
                                 "max": int(per_hit.max())} if len(per_hit) else None),
            "control_per_hit": float(control.median()) if len(control) else None}


def summarise(assignments: pd.DataFrame, ratings: pd.DataFrame, workers: pd.DataFrame) -> dict:
    """Step 8: workers and HITs total/passed, pass rate, mean minutes per conversation, and the
    systems per HIT (:func:`hit_design`).

    ``hits`` counts counted assignments (one worker's HIT each); ``hits_passed`` those done by
    workers who passed QC. Minutes per conversation = work_time_s / 60 / the assignment's number
    of conversations, averaged over assignments; an assignment with no conversations is left out.
    """
    conversations = ratings.groupby("assignment_id")["conversation_id"].nunique()
    per = assignments.assign(
        conversations=assignments["assignment_id"].map(conversations).fillna(0),
        passed=assignments["worker_id"].isin(set(workers.loc[workers["passed"], "worker_id"])))
    with_conv = per[per["conversations"] > 0]
    minutes = with_conv["work_time_s"] / 60 / with_conv["conversations"]
    n_workers, n_passed = len(workers), int(workers["passed"].sum())
    return {
        **hit_design(ratings),
        "workers": n_workers,
        "passed": n_passed,
        "pass_rate": n_passed / n_workers if n_workers else None,
        "hits": len(per),
        "hits_passed": int(per["passed"].sum()),
        "minutes_per_conversation_passed": _mean_or_none(minutes[with_conv["passed"]]),
        "minutes_per_conversation_failed": _mean_or_none(minutes[~with_conv["passed"]]),
    }


def read_tables(in_dir: str | Path, criteria: Sequence[Criterion] = DEFAULT_CRITERIA, *,
                duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every assignment and the ratings of ``in_dir`` (:func:`read_ratings`), checked to belong together."""
    every_assignment = read_assignments(in_dir, duplicates=duplicates)
    ratings = read_ratings(in_dir, criteria, duplicates=duplicates)
    orphans = set(ratings["assignment_id"]) - set(every_assignment["assignment_id"])
    if orphans:
        raise InputError(Path(in_dir) / "ratings.csv", f"assignment_id {sorted(orphans)[0]!r} is "
                         "not in assignments.csv; export both tables from the same study")
    return every_assignment, ratings


def analyze_ratings(every_assignment: pd.DataFrame, ratings: pd.DataFrame, *,
                    criteria: Sequence[Criterion] = DEFAULT_CRITERIA, alpha: float = 0.05,
                    qc_method: QcMethod = "asymptotic", significance_unit: SignificanceUnit = "rating",
                    ddof: int = 1, correction: Correction = DEFAULT_CORRECTION,
                    interval_unit: IntervalUnit = "worker", n_boot: int = 1000, seed: int = 0) -> AnalysisResult:
    """METHODS §1 steps 1–8 on read tables (:func:`read_tables`; their duplicate reports ride in
    ``attrs``): QC, standardisation, system scores with intervals, pairwise significance."""
    assignments = counted(every_assignment)
    duplicate_report = ratings.attrs.get("duplicates", {})
    ratings = ratings[ratings["assignment_id"].isin(set(assignments["assignment_id"]))]
    z = standardise_per_worker(reverse_negative(ratings, criteria), ddof=ddof)
    qc = wilcoxon_qc(z, criteria, alpha, method=qc_method)
    workers = worker_table(assignments, z, qc)
    kept = passed_ratings(z, workers)
    systems = system_scores(kept, criteria)
    order = list(systems["system"])
    significance = pairwise_significance(kept, unit=significance_unit, order=order,
                                         correction=correction)
    summary = summarise(assignments, ratings, workers)
    assignment_report = every_assignment.attrs["duplicates"]
    warnings_out = duplicate_warnings([
        ("rating key(s) (assignment, conversation, criterion)", duplicate_report),
        (ASSIGNMENT_DUPLICATES, assignment_report)])
    summary.update(alpha=alpha, qc_method=qc_method, significance_unit=significance_unit,
                   multiple_comparisons=correction, interval_unit=interval_unit,
                   interval_method=INTERVAL_METHOD, n_boot=n_boot,
                   seed=seed, duplicates=duplicate_report,
                   assignment_duplicates=assignment_report, warnings=warnings_out)
    return AnalysisResult(
        tables={"workers": workers, "systems": systems, "significance": significance,
                "score_intervals": score_intervals(kept, criteria, unit=interval_unit,
                                                   n_boot=n_boot, seed=seed)},
        summary=summary,
        figures={"significance": png(lambda: figures.significance(significance, order, alpha,
                                                                        correction_label(correction)))})


def analyze_live_chat(in_dir: str | Path, *, criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
                      alpha: float = 0.05, replicate_dir: str | Path | None = None,
                      qc_method: QcMethod = "asymptotic",
                      significance_unit: SignificanceUnit = "rating",
                      ddof: int = 1, correction: Correction = DEFAULT_CORRECTION,
                      interval_unit: IntervalUnit = "worker", n_boot: int = 1000,
                      seed: int = 0,
                      duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> AnalysisResult:
    """Run METHODS §1 steps 1–8 on ``in_dir``; with ``replicate_dir``, also correlate the two runs.

    ``qc_method`` → :func:`wilcoxon_qc`, ``significance_unit`` and ``correction`` →
    :func:`pairwise_significance`, ``ddof`` → :func:`standardise_per_worker` (METHODS fixes 1; 0
    is there to compare), ``interval_unit``, ``n_boot`` and ``seed`` → :func:`score_intervals`
    (table ``score_intervals``), ``duplicates`` → :func:`read_ratings`. Every choice is
    recorded in the summary.
    """
    check_criteria(criteria)
    check_correction(correction)
    options = dict(criteria=criteria, alpha=alpha, qc_method=qc_method,
                   significance_unit=significance_unit, ddof=ddof, correction=correction,
                   interval_unit=interval_unit, n_boot=n_boot, seed=seed)
    result = analyze_ratings(*read_tables(in_dir, criteria, duplicates=duplicates), **options)
    if replicate_dir is not None:
        other = analyze_ratings(*read_tables(replicate_dir, criteria, duplicates=duplicates), **options)
        result.tables["replication"] = replication(result.tables["systems"],
                                                   other.tables["systems"])
    return result


def analyze(in_dir: str | Path, *, seed: int, config=None, options: dict, replicate_dir=None,
            stability: bool = False) -> AnalysisResult:
    """The registry's entry point: :func:`analyze_live_chat` with ``hitkit analyze``'s options and
    the study file's criteria (the defaults without one)."""
    extra = common_options(options)
    if config is not None and config.live_chat is not None:
        extra["criteria"] = config.live_chat.criterion_list()
    return analyze_live_chat(in_dir, replicate_dir=replicate_dir, interval_unit=options.get("cluster", "worker"),
                             seed=seed, **extra)


def worker_qc(tables: dict[str, pd.DataFrame], config=None) -> tuple[str, dict[str, bool]] | None:
    """Which workers pass quality control so far (the dashboard's and the QC policy's check), by
    :func:`wilcoxon_qc` on the exported ratings; None before any rating."""
    ratings = tables["ratings"].copy()
    if ratings.empty:
        return None
    criteria = config.live_chat.criterion_list() if config is not None and config.live_chat else DEFAULT_CRITERIA
    ratings["score"] = ratings["score"].astype(float)
    ratings["is_control"] = ratings["is_control"].astype(bool)
    qc = wilcoxon_qc(standardise_per_worker(reverse_negative(ratings, criteria)), criteria)
    return ("QC bot rated below the real bots (Wilcoxon, p < 0.05)",
            {str(w): bool(p) for w, p in zip(qc["worker_id"], qc["passed"])})
