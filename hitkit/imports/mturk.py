"""``hitkit import mturk``: an MTurk batch-results archive into hitkit's tidy tables (METHODS.md §4).

Amazon Mechanical Turk closed on 2026-09-30; what coordinators keep are its *batch results* CSVs:
one row per assignment with ``HITId, AssignmentId, WorkerId, AssignmentStatus, WorkTimeInSeconds``,
the HIT's inputs as ``Input.*`` and the worker's answers as ``Answer.*``. This module turns such a
file into ``assignments.csv`` plus the protocol's table (``ratings.csv`` for live chat,
``votes.csv`` for pairwise, ``annotations.csv`` for Spot The Bot), so ``hitkit analyze`` and
``hitkit report`` work on years-old runs exactly as on new ones.

How answers become ratings or votes is the coordinator's to say, in a small YAML *mapping*
(:class:`~hitkit.imports.mturk_mapping.MTurkMapping`, validated in :mod:`hitkit.imports.mturk_mapping`;
see docs/COLUMNS.md "Importing MTurk archives"), or, for rules a mapping cannot say, a Python function
named ``module:function`` in it.

Answers: a column named in ``flatten`` (default ``Answer.taskAnswers``, what crowd-html forms
submit) holds JSON; it is flattened into ``Answer.<key>`` fields, so a mapping reads
``Answer.score0`` whether the HIT sent a JSON blob or classic form fields. A list of one object
is that object; a longer list gives ``Answer.<n>.<key>``; nested objects give dotted keys.

Workers: ``WorkerId`` is pseudonymised as ``w`` + the first 12 hex digits of its SHA-256, and an
id already in that form is kept, so importing an already pseudonymised file (the Ji et al.
release) or re-importing an output gives the same ids. MTurk's results list only work MTurk
holds as submitted, approved or rejected, so every imported assignment is confirmed work.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hitkit.analysis.inference import DEFAULT_DUPLICATES, DuplicatePolicy, apply_duplicate_policy
from hitkit.errors import ConfigError, InputError
from hitkit.imports.fields import Where, number
from hitkit.imports.mturk_mapping import MTurkMapping, load_mapping
from hitkit.protocols import PROTOCOLS
from hitkit.tables.schema import ASSIGNMENT_COLUMNS, KEY_COLUMNS
from hitkit.worker.bounds import json_refusal

REQUIRED_COLUMNS = ("HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "WorkTimeInSeconds")
PSEUDONYM = re.compile(r"w[0-9a-f]{12}")  # fullmatch: `$` passes a final newline
MAX_ANSWER_DEPTH = 32
"""Deepest nesting a flattened JSON answer column may have; deeper is refused before parsing
(Python's parser recurses per level: 30,000 levels raised RecursionError, a traceback)."""


def pseudonym(worker_id: str) -> str:
    """``w`` + the first 12 hex digits of the id's SHA-256; an id already in that form is kept."""
    worker_id = worker_id.strip()
    if PSEUDONYM.fullmatch(worker_id):
        return worker_id
    return "w" + hashlib.sha256(worker_id.encode("utf-8")).hexdigest()[:12]


# Reading the archive -------------------------------------------------------------------------
def flatten_answers(value: Any, prefix: str = "Answer") -> dict[str, str]:
    """A JSON answer blob as ``{prefix.key: text}``: one-object lists unwrapped, nesting dotted."""
    out: dict[str, str] = {}
    if isinstance(value, list):
        if len(value) == 1:
            return flatten_answers(value[0], prefix)
        for n, item in enumerate(value):
            out.update(flatten_answers(item, f"{prefix}.{n}"))
    elif isinstance(value, dict):
        for key, item in value.items():
            out.update(flatten_answers(item, f"{prefix}.{key}"))
    elif value is not None:
        out[prefix] = value if isinstance(value, str) else json.dumps(value)
    return out


def read_batch(path: str | Path, flatten: list[str]) -> tuple[pd.DataFrame, list[dict[str, str]]]:
    """The batch file and, per row, its fields (``Input.*``, ``Answer.*``, JSON answers flattened)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "not found; give the batch-results CSV downloaded from MTurk's requester site")
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise InputError(path, f"is not a readable CSV ({exc}); give MTurk's batch-results file") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise InputError(path, f"missing column(s) {missing}; an MTurk batch-results file has {list(REQUIRED_COLUMNS)}")
    rows = []
    for i, record in enumerate(table.to_dict("records")):
        fields = dict(record)
        for column in flatten:
            text = record.get(column, "")
            if not text.strip():
                continue
            deep = json_refusal(text, MAX_ANSWER_DEPTH)
            if deep:
                raise InputError(
                    path,
                    f"column {column}: {deep.replace('the JSON sent', 'the JSON')} "
                    f"(MTurk's own answers nest 3 levels); this row was not made by MTurk's "
                    f"form — remove it or the column from the mapping's 'flatten'",
                    line=i + 2,
                )
            try:
                blob = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(
                    path,
                    f"column {column} is not JSON ({exc.msg}); remove it from the mapping's "
                    f"'flatten' if it holds plain text",
                    line=i + 2,
                ) from None
            prefix = "Answer" if column.startswith("Answer.") else column
            fields.update(flatten_answers(blob, prefix))
        rows.append(fields)
    return table, rows


# From fields to rows -------------------------------------------------------------------------
def load_function(spec: str, base_dir: Path) -> Callable[[dict[str, str]], list[dict[str, Any]]]:
    """The mapping's ``module:function`` (or ``path/file.py:function``, relative to the mapping file)."""
    module_name, _, name = spec.rpartition(":")
    try:
        if module_name.endswith(".py"):
            path = (base_dir / module_name).resolve()
            if not path.is_file():
                raise ConfigError(f"function: {path} does not exist; give a path relative to the mapping file")
            loader_spec = importlib.util.spec_from_file_location(f"hitkit_mapping_{path.stem}", path)
            if loader_spec is None or loader_spec.loader is None:
                raise ConfigError(f"function: {path} cannot be loaded as a Python module")
            module = importlib.util.module_from_spec(loader_spec)
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"function: cannot import {module_name!r} ({exc}); install it, or give a .py file "
            f"path relative to the mapping file"
        ) from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ConfigError(f"function: {module_name!r} has no function {name!r}")
    return function


