"""What the coordinator reads on the dashboard: conversations with every answer given on them, a
system's profile (its scores so far and automatic metrics of what it said), two systems side by side,
the studies and the event log."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.dashboard.glossary import detail_label, event_label
from hitkit.dashboard.workers import ActionError
from hitkit.db.models import (
    Assignment,
    Conversation,
    Event,
    Response,
    Study,
    System,
    Turn,
    Unit,
    Worker,
)
from hitkit.prescreen.similarity import distinct_n
from hitkit.prescreen.similarity import tokens as word_tokens
from hitkit.protocols import PROTOCOLS
from hitkit.study.stored import StudyContext


# Conversations ---------------------------------------------------------------------------------------
@dataclass
class Page:
    items: list
    page: int
    pages: int
    total: int


def _paginate(total: int, page: int, per_page: int) -> tuple[int, int]:
    pages = max(1, -(-total // per_page))
    return min(max(1, page), pages), pages


def conversations(
    session: Session, study_id: int, system: str | None = None, page: int = 1, per_page: int = 50
) -> Page:
    """The study's conversations, newest first, optionally only those where ``system`` speaks."""
    query = select(Conversation).where(Conversation.study_id == study_id)
    if system:
        sys_id = session.scalar(select(System.id).where(System.study_id == study_id, System.name == system))
        query = query.where(Conversation.id.in_(select(Turn.conversation_id).where(Turn.system_id == sys_id)))
    total = session.execute(select(func.count()).select_from(query.subquery())).scalar_one()
    page, pages = _paginate(total, page, per_page)
    rows = session.scalars(query.order_by(Conversation.id.desc()).offset((page - 1) * per_page).limit(per_page)).all()
    ids = [c.id for c in rows]
    names = dict(session.execute(select(System.id, System.name).where(System.study_id == study_id)).all())
    speakers: dict[int, set[str]] = defaultdict(set)
    turns: Counter[int] = Counter()
    for conv_id, sys_id in session.execute(
        select(Turn.conversation_id, Turn.system_id).where(Turn.conversation_id.in_(ids))
    ):
        turns[conv_id] += 1
        if sys_id is not None:
            speakers[conv_id].add(names.get(sys_id, "?"))
    items = [
        {
            "id": c.id,
            "key": c.key,
            "kind": c.kind,
            "systems": sorted(speakers[c.id]) or _meta_systems(c),
            "turns": turns[c.id],
            "created_at": c.created_at,
            "topic": _topic_of(c),
        }
        for c in rows
    ]
    return Page(items, page, pages, total)


def _meta_systems(conv: Conversation) -> list[str]:
    """The systems a conversation is with before any of them has spoken (a chat whose bot has not replied)."""
    meta = conv.meta if isinstance(conv.meta, dict) else {}
    if meta.get("system"):
        return [str(meta["system"])]
    return sorted({str(n) for n in meta.get("systems") or [] if n != "human"})


def _topic_of(conv: Conversation) -> str | None:
    return (conv.meta or {}).get("topic") if isinstance(conv.meta, dict) else None


def _answers_by_assignment(session: Session, unit_ids: list[int]) -> list[dict]:
    """Every assignment's answers to these units: worker, status, and question → value."""
    rows = session.execute(
        select(Response, Assignment, Worker)
        .join(Assignment, Response.assignment_id == Assignment.id)
        .join(Worker, Assignment.worker_id == Worker.id)
        .where(Response.unit_id.in_(unit_ids))
        .order_by(Assignment.id, Response.id)
    ).all()
    out: dict[tuple[int, int], dict] = {}
    for r, a, w in rows:
        entry = out.setdefault(
            (r.unit_id, a.id),
            {
                "unit_id": r.unit_id,
                "assignment": a.id,
                "worker": w.external_id,
                "worker_id": w.id,
                "status": a.status,
                "feedback": a.feedback,
                "layout": a.layout,
                "answers": {},
            },
        )
        entry["answers"][r.question] = r.value
    return list(out.values())


def conversation_detail(session: Session, ctx: StudyContext, conversation_id: int) -> dict[str, Any]:
    """One conversation with its turns and every rating, label or vote given on it."""
    conv = session.get(Conversation, conversation_id)
    if conv is None or conv.study_id != ctx.study_id:
        raise ActionError(f"conversation {conversation_id} is not part of study '{ctx.name}'")
    names: dict[int | None, str] = dict(
        session.execute(select(System.id, System.name).where(System.study_id == ctx.study_id)).all()
    )
    turns = [
        {"index": t.index, "speaker": t.speaker, "system": names.get(t.system_id), "text": t.text, "time": t.created_at}
        for t in conv.turns
    ]
    meta = conv.meta or {}
    units: list[Unit | None]
    if conv.kind == "human_bot" and meta.get("unit_id") is not None:
        units = [session.get(Unit, meta["unit_id"])]
        answers = [
            x
            for x in _answers_by_assignment(session, [meta["unit_id"]])
            if x["assignment"] == meta.get("assignment_id")
        ]
    else:
        found = list(session.scalars(select(Unit).where(Unit.conversation_id == conv.id).order_by(Unit.id)))
        units = [*found]
        answers = _answers_by_assignment(session, [u.id for u in found])
    by_unit = {u.id: u for u in units if u is not None}
    views = PROTOCOLS[ctx.config.task].module("views")
    for entry in answers:
        unit = by_unit.get(entry["unit_id"])
        entry["unit"] = views.describe_unit(unit.payload) if unit else ""
        entry["answers"] = views.readable_answers(unit.payload if unit else {}, entry)
    return {"conversation": conv, "meta": meta, "turns": turns, "answers": answers}


