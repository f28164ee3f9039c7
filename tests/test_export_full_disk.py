"""An export onto a full disk: one line naming the file and the cause, exit status 1, no traceback, and
nothing half-written left behind (the atomic writer removes its temporary file; the target is untouched)."""

from __future__ import annotations

import errno

import pandas as pd
from click.testing import CliRunner

from hitkit.cli import main
from hitkit.db.session import session_scope
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from tests.studies import pairwise_study


def launched(tmp_path, database_url):
    study_file = pairwise_study(tmp_path, database_url)
    config = load_study(study_file)
    with session_scope(database_url) as s:
        create_study(s, config, study_file, resolve_secret(database_url))
    return study_file


def test_an_export_onto_a_full_disk_is_one_line_naming_the_file_and_leaves_no_partial_file(
    tmp_path, one_database_url, monkeypatch
):
    study_file = launched(tmp_path, one_database_url)
    out = tmp_path / "export"
    out.mkdir()
    (out / "assignments.csv").write_text("the previous export\n")
    real = pd.DataFrame.to_csv

    def full_disk(self, path, *args, **kwargs):
        with open(path, "w") as fh:
            fh.write("HITId,Assign")  # part of the table reached the disk, then the device was full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_disk)
    run = CliRunner().invoke(main, ["export", str(study_file), "--out", str(out), "--format", "csv", "--no-progress"])
    assert run.exit_code == 1 and "Traceback" not in run.output
    [line] = run.output.strip().splitlines()
    assert line.startswith("Error: could not write ") and str(out / "assignments.csv") in line
    assert "the disk is full" in line
    # The previous file is intact and no temporary file is left beside it.
    assert sorted(p.name for p in out.iterdir()) == ["assignments.csv"]
    assert (out / "assignments.csv").read_text() == "the previous export\n"

    monkeypatch.setattr(pd.DataFrame, "to_csv", real)  # space freed: the same export now succeeds whole
    run = CliRunner().invoke(main, ["export", str(study_file), "--out", str(out), "--format", "csv", "--no-progress"])
    assert run.exit_code == 0, run.output
    assert pd.read_csv(out / "assignments.csv").columns[0] != "the previous export"
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_an_export_into_a_folder_it_cannot_create_names_the_folder(tmp_path, one_database_url):
    study_file = launched(tmp_path, one_database_url)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    run = CliRunner().invoke(main, ["export", str(study_file), "--out", str(blocker / "export"), "--no-progress"])
    assert run.exit_code == 1 and "Traceback" not in run.output
    [line] = run.output.strip().splitlines()
    assert line.startswith(f"Error: could not write {blocker / 'export'}")
