"""``hitkit import``: archives from other platforms (an MTurk batch-results file) into hitkit's tidy
tables, ready for ``hitkit analyze`` and ``hitkit report``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from hitkit.cli.app import FILE, FOLDER, duplicates_option, main
from hitkit.tables.schema import HANDED_IN_STATUSES

if TYPE_CHECKING:
    from hitkit.analysis.inference import DuplicatePolicy


@main.group("import")
def import_group() -> None:
    """Bring archives from other platforms into hitkit's tidy tables."""


@import_group.command("mturk")
@click.argument("batch", type=FILE)
@click.option(
    "--mapping",
    type=FILE,
    required=True,
    help="YAML mapping of answers to ratings/votes (e.g. examples/ji2022_mturk_mapping.yaml).",
)
@click.option("--study", required=True, help="Study name written in every row.")
@click.option("--out", type=FOLDER, default=None, help="Folder for the tables (default: ./STUDY/export).")
@duplicates_option(
    "A repeated AssignmentId (batch files pasted together): keep the first or "
    "last row, drop all copies, or stop with an error. The count is reported."
)
def import_mturk_command(batch: Path, mapping: Path, study: str, out: Path | None, duplicates: DuplicatePolicy) -> None:
    """Turn an MTurk batch-results CSV (BATCH) into assignments.csv and the task's tidy table."""
    import warnings

    from hitkit.analysis.inference import DuplicateRowsWarning, duplicate_warnings
    from hitkit.imports.mturk import import_mturk

    out = out or Path(study) / "export"
    with warnings.catch_warnings():  # printed below, once
        warnings.simplefilter("ignore", DuplicateRowsWarning)
        result = import_mturk(batch, mapping, study, out, duplicates=duplicates)
    for line in duplicate_warnings([("AssignmentId(s) of the batch", result.duplicates)]):
        click.echo(f"warning: {line}", err=True)
    counted = result.assignments["status"].isin(HANDED_IN_STATUSES).sum()
    workers = result.assignments["worker_id"].nunique()
    for path in result.files:
        click.echo(f"wrote {path}")
    click.echo(
        f"{len(result.assignments)} assignments ({counted} counted) by {workers} workers; "
        f"{len(result.table)} rows in {result.table_name}.csv. Next: hitkit analyze "
        f"{_task_of(mapping)} {out} --out {out.parent / 'analysis'}"
    )


def _task_of(mapping: Path) -> str:
    from hitkit.imports.mturk_mapping import load_mapping

    return load_mapping(mapping).task
