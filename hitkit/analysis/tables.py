"""Reading the tidy interchange tables (METHODS.md §4) with errors that name the file and line.

Shared by every analysis: ``assignments.csv`` means the same thing to all of them, and a table
with a missing column or an unreadable file fails the same way everywhere. Where a folder has
``NAME.parquet`` but no ``NAME.csv``, the Parquet file is read instead, through the same text
parsing as the CSV, so both give the same table and the same numbers.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from hitkit.analysis.inference import DEFAULT_DUPLICATES, DuplicatePolicy, apply_duplicate_policy
from hitkit.errors import InputError
from hitkit.tables.schema import ASSIGNMENT_COLUMNS, EXCLUDED, EXCLUSION_COLUMNS, HANDED_IN_STATUSES, TEXT_COLUMNS


def table_path(path: Path) -> Path:
    """``path`` (a .csv), or the .parquet beside it when only that exists, or a release's
    ``NAME/NAME.parquet`` (``hitkit release`` keeps each table in its own configuration folder)."""
    path = Path(path)
    if path.is_file() or path.suffix != ".csv":
        return path
    for candidate in (path.with_suffix(".parquet"), path.parent / path.stem / f"{path.stem}.parquet"):
        if candidate.is_file():
            return candidate
    return path


def table_exists(path: Path) -> bool:
    """Whether ``path`` (a .csv) or the .parquet beside it exists."""
    return table_path(path).is_file()


def _parquet_as_csv(path: Path) -> io.StringIO:
    """The Parquet table as CSV text, so that it parses exactly as an exported CSV does."""
    try:
        table = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        raise InputError(path, f"is not a readable Parquet file ({exc}); export it again") from None
    return io.StringIO(table.to_csv(index=False))


def read_table(path: Path, columns: Sequence[str], dtypes: Mapping[str, type] | type = str) -> pd.DataFrame:
    """Read a CSV (or the Parquet beside it) that must have ``columns``; ids stay text (a worker
    called "NA" or "001" survives)."""
    path = table_path(path)
    if not path.is_file():
        raise InputError(path, f"not found; export the study's tables (METHODS §4) into {path.parent} first")
    try:
        source = _parquet_as_csv(path) if path.suffix == ".parquet" else path
        table = pd.read_csv(source, dtype=dtypes, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise InputError(path, f"is empty; it needs a header row with columns {list(columns)}") from None
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InputError(path, f"missing column(s) {missing}; expected {list(columns)}")
    return table


ASSIGNMENT_DUPLICATES = "assignment_id(s) of assignments.csv"
"""How a summary warning names repeated rows of ``assignments.csv``."""


def read_probability(path: Path, table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its ``human_probability`` column (a judge table's, where the crowd's share followed the
    judge's uncertainty) as numbers, each checked to be in (0, 1] (InputError naming the line); unchanged
    without the column."""
    from hitkit.errors import InputError

    if "human_probability" not in table.columns:
        return table
    pi = pd.to_numeric(table["human_probability"], errors="coerce")
    bad = table.index[pi.isna() | (pi <= 0) | (pi > 1)]
    if len(bad):
        raise InputError(
            path,
            f"human_probability {table.at[bad[0], 'human_probability']!r} is not a number in (0, 1]",
            line=int(bad[0]) + 2,
        )
    return table.assign(human_probability=pi)


