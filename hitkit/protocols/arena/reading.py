"""Reading battles for the arena's analysis: a study's exported ``battles.csv`` (the contract below) or
FastChat/LMArena clean-battle JSON (:mod:`hitkit.protocols.arena.fastchat`), into one frame.

The frame has the columns of :data:`BATTLE_COLUMNS` (one row per vote) and a ``source`` column (the
study's name, or the JSON file's). ``vote`` is one of a, b, tie, both_bad, where ``a`` prefers the
system shown on the left (``system_a``); the style counts are numbers (NaN where a source has none),
``is_control`` and ``leak`` are 0/1.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from hitkit.analysis.inference import (
    DEFAULT_DUPLICATES,
    DuplicatePolicy,
    apply_duplicate_policy,
)
from hitkit.analysis.tables import keep_counted, read_table
from hitkit.errors import InputError
from hitkit.protocols.arena.columns import BATTLE_COLUMNS, VOTES

STYLE_A = ("tokens_a", "header_count_a", "list_count_a", "bold_count_a")
STYLE_B = ("tokens_b", "header_count_b", "list_count_b", "bold_count_b")
NUMERIC = STYLE_A + STYLE_B + ("turns",)
FLAGS = ("is_control", "leak")


def check_battles(table: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """Check and type a battle frame read from ``path`` (rows numbered as CSV lines, header = 1):
    ids as text, the vote normalised to lower case, counts as numbers, flags as 0/1. Raises
    :class:`~hitkit.errors.InputError` naming the line of an empty system, a vote other than
    a/b/tie/both_bad, the same system on both sides, a negative or non-numeric count, or a flag other
    than 0/1."""
    table = table.reset_index(drop=True).copy()
    for column in ("system_a", "system_b"):
        text = table[column].astype(str).str.strip()
        empty = table.index[text == ""]
        if len(empty):
            raise InputError(path, f"{column} is empty; every battle names two systems", line=int(empty[0]) + 2)
        table[column] = text
    vote = table["vote"].astype(str).str.strip().str.lower()
    bad = table.index[~vote.isin(VOTES)]
    if len(bad):
        raise InputError(
            path, f"vote {table.at[bad[0], 'vote']!r} is not one of {', '.join(VOTES)}", line=int(bad[0]) + 2
        )
    table["vote"] = vote
    same = table.index[table["system_a"] == table["system_b"]]
    if len(same):
        raise InputError(
            path,
            f"system_a and system_b are both {table.at[same[0], 'system_a']!r}; a battle "
            "is between two different systems",
            line=int(same[0]) + 2,
        )
    for column in NUMERIC:
        raw = table[column]
        if raw.dtype == object:
            raw = raw.where(raw.astype(str).str.strip() != "", None)
        values = pd.to_numeric(raw, errors="coerce")
        wrong = table.index[(values.isna() & raw.notna()) | (values < 0)]
        if len(wrong):
            raise InputError(
                path,
                f"{column} is {table.at[wrong[0], column]!r}; it must be a count (0 or more) or empty",
                line=int(wrong[0]) + 2,
            )
        table[column] = values.astype(float)
    for column in FLAGS:
        text = (
            table[column]
            .astype(str)
            .str.strip()
            .str.lower()
            .replace({"": "0", "true": "1", "false": "0", "1.0": "1", "0.0": "0"})
        )
        wrong = table.index[~text.isin(["0", "1"])]
        if len(wrong):
            raise InputError(path, f"{column} is {table.at[wrong[0], column]!r}; use 0 or 1", line=int(wrong[0]) + 2)
        table[column] = text.astype(int)
    for column in ("study", "worker_id", "battle_id", "prompt_id", "category", "hit_id", "assignment_id", "reason"):
        table[column] = table[column].fillna("").astype(str).str.strip()
    return table


def read_study_battles(in_dir: str | Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.DataFrame:
    """``battles.csv`` of an export folder, checked (:func:`check_battles`), with only the votes of
    submitted or approved assignments when ``assignments.csv`` is there. Two votes of one assignment
    on one battle are an export's repeat, resolved by ``duplicates`` (report in ``attrs["duplicates"]``)."""
    in_dir = Path(in_dir)
    path = in_dir / "battles.csv"
    table = check_battles(read_table(path, BATTLE_COLUMNS), path)
    table, report = apply_duplicate_policy(
        table, ["study", "assignment_id", "battle_id"], duplicates, what="vote (same assignment, battle)", source=path
    )
    table = keep_counted(table, in_dir, path, duplicates=duplicates)
    # Columns beyond the contract (a coordinator's COLUMN_a / COLUMN_b counts for a style covariate) are kept.
    extra = [c for c in table.columns if c not in BATTLE_COLUMNS and c.endswith(("_a", "_b"))]
    out = table[[*BATTLE_COLUMNS, *extra]].reset_index(drop=True)
    out["source"] = out["study"].where(out["study"] != "", in_dir.name)
    out.attrs["duplicates"] = report
    out.attrs["assignment_duplicates"] = table.attrs.get("assignment_duplicates")
    return out


def included(battles: pd.DataFrame, *, leaks: bool = False) -> pd.DataFrame:
    """The battles a leaderboard counts: never a QC battle (``is_control``), nor one the prompt cap left
    out (``capped``, where the frame has it), and no battle whose reply named a model or vendor
    (``leak``) unless ``leaks``."""
    keep = battles["is_control"].astype(int) == 0
    if "capped" in battles:
        keep &= battles["capped"].astype(int) == 0
    if not leaks:
        keep &= battles["leak"].astype(int) == 0
    return battles[keep].reset_index(drop=True)
