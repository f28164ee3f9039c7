"""Direct Assessment of responses: Ji et al.'s (2022) live-chat pipeline applied to static outputs.

Reads ``assignments.csv`` and ``da_ratings.csv`` from one folder and runs live chat's steps
(:mod:`hitkit.protocols.live_chat.analysis`), with the degraded copies in the QC bot's place:
negative criteria reversed, each worker standardised (z, ddof = 1) over all their ratings, a
per-worker one-sided Mann–Whitney U (Wilcoxon rank-sum) test that the degraded copies' z are below
the intact responses' z on the QC criteria (pass iff p < α), then system scores (mean z per
criterion and overall) from the passed workers' ratings of intact responses, clustered bootstrap
intervals and one-sided pairwise tests. Tables (column contract v1):

- ``workers``, ``systems``, ``significance``, ``score_intervals``: as live chat's.
- ``degraded``: worker_id, n_degraded, n_original, mean_z_degraded, mean_z_original, p_value,
  passed: each worker's QC evidence (QC criteria only).

The summary holds workers, passed, pass_rate, assignments (counted), assignments_passed, items,
responses (distinct item × system rated intact), ratings (criterion ratings scored), degraded (degraded
copies rated) and the options used.
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
    apply_duplicate_policy,
    check_correction,
)
from hitkit.analysis.tables import counted, keep_counted, read_assignments, read_table
from hitkit.errors import InputError
from hitkit.protocols.kit.summary import repeated_rows
from hitkit.protocols.live_chat.criteria import Criterion, check_criteria
from hitkit.protocols.live_chat.evidence import degraded_gold, evidence
from hitkit.protocols.live_chat.quality import QcMethod, reverse_negative, standardise_per_worker, wilcoxon_qc
from hitkit.protocols.live_chat.scores import DEFAULT_SIGNIFICANCE_UNIT, IntervalUnit, SignificanceUnit, score_intervals
from hitkit.protocols.live_chat.steps import RatingChoices
from hitkit.protocols.rating.scores import DA_COLUMNS, DEFAULT_CRITERIA, TABLE

# This protocol's --cluster units → live chat's names for the same clusters.
_INTERVAL_UNITS: dict[str, IntervalUnit] = {"worker": "worker", "response": "conversation", "rating": "rating"}


def as_chat_ratings(table: pd.DataFrame) -> pd.DataFrame:
    """``da_ratings`` in the shape live chat's steps take: ``score`` a float, ``is_control`` a bool and a
    ``conversation_id`` naming one rated text of an assignment (item/system, "/degraded" for a copy),
    the cluster whose criterion ratings belong together."""
    out = table.copy()
    out["score"] = pd.to_numeric(out["score"]).astype(float)
    out["is_control"] = out["is_control"].astype(str).str.strip().str.lower().isin(["1", "true"])
    out["conversation_id"] = (
        out["item_id"].astype(str)
        + "/"
        + out["system"].astype(str)
        + out["is_control"].map({True: "/degraded", False: ""})
    )
    return out


def read_da_ratings(
    in_dir: str | Path,
    criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
    *,
    duplicates: DuplicatePolicy = DEFAULT_DUPLICATES,
) -> pd.DataFrame:
    """Read and check ``da_ratings.csv`` (known criteria, scores within 0–100, is_control 0/1) into
    :func:`as_chat_ratings`' shape; a repeated rating is resolved by ``duplicates``."""
    path = Path(in_dir) / f"{TABLE}.csv"
    table = read_table(
        path,
        DA_COLUMNS,
        {c: str for c in ("study", "hit_id", "assignment_id", "worker_id", "item_id", "system", "criterion")},
    )[list(DA_COLUMNS)]
    known = {c.name for c in criteria}
    score = pd.to_numeric(table["score"], errors="coerce")
    for bad, why in (
        (
            ~table["criterion"].isin(known),
            f"is not a configured criterion ({sorted(known)}); for a study "
            "with its own criteria give its file: `hitkit analyze --study STUDY.yaml`",
        ),
        (score.isna() | (score < 0) | (score > 100), "has a score that is not a number within 0–100"),
        (
            ~table["is_control"].astype(str).str.strip().str.lower().isin(["0", "1", "true", "false"]),
            "has an is_control that is not 0 or 1",
        ),
    ):
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise InputError(path, f"this row (criterion {table['criterion'].iloc[i]!r}) {why}", line=i + 2)
    table = as_chat_ratings(table)
    table, report = apply_duplicate_policy(
        table,
        ["assignment_id", "conversation_id", "criterion"],
        duplicates,
        what="rating (same assignment, response, criterion)",
        source=path,
    )
    table = table.copy()
    table.attrs["duplicates"] = report
    return table


def degraded_table(z: pd.DataFrame, qc: pd.DataFrame, criteria: Sequence[Criterion]) -> pd.DataFrame:
    """Per worker, the QC test's evidence: how many QC-criterion ratings of degraded copies and of intact
    responses, their mean z, and the test's p and verdict."""
    own = z[z["criterion"].isin({c.name for c in criteria if c.qc})]
    means = own.pivot_table(index="worker_id", columns="is_control", values="z", aggfunc="mean")
    table = qc.rename(columns={"n_control": "n_degraded", "n_system": "n_original"}).set_index("worker_id")
    table["mean_z_degraded"] = means.get(True)
    table["mean_z_original"] = means.get(False)
    return table.reset_index()[
        ["worker_id", "n_degraded", "n_original", "mean_z_degraded", "mean_z_original", "p_value", "passed"]
    ]


