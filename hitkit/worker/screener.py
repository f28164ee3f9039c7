"""The screener: a few questions before consent; a participant who fails is screened out, paid, and let go.

A study file's ``screener:`` (:mod:`hitkit.study.screener`) works with any protocol and any
provider. Answering it is one request (:func:`answer`); failing it

- sets the assignment ``screened_out``: its place is free again at once (only accepted, submitted and
  approved work holds a place), and it is never a worker's work in any analysis or export;
- books the screen-out pay in the ledger (``payment`` rows of kind ``screen_out`` and its fee, one per
  assignment by key), paid through the platform where the platform pays it (Prolific's
  ``FIXED_SCREEN_OUT_PAYMENT`` code: pending until Prolific shows the submission ``SCREENED OUT``);
- hands the participant back (:func:`handback`): Prolific's screen-out completion code, a panel's
  ``screen_out_url`` or code, or hitkit's own page.

The worst case, ``slots`` screen-outs and their fees, is counted against the budget before any HIT is
posted (:func:`reserve`); when ``slots`` screen-outs are used up the study pauses, as Prolific's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Event, Hit, Payment, Study, utcnow
from hitkit.errors import AnswerError, ConfigError, FlowError
from hitkit.events import add_event
from hitkit.i18n import N_
from hitkit.money import ledger
from hitkit.providers.base import Completion, CompletionKind
from hitkit.study.screener import ScreenerConfig
from hitkit.worker import flow

ANSWERED = "screener_answered"
SCREENED_OUT = "screened_out"


def section(ctx) -> ScreenerConfig:
    """The study file's ``screener:``; a ConfigError where a step that needs it meets a study without one."""
    if ctx.config.screener is None:
        raise ConfigError(f"study '{ctx.name}' has no screener: section, so it has no screening step")
    return ctx.config.screener


def screen_out_key(study_id: int, assignment_id: int) -> str:
    return f"screen_out:{study_id}:{assignment_id}"


def _outcome(session: Session, ctx, assignment_id: int) -> bool | None:
    """True (passed), False (screened out) or None (not answered yet)."""
    for data in session.scalars(select(Event.data).where(Event.study_id == ctx.study_id, Event.kind == ANSWERED)):
        if data.get("assignment") == assignment_id:
            return bool(data.get("passed"))
    return None


def _worker_outcome(session: Session, ctx, assignment: Assignment) -> bool | None:
    """The worker's screener outcome in this study, on this assignment or an earlier one (one answer per worker)."""
    mine = set(
        session.scalars(
            select(Assignment.id)
            .join(Hit)
            .where(Hit.study_id == ctx.study_id, Assignment.worker_id == assignment.worker_id)
        )
    )
    outcome = None
    for data in session.scalars(select(Event.data).where(Event.study_id == ctx.study_id, Event.kind == ANSWERED)):
        if data.get("assignment") in mine:
            outcome = bool(data.get("passed")) and outcome is not False
    return outcome


def pending(session: Session, ctx, assignment: Assignment) -> bool:
    """Whether this assignment must answer the screener before it sees the instructions and consents.

    A worker answers once per study: one who passed is not asked again; one who was screened out is
    refused on a later visit, and that visit's assignment is returned at once (its place is free again)."""
    if ctx.config.screener is None or assignment.consented_at is not None:
        return False
    outcome = _worker_outcome(session, ctx, assignment)
    if outcome is False and assignment.status == "accepted":
        assignment.status = "returned"
        add_event(
            session,
            ctx.study_id,
            "assignment_returned",
            "server",
            {"assignment": assignment.id, "why": "screened out on an earlier visit"},
        )
        session.commit()  # kept although the page answers with an error
        raise FlowError(
            N_(
                "you answered this study's screening questions on an earlier visit and it is not a match "
                "for you; please return it"
            ),
            403,
        )
    return outcome is None


def questions(ctx) -> list[dict[str, Any]]:
    """The screener's questions as the page shows them (the accepted answers stay on the server)."""
    return [{"name": q.name, "text": q.text, "options": list(q.options)} for q in section(ctx).questions]


def require_passed(session: Session, ctx, token: str) -> None:
    """Consent needs a passed screener, where the study has one (FlowError otherwise)."""
    if ctx.config.screener is None:
        return
    assignment = flow.assignment_for(session, ctx, token)
    if assignment.consented_at is None and _worker_outcome(session, ctx, assignment) is not True:
        raise FlowError(N_("please answer the screening questions first"), 409)


