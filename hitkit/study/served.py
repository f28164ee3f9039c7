"""Where a study's pages are served and which studies a database holds: the address recorded by each
launch or ``hitkit serve`` (so invite links keep working), the dashboard's address, and the one-line
answer for a study that was never launched."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import select

from hitkit.db.models import Event, Study
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.events import add_event
from hitkit.study.config import StudyConfig

SERVED_EVENT = "served"
"""Event kind holding the address a launch or ``hitkit serve`` serves a study's pages at (for invites)."""


def served_url(database_url: str, study: str) -> str | None:
    """The address the study's pages were last served at, as recorded by ``launch`` or ``serve``."""
    names = launched_studies(database_url)
    if not names or study not in names:
        return None
    with session_scope(database_url) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == study))
        if study_id is None:
            return None
        event = session.scalar(
            select(Event)
            .where(Event.study_id == study_id, Event.kind == SERVED_EVENT)
            .order_by(Event.id.desc())
            .limit(1)
        )
        return event.data.get("url") if event else None


def record_served(database_url: str, study_ids: list[int], url: str) -> None:
    """Record where the pages of these studies are served now."""
    with session_scope(database_url) as session:
        for study_id in study_ids:
            add_event(session, study_id, SERVED_EVENT, "cli", {"url": url})


def dashboard_hint(base_url: str) -> str:
    """The dashboard's address, or how to turn it on."""
    if os.environ.get("HITKIT_DASHBOARD_USER"):
        return f"coordinator dashboard at {base_url}/dashboard/"
    return (
        f"coordinator dashboard at {base_url}/dashboard/ once HITKIT_DASHBOARD_USER and "
        f"HITKIT_DASHBOARD_PASSWORD are set"
    )


# Commands on a study that may not be launched yet ------------------------------------------------
def database_url_of(value: str) -> str:
    """A database given as a URL (``sqlite:///…``, ``postgresql://…``) or as the path of a SQLite file."""
    if "://" in value:
        return value
    path = Path(value).expanduser()
    if path.is_dir():
        raise HitkitError(
            f"{value} is a folder; give the study's database file (e.g. {path / 'hitkit.db'}) or a database URL"
        )
    return f"sqlite:///{path.resolve()}"


def launched_studies(database_url: str) -> list[str] | None:
    """The names of the studies in a database, or None when there is no hitkit database there yet.

    Creates nothing: a SQLite file that does not exist is not created, and no table is made.
    """
    from sqlalchemy import inspect
    from sqlalchemy.engine import make_url

    from hitkit.db.session import get_engine, normalise_url

    parsed = make_url(normalise_url(database_url))
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        if not Path(parsed.database).is_file():
            return None
    try:
        engine = get_engine(database_url)
        if not inspect(engine).has_table("study"):
            return None
    except Exception as exc:  # noqa: BLE001 - a database that cannot be reached is said in one line
        raise HitkitError(f"cannot open the database {database_url}: {str(exc).splitlines()[0]}") from None
    with session_scope(database_url) as session:
        return list(session.scalars(select(Study.name).order_by(Study.id)))


def require_launched(config: StudyConfig, study_file: Path | str) -> None:
    """HitkitError in one line unless the study has been launched into its database (creates nothing)."""
    names = launched_studies(config.database_url)
    if names is None or config.study not in names:
        raise HitkitError(
            f"study '{config.study}' has not been launched yet (nothing in {config.database_url}); "
            f"check it with `hitkit launch {study_file} --dry-run`, then run "
            f"`hitkit launch {study_file}`"
        )
