"""Analyses of the tidy tables, one module per protocol; each returns an AnalysisResult."""
from __future__ import annotations

from pathlib import Path

from hitkit.analysis.base import AnalysisResult
from hitkit.errors import HitkitError


def run_analysis(task: str, in_dir: str | Path, *, seed: int = 0, config=None,
                 replicate_dir: str | Path | None = None, stability: bool = False) -> AnalysisResult:
    """The analysis of ``task`` on the exported tables in ``in_dir`` (``config``: the study's, if known).

    ``replicate_dir`` adds live chat's run-to-run correlations; ``stability`` adds Spot The Bot's
    ranking stability (minutes of computing). The summary also records the task and the software
    versions (``software``) the numbers were computed with, for the report's methods paragraph.
    """
    result = _run(task, in_dir, seed=seed, config=config, replicate_dir=replicate_dir, stability=stability)
    from hitkit.loading import software_versions

    result.summary.setdefault("task", task)
    result.summary.setdefault("software", software_versions())
    return result


def _run(task: str, in_dir: str | Path, *, seed: int, config, replicate_dir, stability: bool) -> AnalysisResult:
    if task == "pairwise":
        from hitkit.analysis.pairwise import analyze_pairwise

        return analyze_pairwise(in_dir, seed=seed)
    if task == "live_chat":
        from hitkit.analysis.live_chat import analyze_live_chat

        if config is not None and config.live_chat is not None:
            return analyze_live_chat(in_dir, criteria=config.live_chat.criterion_list(), replicate_dir=replicate_dir)
        return analyze_live_chat(in_dir, replicate_dir=replicate_dir)
    if task == "spot_the_bot":
        from hitkit.analysis.spot_the_bot import analyze_spot_the_bot

        return analyze_spot_the_bot(in_dir, seed=seed, survival=True, stability=stability)
    raise HitkitError(f"no analysis for task '{task}' in this version of hitkit")
