"""Reading pairwise votes (METHODS §4) and turning them into the canonical orientation every
statistic here uses: the two systems sorted by name, ``first`` < ``second``, and an outcome 0 = first
preferred, 1 = tie, 2 = second preferred; items keyed by (study, item_id) when there is a study column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.inference import DEFAULT_DUPLICATES, DuplicatePolicy, apply_duplicate_policy
from hitkit.analysis.tables import keep_counted, read_table
from hitkit.errors import InputError
from hitkit.protocols.pairwise.votes import VOTE_COLUMNS, VOTES

FIRST, TIE, SECOND = 0, 1, 2
"""The canonical outcomes of a vote: the first system (by name) preferred, a tie, the second preferred."""


def read_votes(in_dir: str | Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.DataFrame:
    """Read and check ``votes.csv``; keep only votes of submitted or approved assignments.

    Two votes of one assignment on the same item and pair are an export's repeat, resolved by
    ``duplicates`` (first by default; last, drop, error) with a warning that counts them; the
    report is in ``table.attrs["duplicates"]``; repeated rows of ``assignments.csv`` get the same
    policy (``table.attrs["assignment_duplicates"]``). (One worker voting on the same item in two
    assignments is kept, and counted by :func:`data_warnings`.)

    Without ``assignments.csv`` every vote counts. ``vote`` is normalised to lower case. Raises
    :class:`~hitkit.errors.InputError` naming the file (and line) for a missing file or column,
    a vote other than a/b/tie, an empty id or system, the same system on both sides, or a vote
    whose assignment is not in ``assignments.csv``.
    """
    in_dir = Path(in_dir)
    path = in_dir / "votes.csv"
    table = read_table(path, VOTE_COLUMNS)
    for column in ("worker_id", "item_id", "system_a", "system_b"):
        empty = table.index[table[column].str.strip() == ""]
        if len(empty):
            raise InputError(path, f"{column} is empty; every vote needs one", line=int(empty[0]) + 2)
    vote = table["vote"].str.strip().str.lower()
    bad = table.index[~vote.isin(VOTES)]
    if len(bad):
        i = bad[0]
        raise InputError(path, f"vote {table.at[i, 'vote']!r} is not one of a, b, tie", line=int(i) + 2)
    same = table.index[table["system_a"] == table["system_b"]]
    if len(same):
        i = same[0]
        raise InputError(
            path,
            f"system_a and system_b are both {table.at[i, 'system_a']!r}; a vote compares two different systems",
            line=int(i) + 2,
        )
    table["vote"] = vote
    pair_key = np.where(
        table["system_a"] < table["system_b"],
        table["system_a"] + "\x00" + table["system_b"],
        table["system_b"] + "\x00" + table["system_a"],
    )
    table["_pair"] = pair_key
    table, report = apply_duplicate_policy(
        table,
        ["study", "assignment_id", "item_id", "_pair"],
        duplicates,
        what="vote (same assignment, item, pair)",
        source=path,
    )
    table = keep_counted(table.drop(columns="_pair"), in_dir, path, duplicates=duplicates)
    extra = [c for c in table.columns if c not in VOTE_COLUMNS]
    out = table[list(VOTE_COLUMNS) + extra].reset_index(drop=True)
    out.attrs["duplicates"] = report
    out.attrs["assignment_duplicates"] = table.attrs["assignment_duplicates"]
    return out


def canonical(votes: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """Votes as first, second (sorted system names) and outcome (FIRST / TIE / SECOND)."""
    needed = ("system_a", "system_b", "vote") + columns
    missing = [c for c in needed if c not in votes.columns]
    if missing:
        raise InputError("votes", f"missing column(s) {missing}; expected {list(VOTE_COLUMNS)}")
    a = votes["system_a"].astype(str).to_numpy()
    b = votes["system_b"].astype(str).to_numpy()
    vote = votes["vote"].astype(str).str.strip().str.lower().to_numpy()
    bad = np.flatnonzero(~np.isin(vote, VOTES))
    if len(bad):
        raise InputError(
            "votes", f"row {votes.index[bad[0]]!r}: vote {votes['vote'].iloc[bad[0]]!r} is not one of a, b, tie"
        )
    same = np.flatnonzero(a == b)
    if len(same):
        raise InputError("votes", f"row {votes.index[same[0]]!r}: system_a and system_b are both {a[same[0]]!r}")
    swapped = a > b
    outcome = np.where(vote == "tie", TIE, np.where(vote == "a", FIRST, SECOND))
    # A pair displayed in reverse order: "a" preferred the system that sorts second.
    outcome = np.where(swapped & (outcome != TIE), 2 - outcome, outcome)
    out = pd.DataFrame({"first": np.where(swapped, b, a), "second": np.where(swapped, a, b), "outcome": outcome})
    for column in columns:
        out[column] = votes[column].astype(str).to_numpy()
    return out


def item_columns(votes: pd.DataFrame) -> tuple[str, ...]:
    return ("study", "item_id") if "study" in votes.columns else ("item_id",)