def analyze_da(
    assignments: pd.DataFrame,
    ratings: pd.DataFrame,
    *,
    criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
    alpha: float = 0.05,
    qc_method: QcMethod = "asymptotic",
    ddof: int = 1,
    correction: Correction = DEFAULT_CORRECTION,
    interval_unit: str = "worker",
    n_boot: int = 1000,
    seed: int = 0,
    significance_unit: SignificanceUnit = DEFAULT_SIGNIFICANCE_UNIT,
    judge_labels: str | Path | None = None,
) -> AnalysisResult:
    """The steps above on tables already read: the assignments that count and their ratings in
    :func:`as_chat_ratings`' shape (duplicate reports, if any, in their ``attrs``); every choice is
    recorded in the summary. ``interval_unit`` is the bootstrap's cluster: worker (default), response
    (one worker's ratings of one text) or rating; ``significance_unit`` the significance matrix's test
    (:func:`hitkit.protocols.live_chat.scores.pairwise_significance`: worker-clustered by default, the
    per-rating Mann–Whitney with "rating"); ``judge_labels``: an LLM judge's labels from a file
    (:mod:`hitkit.protocols.rating.judge_file`)."""
    check_criteria(criteria)
    check_correction(correction)
    if interval_unit not in _INTERVAL_UNITS:
        raise ValueError(f"interval_unit={interval_unit!r}; use one of {', '.join(_INTERVAL_UNITS)}")
    duplicate_report = ratings.attrs.get("duplicates", {})
    choices = RatingChoices(alpha, qc_method, significance_unit, ddof, correction, interval_unit, n_boot, seed)
    steps = choices.scored(assignments, ratings, criteria)
    workers, kept, systems = steps.workers, steps.kept, steps.systems
    passed = set(workers.loc[workers["passed"], "worker_id"])
    summary: dict[str, Any] = {
        "workers": len(workers),
        "passed": len(passed),
        "pass_rate": len(passed) / len(workers) if len(workers) else None,
        "assignments": len(assignments),
        "assignments_passed": int(assignments["worker_id"].isin(passed).sum()),
        "items": int(kept["item_id"].nunique()),
        "responses": int(kept[["item_id", "system"]].drop_duplicates().shape[0]),
        "ratings": len(kept),
        "degraded": len(ratings.loc[ratings["is_control"], ["assignment_id", "conversation_id"]].drop_duplicates()),
        "systems": len(systems),
        **choices.recorded(),
        **repeated_rows(
            "rating key(s) (assignment, response, criterion)",
            duplicate_report,
            ratings.attrs.get("assignment_duplicates"),
        ),
    }
    intervals = score_intervals(kept, criteria, unit=_INTERVAL_UNITS[interval_unit], n_boot=n_boot, seed=seed)
    intervals["unit"] = interval_unit
    result = choices.result(
        steps, summary, {"score_intervals": intervals, "degraded": degraded_table(steps.z, steps.qc, criteria)}
    )
    attach(
        result,
        *evidence(steps.z, kept, systems, unit=["item_id", "system"], n_boot=n_boot, seed=seed),
        gold=degraded_gold(steps.z),
        gold_items="degraded copies, right when rated below the worker's intact responses",
    )
    if judge_labels is not None:
        from hitkit.protocols.rating.judge_file import add_judge_file

        add_judge_file(result, steps.z, judge_labels, criteria, seed=seed)
    return result


def analyze_rating(
    in_dir: str | Path,
    *,
    criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
    duplicates: DuplicatePolicy = DEFAULT_DUPLICATES,
    **settings,
) -> AnalysisResult:
    """:func:`analyze_da` on ``in_dir``'s ``assignments.csv`` and ``da_ratings.csv`` (repeated rows
    resolved by ``duplicates``); ``settings`` are :func:`analyze_da`'s."""
    check_criteria(criteria)
    every = read_da_ratings(in_dir, criteria, duplicates=duplicates)
    ratings = keep_counted(every, in_dir, Path(in_dir) / f"{TABLE}.csv", duplicates=duplicates)
    ratings.attrs["duplicates"] = every.attrs["duplicates"]
    assignments = counted(read_assignments(in_dir, duplicates=duplicates))
    return analyze_da(assignments, ratings, criteria=criteria, **settings)


def analyze(
    in_dir: str | Path, *, seed: int, config=None, options: dict, replicate_dir=None, stability: bool = False
) -> AnalysisResult:
    """The registry's entry point: :func:`analyze_rating` with ``hitkit analyze``'s options and the study
    file's criteria (the defaults without one)."""
    extra = common_options(options)
    if config is not None and config.rating is not None:
        extra["criteria"] = config.rating.criterion_list()
    return analyze_rating(
        in_dir,
        interval_unit=options.get("cluster", "worker"),
        significance_unit=options.get("unit", DEFAULT_SIGNIFICANCE_UNIT),
        seed=seed,
        judge_labels=options.get("judge_labels"),
        **extra,
    )


def worker_qc(tables: dict[str, pd.DataFrame], config=None) -> tuple[str, dict[str, bool]] | None:
    """Which workers pass quality control so far (the dashboard's and the QC policy's check): degraded
    copies rated below intact responses (:func:`wilcoxon_qc`); None before any rating."""
    if tables[TABLE].empty:
        return None
    criteria = config.rating.criterion_list() if config is not None and config.rating else DEFAULT_CRITERIA
    qc = wilcoxon_qc(standardise_per_worker(reverse_negative(as_chat_ratings(tables[TABLE]), criteria)), criteria)
    return (
        "degraded copies rated below intact responses (Wilcoxon, p < 0.05)",
        {str(w): bool(p) for w, p in zip(qc["worker_id"], qc["passed"])},
    )
