"""Spot The Bot (Deriu et al., EMNLP 2020): METHODS §2, win rates and ranking.

Reads ``annotations.csv`` (and ``assignments.csv`` when present) from one folder (METHODS §4).
A row is one entity (speaker 0 or 1) of one segment as one assignment annotated it; the two rows of
a segment annotation share (study, assignment_id, conversation_id, segment_exchanges). Returns an
:class:`~hitkit.analysis.base.AnalysisResult` with these tables (column contract v1):

- ``win_rates``: system_a, system_b, wins, losses, ties, win_rate, p_value: one row per ordered
  pair of systems that met in a conversation; wins = segment annotations in which system_a's
  label ranked above system_b's (human > unsure > bot); win_rate = wins / (wins + losses);
  p_value = chi-square test that wins and losses split evenly.
- ``feature_win_rates``: feature plus the same columns, from the fluency / sensibleness /
  specificity answers (+1 = this entity did better).
- ``ranking``: system, win_rate, trueskill_mu, trueskill_sigma, rank_low, rank_high, cluster,
  win_rate_rank_low, win_rate_rank_high, win_rate_cluster: TrueSkill and plain win-rate rankings,
  each with its bootstrap 95 % rank range and clusters of overlapping ranges, e.g. ``(2,3)``.
- ``label_agreement``: system, label, pairs, both, agreement (:func:`agreement`); Krippendorff's alpha
  is in ``agreement`` (:mod:`hitkit.protocols.spot_the_bot.evidence`).
- ``annotators``: worker_id, entities, correct, correctness, hh_entities, hh_correct,
  hh_correctness (:func:`annotator_correctness`).
- ``segment_lengths``: system, segment_exchanges, annotations, games, wins, losses, ties, win_rate,
  labelled_human (:func:`segment_lengths`).
- ``annotation_time``: segment_exchanges, segment_annotations, timed, mean_elapsed_s,
  median_elapsed_s (:func:`annotation_time`).
- With ``judge.csv`` in the folder (a study with an LLM judge): ``judge_win_rates`` and
  ``judge_bias`` (:mod:`hitkit.protocols.spot_the_bot.judge_analysis`).

The summary holds counts, the annotator correctness figures (mean, mean on human–human material,
share of annotators below 50 %), the mean annotation time, and the ranking settings.

**Self-chat.** Human–human material (and a bot talking to itself) gives pairs with
system_a == system_b. They get one ``win_rates`` row each: every decisive annotation is one win
and one loss of the system against itself, every equal pair of labels one tie, so win_rate is 0.5
and p_value 1 by construction; what such a row tells is the tie share (how often annotators
could not tell two speakers of the same kind apart), a bound for the bot pairs. A system cannot
play itself in a ranking, so these annotations are not ranking games; a system that never met
another system is not ranked.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from hitkit.analysis import base
from hitkit.analysis.base import AnalysisResult, common_options, png
from hitkit.analysis.evidence import attach
from hitkit.analysis.gold import gold_counts
from hitkit.analysis.inference import (
    DEFAULT_CORRECTION,
    DEFAULT_DUPLICATES,
    Correction,
    DuplicatePolicy,
    DuplicateRowsWarning,
    check_correction,
    correction_label,
)
from hitkit.analysis.trueskill_vec import DEFAULT_TRUESKILL, TrueSkillEnv, TrueSkillSettings
from hitkit.errors import InputError
from hitkit.protocols.kit.summary import bootstrap, repeated_rows
from hitkit.protocols.spot_the_bot import figures
from hitkit.protocols.spot_the_bot.annotators import (
    agreement,
    annotation_time,
    annotator_correctness,
    implausible_times,
    segment_lengths,
)
from hitkit.protocols.spot_the_bot.evidence import evidence
from hitkit.protocols.spot_the_bot.judge import read_judge
from hitkit.protocols.spot_the_bot.judge_analysis import analysis_tables
from hitkit.protocols.spot_the_bot.ranking import RankBy, Resample, games, rank_with_bootstrap
from hitkit.protocols.spot_the_bot.reading import load_annotations, segment_annotations
from hitkit.protocols.spot_the_bot.win_rates import (
    CLUSTER_UNITS,
    ClusterUnit,
    feature_win_rates,
    system_feature_win_rates,
    win_rates,
)


def _json_float(value) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def analyze_annotations(
    annotations: pd.DataFrame,
    *,
    work_time: pd.Series | None = None,
    duplicate_report: dict | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    by: RankBy = "mu",
    env: TrueSkillEnv | None = None,
    trueskill: TrueSkillSettings = DEFAULT_TRUESKILL,
    resample: Resample = "game",
    cluster: ClusterUnit = "conversation",
    correction: Correction = DEFAULT_CORRECTION,
    survival: bool = False,
    n_imputations: int = 50,
    stability: bool = False,
    stability_sizes: range | list[int] = range(3, 46),
    n_sub: int = 1000,
    stability_boot: int = 40,
) -> AnalysisResult:
    """METHODS §2 on read annotations (:func:`~hitkit.protocols.spot_the_bot.reading.load_annotations`;
    ``work_time``: each assignment's seconds, which bound its annotation times; ``duplicate_report``:
    what the duplicate policy removed): win rates, feature win rates, clustered rankings and the
    annotator tables (agreement, correctness, segment lengths, annotation time).

    Settings (all recorded in the summary): ``trueskill`` (τ = 0 and the observed tie rate as
    draw probability by default; ``env`` overrides it whole), ``by`` and ``resample`` (the
    ranking bootstrap's unit: ``game`` as Dušek et al., or ``conversation`` / ``worker``),
    ``cluster`` (the unit resampled for win-rate intervals and, with ``survival``, the cluster
    of the robust log-rank and Cox variances; ``annotation`` = none), ``correction``
    (Bonferroni, Holm or none, for the chi-square, log-rank and Cox p-values), ``duplicates``
    (:func:`analyze_spot_the_bot`'s policy for repeated annotations; the count is in the summary and in
    ``warnings``).

    ``survival=True`` adds ``survival`` (Turnbull curve per system), ``survival_tests``
    (generalized log-rank per pair; ``n_imputations``), ``cox`` (proportional hazards per
    system on the three features) and the ``survival`` figure (:mod:`hitkit.protocols.spot_the_bot.survival`).
    ``stability=True`` adds ``stability``, ``stability_smallest`` and the ``stability`` figure
    (:mod:`hitkit.protocols.spot_the_bot.stability`; ``n_sub`` subsamples with ``stability_boot`` resamples
    each per size in ``stability_sizes``: about 5 minutes per variant for 6 pairs of 45
    conversations with the defaults, one variant per system on top); it uses the same TrueSkill
    environment as the ranking."""
    check_correction(correction)
    if cluster not in CLUSTER_UNITS:
        raise ValueError(f"cluster={cluster!r}; use one of {', '.join(CLUSTER_UNITS)}")
    played = games(annotations)
    if env is not None:  # an explicit environment: every setting given
        trueskill = TrueSkillSettings(env.mu, env.sigma, env.beta, env.tau, env.draw_probability)
    env = trueskill.env_for(played)
    pairs = win_rates(annotations, correction=correction, cluster=cluster, n_boot=n_boot, seed=seed)
    ranked = rank_with_bootstrap(played, n_boot=n_boot, seed=seed, by=by, env=env, resample=resample)
    annotators = annotator_correctness(annotations)
    times, timing, implausible = _annotation_times(annotations, work_time)
    summary = {
        "annotations": len(annotations),
        "games": len(played),
        "workers": int(annotations["worker_id"].nunique()),
        "conversations": len(annotations[["study", "conversation_id"]].drop_duplicates()),
        "systems": sorted(set(annotations["system"])),
        "correctness_mean": _json_float(annotators["correctness"].mean()),
        "correctness_mean_human_human": _json_float(annotators["hh_correctness"].mean()),
        "correctness_share_below_half": _json_float((annotators["correctness"] < 0.5).mean()),
        **timing,
        "ranked_by": by,
        "trueskill": trueskill.record(env),
        "ranking_resampled": resample,
        "multiple_comparisons": correction,
        **bootstrap(n_boot, seed, cluster),
        **repeated_rows(
            "segment annotation key(s) (same worker, segment)",
            duplicate_report or {},
            annotations.attrs.get("assignment_duplicates"),
        ),
    }
    summary["warnings"] += implausible
    result = AnalysisResult(
        tables={
            "win_rates": pairs,
            "feature_win_rates": feature_win_rates(annotations, correction=correction),
            "system_feature_win_rates": system_feature_win_rates(annotations),
            "ranking": ranked,
            "label_agreement": agreement(annotations),
            "annotators": annotators,
            "segment_lengths": segment_lengths(annotations),
            "annotation_time": times,
        },
        summary=summary,
        figures={
            "win_rates": png(lambda: figures.win_rates(pairs, list(ranked["system"]), correction_label(correction)))
        },
    )
    attach(
        result,
        *evidence(annotations, played, ranked, n_boot=n_boot, seed=seed),
        workers_table="annotators",
        gold=gold_counts(annotators["worker_id"], annotators["hh_entities"], annotators["hh_correct"]),
        gold_items="speakers of human–human conversations, right when labelled human",
    )
    if survival:
        _add_survival(
            result, annotations, cluster=cluster, correction=correction, n_imputations=n_imputations, seed=seed
        )
    if stability:
        _add_stability(
            result, annotations, stability_sizes, n_sub=n_sub, n_boot=stability_boot, seed=seed, by=by, env=env
        )
    return result


def _annotation_times(
    annotations: pd.DataFrame, work_time: pd.Series | None
) -> tuple[pd.DataFrame, dict[str, Any], list[str]]:
    """The annotation-time table, the summary's timing facts (segment annotations, the median and mean
    plausible time, how many were implausible) and the warning that says so where any were."""
    seg = segment_annotations(annotations)
    implausible = implausible_times(seg, work_time)
    plausible = seg["elapsed_s"].where(~implausible)
    facts = {
        "segment_annotations": len(seg),
        "median_elapsed_s": _json_float(plausible.median()),
        "mean_elapsed_s": _json_float(plausible.mean()),
        "implausible_elapsed": int(implausible.sum()),
    }
    warning = (
        f"{int(implausible.sum())} annotation time(s) are implausible "
        "(negative, a timestamp, or longer than the assignment) and were left "
        "out of the time table"
    )
    return annotation_time(annotations, work_time), facts, [warning] if implausible.any() else []


def _add_stability(
    result: AnalysisResult,
    annotations: pd.DataFrame,
    sizes: range | list[int],
    *,
    n_sub: int,
    n_boot: int,
    seed: int,
    by: RankBy,
    env: TrueSkillEnv,
) -> None:
    """Add the ranking's stability per number of conversations per pair, the smallest stable one, their
    figure and the summary's ``stability`` entry to ``result``."""
    from hitkit.protocols.spot_the_bot import stability as stab

    table = stab.stability(annotations, sizes, n_sub=n_sub, n_boot=n_boot, seed=seed, by=by, env=env)
    result.tables["stability"] = table
    result.tables["stability_smallest"] = stab.smallest_stable_size(table)
    result.figures["stability"] = png(lambda: figures.stability(table))
    result.summary["stability"] = {"n_sub": n_sub, "n_boot": n_boot, "sizes": [int(x) for x in sizes]}


