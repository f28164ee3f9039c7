"""Live chat on the coordinator dashboard: what a unit is, a system's mean slider ratings so far, and
one worker's chats with two systems in the same HIT side by side."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from hitkit.protocols.kit.views import first_rows, paired, score, words

WORDS = words(
    "one worker's chats with both, in the same HIT",
    "no worker has chatted with both {a} and {b} in the same HIT yet",
    "Ratings",
    compare_opening="{a}'s chat opened with:",
)
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
        detail = f"{len(group)} ratings; oriented (higher = better) {oriented.mean():.1f}"
        scores.append(score(criterion, round(float(group["score"].mean()), 1), detail))
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
    return first_rows(
        (
            paired(
                f"assignment {assignment}", next((t.text for t in pair[a].turns[:1]), ""), pair[a], pair[b], turns_of
            )
            if a in pair and b in pair
            else None
            for assignment, pair in by_assignment.items()
        ),
        limit,
    )
