"""A study's authenticity signals from the database, scored: one row per typed answer, one per worker.

The export writes both tables (``authenticity``, ``authenticity_workers``; docs/COLUMNS.md) when the
study has any signals, and the dashboard's Workers page shows each worker's score beside the QC
outcome. The scores (:mod:`hitkit.analysis.authenticity`) are for a person's review: nothing here rejects,
blocks or holds anyone.
"""

from __future__ import annotations

from collections import defaultdict

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.analysis.authenticity import AnswerScore, WorkerScore, score_answer, score_worker
from hitkit.db.models import Assignment, Conversation, Hit, HitUnit, Response, Study, Turn, Unit, Worker
from hitkit.protocols.kit.task import answer_ids
from hitkit.study.stored import StudyContext
from hitkit.tables.schema import AUTHENTICITY_COLUMNS, AUTHENTICITY_WORKER_COLUMNS, SIGNAL_COLUMNS, exported_status

KIND_ORDER = {"message": 0, "answer": 1, "comment": 2}
"""The kinds of typed text a row can be, in the order an assignment's rows are listed."""


def _assignments(session: Session, study_id: int):
    return session.execute(
        select(Assignment, Hit, Worker)
        .join(Hit, Assignment.hit_id == Hit.id)
        .join(Worker, Assignment.worker_id == Worker.id)
        .where(Hit.study_id == study_id)
    ).all()


def answers_table(session: Session, ctx: StudyContext) -> pd.DataFrame:
    """Every chat message, free-text answer and HIT comment that came with signals, with its score, in HIT
    and turn order (an assignment's messages, then its answers, then its comment)."""
    study = session.get_one(Study, ctx.study_id)
    assignments = {a.id: (a, hit, w) for a, hit, w in _assignments(session, ctx.study_id)}
    units = list(session.scalars(select(Unit).where(Unit.study_id == ctx.study_id)))
    keys = {u.id: u.public_key for u in units}
    # A unit's suggested prompt (the arena's drawn one), which a worker may send as it is: not "no input".
    offered = {u.id: str(u.payload.get("prompt") or "").strip() for u in units if (u.payload or {}).get("prompt")}
    rows = []

    def row(
        a_id: int, unit_id: int | None, kind: str, turn: int | None, question: str, text: str, signals: dict
    ) -> None:
        a, hit, w = assignments[a_id]
        suggested = kind == "message" and unit_id in offered and text.strip() == offered[unit_id]
        scored = score_answer(signals, len(text), len(text) if suggested else 0)
        rows.append(
            (
                (hit.index, a.id, KIND_ORDER[kind], turn or 0, question),
                {
                    **answer_ids(study, hit, a, w),
                    "status": exported_status(a),
                    "unit_id": keys.get(unit_id, "") if unit_id is not None else "",
                    "conversation_id": (ctx.task.chat_key(a.id, unit_id, ctx.task.chat_sides[0]) or "")
                    if unit_id is not None
                    else "",
                    "kind": kind,
                    "turn": turn,
                    "question": question,
                    "chars": len(text),
                    **{c: signals.get(c) for c in SIGNAL_COLUMNS},
                    "score": scored.score,
                    "reason": scored.reason,
                    "flagged": int(scored.flagged),
                },
            )
        )

    if ctx.task.has_chat:
        by_key = {}
        for a_id, unit_id in session.execute(
            select(Assignment.id, HitUnit.unit_id)
            .join(HitUnit, HitUnit.hit_id == Assignment.hit_id)
            .join(Hit, Hit.id == Assignment.hit_id)
            .where(Hit.study_id == ctx.study_id)
        ):
            # A unit with several conversations (the arena's sides) got each message on every side: counted once.
            by_key[ctx.task.chat_key(a_id, unit_id, ctx.task.chat_sides[0])] = (a_id, unit_id)
        for key, turn in session.execute(
            select(Conversation.key, Turn)
            .join(Turn, Turn.conversation_id == Conversation.id)
            .where(Conversation.study_id == ctx.study_id, Turn.speaker == "worker", Turn.signals.is_not(None))
        ):
            if key in by_key and turn.signals is not None:  # the query's condition, for the type checker
                a_id, unit_id = by_key[key]
                row(a_id, unit_id, "message", turn.index, "", turn.text, turn.signals)
    if ctx.task.free_text:
        for r in session.scalars(
            select(Response)
            .join(Unit, Response.unit_id == Unit.id)
            .where(
                Unit.study_id == ctx.study_id,
                Response.signals.is_not(None),
                Response.question.in_(sorted(ctx.task.free_text)),
            )
        ):
            if r.signals is not None:  # the query's condition, for the type checker
                row(r.assignment_id, r.unit_id, "answer", None, r.question, r.value, r.signals)
    for a, _hit, _w in assignments.values():  # the comment on the whole HIT, every protocol has one
        if a.feedback is not None and a.feedback_signals is not None:
            row(a.id, None, "comment", None, "feedback", a.feedback, a.feedback_signals)
    rows.sort(key=lambda pair: pair[0])
    table = pd.DataFrame([data for _, data in rows], columns=list(AUTHENTICITY_COLUMNS))
    for column in ("turn", *SIGNAL_COLUMNS):
        table[column] = table[column].astype("Int64")
    return table


def _answer_scores(answers: pd.DataFrame) -> dict[str, list[AnswerScore]]:
    by_worker: dict[str, list[AnswerScore]] = defaultdict(list)
    for worker, score, reason, flagged in answers[["worker_id", "score", "reason", "flagged"]].itertuples(index=False):
        by_worker[worker].append(AnswerScore(None if pd.isna(score) else float(score), reason, bool(flagged)))
    return by_worker


def workers_table(answers: pd.DataFrame) -> pd.DataFrame:
    """One row per worker of :func:`answers_table`: answers scored, how many and what share flagged, the flag."""
    rows = []
    for worker, scores in _answer_scores(answers).items():
        summary = score_worker(scores)
        rows.append(
            {
                "study": answers["study"].iloc[0],
                "worker_id": worker,
                "answers": summary.scored,
                "flagged": summary.flagged,
                "share_flagged": summary.share,
                "flag": int(summary.flag),
                "reasons": ";".join(f"{reason}:{n}" for reason, n in sorted(summary.reasons.items())),
            }
        )
    return pd.DataFrame(rows, columns=list(AUTHENTICITY_WORKER_COLUMNS))


def worker_scores(session: Session, ctx: StudyContext) -> dict[str, WorkerScore]:
    """Each worker's aggregate score (by external id), for the dashboard."""
    return {worker: score_worker(scores) for worker, scores in _answer_scores(answers_table(session, ctx)).items()}
