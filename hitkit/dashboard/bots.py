"""Bot health on the dashboard, the CLI's status line and the events: replies owed to workers, timeouts,
unreachable and slow bots, recent and in total."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import (
    Conversation,
    Event,
    System,
    Turn,
)
from hitkit.study.stored import StudyContext

# Bot health ----------------------------------------------------------------------------------------------
BOT_TROUBLE = {"bot_timeout": "timed out", "bot_unavailable": "unreachable", "bot_slow": "slow"}
"""Event kinds the bots layer records for a reply that timed out, a bot that could not be reached, a slow reply."""


OWED_FAILING_S = 30.0
"""A chat whose bot reply has been owed this long counts against its bot: the worker is left waiting."""


RECENT_S = 600.0
"""The window of "recent" bot trouble on the dashboard and in the launch's status line."""


@dataclass
class BotRow:
    """One system's health in a live-chat study: replies owed now, and timeouts / failures recorded."""

    name: str
    is_control: bool
    owed: int = 0
    oldest_wait_s: float | None = None
    recent: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """failing (workers are left waiting, or recent timeouts/failures), slow, or ok."""
        waiting = self.oldest_wait_s is not None and self.oldest_wait_s >= OWED_FAILING_S
        if waiting or self.recent.get("bot_timeout") or self.recent.get("bot_unavailable"):
            return "failing"
        return "slow" if self.recent.get("bot_slow") else "ok"

    def describe(self) -> str:
        """'2 timed out, 1 unreachable in the last 10 min; 1 reply owed for 45 s' (or 'ok')."""
        parts = [f"{n} {BOT_TROUBLE[k]}" for k, n in self.recent.items() if n]
        text = ", ".join(parts) + f" in the last {RECENT_S / 60:.0f} min" if parts else ""
        if self.owed:
            wait = f" for {fmt_seconds(self.oldest_wait_s)}" if self.oldest_wait_s is not None else ""
            text += ("; " if text else "") + f"{self.owed} repl{'y' if self.owed == 1 else 'ies'} owed{wait}"
        return text or "ok"


def bot_health(session: Session, ctx: StudyContext, now: dt.datetime | None = None) -> dict[str, Any]:
    """Every bot of a live-chat study: replies owed (a worker's message waiting for its answer) and the
    ``bot_*`` events, recent and in total; ``failing`` names the bots in trouble, ``summary`` says it in a line.

    Other tasks chat with no bot while workers wait, so they get no rows.
    """
    from hitkit.db.models import utcnow

    now = now or utcnow()
    if not ctx.task.has_chat:
        return {"rows": [], "failing": [], "summary": "", "window_s": RECENT_S, "owed_failing_s": OWED_FAILING_S}
    systems = list(session.scalars(select(System).where(System.study_id == ctx.study_id).order_by(System.id)))
    rows: dict[str | None, BotRow] = {s.name: BotRow(s.name, s.is_control) for s in systems}
    last = (
        select(Turn.conversation_id, func.max(Turn.index).label("last"))
        .join(Conversation)
        .where(Conversation.study_id == ctx.study_id, Conversation.kind == "human_bot")
        .group_by(Turn.conversation_id)
        .subquery()
    )
    owed = session.execute(
        select(Conversation.meta, Turn.created_at)
        .join(Turn, Turn.conversation_id == Conversation.id)
        .join(last, (last.c.conversation_id == Turn.conversation_id) & (last.c.last == Turn.index))
        .where(Turn.speaker == "worker")
    ).all()
    for meta, since in owed:
        row = rows.get((meta or {}).get("system"))
        if row is None:
            continue
        row.owed += 1
        if since is not None:
            since = since if since.tzinfo else since.replace(tzinfo=dt.timezone.utc)
            wait = max(0.0, (now - since).total_seconds())
            row.oldest_wait_s = max(row.oldest_wait_s or 0.0, wait)
    recent_since = now - dt.timedelta(seconds=RECENT_S)
    for kind, data, created in session.execute(
        select(Event.kind, Event.data, Event.created_at).where(
            Event.study_id == ctx.study_id, Event.kind.in_(tuple(BOT_TROUBLE))
        )
    ):
        data = data or {}
        row = rows.get(data.get("system") or data.get("bot") or data.get("model"))
        if row is None:
            continue
        row.total[kind] = row.total.get(kind, 0) + 1
        created = created if created is None or created.tzinfo else created.replace(tzinfo=dt.timezone.utc)
        if created is not None and created >= recent_since:
            row.recent[kind] = row.recent.get(kind, 0) + 1
    failing = [r.name for r in rows.values() if r.state == "failing"]
    summary = ""
    if failing:
        summary = "bots failing: " + "; ".join(f"{r.name} ({r.describe()})" for r in rows.values() if r.name in failing)
    elif any(r.state == "slow" for r in rows.values()):
        summary = "bots slow: " + ", ".join(r.name for r in rows.values() if r.state == "slow")
    bots_summary: Callable[[Session, int], dict[str, Any]] | None
    try:  # the bots layer's own summary (latency, queue depth), where it provides one
        from hitkit.bots import health

        bots_summary = health.summary
    except ImportError:
        bots_summary = None
    extra = bots_summary(session, ctx.study_id) if bots_summary is not None else None
    from hitkit.db.models import Study

    sentence = health_sentence(extra, session.get_one(Study, ctx.study_id).status)
    return {
        "rows": list(rows.values()),
        "failing": failing,
        "summary": summary,
        "window_s": RECENT_S,
        "owed_failing_s": OWED_FAILING_S,
        "bots": extra,
        "sentence": sentence,
    }


def fmt_seconds(value: float | None) -> str:
    """A duration as the dashboard shows it: ``2 min 05 s``."""
    if value is None:
        return "–"
    delta = dt.timedelta(seconds=round(value))
    minutes, seconds = divmod(int(delta.total_seconds()), 60)
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


def health_sentence(extra: dict | None, study_status: str) -> str:
    """The bots layer's summary (:func:`hitkit.bots.health.summary`) as a sentence for a person: what the
    bots did in the recent window, or that a finished study no longer asks them anything."""
    if not extra:
        return ""
    minutes = f"{float(extra.get('window_s') or RECENT_S) / 60:.0f} minutes"
    if study_status != "running":
        return f"The study is {study_status}: no worker is chatting, so the bots are not being asked anything now."
    if extra.get("status") == "ok":
        return f"Every bot answered in time over the last {minutes}."
    detail = str(extra.get("message") or "").split(": ", 1)[-1]
    state = "failing" if extra.get("status") == "failing" else "slow"
    return f"Some bots were {state} over the last {minutes}: {detail}."
