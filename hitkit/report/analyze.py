"""``hitkit analyze``'s entry: the protocol's analysis of exported tables in a folder, with the run's
record (task, study, software versions) in its summary."""

from __future__ import annotations

from pathlib import Path

from hitkit.analysis.base import AnalysisResult
from hitkit.errors import HitkitError
from hitkit.protocols import protocol


def run_analysis(
    task: str,
    in_dir: str | Path,
    *,
    seed: int = 0,
    config=None,
    replicate_dir: str | Path | None = None,
    stability: bool = False,
    options: dict | None = None,
) -> AnalysisResult:
    """The analysis of ``task`` on the exported tables in ``in_dir`` (``config``: the study's, if known).

    ``replicate_dir`` adds live chat's run-to-run correlations; ``stability`` adds Spot The Bot's
    ranking stability (minutes of computing). ``options`` (keys as ``hitkit analyze``'s options:
    correction, duplicates, cluster, n_boot; for spot_the_bot also resample, rank_by and
    trueskill, a :class:`~hitkit.protocols.spot_the_bot.analysis.TrueSkillSettings`) override the
    defaults; without ``trueskill`` the study file's ``spot_the_bot.trueskill`` applies
    (:func:`~hitkit.protocols.spot_the_bot.analysis.study_trueskill`); every option used is recorded in the summary. The summary also records the task,
    the study's name (``study``, so that a report made from the analysis folder alone is titled
    with it) and the software versions (``software``) the numbers were computed with, for the
    report's methods paragraph.
    """
    options = {k: v for k, v in (options or {}).items() if v is not None}
    proto = protocol(task)
    cluster = options.get("cluster")
    if cluster is not None and cluster not in proto.cluster_units:
        raise HitkitError(
            f"--cluster {cluster!r} does not apply to {task}; use one of {', '.join(proto.cluster_units)}"
        )
    result = proto.module("analysis").analyze(
        in_dir, seed=seed, config=config, options=options, replicate_dir=replicate_dir, stability=stability
    )
    from hitkit.analysis.evidence import gold_qc
    from hitkit.analysis.tables import read_exclusions
    from hitkit.tables.loading import study_name
    from hitkit.tables.versions import software_versions

    if config is not None and config.gold is not None:
        gold_qc(result, config.gold.qc)  # the study file's gold rule, as the QC policy applies it
    excluded = read_exclusions(in_dir)
    if excluded:  # stated, with each reason: work left out on purpose is reported, never silently dropped
        result.summary["exclusions"] = [{"assignment_id": a, "reason": r} for a, r in excluded.items()]
        result.summary["warnings"] = list(result.summary.get("warnings", [])) + [
            f"{len(excluded)} assignment(s) excluded from the analysis by exclusions.csv, each with its reason "
            "(summary.json: exclusions)"
        ]
    result.summary.setdefault("task", task)
    result.summary.setdefault("study", study_name(Path(in_dir)))
    result.summary.setdefault("software", software_versions())
    return result