def passes(ctx, answers: Mapping[str, str]) -> bool:
    """Whether ``answers`` (question name → option) pass every question; AnswerError names a bad one."""
    ok = True
    for q in section(ctx).questions:
        given = answers.get(q.name)
        if given not in q.options:
            raise AnswerError(
                f"screening question '{q.name}': choose one of {q.options}"
                + (f" (got {str(given)[:40]!r})" if given is not None else " (no answer given)")
            )
        ok &= given in q.accept
    return ok


def answer(session: Session, ctx, token: str, answers: Mapping[str, str]) -> tuple[Assignment, bool]:
    """Record the screener's answers once: (assignment, passed). Failing screens the participant out."""
    if ctx.config.screener is None:
        raise FlowError("this study has no screening questions", 404)
    assignment = flow.assignment_for(session, ctx, token, lock=True)
    before = _outcome(session, ctx, assignment.id)
    if before is not None:  # a retry: the first answer stands
        return assignment, before
    if _worker_outcome(session, ctx, assignment) is False:
        raise FlowError(
            N_(
                "you answered this study's screening questions on an earlier visit and it is not a match "
                "for you; please return it"
            ),
            403,
        )
    flow.writable(ctx, assignment, consented=False)
    passed = passes(ctx, answers)
    add_event(
        session,
        ctx.study_id,
        ANSWERED,
        "server",
        {
            "assignment": assignment.id,
            "passed": passed,
            "answers": {q.name: answers[q.name] for q in ctx.config.screener.questions},
        },
    )
    if not passed:
        screen_out(session, ctx, assignment)
    return assignment, passed


def screen_out(session: Session, ctx, assignment: Assignment) -> None:
    """Free the place, book the screen-out pay (once), and pause the study once the slots are used up."""
    now = utcnow()
    assignment.status, assignment.decided_at = SCREENED_OUT, now
    screener = section(ctx)
    # The platform pays through the code where it can (Prolific); elsewhere nothing is left to do.
    ledger.book_screen_out(
        session, ctx, assignment, screener.screen_out_reward, paid=not getattr(ctx.provider, "pays_screen_outs", False)
    )
    add_event(session, ctx.study_id, SCREENED_OUT, "server", {"assignment": assignment.id})
    session.flush()
    if screened_out_count(session, ctx.study_id) >= screener.slots:
        study = session.get_one(Study, ctx.study_id)
        if study.status == "running":
            study.status = "paused"
            add_event(session, ctx.study_id, "screen_out_slots_used", "server", {"slots": screener.slots})


def screened_out_count(session: Session, study_id: int) -> int:
    return session.execute(
        select(func.count())
        .select_from(Assignment)
        .join(Hit)
        .where(Hit.study_id == study_id, Assignment.status == SCREENED_OUT)
    ).scalar_one()


def reserve(session: Session, ctx) -> Decimal:
    """The worst case of the study's screen-outs (``slots`` of them, with fees), counted before posting."""
    screener = ctx.config.screener
    if screener is None:
        return Decimal(0)
    each = screener.screen_out_reward + ctx.fee(screener.screen_out_reward, 1)
    return each * max(screener.slots, screened_out_count(session, ctx.study_id))


def handback(ctx, assignment: Assignment) -> Completion:
    """Where a screened-out participant goes: the platform's screen-out code, a panel's URL or code, or our page."""
    own = getattr(ctx.provider, "screen_out_completion", None)
    if callable(own):
        return own()
    screener = section(ctx)
    if screener.screen_out_url:
        url = screener.screen_out_url.format(
            code=screener.screen_out_code or "", session_id=assignment.provider_assignment_id or ""
        )
        return Completion(CompletionKind.REDIRECT, url=url, code=screener.screen_out_code)
    return Completion(CompletionKind.PAGE, code=screener.screen_out_code)


def settle(database_url: str, ctx) -> int:
    """Mark pending screen-out pay paid once the platform shows the submission screened out; how many."""
    from hitkit.db.session import session_scope

    hooks = getattr(ctx.provider, "hooks", None)
    with session_scope(database_url) as session:
        rows = session.execute(
            select(Assignment.id, Assignment.provider_assignment_id)
            .select_from(Payment)
            .join(Assignment, Assignment.id == Payment.assignment_id)
            .where(Payment.study_id == ctx.study_id, Payment.kind == "screen_out", Payment.status == "pending")
        ).all()
    if not rows or hooks is None:
        return 0
    n = 0
    for assignment_id, submission in rows:
        facts = hooks.current("submission.status.change", submission)
        if facts.ours and facts.status in ("SCREENED OUT", "SCREENED_OUT"):
            with session_scope(database_url) as session:  # the platform paid: pending rows become paid
                key = screen_out_key(ctx.study_id, assignment_id)
                for row in session.scalars(select(Payment).where(Payment.idempotency_key.in_((key, f"{key}:fee")))):
                    row.status = "paid"
            n += 1
    return n
