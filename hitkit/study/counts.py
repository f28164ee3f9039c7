"""A stored study's progress, defined once: answers saved, answers in submitted work, answers needed and chat
messages. The console's status line (:mod:`hitkit.running.monitor`), ``hitkit status`` and the dashboard all show
these :class:`Counts`, so they agree at every moment."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Conversation, Hit, HitUnit, Response, Turn, Unit
from hitkit.protocols import PROTOCOLS
from hitkit.study.stored import StudyContext, unit_answer_counts


def submitted_and_needed(session: Session, study_id: int) -> tuple[int, int]:
    """:func:`progress` in an open session."""
    in_hits = select(HitUnit.unit_id).join(Hit, Hit.id == HitUnit.hit_id).where(Hit.study_id == study_id)
    withdrawn, offered = in_hits.where(Hit.status == "withdrawn"), in_hits.where(Hit.status != "withdrawn")
    required = dict(
        session.execute(
            select(Unit.id, Unit.required_answers).where(
                Unit.study_id == study_id, ~Unit.id.in_(withdrawn) | Unit.id.in_(offered)
            )
        ).all()
    )
    counts = unit_answer_counts(session, study_id)
    return sum(min(n, counts.get(uid, 0)) for uid, n in required.items()), sum(required.values())


@dataclass(frozen=True)
class Counts:
    """The one definition of a study's progress: the console's status line, ``hitkit status`` (and ``--json``)
    and the dashboard all show these, so they agree at every moment."""

    saved: int
    """Answers saved so far, in submitted work or not (at most each unit's need)."""
    submitted: int
    """Of those, the answers in work handed in (submitted, approved or rejected)."""
    needed: int
    """Answers the study needs (units the stopping rule withdrew need none)."""
    chat_messages: int | None = None
    """Messages workers typed to bots so far (chat protocols only)."""
    chat_messages_needed: int | None = None
    """The messages the study's chats need before they can be answered."""

    def as_json(self) -> dict[str, int | None]:
        return {
            "answers_saved": self.saved,
            "answers_submitted": self.submitted,
            "answers_needed": self.needed,
            "chat_messages": self.chat_messages,
            "chat_messages_needed": self.chat_messages_needed,
        }

    def answers_text(self) -> str:
        """The answers as every surface writes them."""
        return f"saved {self.saved}/{self.needed} ({self.submitted} in submitted work)"

    def chat_text(self) -> str:
        """The chat messages as every surface writes them ('' without chat)."""
        return "" if self.chat_messages is None else f"{self.chat_messages}/{self.chat_messages_needed}"


def study_counts(session: Session, ctx: StudyContext) -> Counts:
    """The study's :class:`Counts` now."""
    submitted, needed = submitted_and_needed(session, ctx.study_id)
    saved = min(needed, submitted + answers_in_progress(session, ctx.study_id))
    if not PROTOCOLS[ctx.config.task].has_chat:
        return Counts(saved, submitted, needed)
    return Counts(saved, submitted, needed, chat_turns(session, ctx.study_id), ctx.task.chat_turns_needed(needed))


def answers_in_progress(session: Session, study_id: int) -> int:
    """Answers saved in work not handed in yet (one per unit and assignment): the status line counts them as
    they are saved, beside those in submitted work."""
    per_unit = (
        select(Response.assignment_id, Response.unit_id)
        .join(Assignment, Response.assignment_id == Assignment.id)
        .join(Hit, Assignment.hit_id == Hit.id)
        .where(Hit.study_id == study_id, Assignment.status == "accepted")
        .distinct()
        .subquery()
    )
    return session.scalar(select(func.count()).select_from(per_unit)) or 0


def chat_turns(session: Session, study_id: int) -> int:
    """Messages workers have typed in the study's live chats so far."""
    return session.execute(
        select(func.count())
        .select_from(Turn)
        .join(Conversation)
        .where(Conversation.study_id == study_id, Turn.speaker == "worker")
    ).scalar_one()