def function_rows(
    function: Callable, spec: str, columns: tuple[str, ...], fields: dict[str, str], where: Where
) -> list[dict[str, Any]]:
    """Call the mapping's function on one row; check that it returned the table's columns."""
    try:
        produced = function(dict(fields))
    except Exception as exc:  # noqa: BLE001 - the coordinator's code: say where it failed
        raise InputError(
            where.path,
            f"the mapping's function {spec} failed on this row: {type(exc).__name__}: {exc}",
            line=where.line,
        ) from exc
    if produced is None:
        return []
    rows = list(produced)
    wanted = [c for c in columns if c not in KEY_COLUMNS]
    for row in rows:
        if not isinstance(row, Mapping):
            raise InputError(
                where.path,
                f"the mapping's function {spec} returned {type(row).__name__}, not a dict per table row",
                line=where.line,
            )
        missing = [c for c in wanted if c not in row]
        if missing:
            raise InputError(
                where.path,
                f"the mapping's function {spec} returned a row without {missing}; each row needs {wanted}",
                line=where.line,
            )
    return [{c: row[c] for c in wanted} for row in rows]


# The import ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImportResult:
    """What an import wrote: the tables, and where."""

    assignments: pd.DataFrame
    table_name: str
    table: pd.DataFrame
    files: list[Path]
    duplicates: dict = field(default_factory=dict)
    """What the duplicate policy did to repeated AssignmentIds: ``{"policy", "keys", "rows_removed"}``."""


def unique_assignments(rows: list[dict[str, str]], batch: Path, policy: DuplicatePolicy) -> tuple[list[int], dict]:
    """Positions of the batch rows left after the duplicate ``policy`` for repeated AssignmentIds
    (two batch files pasted together, a re-downloaded batch), and its report; a warning counts
    them. ``error`` refuses the file, naming the line of the first repeat."""
    ids = pd.DataFrame({"AssignmentId": [r["AssignmentId"].strip() for r in rows]})
    kept, report = apply_duplicate_policy(
        ids, ["AssignmentId"], policy, what="batch row (same AssignmentId)", source=batch
    )
    return list(kept.index), report


