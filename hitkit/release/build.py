"""A release folder from a study's export and analysis: pseudonymous, scrubbed, one configuration per table.

The folder (:func:`write_release`)::

    README.md                 the dataset card (:mod:`hitkit.release.card`), whose ``configs`` name the folders below
    release.json              what was removed, replaced and excluded, and why
    study.json                the study's task, status and seed (no budget, no platform ids)
    conversations.jsonl       the conversations, as hitkit exports them (what ``hitkit analyze`` reads)
    <table>/<table>.parquet   one configuration per table: the task's answers (votes, ratings, annotations,
                              battles …), assignments, feedback, conversations (one row per turn), workers (QC
                              outcomes), systems (the analysis's ranking)

``datasets.load_dataset(DIR, "votes")`` reads a configuration as the data hub does (from the card), and
``datasets.load_dataset("parquet", data_dir=f"{DIR}/votes")`` reads one folder; :func:`hitkit.load` and
``hitkit analyze TASK DIR`` read the folder as they read an export.

What never enters the folder: platform ids of workers, assignments and HITs (keyed pseudonyms instead,
:mod:`hitkit.release.pseudonyms`), the payments ledger, authenticity signals, the LLM judge's table, work the
coordinator excluded and work never handed in (returned, expired), workers the coordinator names
(``--exclude-worker``: a withdrawn consent), personal data in free text (typed placeholders,
:mod:`hitkit.release.scrub`), fields the coordinator drops, and real dates unless the coordinator allows them
(``times``: ``shift`` moves every time so the study starts on 2000-01-01, keeping durations and order exact;
``day`` keeps dates, rounded down to the day; ``drop`` removes times).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hitkit.analysis.tables import table_exists
from hitkit.errors import HitkitError
from hitkit.protocols import PROTOCOLS
from hitkit.release import scrub
from hitkit.release.pseudonyms import pseudonym_map
from hitkit.tables import atomic
from hitkit.tables.loading import read_any
from hitkit.tables.schema import HANDED_IN_STATUSES

ID_COLUMNS = {"worker_id": "worker", "worker": "worker", "assignment_id": "assignment", "hit_id": "hit"}
"""Columns that hold a platform's ids, and the kind of pseudonym each gets."""
FREE_TEXT_COLUMNS = frozenset({"feedback", "reason", "text", "topic", "prompt", "comment", "comments"})
"""Columns whose values workers typed: scrubbed of personal data."""
SCRUBBED_KINDS = ("human_bot",)
"""Conversations a worker took part in (live chat, the arena): every turn scrubbed, a bot's too (bots repeat
what they are told). Material the study supplied (bot–bot, human–human, prompts) stays as written."""
DROPPED_TABLES = {
    "payments": "what each worker was paid (the card gives the pay per HIT and the totals)",
    "authenticity": "per-answer typing and paste signals that can identify a person",
    "authenticity_workers": "per-worker typing and paste signals that can identify a person",
    "exclusions": "work the coordinator excluded (left out of every table; counted in the card)",
    "judge": "the LLM judge's labels (not the crowd's data)",
}
"""Export tables a release never carries, with the reason ``release.json`` gives."""
QC_TABLES = ("workers", "qc", "annotators")
"""The analysis table of per-worker QC outcomes, by protocol (the first one present)."""
SYSTEM_TABLES = ("systems", "ranking", "leaderboard")
"""The analysis table that ranks the systems (the first one present)."""
TIME_MODES = ("shift", "day", "drop")
SHIFT_ORIGIN = dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc)
"""Where ``times: shift`` puts the study's first recorded moment."""


@dataclass(frozen=True)
class ReleaseOptions:
    """What the coordinator decided: the pseudonyms' key and salt, times, fields dropped, workers left out."""

    key: bytes
    salt: str
    stable_ids: bool = False
    times: str = "shift"
    drop_fields: tuple[str, ...] = ()
    exclude_workers: frozenset[str] = frozenset()
    licence: str = "cc-by-4.0"
    language: str = "en"
    partial: str | None = None
    """Why a study still running is released (``--partial``), said in the card and release.json."""


@dataclass
class Release:
    """The release in memory: its tables, its conversations and what was done to them."""

    task: str
    tables: dict[str, pd.DataFrame]
    conversations: list[dict]
    info: dict
    summary: dict
    report: dict[str, Any] = field(default_factory=dict)


def read_study(export_dir: Path, analysis_dir: Path) -> Release:
    """The export's tables, its conversations, study.json and the analysis's summary, QC and ranking tables."""
    info = json.loads((export_dir / "study.json").read_text(encoding="utf-8"))
    task = info["task"]
    proto = PROTOCOLS[task]
    names = [proto.table, "assignments", "feedback", "exclusions"]
    tables = {n: read_any(export_dir, n) for n in names if table_exists(export_dir / f"{n}.csv")}
    for names_, config in ((QC_TABLES, "workers"), (SYSTEM_TABLES, "systems")):
        found = next((n for n in names_ if table_exists(analysis_dir / f"{n}.csv")), None)
        if found is not None:
            tables[config] = read_any(analysis_dir, found)
    conversations = []
    path = export_dir / "conversations.jsonl"
    if path.is_file():
        conversations = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    summary_path = analysis_dir / "summary.json"
    summary = json.loads(summary_path.read_text(encoding="utf-8")) if summary_path.is_file() else {}
    return Release(task, tables, conversations, info, summary)


