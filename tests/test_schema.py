"""One schema per exported table and one reader: hitkit.load and the analysis read ids alike."""

from __future__ import annotations

import pandas as pd

import hitkit
from hitkit.analysis.tables import read_assignments
from hitkit.protocols import PROTOCOLS
from hitkit.tables.schema import ASSIGNMENT_COLUMNS, SHARED_TABLES


def _votes(folder):
    folder.mkdir()
    pd.DataFrame(
        {
            "study": ["s", "s"],
            "hit_id": ["h1", "h2"],
            "assignment_id": ["007", "NA"],
            "worker_id": ["001", "NA"],
            "status": ["approved", "submitted"],
            "work_time_s": [12, None],
        }
    ).to_csv(folder / "assignments.csv", index=False)
    pd.DataFrame(
        {
            "study": ["s", "s"],
            "hit_id": ["h1", "h2"],
            "assignment_id": ["007", "NA"],
            "worker_id": ["001", "NA"],
            "item_id": ["1", "2"],
            "system_a": ["x", "y"],
            "system_b": ["y", "x"],
            "vote": ["a", "tie"],
        }
    ).to_csv(folder / "votes.csv", index=False)
    return folder


def test_load_keeps_ids_as_text_as_the_analysis_does(tmp_path):
    folder = _votes(tmp_path / "csv")
    loaded = hitkit.load(folder)
    assert list(loaded.tables["votes"]["worker_id"]) == ["001", "NA"]
    assert list(loaded.tables["assignments"]["assignment_id"]) == ["007", "NA"]
    assert list(read_assignments(folder)["worker_id"]) == ["001", "NA"]
    # Numbers stay numbers, and a missing one is missing.
    work = loaded.tables["assignments"]["work_time_s"]
    assert work.iloc[0] == 12 and pd.isna(work.iloc[1])


def test_parquet_reads_like_the_csv(tmp_path):
    folder = _votes(tmp_path / "csv")
    only = tmp_path / "parquet"
    only.mkdir()
    for name in ("votes", "assignments"):
        pd.read_csv(folder / f"{name}.csv", dtype=str, keep_default_na=False).to_parquet(only / f"{name}.parquet")
    assert list(hitkit.load(only).tables["votes"]["worker_id"]) == ["001", "NA"]


def test_every_table_has_one_column_list():
    tables = {**SHARED_TABLES, **{p.table: p.columns for p in PROTOCOLS.values()}}
    assert len(tables) == len(SHARED_TABLES) + len(PROTOCOLS)  # no protocol reuses a shared name
    assert tables["assignments"] == ASSIGNMENT_COLUMNS
    for name, columns in tables.items():
        assert columns[0] == "study" and len(set(columns)) == len(columns), name
