"""The study's LLM judge within ``hitkit launch``: labelling the material before anything is posted
(pairwise), or labelling what the crowd made once its work is in (live chat).

Either way a failed label loses nothing (every label stored is kept) and is reported with the command
that asks again for the missing ones only; judging itself is :mod:`hitkit.judges.judging`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from hitkit.db.models import Study
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.events import add_event
from hitkit.judges.section import judge_section
from hitkit.study.config import StudyConfig
from hitkit.study.stored import StudyContext


def judge_material(
    config: StudyConfig,
    config_path: Path,
    ctx: StudyContext,
    echo: Callable[[str], None],
    show_progress: bool = False,
    lines_every_s: float | None = None,
) -> None:
    """Have the study's judge label every item not yet labelled (:mod:`hitkit.judges.judging`), then open a
    draft study for posting; HitkitError, with the study left a draft, while any label failed."""
    from hitkit.judges.judging import judge_study

    judge = judge_section(config)
    echo(f"Judging every item with {judge.model} at {judge.url} before posting…")
    report = judge_study(
        config, config.database_url, ctx.study_id, show_progress=show_progress, lines_every_s=lines_every_s
    )
    echo(report.line())
    if report.failed:
        raise HitkitError(
            f"the judge ({judge.model} at {judge.url}) failed on {len(report.failed)} "
            f"of {report.planned} labels (first: {report.failed[0]}); the "
            f"{report.already_done + report.judged + report.auto} stored are kept and nothing was "
            f"posted. Check the judge, then `hitkit launch {config_path} --resume` asks only for "
            f"the missing labels"
        )
    with session_scope(config.database_url) as session:
        study = session.get_one(Study, ctx.study_id)
        if study.status == "draft":
            study.status = "running"
            add_event(session, ctx.study_id, "study_judged", "cli", {"labels": report.planned})


def judges_before(config: StudyConfig) -> bool:
    """Whether the study's judge labels its material before anything is posted (pairwise), not what the
    crowd makes (live chat: :func:`judge_crowd_work`)."""
    if config.judge is None:
        return False
    from hitkit.judges.judging import judges_after

    return not judges_after(config)


def judge_crowd_work(
    config: StudyConfig,
    config_path: Path,
    study_id: int,
    echo: Callable[[str], None],
    show_progress: bool = False,
    lines_every_s: float | None = None,
) -> bool:
    """Have the study's judge label what the crowd has made and is not yet labelled (live chat: each
    finished conversation); True when every label is in. A failure loses nothing (the crowd's work is in
    the database, every label stored is kept) and is reported with how to retry."""
    from hitkit.judges.judging import judge_study

    judge = judge_section(config)
    echo(f"Judging the crowd's conversations with {judge.model} at {judge.url}…")
    report = judge_study(
        config, config.database_url, study_id, show_progress=show_progress, lines_every_s=lines_every_s
    )
    echo(report.line())
    if report.failed:
        echo(
            f"The judge ({judge.model} at {judge.url}) failed on {len(report.failed)} of "
            f"{report.planned} {report.what} (first: {report.failed[0]}); the crowd's work and every label "
            f"stored are kept. Check the judge, then `hitkit judge {config_path}` asks only for the missing "
            f"labels, and `hitkit export {config_path}` and `hitkit analyze` include them."
        )
    return not report.failed
