"""What this database remembers doing on Prolific, kept as ``prolific_*`` Event rows.

The Prolific provider is the only writer of these rows; every function here takes the session it
works in, so the caller decides the transaction. :class:`ProlificMemory` is how the provider uses
them: a short transaction of its own for each step, never the caller's. Arrivals read without any
transaction (:func:`read_outside`): a worker's request may already hold SQLite's write lock, and a
read in autocommit mode never waits for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Event, Hit, Study
from hitkit.db.session import get_engine, normalise_url, session_scope
from hitkit.events import add_event
from hitkit.providers.prolific.client import ProlificError


@dataclass
class ProlificState:
    """What this database remembers doing on Prolific, read from its ``prolific_*`` events."""

    study_id: str | None = None
    internal_name: str | None = None
    places: dict[str, int] = field(default_factory=dict)
    bonuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per ledger key: ``bonus_id``, ``submission``, ``amount``, and ``sent_at``/``paid`` once those happen."""
    test_study: str | None = None
    """The study Prolific made for ``hitkit launch --test-participant`` (:mod:`.test_run`), if any."""


def fold(rows: Iterable[Sequence[Any]]) -> ProlificState:
    """The state that ``(kind, data, created_at)`` event rows, oldest first, add up to."""
    out = ProlificState()
    for kind, data, at in rows:
        if kind == "prolific_study_named":
            out.internal_name = out.internal_name or data["internal_name"]
        elif kind == "prolific_study_created":
            out.study_id = out.study_id or data["study_id"]
        elif kind == "prolific_places":
            out.places.setdefault(data["hit_key"], int(data["places"]))
        elif kind == "prolific_bonus_created":
            out.bonuses.setdefault(data["key"], dict(data))
        elif kind == "prolific_bonus_sent":
            out.bonuses.get(data["key"], {}).update(sent_at=at)
        elif kind == "prolific_bonus_unpaid":
            out.bonuses.get(data["key"], {}).pop("sent_at", None)
        elif kind == "prolific_bonus_paid":
            out.bonuses.get(data["key"], {}).update(paid=True)
        elif kind == "prolific_test_study":
            out.test_study = out.test_study or data.get("study_id")
    return out


def read(session: Session, study_name: str) -> ProlificState:
    """The study's ``prolific_*`` events, read in ``session``, as a :class:`ProlificState`."""
    study_row = session.scalar(select(Study.id).where(Study.name == study_name))
    return fold(
        session.execute(
            select(Event.kind, Event.data, Event.created_at)
            .where(Event.study_id == study_row, Event.kind.like("prolific_%"))
            .order_by(Event.id)
        ).all()
    )


def record(session: Session, study_name: str, kind: str, data: dict[str, Any]) -> None:
    """Remember one step done on Prolific as an event of the study, in ``session``."""
    study_row = session.scalar(select(Study.id).where(Study.name == study_name))
    add_event(session, study_row, kind, "provider", data)


def read_outside(database_url: str, statement: Select[Any]) -> Sequence[Any]:
    """Rows of a SELECT read on a connection of its own, outside any transaction."""
    engine = get_engine(database_url)
    compiled = statement.compile(dialect=engine.dialect)
    args = tuple(compiled.params[k] for k in compiled.positiontup or ()) if compiled.positional else compiled.params
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(str(compiled), args)
        rows = cursor.fetchall()
        cursor.close()
        raw.rollback()  # PostgreSQL began a read-only snapshot; nothing to keep
    finally:
        raw.close()
    return rows


def created_study_id(database_url: str, study_name: str, kind: str = "prolific_study_created") -> str | None:
    """The Prolific study this database created for ``study_name`` (or, with ``kind`` ``prolific_test_study``,
    the one Prolific made for a test run), read outside any transaction."""
    study_row = select(Study.id).where(Study.name == study_name).scalar_subquery()
    rows = read_outside(
        database_url,
        select(Event.data).where(Event.study_id == study_row, Event.kind == kind).order_by(Event.id).limit(1),
    )
    if not rows:
        return None
    data = rows[0][0]
    return (json.loads(data) if isinstance(data, str) else data)["study_id"]


def held_status(database_url: str, session_id: str) -> str | None:
    """hitkit's status of the assignment on Prolific session ``session_id``, read outside any transaction."""
    rows = read_outside(database_url, select(Assignment.status).where(Assignment.provider_assignment_id == session_id))
    return rows[0][0] if rows else None


def require_posted(study_id: str | None, study_name: str) -> str:
    """The Prolific study id; a permanent ProlificError when the study was not posted yet."""
    if study_id is None:
        raise ProlificError(f"study '{study_name}' has not been posted to Prolific yet", permanent=True)
    return study_id


class ProlificMemory:
    """One study's ``prolific_*`` events in one database, each read or write in a short transaction of its own."""

    def __init__(self, database_url: str, study_name: str):
        self.database_url = normalise_url(database_url)
        self.study_name = study_name

    def read(self) -> ProlificState:
        """What this database remembers doing on Prolific for the study."""
        with session_scope(self.database_url) as session:
            return read(session, self.study_name)

    def record(self, kind: str, data: dict[str, Any]) -> None:
        """Remember one step done on Prolific, committed at once."""
        with session_scope(self.database_url) as session:
            record(session, self.study_name, kind, data)

    def created_study_id(self) -> str | None:
        """The Prolific study this database created, read outside any transaction (for arrivals)."""
        return created_study_id(self.database_url, self.study_name)

    def held_status(self, session_id: str) -> str | None:
        """hitkit's status of the assignment on a Prolific session, read outside any transaction."""
        return held_status(self.database_url, session_id)

    def open_hits(self) -> int:
        """How many of the study's HITs are still pending or posted (a short transaction of its own)."""
        with session_scope(self.database_url) as session:
            study_row = select(Study.id).where(Study.name == self.study_name).scalar_subquery()
            return session.execute(
                select(func.count())
                .select_from(Hit)
                .where(Hit.study_id == study_row, Hit.status.in_(("pending", "posted")))
            ).scalar_one()
