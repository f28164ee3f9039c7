"""Events that record a lasting state once, however often a job sees it (the scheduler, ``hitkit sync``, the ledger)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Event


def record_once(session: Session, study_id: int, kind: str, data: dict) -> bool:
    """Add an Event unless one of this kind with the same data exists: a state that lasts is logged once."""
    seen = session.scalars(select(Event.data).where(Event.study_id == study_id, Event.kind == kind))
    if any(d == data for d in seen):
        return False
    session.add(Event(study_id=study_id, kind=kind, actor="scheduler", data=data))
    return True
