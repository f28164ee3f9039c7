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

MIN_SECRET_CHARS = 32
"""A signing secret shorter than this is refused: 32 random characters carry well over 128 bits."""

PLACEHOLDER_SECRETS = frozenset(
    {
        "change-me-to-a-long-random-string",  # the placeholder ops/systemd/env.example once shipped
        "changeme",
        "change-me",
        "change_me",
        "secret",
        "password",
        "hitkit",
        "test",
        "example",
        "default",
        "your-secret-here",
        "replace-me",
        "xxx",
    }
)
"""Values copied from examples or typed as a stand-in: refused whatever their length."""

SECRET_HOWTO = (
    "set HITKIT_SECRET to at least 32 random characters, e.g. the output of "
    "`python -c \"import secrets; print(secrets.token_urlsafe(48))\"`, and give every web worker, "
    "the scheduler and every host the same value; or unset it so that hitkit keeps one, made "
    "once, in the database"
)


def secret_problem(value: str | None) -> str | None:
    """Why ``value`` cannot be the signing secret (empty, short, a placeholder or one character
    repeated), or None when it will do. Anyone who knows or guesses the secret can forge every
    token, invite and CSRF value, so a weak one must stop the start, not just warn."""
    text = (value or "").strip()
    if not text:
        return "it is empty"
    folded = text.lower()
    if folded in PLACEHOLDER_SECRETS or "change-me" in folded or "changeme" in folded:
        return "it is a placeholder copied from an example"
    if len(text) < MIN_SECRET_CHARS:
        return f"it has {len(text)} characters, fewer than {MIN_SECRET_CHARS}"
    if len(set(text)) < 8:
        return f"it uses only {len(set(text))} distinct characters"
    return None


def check_secret(value: str | None, source: str = "HITKIT_SECRET") -> str:
    """``value`` stripped, if it is a usable signing secret; else ConfigError saying what to set."""
    why = secret_problem(value)
    if why or value is None:  # secret_problem calls None empty: narrowed here for the type checker
        raise ConfigError(f"{source} cannot sign tokens: {why}; {SECRET_HOWTO}")
    return value.strip()


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
            raise ConfigError(
                f"the database at {make_url(normalise_url(database_url)).render_as_string()} has no "
                "place for the signing secret yet; run `hitkit db upgrade --db URL` (or `hitkit "
                "launch`, which upgrades it), or set HITKIT_SECRET"
            )
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
