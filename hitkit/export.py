"""Tidy exports (METHODS.md §4): ``assignments.csv``, the task's tables and ``conversations.jsonl``.

Column names are a contract: :data:`COLUMNS` lists them per table, and ``EXPORT_VERSION`` changes
whenever one does.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from hitkit.db.models import Assignment, Conversation, Hit, Study, System, Worker
from hitkit.study import StudyContext

EXPORT_VERSION = 2  # 2: feedback.csv
COLUMNS = {
    "assignments": ["study", "hit_id", "assignment_id", "worker_id", "status", "work_time_s"],
    "votes": ["study", "hit_id", "assignment_id", "worker_id", "item_id", "system_a", "system_b", "vote"],
    "feedback": ["study", "hit_id", "assignment_id", "worker_id", "feedback"],
}


def assignments_table(session: Session, study: Study) -> pd.DataFrame:
    """Every assignment a worker started, with its status and working time in seconds."""
    rows = session.execute(
        select(Assignment, Hit, Worker).join(Hit, Assignment.hit_id == Hit.id)
        .join(Worker, Assignment.worker_id == Worker.id)
        .where(Hit.study_id == study.id).order_by(Hit.index, Assignment.id)
    ).all()
    data = [{"study": study.name, "hit_id": hit.provider_hit_id or str(hit.id),
             "assignment_id": a.provider_assignment_id or str(a.id), "worker_id": w.external_id,
             "status": a.status, "work_time_s": round(a.work_time_s, 3) if a.work_time_s is not None else None}
            for a, hit, w in rows]
    return pd.DataFrame(data, columns=COLUMNS["assignments"])


def feedback_table(session: Session, study: Study) -> pd.DataFrame:
    """The workers' comments on whole HITs, one row per assignment that left one."""
    rows = session.execute(
        select(Assignment, Hit, Worker).join(Hit, Assignment.hit_id == Hit.id)
        .join(Worker, Assignment.worker_id == Worker.id)
        .where(Hit.study_id == study.id, Assignment.feedback.is_not(None)).order_by(Hit.index, Assignment.id)
    ).all()
    data = [{"study": study.name, "hit_id": hit.provider_hit_id or str(hit.id),
             "assignment_id": a.provider_assignment_id or str(a.id), "worker_id": w.external_id,
             "feedback": a.feedback} for a, hit, w in rows]
    return pd.DataFrame(data, columns=COLUMNS["feedback"])


def write_conversations(session: Session, study: Study, path: Path) -> int:
    """One JSON line per conversation with its turns, speakers, systems and times."""
    systems = {s.id: s.name for s in session.scalars(select(System).where(System.study_id == study.id))}
    convs = session.scalars(select(Conversation).where(Conversation.study_id == study.id)
                            .options(selectinload(Conversation.turns)).order_by(Conversation.id)).all()
    with path.open("w", encoding="utf-8") as fh:
        for c in convs:
            fh.write(json.dumps({
                "study": study.name, "conversation_id": c.key, "kind": c.kind, "meta": c.meta,
                "turns": [{"index": t.index, "speaker": t.speaker, "system": systems.get(t.system_id),
                           "text": t.text, "time": t.created_at.isoformat()} for t in c.turns],
            }, ensure_ascii=False) + "\n")
    return len(convs)


def export_study(session: Session, ctx: StudyContext, out_dir: str | Path) -> list[Path]:
    """Write every tidy table of the study into ``out_dir``; return the files written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    study = session.get(Study, ctx.study_id)
    tables = {"assignments": assignments_table(session, study), **ctx.task.export(session, study),
              "feedback": feedback_table(session, study)}
    written = []
    for name, table in tables.items():
        path = out / f"{name}.csv"
        table.to_csv(path, index=False)
        written.append(path)
    path = out / "conversations.jsonl"
    write_conversations(session, study, path)
    written.append(path)
    return written
