"""Ranking on the coordinator dashboard: what a unit is, the order in system names, a system's mean place
so far, and two systems' responses to the same prompts (the shared view of prompt material)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hitkit.protocols.kit.views import SAME_PROMPTS_EMPTY, score, words
from hitkit.protocols.ranking.settings import TABLE
from hitkit.protocols.ranking.task import LETTERS, RankingTask
from hitkit.protocols.responses import side_by_side

__all__ = ["WORDS", "describe_unit", "readable_answers", "system_scores", "side_by_side"]

WORDS = words("their responses to the same prompts", SAME_PROMPTS_EMPTY, "Rankings")
"""How the dashboard's shared pages speak of this protocol's material."""


def describe_unit(payload: Mapping[str, Any]) -> str:
    """The prompt and the systems a unit ranks (and whether it carries a degraded copy)."""
    return f"{payload.get('item_id', '')}: {', '.join(payload.get('systems', []))}" + (
        " + a degraded copy" if payload.get("control") else ""
    )


def readable_answers(payload: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, str]:
    """The worker's order with each letter turned into the system shown under it ("degraded" for the copy)."""
    answers = dict(entry["answers"])
    if "order" in answers:
        unit = type("Shown", (), {"id": entry["unit_id"], "payload": payload})
        items = RankingTask.shown_items(unit, entry.get("layout") or {})  # type: ignore[arg-type]
        names = {LETTERS[i]: f"{s} (degraded)" if c else s for i, (s, _t, c) in enumerate(items)}
        answers["order"] = "".join(names.get(ch, ch) for ch in answers["order"])
    return answers


def system_scores(tables: Mapping[str, pd.DataFrame], config, name: str) -> tuple[list[dict[str, Any]], str]:
    """System ``name``'s mean rank among intact responses so far, and that of its degraded copies."""
    r = tables[TABLE]
    own = r[r["system"] == name] if not r.empty else r
    if own.empty:
        return [], ""
    scores = [
        score(f"mean rank, {label}", round(float(rows["rank"].mean()), 2), f"{len(rows)} rankings; 1 = best")
        for label, rows in (("intact", own[own["is_control"] == 0]), ("degraded copies", own[own["is_control"] == 1]))
        if len(rows)
    ]
    return scores, "Mean rank from all submitted work so far (before QC filtering)."