def import_mturk(
    batch: str | Path,
    mapping: MTurkMapping | str | Path,
    study: str,
    out_dir: str | Path | None = None,
    *,
    duplicates: DuplicatePolicy = DEFAULT_DUPLICATES,
) -> ImportResult:
    """Turn ``batch`` (MTurk batch results) into ``assignments`` and the task's table; write them to
    ``out_dir`` as CSV with a ``study.json`` when it is given. A repeated AssignmentId is resolved
    by ``duplicates`` (:func:`unique_assignments`: keep the first row by default; last, drop or
    error), not refused."""
    base_dir = Path(mapping).resolve().parent if not isinstance(mapping, MTurkMapping) else Path.cwd()
    m = mapping if isinstance(mapping, MTurkMapping) else load_mapping(mapping)
    batch = Path(batch)
    table, rows = read_batch(batch, m.flatten)
    kept, duplicate_report = unique_assignments(rows, batch, duplicates)
    columns = PROTOCOLS[m.task].columns
    function = load_function(m.function, base_dir) if m.function else None
    _check_fields_exist(m, rows, batch)

    assignments, task_rows = [], []
    for n in kept:
        fields = rows[n]
        where = Where(batch, n + 2)
        status = fields["AssignmentStatus"].strip()
        if status not in m.statuses:
            raise InputError(
                batch,
                f"AssignmentStatus {status!r} is not in the mapping's 'statuses' "
                f"({', '.join(m.statuses)}); add it there",
                line=where.line,
            )
        ids = {
            "study": study,
            "hit_id": fields["HITId"].strip(),
            "assignment_id": fields["AssignmentId"].strip(),
            "worker_id": pseudonym(fields["WorkerId"]),
        }
        if not all(ids.values()):
            raise InputError(batch, "HITId, AssignmentId and WorkerId must not be empty", line=where.line)
        work = fields["WorkTimeInSeconds"].strip()
        seconds = number(work, "WorkTimeInSeconds", where) if work else None
        assignments.append(
            {
                **ids,
                "status": m.statuses[status],
                "work_time_s": int(seconds) if seconds is not None and seconds.is_integer() else seconds,
            }
        )
        if function is not None and m.function is not None:
            produced = function_rows(function, m.function, columns, fields, where)
        else:
            produced = PROTOCOLS[m.task].module("mturk").rows(m.section, fields, where)
        task_rows += [{**ids, **row} for row in produced]

    assignment_table = pd.DataFrame(assignments, columns=list(ASSIGNMENT_COLUMNS))
    name = PROTOCOLS[m.task].table
    task_table = pd.DataFrame(task_rows, columns=list(columns))
    files: list[Path] = []
    if out_dir is not None:
        files = write_import(
            Path(out_dir), study, m.task, batch, assignment_table, name, task_table, duplicates=duplicate_report
        )
    return ImportResult(assignment_table, name, task_table, files, duplicate_report)


def _check_fields_exist(m: MTurkMapping, rows: list[dict[str, str]], batch: Path) -> None:
    """A template that matches no field in any row is a mapping mistake, not an empty submission."""
    section = m.section
    if section is None or not rows:
        return
    templates = section.templates()
    present = set().union(*(r.keys() for r in rows))
    for template in templates:
        if template.replace("{i}", "0") not in present:
            known = sorted(k for k in present if k.startswith(("Answer.", "Input.")))
            raise ConfigError(
                f"the mapping reads {template!r}, but no row of {batch} has "
                f"{template.replace('{i}', '0')!r}; fields there: {', '.join(known[:40])}"
                f"{' …' if len(known) > 40 else ''}"
            )


def write_import(
    out: Path,
    study: str,
    task: str,
    batch: Path,
    assignments: pd.DataFrame,
    name: str,
    table: pd.DataFrame,
    *,
    duplicates: dict | None = None,
) -> list[Path]:
    """Write ``assignments.csv``, the task's table and ``study.json`` (with the import's duplicate
    report, ``import_duplicates``) into ``out``."""
    from hitkit.tables import atomic
    from hitkit.tables.atomic import replacing
    from hitkit.tables.export import EXPORT_VERSION, neutralise_formulas
    from hitkit.tables.versions import software_versions

    out.mkdir(parents=True, exist_ok=True)
    files = []
    for table_name, frame in (("assignments", assignments), (name, table)):
        path = out / f"{table_name}.csv"
        # Every text cell made inert for spreadsheets, as the exports do: an archive is hostile input
        # (an AssignmentId or HITId of '=HYPERLINK(…)' is the requester's file, not MTurk's word).
        with replacing(path) as temporary:
            neutralise_formulas(frame).to_csv(temporary, index=False)
        files.append(path)
    info = {
        "study": study,
        "task": task,
        "provider": "mturk",
        "status": "completed",
        "imported_from": batch.name,
        "import_duplicates": duplicates,
        "export_version": EXPORT_VERSION,
        "software": software_versions(),
    }
    path = out / "study.json"
    atomic.write_text(path, json.dumps(info, indent=2) + "\n")
    files.append(path)
    return files
