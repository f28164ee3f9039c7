"""Spot The Bot on the coordinator dashboard: what a segment unit is, the labels in system names, how
often a system passed as human per segment length, and two systems' conversations from one seed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from hitkit.protocols.kit.views import first_rows, paired, score, words

WORDS = words(
    "bot–bot conversations from the same seed dialogue",
    "{a} and {b} have no bot–bot conversations from the same seed dialogue yet",
    "Annotations of its segments",
)
"""How the dashboard's shared pages speak of this protocol's material."""


def describe_unit(payload: Mapping[str, Any]) -> str:
    """The segment's length and which system each speaker is."""
    return f"first {payload.get('k')} exchanges: speaker 0 = {payload['systems'][0]}, 1 = {payload['systems'][1]}"


def readable_answers(payload: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, str]:
    """The worker's answers with speaker 0 and 1 turned into the systems behind them."""
    answers = dict(entry["answers"])
    systems = payload.get("systems", ["0", "1"])
    for q, v in list(answers.items()):
        if q.startswith("label_") and q[6:].isdigit():
            answers[q] = f"{systems[int(q[6:])]} → {v}"
        elif v in ("0", "1"):
            answers[q] = systems[int(v)]
    return answers


def system_scores(tables: Mapping[str, pd.DataFrame], config, name: str) -> tuple[list[dict[str, Any]], str]:
    """The share of system ``name``'s speakers labelled human so far, per segment length."""
    a = tables["annotations"]
    scores: list[dict[str, Any]] = []
    if a.empty:
        return scores, ""
    own = a[a["system"] == name]
    for k, group in own.groupby("segment_exchanges"):
        human = float((group["label"] == "human").mean())
        detail = f"{len(group)} labels; spotted as bot {float((group['label'] == 'bot').mean()):.2f}"
        scores.append(score(f"{k} exchanges", f"{human:.2f}", detail))
    return scores, "Share of its speakers labelled human, by segment length."


def side_by_side(
    convs: Sequence, a: str, b: str, ids: Mapping[str, int], turns_of: Callable[[Any], list[dict[str, Any]]], limit: int
) -> list[dict[str, Any]]:
    """Each system's conversation from the same seed dialogue (its self-chat where there is one)."""
    by_seed: dict[str, dict[str, Any]] = defaultdict(dict)
    for conv in convs:
        meta = conv.meta or {}
        systems = meta.get("systems") or []
        seed = meta.get("seed_dialogue")
        if seed is None:
            continue
        seed = str(seed)
        for n in (a, b):
            # Prefer the system's self-chat, else its first conversation from this seed.
            if n in systems and (n not in by_seed[seed] or systems == [n, n]):
                by_seed[seed][n] = conv
    return first_rows(
        (
            paired(f"seed {seed}", "", pair[a], pair[b], turns_of) if a in pair and b in pair else None
            for seed, pair in by_seed.items()
        ),
        limit,
    )
