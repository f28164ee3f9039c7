"""Tidy exports (METHODS.md §4): ``assignments.csv``, the task's tables and ``conversations.jsonl``;
``authenticity.csv`` and ``authenticity_workers.csv`` when the pages sent authenticity signals.

Every table is written as CSV, as Parquet, or both (``formats``); ``payments`` is the money ledger
and ``study.json`` says which study, task, budget and export version the folder holds, so a report
or :func:`hitkit.load` can work from the folder alone. Column names are a contract: :mod:`hitkit.tables.schema`
and each protocol's vocabulary list them per table, ``docs/COLUMNS.md`` documents each, and ``EXPORT_VERSION`` changes whenever
one does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from hitkit.db.models import Assignment, Conversation, Event, Hit, Payment, Study, System, Worker
from hitkit.errors import HitkitError, WriteError
from hitkit.progress import progress
from hitkit.protocols.kit.task import answer_ids
from hitkit.running import stopping
from hitkit.study.stored import StudyContext
from hitkit.tables import atomic
from hitkit.tables import authenticity as authenticity_table
from hitkit.tables.atomic import replacing
from hitkit.tables.cells import neutralise_formula
from hitkit.tables.schema import (
    ASSIGNMENT_COLUMNS,
    EXCLUSION_COLUMNS,
    FEEDBACK_COLUMNS,
    PAYMENT_COLUMNS,
    exported_status,
)

EXPORT_VERSION = 3  # 2: feedback.csv; 3: payments.csv, study.json, Parquet beside every CSV
FORMATS = ("csv", "parquet")
"""The table formats :func:`export_study` can write; ``"both"`` means all of them."""


def assignments_table(session: Session, study: Study) -> pd.DataFrame:
    """Every assignment a worker started, with its status and working time in seconds."""
    rows = session.execute(
        select(Assignment, Hit, Worker)
        .join(Hit, Assignment.hit_id == Hit.id)
        .join(Worker, Assignment.worker_id == Worker.id)
        .where(Hit.study_id == study.id, Assignment.status != "screened_out")  # never a worker's work
        .order_by(Hit.index, Assignment.id)
    ).all()
    data = [
        {
            **answer_ids(study, hit, a, w),
            "status": exported_status(a),
            "work_time_s": round(a.work_time_s, 3) if a.work_time_s is not None else None,
        }
        for a, hit, w in rows
    ]
    return pd.DataFrame(data, columns=list(ASSIGNMENT_COLUMNS))


def feedback_table(session: Session, study: Study) -> pd.DataFrame:
    """The workers' comments on whole HITs, one row per assignment that left one."""
    rows = session.execute(
        select(Assignment, Hit, Worker)
        .join(Hit, Assignment.hit_id == Hit.id)
        .join(Worker, Assignment.worker_id == Worker.id)
        .where(Hit.study_id == study.id, Assignment.feedback.is_not(None), Assignment.confirmed_at.is_not(None))
        .order_by(Hit.index, Assignment.id)
    ).all()
    data = [
        {
            **answer_ids(study, hit, a, w),
            "feedback": a.feedback,
        }
        for a, hit, w in rows
    ]
    return pd.DataFrame(data, columns=list(FEEDBACK_COLUMNS))


def payments_table(session: Session, study: Study) -> pd.DataFrame:
    """The payment ledger: one row per reward, bonus or fee, amount as text (exact decimal)."""
    rows = session.execute(
        select(Payment, Assignment, Worker)
        .outerjoin(Assignment, Payment.assignment_id == Assignment.id)
        .outerjoin(Worker, Payment.worker_id == Worker.id)
        .where(Payment.study_id == study.id)
        .order_by(Payment.id)
    ).all()
    data = [
        {
            "study": study.name,
            "payment_id": str(p.id),
            "assignment_id": (a.provider_assignment_id or str(a.id)) if a is not None else "",
            "worker_id": w.external_id if w is not None else "",
            "kind": p.kind,
            "amount": str(p.amount),
            "currency": p.currency,
            "status": p.status,
            "created_at": p.created_at.isoformat(),
        }
        for p, a, w in rows
    ]
    return pd.DataFrame(data, columns=list(PAYMENT_COLUMNS))