def _add_survival(
    result: AnalysisResult,
    annotations: pd.DataFrame,
    *,
    cluster: ClusterUnit,
    correction: Correction,
    n_imputations: int,
    seed: int,
) -> None:
    """Add the Turnbull curves, the pairwise generalized log-rank tests, the Cox model per system, their
    figure and the summary's ``survival`` entry to ``result``."""
    from hitkit.protocols.spot_the_bot import cox, logrank
    from hitkit.protocols.spot_the_bot import survival as surv

    data = surv.survival_data(annotations)
    curves = surv.survival_curves(data)
    unit = None if cluster == "annotation" else cluster
    result.tables["survival"] = curves
    result.tables["survival_tests"] = logrank.survival_tests(
        data, n_imputations=n_imputations, seed=seed, correction=correction, cluster=unit
    )
    result.tables["cox"] = cox.cox_by_system(data, cluster=unit, correction=correction)
    result.figures["survival"] = png(lambda: figures.survival(curves))
    result.summary["survival"] = {"n_imputations": n_imputations, "bot_annotations": len(data), "cluster": cluster}


def analyze_spot_the_bot(
    in_dir: str | Path,
    *,
    duplicates: DuplicatePolicy = DEFAULT_DUPLICATES,
    judge_labels: str | Path | None = None,
    **settings,
) -> AnalysisResult:
    """:func:`analyze_annotations` on the annotations (and assignments' work times) of ``in_dir``;
    ``duplicates`` is the policy for repeated annotations, ``judge_labels`` a judge-labels file read
    instead of the folder's judge.csv (:mod:`hitkit.protocols.spot_the_bot.judge_file`), ``settings``
    those of :func:`analyze_annotations`."""
    in_dir = Path(in_dir)
    annotations, duplicate_report = load_annotations(in_dir, duplicates=duplicates)
    if annotations.empty:
        raise InputError(
            in_dir / "annotations.csv", "no annotations from submitted or approved assignments; nothing to analyse"
        )
    result = analyze_annotations(
        annotations, work_time=_work_times(in_dir, duplicates), duplicate_report=duplicate_report, **settings
    )
    judge_path = in_dir / "judge.csv"
    if judge_labels is not None:
        from hitkit.protocols.spot_the_bot.judge_file import analysis_tables_from_file

        seed = settings.get("seed", 0)
        base.add_judge(result, analysis_tables_from_file(annotations, judge_labels, seed=seed), figures.judge_win_rates)
    elif judge_path.is_file() or judge_path.with_suffix(".parquet").is_file():
        add_judge(result, annotations, read_judge(judge_path))
    return result


