"""Live chat on the coordinator dashboard: what a unit is, a system's mean slider ratings so far, and
one worker's chats with two systems in the same HIT side by side."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

WORDS = {
    "compare_note": "one worker's chats with both, in the same HIT",
    "compare_opening": "{a}'s chat opened with:",
    "compare_empty": "no worker has chatted with both {a} and {b} in the same HIT yet",
    "answers_heading": "Ratings",
}
"""How the dashboard's shared pages speak of this protocol's material."""


def describe_unit(payload: Mapping[str, Any]) -> str:
    """The system a chat slot talks to."""
    return str(payload.get("system", ""))


def readable_answers(payload: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, str]:
    """The worker's answers as they are: ratings and topics need no translation."""
    return dict(entry["answers"])


def system_scores(tables: Mapping[str, pd.DataFrame], config, name: str) -> tuple[list[dict[str, Any]], str]:
    """System ``name``'s mean rating per criterion so far, with its mean oriented so higher is better."""
    r = tables["ratings"]
    scores: list[dict[str, Any]] = []
    if r.empty:
        return scores, ""
    own = r[r["system"] == name]
    crit = {c.name: c for c in config.live_chat.criterion_list()}
    for criterion, group in own.groupby("criterion", sort=False):
        oriented = group["score"] if crit[criterion].polarity == "positive" else 100 - group["score"]
        scores.append(
            {
                "measure": criterion,
                "value": round(float(group["score"].mean()), 1),
                "detail": f"{len(group)} ratings; oriented (higher = better) {oriented.mean():.1f}",
            }
        )
    return scores, "Mean 0–100 slider ratings from all submitted work so far (before QC filtering)."


def side_by_side(
    convs: Sequence, a: str, b: str, ids: Mapping[str, int], turns_of: Callable[[Any], list[dict[str, Any]]], limit: int
) -> list[dict[str, Any]]:
    """The same worker's chats with both systems in one HIT, one row per such assignment."""
    by_assignment: dict[Any, dict[str, Any]] = defaultdict(dict)
    for conv in convs:
        meta = conv.meta or {}
        if conv.kind == "human_bot" and meta.get("system") in (a, b):
            by_assignment[meta.get("assignment_id")][meta["system"]] = conv
    rows: list[dict[str, Any]] = []
    for assignment, pair in by_assignment.items():
        if a in pair and b in pair:
            topic = next((t.text for t in pair[a].turns[:1]), "")
            rows.append(
                {
                    "title": f"assignment {assignment}",
                    "prompt": topic,
                    "conversation": pair[a].id,
                    "right_conversation": pair[b].id,
                    "left": turns_of(pair[a]),
                    "right": turns_of(pair[b]),
                }
            )
        if len(rows) >= limit:
            break
    return rows
