"""Deployment-wide values in the ``setting`` table: created once by whichever process comes first.

Every writer uses one atomic statement (``INSERT … ON CONFLICT DO NOTHING`` or a single
``UPDATE``), so processes and hosts starting together never see a half-made value and never
disagree about which value won.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import inspect, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from hitkit.db.models import Setting, utcnow


def has_settings(conn: Connection) -> bool:
    """Whether the database has the ``setting`` table (migration 0003 or later)."""
    return inspect(conn).has_table(Setting.__tablename__)


def read(conn: Connection, key: str) -> str | None:
    """The value stored under ``key``, or None."""
    return conn.scalar(select(Setting.value).where(Setting.key == key))


def read_or_create(conn: Connection, key: str, make: Callable[[], str]) -> str:
    """The value under ``key``; if there is none, store ``make()`` first. Exactly one value ever wins:
    a process that loses the race reads the winner's value, whatever it made itself."""
    existing = read(conn, key)
    if existing is not None:
        return existing
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(
        dialect.insert(Setting)
        .values(key=key, value=make(), created_at=utcnow())
        .on_conflict_do_nothing(index_elements=[Setting.key])
    )
    value = read(conn, key)
    if value is None:
        raise RuntimeError(f"setting '{key}' is missing right after it was stored")
    return value


def increment(conn: Connection, key: str) -> int:
    """Add one to the integer under ``key`` (0 if absent) and return the new value; the row is locked
    (PostgreSQL) or the database write-locked (SQLite's BEGIN IMMEDIATE) for the caller's transaction."""
    read_or_create(conn, key, lambda: "0")
    value = int(conn.execute(select(Setting.value).where(Setting.key == key).with_for_update()).scalar_one()) + 1
    conn.execute(update(Setting).where(Setting.key == key).values(value=str(value)))
    return value
