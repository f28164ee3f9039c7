"""A study's state at a glance, as plain data (for ``hitkit status`` and ``--json``)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import func, select

from hitkit.db.models import Assignment, Hit, Payment, Study
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.running.stopping import fired_event, outcome_of
from hitkit.study.lease import leader


def study_status(database_url: str, name: str) -> dict:
    """Progress, HIT and assignment counts by status, spend and budget of the study ``name``."""
    from hitkit.study.counts import study_counts
    from hitkit.study.stored import StudyContext

    with session_scope(database_url) as session:
        study = session.scalar(select(Study).where(Study.name == name))
        if study is None:
            raise HitkitError(f"no study called '{name}' in {database_url}; launch it first")
        hits = dict(
            session.execute(select(Hit.status, func.count()).where(Hit.study_id == study.id).group_by(Hit.status)).all()
        )
        assignments = dict(
            session.execute(
                select(Assignment.status, func.count())
                .join(Hit)
                .where(Hit.study_id == study.id)
                .group_by(Assignment.status)
            ).all()
        )
        workers = session.scalar(
            select(func.count(func.distinct(Assignment.worker_id)))
            .join(Hit)  # a screened-out
            .where(Hit.study_id == study.id, Assignment.status != "screened_out")
        )  # is none
        spent = session.execute(
            select(func.coalesce(func.sum(Payment.amount), 0)).where(
                Payment.study_id == study.id, Payment.status == "paid"
            )
        ).scalar_one()
        info: dict[str, Any] = {
            "study": study.name,
            "task": study.task_type,
            "provider": study.provider,
            "status": study.status,
            "hits": hits,
            "assignments": assignments,
            "workers": workers,
            "spent": str(Decimal(spent).quantize(Decimal("0.01"))),
            "budget": str(study.budget),
            "currency": study.currency,
        }
        info["leader"] = leader(session, study.id)  # which process acts for the study, since when
        if study.provider == "prolific":  # the one platform with webhooks: their health, refusals by cause
            from hitkit.running.hooks import health

            info["webhooks"] = health(session, study.id)
        fired = fired_event(session, study.id)
        if fired is not None:
            info["stopped_by_rule"] = {
                "after_hits": fired.data["hits"],
                "at": fired.data["at"],
                "outcome": fired.data["outcome"],
                "line": outcome_of(session, study.id),
            }
        # The one definition of progress the console and the dashboard show too (hitkit.study.counts.Counts).
        counts = study_counts(session, StudyContext.of(study, ""))
    info.update(counts.as_json())
    info["answers_done"] = counts.submitted  # the name earlier versions gave the answers in submitted work
    info["answers"] = counts.answers_text()
    if counts.chat_messages is not None:
        info["chat"] = counts.chat_text()
    return info