def leave_out(release: Release, excluded_assignments: Iterable[str], exclude_workers: frozenset[str]) -> dict:
    """Drop work never handed in, work the coordinator excluded and workers who withdrew; return the counts."""
    excluded = {str(a) for a in excluded_assignments}
    assignments = release.tables.get("assignments", pd.DataFrame(columns=["assignment_id", "worker_id", "status"]))
    unknown = sorted(exclude_workers - set(assignments["worker_id"].astype(str)))
    if unknown:
        raise HitkitError(f"--exclude-worker {unknown[0]}: no such worker in this study")
    not_handed_in = set(assignments.loc[~assignments["status"].isin(HANDED_IN_STATUSES), "assignment_id"].astype(str))
    withdrawn = set(assignments.loc[assignments["worker_id"].astype(str).isin(exclude_workers), "assignment_id"])
    gone = excluded | not_handed_in | {str(a) for a in withdrawn}
    workers_before = set(assignments["worker_id"].astype(str))
    for name, table in list(release.tables.items()):
        if "assignment_id" in table.columns:
            table = table[~table["assignment_id"].astype(str).isin(gone)]
        if "worker_id" in table.columns:
            table = table[~table["worker_id"].astype(str).isin(exclude_workers)]
        release.tables[name] = table  # the export's row numbers stay: they are the keys of reviewed spans
    release.tables.pop("exclusions", None)
    linked = linked_assignment_numbers(release.tables)
    release.conversations = [
        c
        for c in release.conversations
        if c.get("kind") not in SCRUBBED_KINDS or (c.get("meta") or {}).get("assignment_id") in linked
    ]
    workers_after = set(release.tables.get("assignments", assignments)["worker_id"].astype(str))
    return {
        "assignments_excluded_by_coordinator": len(excluded),
        "assignments_not_handed_in": len(not_handed_in - excluded),
        "workers_withdrawn": len(exclude_workers),
        "workers_left_out": len(workers_before - workers_after),
    }


_NUMBER = re.compile(r"(?:^|:)a(\d+):u")


def linked_assignment_numbers(tables: dict[str, pd.DataFrame]) -> set[int]:
    """The database's assignment numbers of the released answers: a worker's conversation is released only
    with the answers it belongs to (live chat's ``conversation_id`` and the arena's ``battle_id`` name it)."""
    numbers: set[int] = set()
    for table in tables.values():
        for column in ("conversation_id", "battle_id"):
            if column in table.columns:
                for value in table[column].dropna().astype(str):
                    m = _NUMBER.search(value)
                    if m:
                        numbers.add(int(m.group(1)))
    return numbers


def drop_fields(release: Release, fields: Iterable[str]) -> list[str]:
    """Remove whole fields named ``table.column`` (``conversations.text`` blanks every turn's text)."""
    dropped = []
    for spec in fields:
        table, _, column = spec.partition(".")
        if table == "conversations" and column == "text":
            for c in release.conversations:
                for t in c.get("turns", []):
                    t["text"] = ""
        elif table in release.tables and column in release.tables[table].columns:
            release.tables[table] = release.tables[table].drop(columns=[column])
        else:
            present = ", ".join(f"{n}.{c}" for n, t in release.tables.items() for c in t.columns)
            raise HitkitError(f"--drop-field {spec}: no such field; fields: {present}, conversations.text")
        dropped.append(spec)
    return dropped


def free_texts(release: Release) -> list[tuple[str, str, str, str]]:
    """Every free-text value workers typed (or a bot said to them): (source, key, field, text)."""
    texts = []
    for name, table in release.tables.items():
        for column in sorted(FREE_TEXT_COLUMNS & set(table.columns)):
            for i, value in table[column].items():
                if isinstance(value, str) and value.strip():
                    texts.append((name, str(i), column, value))
    for c in release.conversations:
        if c.get("kind") not in SCRUBBED_KINDS:
            continue
        for t in c.get("turns", []):
            if isinstance(t.get("text"), str) and t["text"].strip():
                texts.append(("conversations", f"{c['conversation_id']}#{t['index']}", "text", t["text"]))
        for n, change in enumerate((c.get("meta") or {}).get("topic_changes") or []):
            if isinstance(change, dict) and isinstance(change.get("topic"), str) and change["topic"].strip():
                texts.append(("conversations", f"{c['conversation_id']}#topic{n}", "topic", change["topic"]))
    return texts