def exclusions_table(session: Session, study: Study) -> pd.DataFrame:
    """Work the coordinator rejected with a reason of their own (the dashboard's reject, an
    ``assignment_rejected`` event carrying a reason), not held for failing QC first: EXCLUSION_COLUMNS, one
    row per assignment still rejected. A QC rejection (the study's policy, or ``hitkit held --reject`` of work
    held for QC) is an outcome the analysis keeps."""
    from hitkit.money.qc_policy import HELD_EVENT

    # Work held because its worker failed QC and then rejected is a QC outcome, whoever pressed the button.
    held = {
        (e.data or {}).get("assignment")
        for e in session.scalars(select(Event).where(Event.study_id == study.id, Event.kind == HELD_EVENT))
    }
    rows = []
    for event in session.scalars(
        select(Event).where(Event.study_id == study.id, Event.kind == "assignment_rejected").order_by(Event.id)
    ):
        reason = str((event.data or {}).get("reason") or "").strip()
        a = session.get(Assignment, (event.data or {}).get("assignment"))
        if reason and a is not None and a.status == "rejected" and a.id not in held:
            rows.append(
                {
                    "study": study.name,
                    "assignment_id": a.provider_assignment_id or str(a.id),
                    "worker_id": a.worker.external_id,
                    "reason": f"rejected by the coordinator: {reason}",
                }
            )
    return pd.DataFrame(rows, columns=list(EXCLUSION_COLUMNS)).drop_duplicates("assignment_id")


def study_info(study: Study) -> dict:
    """What ``study.json`` holds: the study's identity, budget, seed and the export's version."""
    from hitkit.tables.versions import software_versions

    return {
        "study": study.name,
        "task": study.task_type,
        "provider": study.provider,
        "status": study.status,
        "budget": str(study.budget),
        "currency": study.currency,
        "seed": study.seed,
        "export_version": EXPORT_VERSION,
        "software": software_versions(),
    }


def resolve_formats(fmt: str | Iterable[str]) -> tuple[str, ...]:
    """``"csv"``, ``"parquet"``, ``"both"`` or a list of them, as a tuple of FORMATS."""
    names = FORMATS if fmt == "both" else (fmt,) if isinstance(fmt, str) else tuple(fmt)
    bad = [f for f in names if f not in FORMATS]
    if bad or not names:
        raise HitkitError(f"export format {bad[0] if bad else fmt!r} is unknown; use csv, parquet or both")
    return tuple(names)