def add_judge(result: AnalysisResult, annotations: pd.DataFrame, judge: pd.DataFrame) -> None:
    """Add the LLM judge's tables (``judge_win_rates``, ``judge_bias``), its summary (``judge``) and its
    warnings to ``result`` (:func:`~hitkit.protocols.spot_the_bot.judge_analysis.analysis_tables`)."""
    base.add_judge(result, analysis_tables(annotations, judge), figures.judge_win_rates)


def _work_times(in_dir: Path, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.Series | None:
    """work_time_s by assignment_id from ``assignments.csv``, or None without that table."""
    from hitkit.analysis.tables import read_assignments, table_exists

    if not table_exists(in_dir / "assignments.csv"):
        return None
    with warnings.catch_warnings():  # the same repeats were counted when the annotations were read
        warnings.simplefilter("ignore", DuplicateRowsWarning)
        assignments = read_assignments(in_dir, duplicates=duplicates)
    return assignments.set_index("assignment_id")["work_time_s"]


def study_trueskill(config=None) -> TrueSkillSettings:
    """The TrueSkill settings of the study file's ``spot_the_bot.trueskill`` section, or the
    defaults (:data:`DEFAULT_TRUESKILL`) without a study file."""
    section = getattr(config, "spot_the_bot", None) if config is not None else None
    return section.trueskill.settings() if section is not None else DEFAULT_TRUESKILL


def analyze(
    in_dir: str | Path, *, seed: int, config=None, options: dict, replicate_dir=None, stability: bool = False
) -> AnalysisResult:
    """The registry's entry point: :func:`analyze_spot_the_bot` with ``hitkit analyze``'s options;
    without a ``trueskill`` option the study file's ``spot_the_bot.trueskill`` applies."""
    common = common_options(options)
    return analyze_spot_the_bot(
        in_dir,
        seed=seed,
        survival=True,
        stability=stability,
        cluster=options.get("cluster", "conversation"),
        resample=options.get("resample", "game"),
        by=options.get("rank_by", "mu"),
        trueskill=options.get("trueskill", study_trueskill(config)),
        judge_labels=options.get("judge_labels"),
        **common,
    )


def cli_options(config, given: dict) -> dict:
    """``hitkit analyze``'s Spot The Bot options as :func:`analyze` takes them: the ``--trueskill-*`` and
    ``--draw-probability`` values override the study file's settings (:func:`study_trueskill`) one by one."""
    import dataclasses

    from hitkit.errors import HitkitError

    settings = {
        name: given[f"trueskill_{name}"]
        for name in ("mu", "sigma", "beta", "tau")
        if given.get(f"trueskill_{name}") is not None
    }
    try:
        if given.get("draw_probability") is not None:
            p = given["draw_probability"]
            settings["draw_probability"] = None if p == "observed" else float(p)
        trueskill = dataclasses.replace(study_trueskill(config), **settings)
    except ValueError as exc:
        raise HitkitError(f"TrueSkill settings: {exc}; e.g. --trueskill-tau 0 --draw-probability observed") from None
    return {"resample": given.get("resample"), "rank_by": given.get("rank_by"), "trueskill": trueskill}


def worker_qc(tables: dict[str, pd.DataFrame], config=None) -> tuple[str, dict[str, bool]] | None:
    """Which workers pass quality control so far (the dashboard's and the QC policy's check): those whom
    :func:`annotator_correctness` finds right on at least half the speakers; None before any annotation."""
    annotations = tables["annotations"]
    if annotations.empty:
        return None
    table = annotator_correctness(annotations)
    return (
        "labels at least half the speakers right (human as human, bot as bot)",
        {str(w): bool(c >= 0.5) for w, c in zip(table["worker_id"], table["correctness"])},
    )
