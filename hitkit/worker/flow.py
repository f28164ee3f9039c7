"""The worker's path through a HIT, shared by every task type and provider.

1. **Arrive** (:mod:`hitkit.worker.admission`): the worker gets an assignment and an HMAC token bound to
   it, or a read-only preview; from then on the token names the assignment (:func:`assignment_for`).
2. **Consent** (:func:`consent`): nothing is answered or chatted before it.
3. **Answer** (:func:`save_answer`): every answer is stored as it is given; answering again
   replaces the answer, never adds a second row.
4. **Submit** (:func:`submit`): all questions must be answered; submitting twice stores once and
   hands the worker back the same way both times (:func:`handback`, called after the commit: it
   may ask the platform).

Every step that changes an assignment (consent, answer, chat turn, return, submit) locks the
assignment's row *before* it checks anything, and the scheduler's expiry is a conditional update
of the same row; so each is one serialised, idempotent step on SQLite and PostgreSQL alike, and a
lost race reads as the state the winner left. The time limit (``hit.assignment_minutes``) is
enforced here, at the request, not only by the scheduler.

Workers never see a unit's row id (made in creation order, it would tell the QC slot and the
human–human material apart): they see :attr:`Unit.public_key`, random. Functions taking a unit
from a request take that key (a str); Python callers may pass the row id (an int).

Every function taking a session leaves committing to the caller (one request, one transaction).
None of them knows about HTTP.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any, Mapping

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session, joinedload, object_session

from hitkit.db.models import Assignment, HitUnit, Response, Unit, utcnow
from hitkit.errors import AnswerError, FlowError
from hitkit.events import add_event
from hitkit.i18n import N_
from hitkit.providers.base import Completion
from hitkit.study.stored import StudyContext
from hitkit.tables.schema import DONE_STATUSES
from hitkit.worker import arrivals, authenticity, tokens

MAX_ROW_ID = 2**31 - 1
"""Largest id a row can have; a larger one in a URL names nothing (and would overflow the driver)."""


def storable_text(text: str, what: str) -> str:
    """``text`` unchanged, or AnswerError if it holds a character no database can store.

    NUL is refused by PostgreSQL and a lone UTF-16 surrogate (JSON allows ``"\\ud800"``) by every
    UTF-8 encoder; both would otherwise fail deep in the driver as a server error.
    """
    if "\x00" in text:
        raise AnswerError(f"the {what} contains a NUL character (position {text.index(chr(0))}); remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise AnswerError(
            f"the {what} contains an unpaired surrogate character (position {exc.start}); send proper UTF-8 text"
        ) from None
    return text


def assignment_for(session: Session, ctx: StudyContext, token: str, *, lock: bool = False) -> Assignment:
    """The assignment a token is bound to; FlowError(403) for a forged, stale or foreign token.

    With ``lock``, the assignment's row is locked for the rest of the transaction and read fresh:
    every step that changes an assignment takes the lock before checking its status, so two
    requests (or a request and the scheduler's expiry) on one assignment take turns.
    """
    parsed = tokens.read_assignment_token(ctx.secret, token)
    if parsed is None:
        raise FlowError(N_("this link is not valid; please return to the task from the crowd site"), 403)
    if not 0 < parsed[0] <= MAX_ROW_ID:
        raise FlowError(N_("this link is not valid for this study"), 403)
    assignment = session.scalar(_assignment_query(lock), {"assignment_id": parsed[0]})
    if assignment is None or assignment.token_nonce != parsed[1] or assignment.hit.study_id != ctx.study_id:
        raise FlowError(N_("this link is not valid for this study"), 403)
    return assignment


@functools.cache
def _assignment_query(lock: bool):
    """An assignment by id with its HIT in one query; with ``lock``, FOR UPDATE OF the assignment only.

    Built once per process (the id is a bound parameter): every worker request runs it, and building
    the statement and its cache key each time was a tenth of a chat turn's CPU.
    """
    query = (
        select(Assignment)
        .options(joinedload(Assignment.hit, innerjoin=True))
        .where(Assignment.id == bindparam("assignment_id"))
    )
    if lock:
        query = query.with_for_update(of=Assignment).execution_options(populate_existing=True)
    return query


STATUS_WORDS = {
    "previewed": N_("previewed"),
    "accepted": N_("accepted"),
    "submitted": N_("submitted"),
    "approved": N_("approved"),
    "rejected": N_("rejected"),
    "returned": N_("returned"),
    "expired": N_("expired"),
}
"""An assignment's status as a worker page names it."""


def status_word(status: str) -> str:
    """``status`` in the words a worker page uses (translated at the edge)."""
    return STATUS_WORDS.get(status, status)


def deadline(ctx: StudyContext, assignment: Assignment) -> dt.datetime:
    """When the assignment's time limit (``hit.assignment_minutes`` after acceptance) runs out."""
    return assignment.accepted_at + dt.timedelta(minutes=ctx.config.hit.assignment_minutes)


def writable(ctx: StudyContext, assignment: Assignment, *, consented: bool = True) -> None:
    """FlowError unless the assignment takes answers now: open, within its time limit, and consented to."""
    if assignment.status in DONE_STATUSES:
        raise FlowError(N_("this HIT is already submitted; answers can no longer change"), 409)
    if assignment.status != "accepted":
        raise FlowError(
            N_("this assignment is %(status)s and takes no more answers", status=status_word(assignment.status)), 410
        )
    if utcnow() >= deadline(ctx, assignment):
        raise FlowError(
            N_(
                "the time limit of this HIT (%(limit)s) has passed; "
                "your place has been given up and the HIT can no longer be answered or submitted",
                limit=dt.timedelta(minutes=ctx.config.hit.assignment_minutes),
            ),
            410,
        )
    if consented and assignment.consented_at is None:
        raise FlowError(N_("read the instructions and agree to take part before answering"), 409)


def _units(assignment: Assignment) -> dict[int, Unit]:
    """The HIT's units by id, in HIT order: one query (answers and submits run it on every request)."""
    session = object_session(assignment)
    if session is None:
        raise ValueError(f"assignment {assignment.id} is not in a session, so its HIT's units cannot be read")
    rows = session.scalars(
        select(Unit)
        .join(HitUnit, HitUnit.unit_id == Unit.id)
        .where(HitUnit.hit_id == assignment.hit_id)
        .order_by(HitUnit.position)
    )
    return {unit.id: unit for unit in rows}


def find_unit(units: Mapping[int, Unit], ref: int | str) -> Unit:
    """The unit ``ref`` names among ``units``: a public key (from a request) or a row id (from Python)."""
    if isinstance(ref, str):
        unit = next((u for u in units.values() if u.public_key == ref), None)
    else:
        unit = units.get(ref)
    if unit is None:
        raise AnswerError(N_("unit %(unit)r is not part of this HIT; reload the page", unit=str(ref)[:40]))
    return unit


def unit_of(assignment: Assignment, ref: int | str) -> Unit:
    """The unit of the assignment's HIT that ``ref`` names (:func:`find_unit`)."""
    return find_unit(_units(assignment), ref)


def _store(
    session: Session,
    ctx: StudyContext,
    assignment: Assignment,
    unit: Unit,
    question: str,
    value: Any,
    elapsed_s: float | None,
    signals: dict[str, int] | None = None,
) -> Response:
    value = storable_text(ctx.task.validate(unit, question, value), f"answer to '{question}'")
    ctx.task.check_answer(session, assignment, unit, question)
    now = utcnow()
    # The assignment's row is locked (assignment_for(lock=True)), so no other request of this
    # assignment can insert the same answer between this read and the insert below.
    row = session.scalar(
        select(Response).where(
            Response.assignment_id == assignment.id, Response.unit_id == unit.id, Response.question == question
        )
    )
    if row is None:
        row = Response(
            assignment_id=assignment.id,
            unit_id=unit.id,
            question=question,
            value=value,
            elapsed_s=elapsed_s,
            created_at=now,
            updated_at=now,
            signals=signals,
        )
        session.add(row)
    else:
        row.value, row.updated_at = value, now
        if elapsed_s is not None:
            row.elapsed_s = elapsed_s
        if signals is not None:  # the signals describe the value they came with
            row.signals = signals
    session.flush()
    return row


def save_answer(
    session: Session,
    ctx: StudyContext,
    token: str,
    unit_id: int | str,
    question: str,
    value: Any,
    elapsed_s: float | None = None,
    signals: Any = None,
) -> Response:
    """Store (or replace) one answer of the token's assignment; ``unit_id`` is the unit's public key or row id.

    ``signals``, how the page saw a free-text answer typed, is checked and bounded
    (:func:`hitkit.worker.authenticity.clean_signals`) and dropped when unusable; it never refuses the answer.
    """
    assignment = assignment_for(session, ctx, token, lock=True)
    writable(ctx, assignment)
    unit = find_unit(_units(assignment), unit_id)
    return _store(session, ctx, assignment, unit, question, value, elapsed_s, authenticity.clean_signals(signals))


def missing_answers(ctx: StudyContext, assignment: Assignment) -> list[tuple[int, str]]:
    """The (unit id, question) pairs the worker has not answered yet."""
    given = {(r.unit_id, r.question) for r in assignment.responses}
    return [
        (u.id, q.name)
        for u in _units(assignment).values()
        for q in ctx.task.questions(u)
        if (u.id, q.name) not in given
    ]


def submit(
    session: Session,
    ctx: StudyContext,
    token: str,
    answers: Mapping[tuple[int | str, str], Any] | None = None,
    feedback: str | None = None,
    feedback_signals: Any = None,
) -> tuple[Assignment, Completion | None]:
    """Store any answers sent with the submission, check completeness, mark the assignment submitted.

    ``answers`` are keyed by (unit public key or row id, question). ``feedback`` is the worker's
    optional comment on the whole HIT; ``feedback_signals``, how the page saw it entered, as sent (checked
    and bounded by :func:`hitkit.worker.authenticity.clean_signals`, kept only with a comment).
    Submitting an already submitted assignment changes nothing.
    The second element is None: the hand-back may ask the platform, so the caller gets it from
    :func:`handback` once the transaction is committed.
    """
    assignment = assignment_for(session, ctx, token, lock=True)
    if assignment.status in DONE_STATUSES:
        return assignment, None
    writable(ctx, assignment)
    units = _units(assignment)
    for (unit_ref, question), value in (answers or {}).items():
        _store(session, ctx, assignment, find_unit(units, unit_ref), question, value, None)
    session.refresh(assignment, ["responses"])
    missing = missing_answers(ctx, assignment)
    if missing:
        raise FlowError(
            N_("%(count)s question(s) are not answered yet; answer them all, then submit", count=len(missing)), 400
        )
    ctx.task.check_submit(session, assignment)
    if feedback is not None and feedback.strip():
        limit = ctx.config.hit.max_answer_chars
        if len(feedback) > limit:
            raise AnswerError(
                N_("the comment is %(length)s characters; the limit is %(limit)s", length=len(feedback), limit=limit)
            )
        assignment.feedback = storable_text(feedback.strip(), "comment")
        assignment.feedback_signals = authenticity.clean_signals(feedback_signals)
    now = utcnow()
    assignment.status = "submitted"
    assignment.submitted_at = now
    arrivals.CHECKS.forget(assignment.provider_assignment_id)  # a new arrival must see the work as done
    assignment.work_time_s = (now - assignment.accepted_at).total_seconds()
    add_event(session, ctx.study_id, "assignment_submitted", "server", {"assignment": assignment.id})
    session.flush()
    return assignment, None


def handback(ctx: StudyContext, assignment: Assignment) -> Completion:
    """How the worker of a submitted assignment goes back to the platform (call with no transaction open)."""
    return ctx.provider.completion(assignment.provider_assignment_id, {})


def return_assignment(session: Session, ctx: StudyContext, token: str) -> Assignment:
    """The worker gives the HIT back unfinished: its place opens for someone else, answers stay stored.

    Returning twice returns once (one event); a submitted or expired assignment cannot be returned.
    """
    assignment = assignment_for(session, ctx, token, lock=True)
    if assignment.status == "returned":
        return assignment
    writable(ctx, assignment, consented=False)
    assignment.status = "returned"
    arrivals.CHECKS.forget(assignment.provider_assignment_id)
    add_event(session, ctx.study_id, "assignment_returned", "server", {"assignment": assignment.id})
    return assignment


def consent(session: Session, ctx: StudyContext, token: str) -> Assignment:
    """Record that the worker read the instructions and agreed to take part (once, whatever the retries)."""
    assignment = assignment_for(session, ctx, token, lock=True)
    writable(ctx, assignment, consented=False)
    if assignment.consented_at is None:
        assignment.consented_at = utcnow()
    return assignment


def state(session: Session, ctx: StudyContext, assignment: Assignment) -> dict[str, Any]:
    """What the task page shows: every unit's view, the questions, and the answers given so far.

    Units are keyed by their public key and listed in the order this assignment shows them (its
    layout's ``order`` where it has one): nothing in an id or a position tells the units apart.
    """
    units_by_id = _units(assignment)
    order = [uid for uid in assignment.layout.get("order", []) if uid in units_by_id]
    ordered = [units_by_id[uid] for uid in order] + [u for uid, u in units_by_id.items() if uid not in order]
    answers: dict[str, dict[str, str]] = {}
    for r in assignment.responses:
        if r.unit_id in units_by_id:
            answers.setdefault(units_by_id[r.unit_id].public_key, {})[r.question] = r.value
    units = []
    for unit in ordered:
        view = ctx.task.view(unit, assignment.layout)
        view["questions"] = [
            {"name": q.name, "choices": list(q.choices) if q.choices else None} for q in ctx.task.questions(unit)
        ]
        units.append(view)
    return {
        "assignment": assignment.provider_assignment_id,
        "status": assignment.status,
        "consented": assignment.consented_at is not None,
        "units": units,
        "answers": answers,
    }
