"""Pairwise A/B on the coordinator dashboard: what a unit is, the votes in system names, a system's
record against each other system, and two systems' replies to the same prompts side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hitkit.protocols.kit.views import SAME_PROMPTS_EMPTY, record_against, words
from hitkit.protocols.responses import side_by_side

__all__ = ["WORDS", "describe_unit", "readable_answers", "system_scores", "side_by_side"]

WORDS = words("the same prompts", SAME_PROMPTS_EMPTY, "Votes")
"""How the dashboard's shared pages speak of this protocol's material."""


def describe_unit(payload: Mapping[str, Any]) -> str:
    """The pair of systems a unit compares."""
    return " vs ".join(payload.get("systems", []))


def readable_answers(payload: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, str]:
    """The worker's answers with the vote's A or B turned into the system shown on that side."""
    answers = dict(entry["answers"])
    if "vote" in answers:
        first, second = payload["systems"]
        swapped = (entry.get("layout") or {}).get("swapped", {}).get(str(entry["unit_id"]), False)
        shown = {"a": second if swapped else first, "b": first if swapped else second}
        answers["vote"] = shown.get(answers["vote"], answers["vote"])
    return answers


def system_scores(tables: Mapping[str, pd.DataFrame], config, name: str) -> tuple[list[dict[str, Any]], str]:
    """Wins / ties / losses of system ``name`` against every other system in the votes so far."""
    v = tables["votes"]
    if v.empty:
        return [], ""
    return record_against(v, name, ("tie",)), "Wins / ties / losses in the votes so far."
