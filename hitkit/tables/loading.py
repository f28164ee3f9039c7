"""``hitkit.load``: a study's tidy tables as pandas DataFrames, for notebooks.

One call takes whatever the user has at hand: a study file (its export folder, written from the
database first when there is none), a run folder ``OUT/STUDY`` (its ``export/`` and ``analysis/``),
an export folder, or an analysis folder. Tables are read from CSV, or from Parquet where only
Parquet is there; ``docs/COLUMNS.md`` documents every column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hitkit.analysis.tables import table_exists
from hitkit.errors import HitkitError, InputError
from hitkit.protocols import PROTOCOLS

if TYPE_CHECKING:
    import pandas as pd

TABLE_SUFFIXES = (".csv", ".parquet")
TASK_TABLES = {p.table: p.name for p in PROTOCOLS.values()}
"""The export table that tells which task a folder holds."""
ANALYSIS_MARKERS = {p.analysis_marker: p.name for p in PROTOCOLS.values()}
"""The analysis table that tells which task an analysis folder holds."""


def check_task_folder(task: str, folder: Path) -> None:
    """Raise a HitkitError naming the right command when ``folder`` holds another task's table."""
    wanted = {t: name for name, t in TASK_TABLES.items()}.get(task)
    if wanted is None or table_exists(folder / f"{wanted}.csv"):
        return
    for name, other in TASK_TABLES.items():
        if table_exists(folder / f"{name}.csv"):
            raise HitkitError(
                f"{folder} holds {name} (the input of `hitkit analyze {other}`), not {wanted}.csv; "
                f"run `hitkit analyze {other} {folder} --out …`"
            )


def table_names(folder: Path) -> list[str]:
    """Stems of the tables (CSV or Parquet) in ``folder`` (a release's too, one folder each), sorted."""
    names = {p.stem for p in folder.iterdir() if p.suffix in TABLE_SUFFIXES and p.is_file()}
    names |= {p.name for p in folder.iterdir() if p.is_dir() and (p / f"{p.name}.parquet").is_file()}
    return sorted(names)


def read_any(folder: Path, name: str) -> pd.DataFrame:
    """``NAME.csv`` from ``folder``, or ``NAME.parquet`` when there is no CSV (ids as text:
    :func:`hitkit.analysis.tables.read_frame`)."""
    from hitkit.analysis.tables import read_frame

    try:
        return read_frame(folder, name)
    except InputError:
        raise HitkitError(f"no {name}.csv or {name}.parquet in {folder}") from None


def study_name(folder: Path) -> str | None:
    """The study an export folder holds: study.json's name, else the ``study`` column of its
    assignments or task table (several studies joined by ", "); None when neither says."""
    import pandas as pd

    folder = Path(folder)
    info = folder / "study.json"
    if info.is_file():
        name = json.loads(info.read_text()).get("study")
        if name:
            return str(name)
    for table in ("assignments", *TASK_TABLES):
        csv, parquet = folder / f"{table}.csv", folder / f"{table}.parquet"
        try:
            if csv.is_file():
                column = pd.read_csv(csv, usecols=["study"], dtype=str, keep_default_na=False)["study"]
            elif parquet.is_file():
                column = pd.read_parquet(parquet, columns=["study"])["study"].astype(str)
            else:
                continue
        except (ValueError, KeyError, pd.errors.EmptyDataError):  # no study column: ask the next table
            continue
        names = [n for n in dict.fromkeys(column.str.strip()) if n]
        if names:
            return ", ".join(names)
    return None


def read_conversations(path: Path) -> pd.DataFrame:
    """``conversations.jsonl`` as one row per turn: study, conversation_id, kind, index, speaker,
    system, text, time."""
    import pandas as pd

    from hitkit.material.jsonl import iter_jsonl

    rows = []
    for lineno, conv in iter_jsonl(path, "conversations.jsonl not found — run `hitkit export` first"):
        if not isinstance(conv, dict):
            raise InputError(path, "each line must be one conversation object with 'turns'", lineno)
        for turn in conv.get("turns", []):
            rows.append(
                {
                    "study": conv.get("study"),
                    "conversation_id": conv.get("conversation_id"),
                    "kind": conv.get("kind"),
                    **turn,
                }
            )
    columns = ["study", "conversation_id", "kind", "index", "speaker", "system", "text", "time"]
    table = pd.DataFrame(rows, columns=columns)
    table["time"] = pd.to_datetime(table["time"], utc=True, errors="coerce")
    return table


