"""Bounds on what a worker sends, checked once at the edge (docs/THREAT_MODEL.md, "Input bounds").

Pure functions: each takes a value as it arrived (parsed JSON or a form string) and returns it in
the one form hitkit stores, or raises :class:`~hitkit.errors.AnswerError` saying which field was
wrong and what is accepted (the routes turn that into a 400; nothing is stored).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from hitkit.errors import AnswerError

MAX_DB_ID = 2**31 - 1
"""Largest row id any table can hold on every backend (PostgreSQL ``integer``); larger ones exist nowhere."""
MAX_ELAPSED_S = 24 * 3600.0
"""Longest time a page may report for one answer: no assignment lasts a day."""
MAX_TOPIC_CHANGES = 50
"""Topic changes one chat may record: far more than a conversation of a few minutes has."""
MAX_TOPIC_CHARS = 500
"""Longest new topic a worker may type."""
MAX_JSON_ANSWER_CHARS = 10_000
"""Longest JSON text an answer that is an object or a list may become (before the task's own limit)."""


def record_id(value: Any, field: str) -> int:
    """A row id sent in a body or form (``unit_id``): a whole number 1..:data:`MAX_DB_ID`.

    Accepts an integer or a string of ASCII digits; refuses booleans, fractions, signs, NaN and
    numbers no table can hold (which would otherwise overflow the database driver: a 500)."""
    if isinstance(value, bool):
        raise AnswerError(f"{field} must be a whole number, not {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit()) or len(text) > 10:
            raise AnswerError(f"{field} must be a whole number from 1 to {MAX_DB_ID}, not {value[:40]!r}")
        value = int(text)
    if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_DB_ID:
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_DB_ID:
        shown = value if isinstance(value, (int, float)) and abs(value) < 1e12 else type(value).__name__
        raise AnswerError(f"{field} must be a whole number from 1 to {MAX_DB_ID}, not {shown!r}")
    return value


def unit_key(value: Any, field: str) -> str:
    """A unit's opaque public key as the worker's page was given it (letters and digits, at most 64)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**20:
        value = str(value)  # names no unit (keys are not row ids), but the assignment's own state answers first
    if not isinstance(value, str) or not 0 < len(value) <= 64 or not value.isascii() or not value.isalnum():
        shown = value[:40] if isinstance(value, str) else value
        raise AnswerError(f"{field} must be the unit's key as /state gives it, not {shown!r}")
    return value


def elapsed_seconds(value: Any) -> float | None:
    """``elapsed_s`` of an answer: None when absent, else a finite number of seconds 0..:data:`MAX_ELAPSED_S`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise AnswerError(f"elapsed_s must be a number of seconds, not {type(value).__name__}")
    try:
        seconds = float(value)
    except (ValueError, OverflowError):
        raise AnswerError(f"elapsed_s must be a number of seconds, not {str(value)[:40]!r}") from None
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_ELAPSED_S:
        raise AnswerError(f"elapsed_s must be between 0 and {MAX_ELAPSED_S:.0f} seconds, not {str(value)[:40]}")
    return seconds


def answer_text(value: Any) -> str:
    """An answer's value as the text stored: strings as they are, numbers and booleans as JSON spells
    them, objects and lists as compact JSON (never Python's repr); null and non-finite numbers refused."""
    if isinstance(value, str):
        return value
    if value is None:
        raise AnswerError("the answer has no value; send the answer as 'value'")
    if isinstance(value, float) and not math.isfinite(value):
        raise AnswerError(f"the answer {value!r} is not a finite number")
    if isinstance(value, (bool, int, float)):
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
            raise AnswerError("the answer is a number too large to store exactly; send it as text")
        return json.dumps(value)
    if isinstance(value, (Mapping, list, tuple)):
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise AnswerError(f"the answer is not plain JSON ({exc})") from None
        if len(text) > MAX_JSON_ANSWER_CHARS:
            raise AnswerError(f"the answer is {len(text)} characters of JSON; the limit is {MAX_JSON_ANSWER_CHARS}")
        return text
    raise AnswerError(f"the answer must be text, a number or JSON, not {type(value).__name__}")


def check_topic_change(meta: Mapping[str, Any], topic: Any) -> None:
    """Refuse a topic change past :data:`MAX_TOPIC_CHANGES` in one chat, or a new topic longer than
    :data:`MAX_TOPIC_CHARS` (each change is kept in the conversation's row: it must stay small)."""
    made = len(meta.get("topic_changes") or [])
    if made >= MAX_TOPIC_CHANGES:
        raise AnswerError(
            f"this chat already has {made} topic changes, the most one chat may have; carry on with the current topic"
        )
    if isinstance(topic, str) and len(topic) > MAX_TOPIC_CHARS:
        raise AnswerError(f"the new topic is {len(topic)} characters; the limit is {MAX_TOPIC_CHARS}")
