"""Events that record a lasting state once, however often a job sees it (the scheduler, ``hitkit sync``, the ledger)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Event


def add_event(session: Session, study_id: int | None, kind: str, actor: str, data: dict) -> None:
    """Add an Event of ``kind`` to the study's log: who did it (``actor``: scheduler, cli, server, webhook
    ...) and what it concerns (``data``)."""
    session.add(Event(study_id=study_id, kind=kind, actor=actor, data=data))


def record_once(session: Session, study_id: int, kind: str, data: dict) -> bool:
    """Add an Event unless one of this kind with the same data exists: a state that lasts is logged once."""
    seen = session.scalars(select(Event.data).where(Event.study_id == study_id, Event.kind == kind))
    if any(d == data for d in seen):
        return False
    add_event(session, study_id, kind, "scheduler", data)
    return True