@dataclass
class StudyData:
    """A study's tables: ``tables`` from the export (plus ``conversations``, one row per turn),
    ``analysis`` from an analysis folder, ``summary`` its summary.json, ``info`` the export's
    study.json. ``data["votes"]`` and ``data.votes`` look in tables, then analysis."""

    path: Path
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    analysis: dict[str, pd.DataFrame] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    export_dir: Path | None = None
    analysis_dir: Path | None = None

    @property
    def task(self) -> str | None:
        """pairwise, live_chat or spot_the_bot, from study.json or the tables present."""
        for known in (self.info, self.summary):
            if known.get("task"):
                return known["task"]
        for name, task in TASK_TABLES.items():
            if name in self.tables:
                return task
        for name, task in ANALYSIS_MARKERS.items():
            if name in self.analysis:
                return task
        return None

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name in self.tables:
            return self.tables[name]
        if name in self.analysis:
            return self.analysis[name]
        raise KeyError(f"no table {name!r}; there are {sorted(self.tables) + sorted(self.analysis)}")

    def __getattr__(self, name: str) -> pd.DataFrame:
        if name.startswith("_") or name in {
            "path",
            "tables",
            "analysis",
            "summary",
            "info",
            "export_dir",
            "analysis_dir",
        }:
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(str(exc)) from None

    def __contains__(self, name: str) -> bool:
        return name in self.tables or name in self.analysis

    def __repr__(self) -> str:
        return (
            f"StudyData({str(self.path)!r}, task={self.task!r}, tables={sorted(self.tables)}, "
            f"analysis={sorted(self.analysis)})"
        )


def _is_export(folder: Path) -> bool:
    return any(table_exists(folder / f"{n}.csv") for n in [*TASK_TABLES, "assignments"])


def _is_analysis(folder: Path) -> bool:
    return (folder / "summary.json").is_file() or any(
        (folder / f"{n}{s}").is_file() for n in ANALYSIS_MARKERS for s in TABLE_SUFFIXES
    )


def locate(path: str | Path) -> tuple[Path | None, Path | None]:
    """(export folder, analysis folder) for a run folder, an export folder or an analysis folder."""
    path = Path(path)
    if not path.exists():
        raise HitkitError(
            f"{path} does not exist; give a study file, a run folder (OUT/STUDY), "
            "an export folder or an analysis folder"
        )
    if not path.is_dir():
        raise HitkitError(f"{path} is a file but not a study file (.yaml); give a study file or a folder")
    if _is_export(path):
        sibling = path.parent / "analysis"
        return path, sibling if path.name == "export" and _is_analysis(sibling) else None
    if _is_analysis(path):
        sibling = path.parent / "export"
        return (sibling if path.name == "analysis" and _is_export(sibling) else None), path
    export, analysis = path / "export", path / "analysis"
    if _is_export(export) or _is_analysis(analysis):
        return (export if _is_export(export) else None), (analysis if _is_analysis(analysis) else None)
    raise HitkitError(
        f"{path} holds no hitkit tables (votes, ratings, annotations or assignments as CSV or "
        "Parquet, or an analysis' summary.json); export the study first with `hitkit export`"
    )


def export_from_database(study_file: Path, formats: str = "both") -> Path:
    """Export the study of ``study_file`` from its database into ``OUT/STUDY/export``; return it."""
    from hitkit.db.session import session_scope
    from hitkit.study.loading import load_study
    from hitkit.study.stored import StudyContext, resolve_secret
    from hitkit.tables.export import export_study

    config = load_study(study_file)
    out = config.out_dir / "export"
    with session_scope(config.database_url) as session:
        ctx = StudyContext.load(session, config.study, resolve_secret(config.database_url))
        export_study(session, ctx, out, formats)
    return out


def load(path: str | Path, *, refresh: bool = False) -> StudyData:
    """The tables of a study as DataFrames: ``path`` is a study file, a run, export or analysis folder.

    A study file reads ``OUT/STUDY/export`` (and ``analysis``); when there is no export yet, or with
    ``refresh=True``, it exports from the study's database first.
    """
    path = Path(path)
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        from hitkit.study.loading import load_study

        run_dir = load_study(path).out_dir
        if refresh or not _is_export(run_dir / "export"):
            export_from_database(path)
        path = run_dir
    export_dir, analysis_dir = locate(path)
    data = StudyData(path=path, export_dir=export_dir, analysis_dir=analysis_dir)
    if export_dir is not None:
        data.tables = {name: read_any(export_dir, name) for name in table_names(export_dir)}
        conversations = export_dir / "conversations.jsonl"
        if conversations.is_file():
            data.tables["conversations"] = read_conversations(conversations)
        if (export_dir / "study.json").is_file():
            data.info = json.loads((export_dir / "study.json").read_text())
    if analysis_dir is not None:
        data.analysis = {name: read_any(analysis_dir, name) for name in table_names(analysis_dir)}
        if (analysis_dir / "summary.json").is_file():
            data.summary = json.loads((analysis_dir / "summary.json").read_text())
    return data
