"""HMAC-signed tokens: the assignment token binds a worker to one assignment; invites bind a person.

A token is ``PAYLOAD.SIGNATURE`` with a base64url payload and an HMAC-SHA256 signature under the
server secret and a purpose string, so a token made for one purpose (an invite) is useless for
another (an assignment). Tokens carry no secrets; they must simply be unforgeable.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(secret: str, purpose: str, payload: str) -> str:
    """A token for ``payload`` that only the holder of ``secret`` can make."""
    body = _b64(payload.encode("utf-8"))
    mac = hmac.new(secret.encode(), f"{purpose}:{body}".encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac[:18])}"


def verify(secret: str, purpose: str, token: str) -> str | None:
    """The payload of a genuine token, or None for a forged, truncated or re-purposed one."""
    try:
        body, mac = token.split(".", 1)
        expected = hmac.new(secret.encode(), f"{purpose}:{body}".encode(), hashlib.sha256).digest()[:18]
        if not hmac.compare_digest(_unb64(mac), expected):
            return None
        return _unb64(body).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


def assignment_token(secret: str, assignment_id: int, nonce: str) -> str:
    """The token a worker carries for one assignment (``nonce`` is stored on the assignment)."""
    return sign(secret, "assignment", f"{assignment_id}:{nonce}")


def read_assignment_token(secret: str, token: str) -> tuple[int, str] | None:
    """``(assignment_id, nonce)`` from a genuine assignment token, else None."""
    payload = verify(secret, "assignment", token)
    if payload is None:
        return None
    ident, _, nonce = payload.partition(":")
    return (int(ident), nonce) if ident.isdigit() and nonce else None


def new_nonce() -> str:
    """A fresh random nonce for an assignment token."""
    return secrets.token_hex(8)