# A system's profile -----------------------------------------------------------------------------------
def automatic_metrics(texts: list[str]) -> dict[str, float | int | None]:
    """Length and lexical diversity of a system's turns: distinct-n as Li et al. (2016) and ChatEval
    define it, distinct n-grams of all the turns over their number of tokens (the pre-screen's
    :func:`~hitkit.prescreen.similarity.distinct_n`, so the two pages agree)."""
    words = [word_tokens(t) for t in texts]
    has_tokens = any(words)
    return {
        "turns": len(texts),
        "mean_words": round(statistics.fmean(len(ws) for ws in words), 2) if words else None,
        "distinct_1": round(distinct_n(texts, 1), 3) if has_tokens else None,
        "distinct_2": round(distinct_n(texts, 2), 3) if has_tokens else None,
    }


def system_profile(session: Session, ctx: StudyContext, name: str) -> dict[str, Any]:
    """A system's conversations, its scores so far, and automatic metrics of what it said."""
    system = session.scalar(select(System).where(System.study_id == ctx.study_id, System.name == name))
    if system is None:
        raise ActionError(f"study '{ctx.name}' has no system called '{name}'")
    texts = list(
        session.scalars(
            select(Turn.text)
            .join(Conversation)
            .where(Conversation.study_id == ctx.study_id, Turn.system_id == system.id)
        )
    )
    study = session.get_one(Study, ctx.study_id)
    tables = ctx.task.export(session, study)
    scores, score_note = PROTOCOLS[ctx.config.task].module("views").system_scores(tables, ctx.config, name)
    convs = conversations(session, ctx.study_id, system=name, per_page=20)
    return {
        "system": system,
        "metrics": automatic_metrics(texts),
        "scores": scores,
        "score_note": score_note,
        "conversations": convs,
    }


# Side by side -------------------------------------------------------------------------------------------
def side_by_side(session: Session, ctx: StudyContext, a: str, b: str, limit: int = 30) -> dict[str, Any]:
    """Two systems' responses to the same prompts: pairwise prompts, bot–bot conversations from the same
    seed dialogue, or the same worker's chats with both in one live-chat HIT."""
    names = dict(session.execute(select(System.name, System.id).where(System.study_id == ctx.study_id)).all())
    for n in (a, b):
        if n not in names:
            raise ActionError(f"study '{ctx.name}' has no system called '{n}'")
    by_id: dict[int | None, str] = {v: k for k, v in names.items()}
    convs = session.scalars(
        select(Conversation).where(Conversation.study_id == ctx.study_id).order_by(Conversation.id)
    ).all()

    def turns_of(conv: Conversation) -> list[dict[str, Any]]:
        return [
            {"speaker": by_id.get(t.system_id) or t.speaker, "text": t.text, "own": t.system_id in (names[a], names[b])}
            for t in conv.turns
        ]

    views = PROTOCOLS[ctx.config.task].module("views")
    rows = views.side_by_side(convs, a, b, {a: names[a], b: names[b]}, turns_of, limit)
    return {"a": a, "b": b, "rows": rows}


# Event log --------------------------------------------------------------------------------------------
def events(session: Session, study_id: int | None = None, page: int = 1, per_page: int = 50) -> Page:
    """Event rows, newest first."""
    query = select(Event)
    if study_id is not None:
        query = query.where(Event.study_id == study_id)
    total = session.execute(select(func.count()).select_from(query.subquery())).scalar_one()
    page, pages = _paginate(total, page, per_page)
    rows = session.scalars(query.order_by(Event.id.desc()).offset((page - 1) * per_page).limit(per_page)).all()
    studies: dict[int | None, str] = dict(session.execute(select(Study.id, Study.name)).all())
    items = [
        {
            "id": e.id,
            "time": e.created_at,
            "study": studies.get(e.study_id),
            "kind": e.kind,
            "actor": e.actor,
            "data": e.data,
        }
        for e in rows
    ]
    return Page(items, page, pages, total)


def event_json(item: Mapping[str, Any]) -> dict[str, Any]:
    """One event of :func:`events` as the live refresh sends it (values as text)."""
    data = item["data"] if isinstance(item["data"], dict) else {"data": item["data"]}
    return {
        "time": item["time"].strftime("%Y-%m-%d %H:%M:%S") if item["time"] else "–",
        "study": item["study"],
        "kind": item["kind"],
        "label": event_label(item["kind"]),
        "actor": item["actor"],
        "data": {detail_label(str(k)): str(v) for k, v in data.items()},
    }


def studies(session: Session) -> list[Study]:
    """Every study in the database, newest first."""
    return list(session.scalars(select(Study).order_by(Study.id.desc())))