def apply_spans(release: Release, spans: list[scrub.Span]) -> dict[str, int]:
    """Replace every span marked ``replace`` by its placeholder; return how many of each kind."""
    by_place: dict[tuple[str, str, str], list[scrub.Span]] = {}
    for s in spans:
        by_place.setdefault((s.source, s.key, s.field), []).append(s)
    for (source, key, column), group in by_place.items():
        if source == "conversations":
            conversation_id, _, part = key.rpartition("#")
            conv = next(c for c in release.conversations if c["conversation_id"] == conversation_id)
            if part.startswith("topic"):
                change = conv["meta"]["topic_changes"][int(part[len("topic") :])]
                change["topic"] = scrub.replace_spans(change["topic"], group)
            else:
                turn = next(t for t in conv["turns"] if str(t["index"]) == part)
                turn["text"] = scrub.replace_spans(turn["text"], group)
        else:
            table = release.tables[source]
            row = int(key)
            table.at[row, column] = scrub.replace_spans(str(table.at[row, column]), group)
    counts: dict[str, int] = {}
    for s in spans:
        if s.action == "replace":
            label = scrub.PLACEHOLDERS[s.entity].strip("[]")
            counts[label] = counts.get(label, 0) + 1
    return dict(sorted(counts.items()))


def pseudonymise(release: Release, key: bytes, salt: str) -> dict[str, int]:
    """Every id column through its keyed pseudonym map (the same map in every table); return the counts."""
    values: dict[str, set[str]] = {kind: set() for kind in set(ID_COLUMNS.values())}
    for table in release.tables.values():
        for column, kind in ID_COLUMNS.items():
            if column in table.columns:
                values[kind] |= {str(v) for v in table[column].dropna()}
    maps = {kind: pseudonym_map(ids, kind, key, salt) for kind, ids in values.items()}
    for table in release.tables.values():
        for column, kind in ID_COLUMNS.items():
            if column in table.columns:
                table[column] = table[column].map(lambda v, m=maps[kind]: m.get(str(v), v) if pd.notna(v) else v)
    return {kind: len(m) for kind, m in sorted(maps.items())}


def move_times(release: Release, mode: str) -> None:
    """Every absolute time in the conversations as ``mode`` says (:data:`TIME_MODES`)."""
    if mode not in TIME_MODES:
        raise HitkitError(f"--times must be one of {', '.join(TIME_MODES)} (got {mode!r})")
    places = [
        holder
        for c in release.conversations
        for holder in [*c.get("turns", []), *((c.get("meta") or {}).get("topic_changes") or [])]
        if isinstance(holder, dict) and holder.get("time")
    ]
    if not places:
        return
    stamps = [dt.datetime.fromisoformat(str(h["time"])) for h in places]
    first = min(stamps)
    for holder, stamp in zip(places, stamps):
        if mode == "drop":
            holder["time"] = None
        elif mode == "day":
            holder["time"] = stamp.replace(hour=0, minute=0, second=0, microsecond=0).isoformat()
        else:
            holder["time"] = (SHIFT_ORIGIN + (stamp - first)).isoformat()


def turns_table(release: Release) -> pd.DataFrame:
    """The conversations as one row per turn (the ``conversations`` configuration)."""
    rows = [
        {
            "conversation_id": c.get("conversation_id"),
            "kind": c.get("kind"),
            "system": (c.get("meta") or {}).get("system"),
            "is_control": (c.get("meta") or {}).get("is_control"),
            "index": t.get("index"),
            "speaker": t.get("speaker"),
            "turn_system": t.get("system"),
            "text": t.get("text"),
            "time": t.get("time"),
        }
        for c in release.conversations
        for t in c.get("turns", [])
    ]
    columns = ["conversation_id", "kind", "system", "is_control", "index", "speaker", "turn_system", "text", "time"]
    return pd.DataFrame(rows, columns=columns)


def released_info(info: dict) -> dict:
    """study.json as released: what the analysis needs, nothing about money or platforms' accounts."""
    keep = ("study", "task", "provider", "status", "currency", "seed", "export_version", "software", "stopping")
    return {k: info[k] for k in keep if k in info}


def write_release(out: Path, release: Release, card_text: str, manifest: dict) -> list[Path]:
    """Write the folder (replacing one made before); return the files written."""
    if out.exists():
        if not (out / "release.json").is_file():
            raise HitkitError(f"{out} exists and is not a hitkit release; give --out a new or empty folder")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    written = []
    tables = dict(release.tables)
    tables["conversations"] = turns_table(release)
    for name, table in tables.items():
        folder = out / name
        folder.mkdir()
        path = folder / f"{name}.parquet"
        table.to_parquet(path, index=False)
        written.append(path)
    lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in release.conversations)
    for path, text in (
        (out / "conversations.jsonl", lines),
        (out / "study.json", json.dumps(released_info(release.info), indent=2) + "\n"),
        (out / "release.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"),
        (out / "README.md", card_text),
    ):
        atomic.write_text(path, text)
        written.append(path)
    return written
