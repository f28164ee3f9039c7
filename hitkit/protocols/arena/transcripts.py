"""The arena's conversations as the analysis step reads them: ``conversations.jsonl`` of an export folder.

``battles.csv`` holds one row per vote but not the text; prompt hygiene, categories, declared style
covariates and costs need it. A battle's conversations have keys ``arena:a{assignment}:u{unit}:{side}``
and its ``battle_id`` in ``battles.csv`` is ``a{assignment}:u{unit}``, which joins the two.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hitkit.errors import InputError
from hitkit.protocols.arena.style import count_tokens

FILE = "conversations.jsonl"
TURN_COLUMNS = ("study", "battle_id", "side", "system", "first_token_ms", "reply_ms", "input_tokens", "output_tokens")


@dataclass
class Transcripts:
    """What the analysis needs of a study's arena conversations."""

    prompts: dict[tuple[str, str], str] = field(default_factory=dict)
    """(study, battle_id) → the worker's first message."""
    replies: dict[tuple[str, str, str], list[str]] = field(default_factory=dict)
    """(study, battle_id, side) → that side's replies, in order."""
    turns: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(TURN_COLUMNS)))
    """One row per bot reply: its battle, side, system, timings (ms; empty where not measured) and tokens
    (input: every earlier turn of the conversation, which a chat API is sent again each turn)."""


def merge(parts: list[Transcripts]) -> Transcripts:
    """The transcripts of several export folders as one (their keys carry the study's name)."""
    if len(parts) == 1:
        return parts[0]
    out = Transcripts()
    for part in parts:
        out.prompts.update(part.prompts)
        out.replies.update(part.replies)
    frames = [p.turns for p in parts if len(p.turns)]
    if frames:
        out.turns = pd.concat(frames, ignore_index=True)
    return out


def read_transcripts(in_dir: str | Path) -> Transcripts:
    """The arena conversations of export folder ``in_dir``; empty where it has no ``conversations.jsonl``
    (a FastChat battle file, an export written before conversations were exported)."""
    path = Path(in_dir) / FILE
    if not path.is_file():
        return Transcripts()
    prompts: dict[tuple[str, str], str] = {}
    replies: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                conv = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(path, f"not JSON ({exc.msg})", lineno) from None
            key = str(conv.get("conversation_id", ""))
            if not key.startswith("arena:") or key.count(":") != 3:
                continue
            _, assignment, unit, side = key.split(":")
            battle = (str(conv.get("study", "")), f"{assignment}:{unit}")
            history = 0
            for turn in conv.get("turns") or []:
                text = str(turn.get("text", ""))
                tokens = count_tokens(text)
                if turn.get("speaker") == "worker":
                    prompts.setdefault(battle, text)
                elif turn.get("speaker") == "bot":
                    replies[battle + (side,)].append(text)
                    rows.append(
                        (
                            *battle,
                            side,
                            turn.get("system") or (conv.get("meta") or {}).get("system", ""),
                            turn.get("first_token_ms"),
                            turn.get("reply_ms"),
                            history,
                            tokens,
                        )
                    )
                history += tokens
    turns = pd.DataFrame(rows, columns=list(TURN_COLUMNS))
    for column in ("first_token_ms", "reply_ms"):
        turns[column] = pd.to_numeric(turns[column], errors="coerce")
    return Transcripts(prompts, dict(replies), turns)
