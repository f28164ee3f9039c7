"""The deployment's signing secret: one value shared by every process and every host.

Production sets ``HITKIT_SECRET`` (the same value for every gunicorn worker, the scheduler and the
CLI, on every host). Without it, the first process to start stores a fresh random secret in the
study database (the ``setting`` table, one atomic insert-if-absent) and every later process, on
this host or another, reads that same row: nothing depends on ``$HOME`` or on a file that
processes could race to create. A weak value, from either place, stops the start (ConfigError).
"""
from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.engine import make_url

from hitkit.db import settings
from hitkit.db.session import get_engine, normalise_url
from hitkit.errors import ConfigError
from hitkit.worker.security import check_secret

SECRET_KEY = "secret"
"""The ``setting`` row that holds the embedded default's secret."""

LEGACY_FILE = "hitkit.secret"
"""Where releases before 0003 kept the secret beside a SQLite database; adopted once if present, so
invite links already sent keep working."""


def resolve_secret(database_url: str, environ: Mapping[str, str] | None = None) -> str:
    """The signing secret: HITKIT_SECRET when it is set (even to an empty value, which is refused),
    else the one stored in the database at ``database_url``, created there if this is the first start."""
    env = os.environ if environ is None else environ
    if "HITKIT_SECRET" in env:
        return check_secret(env["HITKIT_SECRET"])
    engine = get_engine(database_url)
    with engine.begin() as conn:
        if not settings.has_settings(conn):
            raise ConfigError(f"the database at {make_url(normalise_url(database_url)).render_as_string()} has no "
                              "place for the signing secret yet; run `hitkit db upgrade --db URL` (or `hitkit "
                              "launch`, which upgrades it), or set HITKIT_SECRET")
        value = settings.read_or_create(conn, SECRET_KEY, lambda: _legacy_secret(database_url) or _fresh())
    return check_secret(value, f"the secret stored in the database (setting '{SECRET_KEY}')")


def _fresh() -> str:
    return secrets.token_urlsafe(48)


def _legacy_secret(database_url: str) -> str | None:
    url = make_url(normalise_url(database_url))
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    path = Path(url.database).with_name(LEGACY_FILE)
    try:
        value = path.read_text().strip()
    except OSError:
        return None
    return value or None