def read_assignments(in_dir: str | Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.DataFrame:
    """Read and check ``assignments.csv``, every status (:func:`counted` keeps those that count).

    An assignment_id on more than one row (two exports pasted together, a re-downloaded batch) is
    resolved by the ``duplicates`` policy (first by default; last, drop, error) with a warning that
    counts it, not refused; the report is in ``table.attrs["duplicates"]``.
    """
    path = Path(in_dir) / "assignments.csv"
    table = read_table(path, ASSIGNMENT_COLUMNS, {c: str for c in ASSIGNMENT_COLUMNS if c != "work_time_s"})
    table = table[list(ASSIGNMENT_COLUMNS)].copy()
    table["status"] = table["status"].str.strip().str.lower()
    table["work_time_s"] = pd.to_numeric(table["work_time_s"].replace("", None), errors="coerce")
    table, report = apply_duplicate_policy(
        table, ["assignment_id"], duplicates, what="assignment (same assignment_id)", source=path
    )
    table = table.reset_index(drop=True)
    excluded = read_exclusions(in_dir, set(table["assignment_id"]))
    if excluded:
        table.loc[table["assignment_id"].isin(set(excluded)), "status"] = EXCLUDED
    table.attrs["duplicates"] = report
    table.attrs["exclusions"] = excluded
    return table


def read_exclusions(in_dir: str | Path, known: set[str] | None = None) -> dict[str, str]:
    """``exclusions.csv`` of ``in_dir`` (if there is one) as {assignment_id: reason}: work left out of every
    analysis for a stated reason other than quality control (a coordinator's rejection, a worker who
    asked to withdraw). Every row needs a reason, and an assignment ``assignments.csv`` lacks is an error."""
    path = table_path(Path(in_dir) / "exclusions.csv")
    if not path.is_file():
        return {}
    table = read_table(path, EXCLUSION_COLUMNS)
    out: dict[str, str] = {}
    for i, (assignment, reason) in enumerate(zip(table["assignment_id"], table["reason"])):
        if not str(reason).strip():
            raise InputError(path, f"assignment {assignment!r} has no reason; every exclusion states why", line=i + 2)
        if known is not None and assignment not in known:
            raise InputError(
                path,
                f"assignment_id {assignment!r} is not in assignments.csv; export both tables from the same study",
                line=i + 2,
            )
        out[str(assignment)] = str(reason).strip()
    return out


def counted(assignments: pd.DataFrame, statuses: tuple[str, ...] = HANDED_IN_STATUSES) -> pd.DataFrame:
    """The assignments that count: all work handed in (submitted, approved, and rejected: a rejection is
    QC's outcome, not its input); returned, expired, unconfirmed and explicitly excluded work does not."""
    return assignments[assignments["status"].isin(statuses)].reset_index(drop=True)


def keep_counted(
    table: pd.DataFrame, in_dir: str | Path, path: Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES
) -> pd.DataFrame:
    """Rows of ``table`` (read from ``path``) whose assignment counts, if ``assignments.csv`` is there.

    A row naming an assignment that ``assignments.csv`` lacks is an InputError naming its line:
    the two tables must come from the same export. ``duplicates`` applies to repeated rows of
    ``assignments.csv`` (:func:`read_assignments`); its report is in the result's
    ``attrs["assignment_duplicates"]`` (None without ``assignments.csv``).
    """
    assignments_path = table_path(Path(in_dir) / "assignments.csv")
    if not assignments_path.exists():
        table.attrs["assignment_duplicates"] = None
        return table
    assignments = read_assignments(in_dir, duplicates=duplicates)
    orphans = table.index[~table["assignment_id"].isin(set(assignments["assignment_id"]))]
    if len(orphans):
        i = orphans[0]
        raise InputError(
            path,
            f"assignment_id {table.at[i, 'assignment_id']!r} is not in "
            f"{assignments_path.name}; export both tables from the same study",
            line=int(i) + 2,
        )
    kept = table[table["assignment_id"].isin(set(counted(assignments)["assignment_id"]))].copy()
    kept.attrs["assignment_duplicates"] = assignments.attrs["duplicates"]
    return kept


_MISSING = ["", "NA", "N/A", "NaN", "nan", "null", "None"]


def read_frame(folder: str | Path, name: str) -> pd.DataFrame:
    """``NAME.csv`` of ``folder`` (or ``NAME.parquet`` where there is no CSV) as exported, for reading
    rather than checking: the :data:`~hitkit.tables.schema.TEXT_COLUMNS` as text (a worker "001" or "NA"
    stays itself, as :func:`read_table` keeps it), every other column typed by pandas. The one reader
    behind :func:`hitkit.load` and the report; an empty file is an empty table."""
    path = table_path(Path(folder) / f"{name}.csv")
    if not path.is_file():
        raise InputError(path, "not found")
    if path.suffix == ".parquet":
        table = pd.read_parquet(path)
        for column in TEXT_COLUMNS & set(table.columns):
            values = table[column]
            table[column] = values.where(values.isna(), values.astype(str))
        return table
    try:
        header = list(pd.read_csv(path, nrows=0).columns)
    except pd.errors.EmptyDataError:
        return pd.DataFrame()
    text = [c for c in header if c in TEXT_COLUMNS]
    return pd.read_csv(
        path,
        dtype={c: str for c in text},
        keep_default_na=False,
        na_values={c: _MISSING for c in header if c not in TEXT_COLUMNS},
    )
