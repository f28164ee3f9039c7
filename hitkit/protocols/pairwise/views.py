"""Pairwise A/B on the coordinator dashboard: what a unit is, the votes in system names, a system's
record against each other system, and two systems' replies to the same prompts side by side."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from hitkit.protocols.responses import side_by_side

__all__ = ["WORDS", "describe_unit", "readable_answers", "system_scores", "side_by_side"]

WORDS = {
    "compare_note": "the same prompts",
    "compare_opening": "",
    "compare_empty": "{a} and {b} have no responses to the same prompts in this study",
    "answers_heading": "Votes",
}
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
    scores: list[dict[str, Any]] = []
    if v.empty:
        return scores, ""
    for other in sorted(set(v["system_a"]) | set(v["system_b"]) - {name}):
        mine = v[
            ((v["system_a"] == name) & (v["system_b"] == other)) | ((v["system_a"] == other) & (v["system_b"] == name))
        ]
        if mine.empty:
            continue
        won = int(
            (
                ((mine["system_a"] == name) & (mine["vote"] == "a"))
                | ((mine["system_b"] == name) & (mine["vote"] == "b"))
            ).sum()
        )
        ties = int((mine["vote"] == "tie").sum())
        lost = len(mine) - won - ties
        scores.append(
            {
                "measure": f"vs {other}",
                "value": f"{won} / {ties} / {lost}",
                "detail": f"win rate {won / (won + lost):.2f}" if won + lost else "no decisive vote",
            }
        )
    return scores, "Wins / ties / losses in the votes so far."