def neutralise_formulas(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every text cell passed through :func:`hitkit.tables.cells.neutralise_formula`;
    numeric columns are untouched and keep their type."""
    fixed = table.copy()
    for column in fixed.columns:
        if fixed[column].dtype == object or pd.api.types.is_string_dtype(fixed[column].dtype):
            fixed[column] = fixed[column].map(neutralise_formula)
    return fixed


def write_table(table: pd.DataFrame, out: Path, name: str, formats: Iterable[str]) -> list[Path]:
    """Write ``table`` as ``NAME.csv`` and/or ``NAME.parquet`` in ``out``; return the paths.

    Both formats carry the same, formula-neutralised text (a worker's ``=HYPERLINK(…)`` arrives as
    ``'=HYPERLINK(…)``), so whichever a coordinator opens in a spreadsheet runs nothing."""
    table = neutralise_formulas(table)
    written = []
    for fmt in formats:
        path = out / f"{name}.{fmt}"
        with replacing(path) as temporary:  # whole or not at all: a failed export leaves the previous file
            if fmt == "csv":
                table.to_csv(temporary, index=False)
            else:
                # Mixed object columns (text with None) are stored as text; Parquet keeps the other types.
                fixed = table.copy()
                for column in fixed.columns:
                    if fixed[column].dtype == object:
                        fixed[column] = fixed[column].map(lambda v: None if v is None else str(v))
                fixed.to_parquet(temporary, index=False, engine="pyarrow")
        written.append(path)
    return written


def write_conversations(session: Session, study: Study, path: Path) -> int:
    """One JSON line per conversation with its turns, speakers, systems and times."""
    systems: dict[int | None, str] = {
        s.id: s.name for s in session.scalars(select(System).where(System.study_id == study.id))
    }
    convs = session.scalars(
        select(Conversation)
        .where(Conversation.study_id == study.id)
        .options(selectinload(Conversation.turns))
        .order_by(Conversation.id)
    ).all()
    with replacing(path) as temporary, temporary.open("w", encoding="utf-8") as fh:
        for c in convs:
            fh.write(
                json.dumps(
                    {
                        "study": study.name,
                        "conversation_id": c.key,
                        "kind": c.kind,
                        "meta": c.meta,
                        "turns": [
                            {
                                "index": t.index,
                                "speaker": t.speaker,
                                "system": systems.get(t.system_id),
                                "text": t.text,
                                "time": t.created_at.isoformat(),
                                **(
                                    {"first_token_ms": t.first_token_ms, "reply_ms": t.reply_ms}
                                    if t.reply_ms is not None
                                    else {}
                                ),
                            }
                            for t in c.turns
                        ],
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    return len(convs)


def export_study(
    session: Session, ctx: StudyContext, out_dir: str | Path, formats: str | Iterable[str] = "both"
) -> list[Path]:
    """Write every tidy table of the study into ``out_dir`` as CSV and/or Parquet (``formats``:
    csv, parquet or both), plus ``conversations.jsonl`` and ``study.json``; return the files written."""
    formats = resolve_formats(formats)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(out, exc) from exc
    study = session.get_one(Study, ctx.study_id)
    steps = {
        "assignments": lambda: assignments_table(session, study),
        ctx.task.name: lambda: ctx.task.export(session, study),
        "feedback": lambda: feedback_table(session, study),
        "payments": lambda: payments_table(session, study),
    }
    if ctx.config.judge is not None:
        from hitkit.judges.judging import judge_table

        steps["judge"] = lambda: judge_table(session, study, ctx.config)
        if ctx.config.judge.also:  # several judges: every one's labels, as `analyze --judge-labels` reads them
            from hitkit.judges.design import probabilities
            from hitkit.judges.panel import labels_table

            steps["judge_labels"] = lambda: labels_table(
                session, study, ctx.config, probabilities(session, study, ctx.config)
            )
    written = []
    for name, build in progress(steps.items(), "export", total=len(steps), unit="table"):
        tables = build()
        for table_name, table in tables.items() if isinstance(tables, dict) else [(name, tables)]:
            written += write_table(table, out, table_name, formats)
    # Only a study whose coordinator excluded work for a reason other than QC has this table.
    exclusions = exclusions_table(session, study)
    if len(exclusions):
        written += write_table(exclusions, out, "exclusions", formats)
    # Only a study whose pages sent authenticity signals has these tables (older studies have none).
    answers = authenticity_table.answers_table(session, ctx)
    if len(answers):
        written += write_table(answers, out, "authenticity", formats)
        written += write_table(authenticity_table.workers_table(answers), out, "authenticity_workers", formats)
    path = out / "conversations.jsonl"
    write_conversations(session, study, path)
    written.append(path)
    written += ctx.task.export_files(session, study, out)
    path = out / "study.json"
    info = study_info(study)
    rule = stopping.summary(session, ctx)
    if rule is not None:
        info["stopping"] = rule
    atomic.write_text(path, json.dumps(info, indent=2) + "\n")
    written.append(path)
    return written
