"""FastChat / LMArena clean-battle JSON as arena battles (:data:`~hitkit.protocols.arena.reading.BATTLE_COLUMNS`).

FastChat's ``clean_battle_data.py`` writes a JSON list (or JSON lines) of battles with these fields,
the ones read here (others are ignored):

- ``model_a``, ``model_b``: the two systems, ``model_a`` shown on the left;
- ``winner``: ``model_a`` | ``model_b`` | ``tie`` | ``tie (bothbad)`` (→ vote a, b, tie, both_bad);
- ``conv_metadata``: ``sum_assistant_a_tokens`` and ``sum_assistant_b_tokens`` (numbers), and
  ``header_count_a``, ``list_count_a``, ``bold_count_a`` and the ``_b`` twins, each a number or a dict
  of counts (``{"h1": 2, "h2": 0, ...}``, ``{"ordered": 1, "unordered": 3}``, ``{"**": 2, "__": 0}``)
  that is summed, as FastChat's ``preprocess_for_style`` does; a battle without ``conv_metadata`` has
  no style counts (NaN), and style control then needs every battle to have them;
- ``judge``: the voter, used as the worker (the bootstrap's cluster) where present; otherwise each
  battle is its own cluster;
- ``question_id`` (the battle and its prompt), ``turn`` (exchanges), and a category where the battle
  has one (``category`` as text).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from hitkit.errors import InputError
from hitkit.protocols.arena.reading import BATTLE_COLUMNS, check_battles

WINNERS = {"model_a": "a", "model_b": "b", "tie": "tie", "tie (bothbad)": "both_bad"}
STYLE_KEYS = {
    "tokens_a": "sum_assistant_a_tokens",
    "header_count_a": "header_count_a",
    "list_count_a": "list_count_a",
    "bold_count_a": "bold_count_a",
    "tokens_b": "sum_assistant_b_tokens",
    "header_count_b": "header_count_b",
    "list_count_b": "list_count_b",
    "bold_count_b": "bold_count_b",
}


def _records(path: Path) -> list:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(path, f"neither a JSON list nor JSON lines ({exc.msg})", line=number) from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise InputError(path, "is not a list of battles (FastChat's clean-battle JSON)")
    return data


def _count(value, path: Path, where: int, key: str) -> float:
    """A count as FastChat reads it: a number, or the sum of a dict's values."""
    if value is None:
        return math.nan
    if isinstance(value, dict):
        try:
            return float(sum(value.values()))
        except TypeError:
            raise InputError(path, f"battle {where}: conv_metadata.{key} holds non-numbers: {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(
            path, f"battle {where}: conv_metadata.{key} is {value!r}; expected a count or a dict of counts"
        )
    return float(value)


def read_fastchat(path: str | Path) -> pd.DataFrame:
    """FastChat clean battles from ``path`` as a battle frame (with ``source`` = the file's stem).
    Raises :class:`~hitkit.errors.InputError` naming the battle (0-based) of a missing model or an
    unknown winner."""
    path = Path(path)
    rows = []
    for i, battle in enumerate(_records(path)):
        if not isinstance(battle, dict):
            raise InputError(path, f"battle {i} is {type(battle).__name__}, not an object")
        for key in ("model_a", "model_b", "winner"):
            if not str(battle.get(key) or "").strip():
                raise InputError(path, f"battle {i} has no {key}; FastChat battles have model_a, model_b and winner")
        winner = str(battle["winner"]).strip()
        if winner not in WINNERS:
            raise InputError(path, f"battle {i}: winner {winner!r} is not one of {', '.join(WINNERS)}")
        meta = battle.get("conv_metadata") or {}
        if not isinstance(meta, dict):
            raise InputError(path, f"battle {i}: conv_metadata is not an object")
        judge = str(battle.get("judge") or "").strip()
        battle_id = str(battle.get("question_id") or battle.get("battle_id") or i)
        category = battle.get("category")
        row = {
            "study": path.stem,
            "hit_id": "",
            "assignment_id": "",
            "worker_id": judge or f"battle:{i}",
            "battle_id": battle_id,
            "prompt_id": battle_id,
            "category": category if isinstance(category, str) else "",
            "turns": battle.get("turn", ""),
            "system_a": str(battle["model_a"]),
            "system_b": str(battle["model_b"]),
            "vote": WINNERS[winner],
            "reason": "",
            "is_control": 0,
            "leak": 0,
        }
        for column, key in STYLE_KEYS.items():
            row[column] = _count(meta.get(key), path, i, key)
        rows.append(row)
    if not rows:
        raise InputError(path, "holds no battles")
    # FastChat's rows have no CSV lines; check_battles numbers them from 2, so say "battle" in our own errors.
    table = check_battles(pd.DataFrame(rows, columns=list(BATTLE_COLUMNS)), path)
    table["source"] = path.stem
    table.attrs["duplicates"] = {}
    table.attrs["assignment_duplicates"] = None
    return table
