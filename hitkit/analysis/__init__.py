"""Analyses of the tidy tables, one module per protocol; each returns an AnalysisResult."""
from __future__ import annotations

from pathlib import Path

from hitkit.analysis.base import AnalysisResult
from hitkit.errors import HitkitError


CLUSTER_UNITS = {"spot_the_bot": ("conversation", "worker", "annotation"),
                 "live_chat": ("worker", "conversation", "rating"),
                 "pairwise": ("worker", "item", "vote")}
"""Per task, the units a clustered bootstrap (and robust variance) can resample; first = default."""


def run_analysis(task: str, in_dir: str | Path, *, seed: int = 0, config=None,
                 replicate_dir: str | Path | None = None, stability: bool = False,
                 options: dict | None = None) -> AnalysisResult:
    """The analysis of ``task`` on the exported tables in ``in_dir`` (``config``: the study's, if known).

    ``replicate_dir`` adds live chat's run-to-run correlations; ``stability`` adds Spot The Bot's
    ranking stability (minutes of computing). ``options`` (keys as ``hitkit analyze``'s options:
    correction, duplicates, cluster, n_boot; for spot_the_bot also resample, rank_by and
    trueskill, a :class:`~hitkit.protocols.spot_the_bot.analysis.TrueSkillSettings`) override the
    defaults; without ``trueskill`` the study file's ``spot_the_bot.trueskill`` applies
    (:func:`study_trueskill`); every option used is recorded in the summary. The summary also records the task,
    the study's name (``study``, so that a report made from the analysis folder alone is titled
    with it) and the software versions (``software``) the numbers were computed with, for the
    report's methods paragraph.
    """
    options = {k: v for k, v in (options or {}).items() if v is not None}
    cluster = options.get("cluster")
    if cluster is not None and task in CLUSTER_UNITS and cluster not in CLUSTER_UNITS[task]:
        raise HitkitError(f"--cluster {cluster!r} does not apply to {task}; use one of "
                          f"{', '.join(CLUSTER_UNITS[task])}")
    result = _run(task, in_dir, seed=seed, config=config, replicate_dir=replicate_dir, stability=stability,
                  options=options)
    from hitkit.loading import software_versions, study_name

    result.summary.setdefault("task", task)
    result.summary.setdefault("study", study_name(Path(in_dir)))
    result.summary.setdefault("software", software_versions())
    return result


def study_trueskill(config=None):
    """The TrueSkill settings of the study file's ``spot_the_bot.trueskill`` section, or the
    defaults (:data:`~hitkit.protocols.spot_the_bot.analysis.DEFAULT_TRUESKILL`) without a study file."""
    from hitkit.protocols.spot_the_bot.analysis import DEFAULT_TRUESKILL

    section = getattr(config, "spot_the_bot", None) if config is not None else None
    return section.trueskill.settings() if section is not None else DEFAULT_TRUESKILL


def _run(task: str, in_dir: str | Path, *, seed: int, config, replicate_dir, stability: bool,
         options: dict) -> AnalysisResult:
    common = {k: options[k] for k in ("correction", "duplicates", "n_boot") if k in options}
    if task == "pairwise":
        from hitkit.protocols.pairwise.analysis import analyze_pairwise

        return analyze_pairwise(in_dir, seed=seed, resample=options.get("cluster", "worker"), **common)
    if task == "live_chat":
        from hitkit.protocols.live_chat.analysis import analyze_live_chat

        extra = dict(common, interval_unit=options.get("cluster", "worker"), seed=seed)
        if config is not None and config.live_chat is not None:
            return analyze_live_chat(in_dir, criteria=config.live_chat.criterion_list(),
                                     replicate_dir=replicate_dir, **extra)
        return analyze_live_chat(in_dir, replicate_dir=replicate_dir, **extra)
    if task == "spot_the_bot":
        from hitkit.protocols.spot_the_bot.analysis import analyze_spot_the_bot

        return analyze_spot_the_bot(in_dir, seed=seed, survival=True, stability=stability,
                                    cluster=options.get("cluster", "conversation"),
                                    resample=options.get("resample", "game"),
                                    by=options.get("rank_by", "mu"),
                                    trueskill=options.get("trueskill", study_trueskill(config)), **common)
    raise HitkitError(f"no analysis for task '{task}' in this version of hitkit")
