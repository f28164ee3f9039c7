"""Reading live chat's tables (METHODS §4): ``ratings.csv`` checked (known criteria, scores within 0–100,
is_control 0/1, repeats resolved by the duplicate policy) and ``assignments.csv`` checked to belong with it."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from hitkit.analysis.inference import DEFAULT_DUPLICATES, DuplicatePolicy, apply_duplicate_policy
from hitkit.analysis.tables import read_assignments, read_table
from hitkit.errors import InputError
from hitkit.protocols.live_chat.criteria import (
    DEFAULT_CRITERIA,
    RATING_COLUMNS,
    Criterion,
    check_criteria,
    unknown_criteria,
)

_ID_COLUMNS = ("study", "hit_id", "assignment_id", "worker_id", "conversation_id", "system", "criterion", "status")


def read_ratings(
    in_dir: str | Path,
    criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
    *,
    duplicates: DuplicatePolicy = DEFAULT_DUPLICATES,
) -> pd.DataFrame:
    """Read and check ``ratings.csv``: known criteria, scores within 0–100, is_control 0/1.

    A second rating of one criterion in one conversation of one assignment is resolved by the
    ``duplicates`` policy (first by default; last, drop or error), with a warning that counts
    it; the report is in ``table.attrs["duplicates"]``.
    """
    check_criteria(criteria)
    path = Path(in_dir) / "ratings.csv"
    text_ids = {c: str for c in _ID_COLUMNS if c in RATING_COLUMNS}
    table = read_table(path, RATING_COLUMNS, text_ids)[list(RATING_COLUMNS)]
    unknown = unknown_criteria(table, criteria)
    if unknown:
        raise InputError(
            path,
            f"unknown criterion {unknown[0]!r}"
            + (f" (and {unknown[1:]})" if len(unknown) > 1 else "")
            + f"; configured criteria are {[c.name for c in criteria]}. "
            "For a study with its own criteria give its file (`hitkit analyze --study STUDY.yaml`), "
            "else add it to the study's criteria or fix the export",
        )
    score = pd.to_numeric(table["score"], errors="coerce")
    bad = table.index[score.isna() | (score < 0) | (score > 100)]
    if len(bad):
        i = bad[0]
        raise InputError(path, f"score '{table.at[i, 'score']}' is not a number within 0–100", line=int(i) + 2)
    control = table["is_control"].astype(str).str.strip().str.lower()
    bad = table.index[~control.isin(["0", "1", "true", "false"])]
    if len(bad):
        i = bad[0]
        raise InputError(path, f"is_control '{table.at[i, 'is_control']}' is not 0 or 1", line=int(i) + 2)
    table["score"] = score.astype(float)
    table["is_control"] = control.isin(["1", "true"])
    key = ["assignment_id", "conversation_id", "criterion"]
    table, report = apply_duplicate_policy(
        table, key, duplicates, what="rating (same assignment, conversation, criterion)", source=path
    )
    table = table.copy()
    table.attrs["duplicates"] = report
    return table


def read_tables(
    in_dir: str | Path,
    criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
    *,
    duplicates: DuplicatePolicy = DEFAULT_DUPLICATES,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every assignment and the ratings of ``in_dir`` (:func:`read_ratings`), checked to belong together."""
    every_assignment = read_assignments(in_dir, duplicates=duplicates)
    ratings = read_ratings(in_dir, criteria, duplicates=duplicates)
    orphans = set(ratings["assignment_id"]) - set(every_assignment["assignment_id"])
    if orphans:
        raise InputError(
            Path(in_dir) / "ratings.csv",
            f"assignment_id {sorted(orphans)[0]!r} is not in assignments.csv; export both tables from the same study",
        )
    return every_assignment, ratings
