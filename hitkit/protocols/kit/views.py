"""What the protocols' dashboard views (``hitkit/protocols/NAME/views.py``) share: the words of the shared
pages, one score row, a system's wins, ties and losses against each other system in paired votes, and the
rows of two systems' material side by side."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import pandas as pd

SAME_PROMPTS_EMPTY = "{a} and {b} have no responses to the same prompts in this study"
"""The compare page's empty note of a protocol that shows responses to prompts."""


def words(compare_note: str, compare_empty: str, answers_heading: str, compare_opening: str = "") -> dict[str, str]:
    """A views module's ``WORDS``: how the dashboard's shared pages speak of the protocol's material
    (the compare page's note, its opening line and its empty note; the answers' heading)."""
    return {
        "compare_note": compare_note,
        "compare_opening": compare_opening,
        "compare_empty": compare_empty,
        "answers_heading": answers_heading,
    }


def score(measure: str, value: Any, detail: str) -> dict[str, Any]:
    """One row of a system's scores on the dashboard."""
    return {"measure": measure, "value": value, "detail": detail}


def record_against(votes: pd.DataFrame, name: str, ties: Collection[str]) -> list[dict[str, Any]]:
    """Wins / ties / losses of system ``name`` against every other system it met in ``votes`` (columns
    system_a, system_b and vote: "a", "b" or one of ``ties``; anything else counts as a loss), one
    :func:`score` row per opponent, in name order."""
    rows = []
    for other in sorted((set(votes["system_a"]) | set(votes["system_b"])) - {name}):
        left = (votes["system_a"] == name) & (votes["system_b"] == other)
        right = (votes["system_a"] == other) & (votes["system_b"] == name)
        mine = votes[left | right]
        if mine.empty:
            continue
        won = int(((left & (votes["vote"] == "a")) | (right & (votes["vote"] == "b"))).sum())
        tied = int(mine["vote"].isin(list(ties)).sum())
        lost = len(mine) - won - tied
        decisive = f"win rate {won / (won + lost):.2f}" if won + lost else "no decisive vote"
        rows.append(score(f"vs {other}", f"{won} / {tied} / {lost}", decisive))
    return rows


def paired(
    title: str, prompt: str, left: Any, right: Any, turns_of: Callable[[Any], list[dict[str, Any]]]
) -> dict[str, Any]:
    """A side-by-side row of two conversations (each with ``id``; ``turns_of`` gives its turns)."""
    return {
        "title": title,
        "prompt": prompt,
        "conversation": left.id,
        "right_conversation": right.id,
        "left": turns_of(left),
        "right": turns_of(right),
    }


def first_rows(candidates: Iterable[dict[str, Any] | None], limit: int) -> list[dict[str, Any]]:
    """The rows of ``candidates`` (None: a candidate without a row), read until ``limit`` rows are found."""
    rows: list[dict[str, Any]] = []
    for row in candidates:
        if row is not None:
            rows.append(row)
        if len(rows) >= limit:
            break
    return rows
