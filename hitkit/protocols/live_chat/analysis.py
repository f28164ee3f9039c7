"""Live chat + Direct Assessment (Ji et al., ACL 2022): METHODS §1 "Analysis", steps 1–8.

Reads the tidy tables of METHODS §4 from one folder (``assignments.csv``, ``ratings.csv``; read and
checked by :mod:`hitkit.protocols.live_chat.reading`) and returns an
:class:`~hitkit.analysis.base.AnalysisResult` with these tables (column contract v1):

- ``workers``: worker_id, assignments, passed, p_value, mean_raw, sd_raw: every worker with a
  counted (submitted or approved) assignment, the empty submission included (it fails).
  mean_raw / sd_raw are the μ and σ the worker was standardised with (reversed scores, ddof = 1).
- ``systems``: system, n, z, one column per criterion (mean z), raw, rank: real systems only,
  passed workers only. ``z`` is the mean of all the system's criterion ratings, ``n`` their count,
  ``raw`` the mean reversed 0–100 score (higher = better, like z), rank 1 = highest z.
- ``significance``: system_a, system_b, p_value, p_adjusted, correction: one-sided p that a's z
  exceed b's, for every ordered pair of real systems: worker-clustered by default (``significance_unit``
  "worker"), the paper's per-rating Mann–Whitney U with "rating" (what reproducing Ji et al. asks
  for); p_adjusted is corrected over all the ordered pairs (Bonferroni by default; Holm or none).
- ``score_intervals``: system, criterion, score, low, high, unit: 95 % intervals of every system
  score (overall and per criterion) from a bootstrap that resamples workers (default).
- ``replication`` (only with ``replicate_dir``): criterion ("overall" and each criterion),
  pearson, spearman, kendall, pearson_low, pearson_high, n_systems: system scores of this run
  against the other run's, with the Fisher-z interval of r.

- ``judge_scores`` and ``judge_bias`` (only when the folder holds ``judge.csv``, a study with an LLM
  judge): per system and criterion (and overall) the mean z people only, judge only and
  prediction-powered, and the judge's bias per system
  (:func:`hitkit.protocols.live_chat.judge.analysis_tables`); the summary's ``judge`` says what it used.

The summary holds workers, passed, pass_rate, hits (counted assignments: one worker's HIT each),
hits_passed (those done by workers who passed QC), minutes_per_conversation_passed / _failed,
systems, systems_per_hit and control_per_hit (:func:`hit_design`), and the options used. The
figure ``significance`` is the p-value matrix, row beats column.

Each step is a small pure function, so a notebook can rerun one with another choice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from hitkit.analysis.base import AnalysisResult, common_options
from hitkit.analysis.evidence import attach
from hitkit.analysis.inference import (
    DEFAULT_CORRECTION,
    DEFAULT_DUPLICATES,
    Correction,
    DuplicatePolicy,
    check_correction,
)
from hitkit.analysis.tables import counted
from hitkit.protocols.kit.summary import repeated_rows
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA, Criterion, check_criteria
from hitkit.protocols.live_chat.evidence import degraded_gold, evidence
from hitkit.protocols.live_chat.quality import QcMethod, reverse_negative, standardise_per_worker, wilcoxon_qc
from hitkit.protocols.live_chat.reading import read_tables
from hitkit.protocols.live_chat.scores import (
    DEFAULT_SIGNIFICANCE_UNIT,
    IntervalUnit,
    SignificanceUnit,
    replication,
    score_intervals,
)
from hitkit.protocols.live_chat.steps import RatingChoices


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
    control = (
        ratings[ratings["is_control"]]
        .groupby("assignment_id")["conversation_id"]
        .nunique()
        .reindex(per_hit.index, fill_value=0)
    )
    return {
        "systems": int(real["system"].nunique()),
        "systems_per_hit": (
            {"median": float(per_hit.median()), "min": int(per_hit.min()), "max": int(per_hit.max())}
            if len(per_hit)
            else None
        ),
        "control_per_hit": float(control.median()) if len(control) else None,
    }


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
        passed=assignments["worker_id"].isin(set(workers.loc[workers["passed"], "worker_id"])),
    )
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


def analyze_ratings(
    every_assignment: pd.DataFrame,
    ratings: pd.DataFrame,
    *,
    criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
    alpha: float = 0.05,
    qc_method: QcMethod = "asymptotic",
    significance_unit: SignificanceUnit = DEFAULT_SIGNIFICANCE_UNIT,
    ddof: int = 1,
    correction: Correction = DEFAULT_CORRECTION,
    interval_unit: IntervalUnit = "worker",
    n_boot: int = 1000,
    seed: int = 0,
    judge: pd.DataFrame | None = None,
    judge_labels: str | Path | None = None,
) -> AnalysisResult:
    """METHODS §1 steps 1–8 on read tables (:func:`~hitkit.protocols.live_chat.reading.read_tables`; their duplicate reports ride in
    ``attrs``): QC, standardisation, system scores with intervals, pairwise significance; with ``judge``
    (``judge.csv``, :func:`hitkit.protocols.live_chat.judge.read_judge`) the judge's tables too; with
    ``judge_labels`` those of a judge-labels file instead (:mod:`hitkit.protocols.live_chat.judge_file`)."""
    assignments = counted(every_assignment)
    duplicate_report = ratings.attrs.get("duplicates", {})
    ratings = ratings[ratings["assignment_id"].isin(set(assignments["assignment_id"]))]
    choices = RatingChoices(alpha, qc_method, significance_unit, ddof, correction, interval_unit, n_boot, seed)
    steps = choices.scored(assignments, ratings, criteria)
    kept, systems = steps.kept, steps.systems
    summary = {
        **summarise(assignments, ratings, steps.workers),
        **choices.recorded(),
        **repeated_rows(
            "rating key(s) (assignment, conversation, criterion)",
            duplicate_report,
            every_assignment.attrs["duplicates"],
        ),
    }
    intervals = score_intervals(kept, criteria, unit=interval_unit, n_boot=n_boot, seed=seed)
    result = choices.result(steps, summary, {"score_intervals": intervals})
    attach(
        result,
        *evidence(steps.z, kept, systems, unit=None, n_boot=n_boot, seed=seed),
        gold=degraded_gold(steps.z),
        gold_items="the QC bot's conversations, right when rated below the worker's real conversations",
    )
    if judge_labels is not None:
        from hitkit.protocols.live_chat.judge_file import add_judge_file

        add_judge_file(result, steps.z, judge_labels, criteria, seed=seed)
    elif judge is not None:
        add_judge(result, steps.z, judge, criteria)
    return result


def add_judge(result: AnalysisResult, z: pd.DataFrame, judge: pd.DataFrame, criteria: Sequence[Criterion]) -> None:
    """Add the LLM judge's tables (``judge_scores``, ``judge_bias``), its summary (``judge``) and its
    warnings to ``result``, over the conversations of the workers who passed QC
    (:func:`~hitkit.protocols.live_chat.judge.analysis_tables`)."""
    from hitkit.protocols.live_chat.judge import analysis_tables

    passed = set(result.tables["workers"].loc[result.tables["workers"]["passed"], "worker_id"].astype(str))
    tables, summary, lines = analysis_tables(z, judge, criteria, passed)
    result.tables.update(tables)
    result.summary["judge"] = summary
    result.summary["warnings"] = list(result.summary.get("warnings", [])) + lines


def analyze_live_chat(
    in_dir: str | Path,
    *,
    criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
    alpha: float = 0.05,
    replicate_dir: str | Path | None = None,
    qc_method: QcMethod = "asymptotic",
    significance_unit: SignificanceUnit = DEFAULT_SIGNIFICANCE_UNIT,
    ddof: int = 1,
    correction: Correction = DEFAULT_CORRECTION,
    interval_unit: IntervalUnit = "worker",
    n_boot: int = 1000,
    seed: int = 0,
    duplicates: DuplicatePolicy = DEFAULT_DUPLICATES,
    judge_labels: str | Path | None = None,
) -> AnalysisResult:
    """Run METHODS §1 steps 1–8 on ``in_dir``; with ``replicate_dir``, also correlate the two runs;
    ``judge_labels``: a judge-labels file read instead of the folder's ``judge.csv``.

    ``qc_method`` → :func:`wilcoxon_qc`, ``significance_unit`` and ``correction`` →
    :func:`pairwise_significance`, ``ddof`` → :func:`standardise_per_worker` (METHODS fixes 1; 0
    is there to compare), ``interval_unit``, ``n_boot`` and ``seed`` → :func:`score_intervals`
    (table ``score_intervals``), ``duplicates`` → :func:`~hitkit.protocols.live_chat.reading.read_ratings`. Every choice is
    recorded in the summary.
    """
    check_criteria(criteria)
    check_correction(correction)
    options: dict[str, Any] = dict(
        criteria=criteria,
        alpha=alpha,
        qc_method=qc_method,
        significance_unit=significance_unit,
        ddof=ddof,
        correction=correction,
        interval_unit=interval_unit,
        n_boot=n_boot,
        seed=seed,
    )
    judge_path = Path(in_dir) / "judge.csv"
    judge = None
    if judge_labels is None and (judge_path.is_file() or judge_path.with_suffix(".parquet").is_file()):
        from hitkit.protocols.live_chat.judge import read_judge

        judge = read_judge(judge_path, criteria)
    tables = read_tables(in_dir, criteria, duplicates=duplicates)
    result = analyze_ratings(*tables, judge=judge, judge_labels=judge_labels, **options)
    if replicate_dir is not None:
        other = analyze_ratings(*read_tables(replicate_dir, criteria, duplicates=duplicates), **options)
        result.tables["replication"] = replication(result.tables["systems"], other.tables["systems"])
    return result


def analyze(
    in_dir: str | Path, *, seed: int, config=None, options: dict, replicate_dir=None, stability: bool = False
) -> AnalysisResult:
    """The registry's entry point: :func:`analyze_live_chat` with ``hitkit analyze``'s options and
    the study file's criteria (the defaults without one)."""
    extra = common_options(options)
    if config is not None and config.live_chat is not None:
        extra["criteria"] = config.live_chat.criterion_list()
    result = analyze_live_chat(
        in_dir,
        replicate_dir=replicate_dir,
        interval_unit=options.get("cluster", "worker"),
        significance_unit=options.get("unit", DEFAULT_SIGNIFICANCE_UNIT),
        seed=seed,
        judge_labels=options.get("judge_labels"),
        **extra,
    )
    if "judge" in result.summary and config is not None and config.judge is not None:
        result.summary["judge"]["human_share"] = config.judge.human_share  # the design's, for the methods
    return result


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
    return (
        "QC bot rated below the real bots (Wilcoxon, p < 0.05)",
        {str(w): bool(p) for w, p in zip(qc["worker_id"], qc["passed"])},
    )
