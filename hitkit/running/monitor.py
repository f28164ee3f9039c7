"""A running study as its coordinator watches it: answers and chat turns so far, the ETA, the status
line redrawn on a terminal (or plain lines in a log), and the one-line QC outcome at the end."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Hit
from hitkit.db.session import session_scope
from hitkit.progress import eta_text
from hitkit.study.counts import Counts, study_counts, submitted_and_needed
from hitkit.study.stored import StudyContext


def progress(database_url: str, study_id: int) -> tuple[int, int]:
    """(answers in submitted work, answers the study needs), counting at most the required number per unit; a unit
    whose every HIT the stopping rule withdrew needs none."""
    with session_scope(database_url) as session:
        return submitted_and_needed(session, study_id)


@dataclass
class Snapshot:
    """What the progress line shows at one moment: the study's :class:`Counts`, bot health and held work."""

    counts: Counts
    health: str = ""
    held: int = 0

    @property
    def fraction(self) -> float:
        """Share of the work done: chat messages move it from the first turn, answers finish it. It shows
        100 % only once every answer is in submitted work: a chat whose rating has begun still has its last
        messages or sliders to come."""
        c = self.counts
        answers = c.saved / c.needed if c.needed else 0.0
        if c.chat_messages is not None and c.chat_messages_needed:
            answers = 0.9 * min(1.0, c.chat_messages / c.chat_messages_needed) + 0.1 * answers
        return answers if c.submitted >= c.needed else min(answers, 0.99)

    def line(self, elapsed_s: float) -> str:
        """The one-line status: answers, chat messages, ETA, bot health, held work."""
        parts = [f"answers {self.counts.answers_text()}"]
        if self.counts.chat_messages is not None:
            parts.append(f"chat messages {self.counts.chat_text()}")
        parts.append(f"{100 * self.fraction:.0f} %")
        eta = eta_text(self.fraction, elapsed_s)
        if eta:
            parts.append(eta)
        if self.health:
            parts.append(self.health)
        if self.held:
            parts.append(f"{self.held} held for QC review")
        return " · ".join(parts)


def snapshot(session: Session, ctx: StudyContext) -> Snapshot:
    """The progress figures of a running study (bot health as the dashboard shows it)."""
    from hitkit.dashboard.bots import bot_health
    from hitkit.db.models import Study
    from hitkit.money.qc_policy import held_assignment_ids

    running = session.get_one(Study, ctx.study_id).status == "running"
    # Bot trouble matters while workers chat; a finished (or paused) study's bots are no longer asked.
    return Snapshot(
        study_counts(session, ctx),
        health=bot_health(session, ctx)["summary"] if running else "",
        held=len(held_assignment_ids(session, ctx.study_id)),
    )


def only_held_left(session: Session, study_id: int) -> int:
    """When all that keeps the study open is work held for QC review, how much; else 0."""
    from hitkit.db.models import Assignment
    from hitkit.money.qc_policy import held_assignment_ids

    held = held_assignment_ids(session, study_id)
    if not held:
        return 0
    open_hits = session.scalar(
        select(func.count()).select_from(Hit).where(Hit.study_id == study_id, Hit.status.in_(("pending", "posted")))
    )
    undecided = session.scalar(
        select(func.count())
        .select_from(Assignment)
        .join(Hit)
        .where(Hit.study_id == study_id, Assignment.status.in_(("submitted", "accepted")))
    )
    return len(held) if open_hits == 0 and undecided == len(held) else 0


def qc_outcome_line(session: Session, ctx: StudyContext) -> str:
    """'1 of 4 workers failed QC (check): w-003' — the study's quality check over its counted work."""
    from hitkit.money.qc import qc_summary

    qc = qc_summary(session, ctx, cache_key="launch-summary")
    if qc is None:
        return "QC: no verdict (no counted work to check)"
    unjudged = f"; {qc.not_judged} not judged yet (too few votes to tell)" if qc.not_judged else ""
    if not qc.workers:
        return f"QC: no worker has enough QC work to be judged yet{unjudged} (check: {qc.method})"
    failed = sorted(w for w, ok in qc.by_worker.items() if ok is False)
    if not failed:
        return f"QC: all {qc.workers} judged workers passed{unjudged} ({qc.method})"
    shown = ", ".join(failed[:8]) + (f" and {len(failed) - 8} more" if len(failed) > 8 else "")
    return f"{len(failed)} of {qc.workers} judged workers failed QC: {shown}{unjudged} (check: {qc.method})"
