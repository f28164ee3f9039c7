"""HMAC-signed tokens: the assignment token binds a worker to one assignment; invites bind a person.

A token is ``PAYLOAD.SIGNATURE`` with a base64url payload and an HMAC-SHA256 signature under the
server secret and a purpose string, so a token made for one purpose (an invite) is useless for
another (an assignment). Tokens carry no secrets; they must simply be unforgeable.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_B64URL = re.compile(r"[A-Za-z0-9_-]+")
_MAC_BYTES = 18
_MAC_CHARS = len(_b64(bytes(_MAC_BYTES)))


def _canonical_b64(text: str) -> bytes | None:
    """The bytes of ``text`` if it is exactly what :func:`_b64` writes for them: the URL-safe alphabet,
    no padding and no stray bits. Python's decoder forgives much more (padding, characters outside
    the alphabet, unused low bits), which would give one token many spellings, each one a fresh key
    for the rate limits."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        return None
    data = _unb64(text)
    return data if _b64(data) == text else None


def sign(secret: str, purpose: str, payload: str) -> str:
    """A token for ``payload`` that only the holder of ``secret`` can make."""
    body = _b64(payload.encode("utf-8"))
    mac = hmac.new(secret.encode(), f"{purpose}:{body}".encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac[:_MAC_BYTES])}"


def verify(secret: str, purpose: str, token: str) -> str | None:
    """The payload of a genuine token, or None for a forged, truncated, re-purposed or re-spelt one.

    Only the one canonical spelling :func:`sign` produces is accepted (``BODY.MAC``, URL-safe base64
    without padding), so a token is its own canonical key.
    """
    if not isinstance(token, str) or token.count(".") != 1:
        return None
    body, mac = token.split(".")
    if len(mac) != _MAC_CHARS:
        return None
    given, raw = _canonical_b64(mac), _canonical_b64(body)
    if given is None or raw is None:
        return None
    expected = hmac.new(secret.encode(), f"{purpose}:{body}".encode(), hashlib.sha256).digest()[:_MAC_BYTES]
    if not hmac.compare_digest(given, expected):
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
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
