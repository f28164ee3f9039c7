"""Alembic, driven from Python: ``hitkit db upgrade`` and every launch call :func:`upgrade`."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

import migrations
from hitkit.db.session import get_engine, normalise_url


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` that finds the revisions shipped in ``migrations/``."""
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    cfg.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (creates it for SQLite)."""
    engine = get_engine(url)
    with engine.connect() as conn:
        cfg = alembic_config(url)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        conn.commit()


def current(url: str) -> str | None:
    """The revision the database is at, or None for an empty database."""
    from alembic.runtime.migration import MigrationContext

    with get_engine(url).connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()
