"""Keyed pseudonyms for the ids a release must not carry (workers, assignments, HITs).

A pseudonym is ``PREFIX`` + the id's rank among the study's ids of that kind + ``_`` + eight hex digits of
HMAC-SHA256(key, salt ‖ kind ‖ id). The key is the study's secret and never leaves the study; the salt is
drawn anew for every release unless the coordinator asks for stable pseudonyms, so two releases of a study
cannot be joined on a worker's pseudonym by default. The rank keeps the ids' sort order, which makes every
analysis that orders workers (a bootstrap over workers, a per-worker standardisation) give exactly the numbers
it gives on the study; it says nothing about a person (it is the position of a platform id in sorted order).
Pure functions.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

PREFIXES = {"worker": "w", "assignment": "a", "hit": "h"}
"""The kinds of id a release pseudonymises, and the letter each pseudonym starts with."""
STABLE_SALT = "hitkit-release-stable"
"""The salt of ``--stable-ids``: pseudonyms then repeat across releases of the same study."""


def digest(key: bytes, salt: str, kind: str, value: str) -> str:
    """Eight hex digits of HMAC-SHA256 over the salt, the kind and the id."""
    message = f"{salt}\x1f{kind}\x1f{value}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:8]


def pseudonym_map(values: Iterable[str], kind: str, key: bytes, salt: str) -> dict[str, str]:
    """Every distinct id of ``kind`` mapped to its pseudonym, in the ids' sort order."""
    if kind not in PREFIXES:
        raise ValueError(f"release: no pseudonyms for ids of kind {kind!r}")
    ids = sorted({str(v) for v in values if v is not None and str(v) != ""})
    width = max(3, len(str(len(ids))))
    return {v: f"{PREFIXES[kind]}{i:0{width}d}_{digest(key, salt, kind, v)}" for i, v in enumerate(ids, start=1)}
