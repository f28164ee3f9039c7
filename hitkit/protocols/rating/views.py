"""Direct Assessment of responses on the coordinator dashboard: what a unit is, a system's mean slider
ratings so far, and two systems' responses to the same prompts (pairwise's view: the same material)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hitkit.protocols.kit.views import SAME_PROMPTS_EMPTY, score, words
from hitkit.protocols.rating.scores import TABLE
from hitkit.protocols.responses import side_by_side

WORDS = words("their responses to the same prompts", SAME_PROMPTS_EMPTY, "Ratings")
"""How the dashboard's shared pages speak of this protocol's material."""

__all__ = ["WORDS", "describe_unit", "readable_answers", "system_scores", "side_by_side"]


def describe_unit(payload: Mapping[str, Any]) -> str:
    """The system and prompt a response unit shows, or the degraded place it is."""
    if payload.get("is_control"):
        return f"degraded copy #{payload.get('slot', '?')} (made per worker)"
    return f"{payload.get('system', '')} on {payload.get('item_id', '')}"


def readable_answers(payload: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, str]:
    """The worker's answers as they are: slider ratings need no translation."""
    return dict(entry["answers"])


def system_scores(tables: Mapping[str, pd.DataFrame], config, name: str) -> tuple[list[dict[str, Any]], str]:
    """System ``name``'s mean rating per criterion so far (intact responses), and of its degraded copies."""
    r = tables[TABLE]
    if r.empty:
        return [], ""
    own = r[r["system"] == name]
    polarity = {c.name: c.polarity for c in config.rating.criterion_list()}
    scores = []
    for criterion, group in own.groupby("criterion", sort=False):
        intact, degraded = group.loc[group["is_control"] == 0, "score"], group.loc[group["is_control"] == 1, "score"]
        oriented = intact if polarity.get(criterion) != "negative" else 100 - intact
        detail = f"{len(intact)} ratings; oriented (higher = better) {oriented.mean():.1f}"
        if len(degraded):
            detail += f"; its degraded copies {degraded.mean():.1f} ({len(degraded)} ratings)"
        scores.append(score(criterion, round(float(intact.mean()), 1) if len(intact) else "–", detail))
    return scores, "Mean 0–100 slider ratings from all submitted work so far (before QC filtering)."
