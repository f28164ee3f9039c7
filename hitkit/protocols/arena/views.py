"""The arena on the coordinator dashboard: what a battle is, the vote in system names, a system's record
against each other system, and two systems' answers to the same battles side by side."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from hitkit.protocols.arena.columns import TABLE
from hitkit.protocols.kit.views import record_against, words

WORDS = words("the battles where they met", "{a} and {b} have not met in a battle in this study yet", "Votes")
"""How the dashboard's shared pages speak of this protocol's material."""


def describe_unit(payload: Mapping[str, Any]) -> str:
    """The two systems of a battle as shown (left vs right), and its prompt's id where it has one."""
    text = f"{payload.get('system_a', '')} vs {payload.get('system_b', '')}"
    if payload.get("is_control"):
        text += " (QC battle)"
    return text + (f" on {payload['prompt_id']}" if payload.get("prompt_id") else "")


def readable_answers(payload: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, str]:
    """The worker's answers with the vote's a or b turned into the system shown on that side."""
    answers = dict(entry["answers"])
    if "vote" in answers:
        shown = {"a": payload.get("system_a"), "b": payload.get("system_b")}
        answers["vote"] = shown.get(answers["vote"]) or answers["vote"]
    return answers


def system_scores(tables: Mapping[str, pd.DataFrame], config, name: str) -> tuple[list[dict[str, Any]], str]:
    """Wins / ties / losses of system ``name`` against every other system in the real battles so far."""
    v = tables[TABLE]
    if v.empty:
        return [], ""
    scores = record_against(v[v["is_control"] == 0], name, ("tie", "both_bad"))
    from hitkit.protocols.arena.verdicts import live_warnings

    note = "Wins / ties (both bad included) / losses in the battles so far."
    warnings = live_warnings(tables[TABLE])
    return scores, note + ("" if not warnings else " Read with care: " + "; ".join(warnings) + ".")


def side_by_side(
    convs: Sequence, a: str, b: str, ids: Mapping[str, int], turns_of: Callable[[Any], list[dict[str, Any]]], limit: int
) -> list[dict[str, Any]]:
    """The two sides of every battle where ``a`` and ``b`` met: one row per battle."""
    sides: dict[str, dict[str, Any]] = {}
    for conv in convs:
        meta = conv.meta or {}
        if conv.kind != "human_bot" or meta.get("side") not in ("a", "b"):
            continue
        sides.setdefault(conv.key.rsplit(":", 1)[0], {})[meta["system"]] = conv
    rows = []
    for battle, by_system in sides.items():
        if a in by_system and b in by_system:
            first = by_system[a].turns[0].text if by_system[a].turns else ""
            rows.append(
                {
                    "title": battle.removeprefix("arena:"),
                    "prompt": first,
                    "conversation": by_system[a].id,
                    "left": turns_of(by_system[a]),
                    "right": turns_of(by_system[b]),
                }
            )
        if len(rows) >= limit:
            break
    return rows
