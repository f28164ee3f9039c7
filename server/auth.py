"""The coordinator's login on the dashboard: one account from the environment (HITKIT_DASHBOARD_USER and
HITKIT_DASHBOARD_PASSWORD, or HITKIT_DASHBOARD_PASSWORD_HASH made by werkzeug's
``generate_password_hash``), a signed, expiring session cookie bound to those credentials (changing the
password logs everyone out, and so does revoking the sessions), and CSRF tokens for every form."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

from hitkit.db import settings
from hitkit.db.session import get_engine
from hitkit.errors import ConfigError
from hitkit.worker import tokens

SESSION_HOURS = 12


# Login -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Credentials:
    """The coordinator's account: a user name and a password, or a werkzeug password hash."""

    username: str
    password: str | None = None
    password_hash: str | None = None

    def check(self, username: str, password: str) -> bool:
        """True when both match; every comparison is constant-time and always runs."""
        from werkzeug.security import check_password_hash

        user_ok = hmac.compare_digest(username.encode(), self.username.encode())
        if self.password_hash is not None:
            try:
                password_ok = check_password_hash(self.password_hash, password)
            except (ValueError, TypeError):
                password_ok = False
        else:
            password_ok = hmac.compare_digest(password.encode(), (self.password or "").encode())
        return user_ok and password_ok

    @property
    def fingerprint(self) -> str:
        """Binds sessions to these credentials: a new password invalidates every old session."""
        material = f"{self.username}\0{self.password_hash or self.password}"
        return hashlib.sha256(material.encode()).hexdigest()[:16]


def credentials_from_env(environ: Mapping[str, str]) -> Credentials | None:
    """The dashboard's account from the environment, or None (dashboard disabled) when none is set."""
    user = (environ.get("HITKIT_DASHBOARD_USER") or "").strip()
    password = environ.get("HITKIT_DASHBOARD_PASSWORD") or None
    hashed = (environ.get("HITKIT_DASHBOARD_PASSWORD_HASH") or "").strip() or None
    if not user and not password and not hashed:
        return None
    if not user:
        raise ConfigError(
            "HITKIT_DASHBOARD_PASSWORD(_HASH) is set but HITKIT_DASHBOARD_USER is not; "
            "set the coordinator's user name too, or unset both to disable the dashboard"
        )
    if password and hashed:
        raise ConfigError(
            "both HITKIT_DASHBOARD_PASSWORD and HITKIT_DASHBOARD_PASSWORD_HASH are set; keep one "
            "(the hash, made with werkzeug.security.generate_password_hash, keeps the password "
            "out of the environment)"
        )
    if not password and not hashed:
        raise ConfigError(
            "HITKIT_DASHBOARD_USER is set without a password; set HITKIT_DASHBOARD_PASSWORD or "
            "HITKIT_DASHBOARD_PASSWORD_HASH"
        )
    if password is not None and len(password) < 8:
        raise ConfigError(f"HITKIT_DASHBOARD_PASSWORD has {len(password)} characters; use at least 8")
    return Credentials(user, password, hashed)


def session_token(secret: str, creds: Credentials, generation: int = 0, now: float | None = None) -> str:
    """A signed session for the coordinator that expires after :data:`SESSION_HOURS`, or sooner when
    the coordinator logs out (``generation``: :func:`session_generation` when it was made)."""
    expires = int((now if now is not None else time.time()) + SESSION_HOURS * 3600)
    return tokens.sign(secret, f"dashboard:{creds.fingerprint}", f"{expires}:{generation}:{secrets.token_hex(8)}")


def session_valid(
    secret: str, creds: Credentials, token: str | None, generation: int = 0, now: float | None = None
) -> bool:
    """True for a genuine, unexpired session made for the current credentials since the last logout
    (its generation is the current ``generation``)."""
    if not token:
        return False
    payload = tokens.verify(secret, f"dashboard:{creds.fingerprint}", token)
    if payload is None:
        return False
    expires, made_in, _ = (payload.split(":") + ["", ""])[:3]
    return expires.isdigit() and int(expires) > (now if now is not None else time.time()) and made_in == str(generation)


def _generation_key(creds: Credentials) -> str:
    return f"dashboard_sessions:{creds.fingerprint}"


def session_generation(database_url: str, creds: Credentials) -> int:
    """The coordinator's current session generation (0 until the first logout), kept in the database so
    that every web worker and host agrees on which sessions a logout ended."""
    with get_engine(database_url).connect() as conn:
        value = settings.read(conn, _generation_key(creds))
    return int(value) if value is not None else 0


def revoke_sessions(database_url: str, creds: Credentials) -> int:
    """Log the coordinator out everywhere: every session made so far stops being valid at once, in
    every process (the server-side half of logout; the cookie is deleted too). The new generation."""
    with get_engine(database_url).begin() as conn:
        return settings.increment(conn, _generation_key(creds))


def csrf_token(secret: str, bound_to: str) -> str:
    """The form field a dashboard POST must carry: only a page rendered for this cookie knows it."""
    return hmac.new(secret.encode(), f"dashboard-csrf:{bound_to}".encode(), hashlib.sha256).hexdigest()[:32]


def csrf_ok(secret: str, bound_to: str | None, given: str | None) -> bool:
    """Constant-time check of a POST's CSRF field against the cookie it is bound to."""
    if not bound_to or not given:
        return False
    return hmac.compare_digest(given.encode(), csrf_token(secret, bound_to).encode())
