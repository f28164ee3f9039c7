"""The coordinator's workers: who did what with which QC result, and the actions on them (approve,
reject, bonus, block, unblock), each through the provider and the ledger (:mod:`hitkit.money.ledger`).

Actions write the ledger row and commit it *before* the provider is called, then record the
outcome: a crash in between leaves a ``pending`` row whose idempotency key stops a retry from
paying twice (the scheduler's rule for rewards, applied to the coordinator's clicks)."""

from __future__ import annotations

import datetime as dt
import re
import statistics
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hitkit.analysis.authenticity import WorkerScore
from hitkit.db.models import Assignment, Hit, Payment, Worker, utcnow
from hitkit.db.session import session_scope
from hitkit.errors import BudgetError, HitkitError
from hitkit.events import add_event
from hitkit.money.amounts import cents
from hitkit.money.qc import QcSummary
from hitkit.money.qc_policy import held_assignment_ids
from hitkit.study.stored import StudyContext
from hitkit.tables.authenticity import worker_scores
from hitkit.tables.schema import DONE_STATUSES

ACTOR = "dashboard"


IN_FLIGHT = dt.timedelta(seconds=60)
"""A pending bonus younger than this is being paid by another request; an older one is retried."""


class ActionError(HitkitError):
    """A coordinator's action that cannot be done as asked; the message says why and what to do."""


# Workers ------------------------------------------------------------------------------------------
@dataclass
class WorkerRow:
    id: int
    external_id: str
    provider: str
    blocked: bool
    statuses: dict[str, int]
    paid: Decimal
    bonuses: Decimal
    median_work_s: float | None
    qc_passed: bool | None
    feedback: list[str]
    submitted: list[int]
    """Ids of the worker's submitted (undecided) assignments, for approve / reject."""
    bonus_assignment: int | None
    """The assignment a bonus is paid against: the worker's latest counted one."""
    held: list[int] = field(default_factory=list)
    """Ids of the worker's assignments held for review by the QC outcome policy (schedule.qc_failures)."""
    authenticity: WorkerScore | None = None
    """Whether the worker's answers look typed by them (:mod:`hitkit.analysis.authenticity`): for review, never acted on."""


def worker_rows(session: Session, ctx: StudyContext, qc: QcSummary | None) -> list[WorkerRow]:
    """Every worker who took a HIT of the study, with what they did and what they were paid."""
    rows = session.execute(
        select(Assignment, Worker)
        .join(Hit, Assignment.hit_id == Hit.id)
        .join(Worker, Assignment.worker_id == Worker.id)
        .where(Hit.study_id == ctx.study_id)
        .order_by(Worker.id, Assignment.id)
    ).all()
    pay: defaultdict[int | None, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for worker_id, kind, amount in session.execute(
        select(Payment.worker_id, Payment.kind, func.sum(Payment.amount))
        .where(Payment.study_id == ctx.study_id, Payment.status == "paid", Payment.kind.in_(("reward", "bonus")))
        .group_by(Payment.worker_id, Payment.kind)
    ):
        pay[worker_id][0] += Decimal(amount)
        if kind == "bonus":
            pay[worker_id][1] += Decimal(amount)
    out: dict[int, WorkerRow] = {}
    times: dict[int, list[float]] = defaultdict(list)
    held = held_assignment_ids(session, ctx.study_id)
    for a, w in rows:
        row = out.get(w.id)
        if row is None:
            row = out[w.id] = WorkerRow(
                w.id,
                w.external_id,
                w.provider,
                w.blocked,
                {},
                cents(pay[w.id][0]),
                cents(pay[w.id][1]),
                None,
                qc.by_worker.get(w.external_id) if qc else None,
                [],
                [],
                None,
            )
        row.statuses[a.status] = row.statuses.get(a.status, 0) + 1
        if a.feedback:
            row.feedback.append(a.feedback)
        if a.status == "submitted":
            row.submitted.append(a.id)
            if a.id in held:
                row.held.append(a.id)
        if a.status in DONE_STATUSES:
            row.bonus_assignment = a.id
            if a.work_time_s is not None:
                times[w.id].append(a.work_time_s)
    for wid, ts in times.items():
        out[wid].median_work_s = round(statistics.median(ts), 1)
    typed = worker_scores(session, ctx)
    for row in out.values():
        row.authenticity = typed.get(row.external_id)
    return list(out.values())


# Actions: through the provider and the ledger ------------------------------------------------------
def _assignment_in_study(session: Session, ctx: StudyContext, assignment_id: int) -> Assignment:
    a = session.scalar(select(Assignment).where(Assignment.id == assignment_id).with_for_update())
    if a is None or a.hit.study_id != ctx.study_id:
        raise ActionError(f"assignment {assignment_id} is not part of study '{ctx.name}'")
    return a


def _worker_in_study(session: Session, ctx: StudyContext, worker_id: int) -> Worker:
    worker = session.get(Worker, worker_id)
    took = (
        session.scalar(
            select(func.count())
            .select_from(Assignment)
            .join(Hit)
            .where(Assignment.worker_id == worker_id, Hit.study_id == ctx.study_id)
        )
        if worker
        else 0
    )
    if worker is None or not took:
        raise ActionError(f"worker {worker_id} has no assignment in study '{ctx.name}'")
    return worker


def approve_assignment(
    database_url: str, ctx: StudyContext, assignment_id: int, override_platform: str | None = None
) -> str:
    """Approve submitted work now, through the ledger's one approve path as the coordinator's decision.

    The coordinator's approval replaces the review window, a panel's confirmation and the QC hold,
    but not the platform check: the platform must show the work handed in by this worker, as for the
    scheduler and ``hitkit sync``. ``override_platform``, the coordinator's reason, skips that check
    explicitly and is logged as an ``approve_override`` event; nothing passes it by default.
    """
    from hitkit.money.ledger import approve

    with session_scope(database_url) as session:
        a = _assignment_in_study(session, ctx, assignment_id)
        if a.status == "approved":
            return f"assignment {assignment_id} was already approved"
        if a.status != "submitted":
            raise ActionError(f"assignment {assignment_id} is {a.status}; only submitted work can be approved")
        worker = a.worker.external_id
    with _leading(database_url, ctx):
        outcome = approve(
            database_url,
            ctx,
            assignment_id,
            utcnow(),
            actor=ACTOR,
            coordinator=True,
            override_platform=override_platform,
        )
    if outcome == "refused":
        raise ActionError(
            f"the {ctx.provider.name} platform records another worker on assignment "
            f"{assignment_id}; it cannot be approved for {worker}"
        )
    if outcome == "waiting":
        raise ActionError(
            f"assignment {assignment_id} is not handed in on {ctx.provider.name} yet; approve it once it is"
        )
    if outcome != "approved":
        with session_scope(database_url) as session:
            status = session.get_one(Assignment, assignment_id).status
        return f"assignment {assignment_id} is {status} now; nothing done"
    return f"assignment {assignment_id} approved"


LEASE_WAIT_S = 10.0
"""How long a dashboard action waits for the study's lease (the scheduler hands over at the end of its tick)."""


@contextmanager
def _leading(database_url: str, ctx: StudyContext) -> Iterator[None]:
    """Hold the study's lease for one dashboard action; ActionError naming the leader when it is not free."""
    from hitkit.study import lease

    try:
        with lease.held(database_url, ctx.study_id, "dashboard", wait_s=LEASE_WAIT_S):
            yield
    except lease.LeaseBusy as busy:
        raise ActionError(f"{busy}") from None


def reject_assignment(database_url: str, ctx: StudyContext, assignment_id: int, reason: str) -> str:
    """Reject submitted work through the provider, with the reason the worker will read."""
    reason = (reason or "").strip()
    if not reason:
        raise ActionError("give the worker a reason for the rejection")
    with session_scope(database_url) as session:
        a = _assignment_in_study(session, ctx, assignment_id)
        if a.status == "rejected":
            return f"assignment {assignment_id} was already rejected"
        if a.status != "submitted":
            raise ActionError(f"assignment {assignment_id} is {a.status}; only submitted work can be rejected")
        provider_id = a.provider_assignment_id
    if provider_id is None:  # admission gives every assignment one
        raise ActionError(f"assignment {assignment_id} has no {ctx.provider.name} assignment id to reject")
    with _leading(database_url, ctx):
        with session_scope(database_url) as session:
            if session.get_one(Assignment, assignment_id).status != "submitted":
                return f"assignment {assignment_id} was decided meanwhile; nothing done"
        ctx.provider.reject(provider_id, reason)
    with session_scope(database_url) as session:
        a = session.get_one(Assignment, assignment_id, with_for_update=True)
        a.status, a.decided_at = "rejected", utcnow()
        add_event(session, ctx.study_id, "assignment_rejected", ACTOR, {"assignment": a.id, "reason": reason})
    return f"assignment {assignment_id} rejected"


_AMOUNT = re.compile(r"^\s*\d{1,6}(\.\d{1,2})?\s*$")


def parse_amount(text: str | None) -> Decimal:
    """A bonus amount typed by the coordinator: a positive number of at most two decimals."""
    if text is None or not _AMOUNT.match(text):
        raise ActionError(f"the bonus {text!r} is not an amount; write it like 0.50")
    try:
        amount = Decimal(text.strip())
    except InvalidOperation:
        raise ActionError(f"the bonus {text!r} is not an amount; write it like 0.50") from None
    if amount <= 0:
        raise ActionError("the bonus must be more than 0")
    return amount


def bonus_worker(database_url: str, ctx: StudyContext, worker_id: int, amount: Decimal, reason: str, key: str) -> str:
    """Pay ``worker_id`` a bonus once per ``key`` (the form's nonce): a second click pays nothing more.

    The bonus is the ledger's (``hitkit.money.ledger.bonus_key`` with the nonce as its tag), on the
    worker's latest handed-in assignment; a retry of the same form finds it by worker and nonce.
    """
    from hitkit.money.bonuses import pay_bonus

    reason = (reason or "").strip() or "Thank you for your careful work."
    if not re.fullmatch(r"[A-Za-z0-9_-]{8,64}", key or ""):
        raise ActionError("this bonus form has no valid key; reload the page and try again")
    try:
        prepared = _prepare_bonus(database_url, ctx, worker_id, amount, reason, key)
    except IntegrityError:  # the same form, clicked twice at once: the other click pays it
        return "this bonus is being paid"
    if isinstance(prepared, str):
        return prepared
    external_id, ledger_key, amount = prepared
    # The ledger rows are committed: only now does the provider hear of the bonus.
    try:
        with _leading(database_url, ctx):
            pay_bonus(
                database_url,
                ctx,
                ledger_key,
                actor=ACTOR,
                note={"worker": external_id, "amount": str(amount), "reason": reason},
            )
    except Exception as exc:
        with session_scope(database_url) as session:
            add_event(
                session,
                ctx.study_id,
                "bonus_failed",
                ACTOR,
                {"worker": external_id, "amount": str(amount), "error": str(exc)[:500]},
            )
        raise ActionError(
            f"the provider did not pay the bonus ({exc}); the ledger keeps it pending under its key, "
            f"so sending the same form again in a minute retries it without paying twice"
        ) from exc
    return f"bonus of {amount} {ctx.config.provider.currency} paid to {external_id}"


def _prepare_bonus(
    database_url: str, ctx: StudyContext, worker_id: int, amount: Decimal, reason: str, nonce: str
) -> tuple[str, str, Decimal] | str:
    """Have the ledger write (and commit) the pending bonus and fee; a message instead when nothing is left to do."""
    from hitkit.money.bonuses import bonus_by_tag, record_bonus
    from hitkit.money.ledger import bonus_key

    with session_scope(database_url) as session:
        # One coordinator action at a time per worker: the worker row is the lock.
        session.execute(select(Worker.id).where(Worker.id == worker_id).with_for_update())
        existing = bonus_by_tag(session, ctx.study_id, worker_id, nonce)
        if existing is not None and existing.status == "paid":
            return f"this bonus of {existing.amount} {existing.currency} was already paid"
        worker = _worker_in_study(session, ctx, worker_id)
        if existing is not None:
            if existing.amount != amount:
                raise ActionError(
                    f"this form already started a bonus of {existing.amount}; reload the page for a new one"
                )
            if utcnow() - existing.created_at < IN_FLIGHT:
                # Another click of the same form is paying it right now; a second provider call is not needed.
                return f"this bonus of {existing.amount} {existing.currency} is being paid"
            return worker.external_id, existing.idempotency_key, amount
        assignment = session.scalar(
            select(Assignment)
            .join(Hit)
            .where(
                Hit.study_id == ctx.study_id, Assignment.worker_id == worker_id, Assignment.status.in_(DONE_STATUSES)
            )
            .order_by(Assignment.id.desc())
            .limit(1)
        )
        if assignment is None:
            raise ActionError(f"worker {worker.external_id} has no submitted or approved work to pay a bonus on")
        try:
            row = record_bonus(
                session, ctx, assignment, amount, bonus_key(ctx.study_id, assignment.id, nonce), reason, ACTOR
            )
        except BudgetError as exc:
            raise ActionError(str(exc)) from None
        return worker.external_id, row.idempotency_key, amount


def block_worker(database_url: str, ctx: StudyContext, worker_id: int, reason: str) -> str:
    """Refuse the worker in hitkit (every study on this provider) and at the provider where it can."""
    with session_scope(database_url) as session:
        worker = _worker_in_study(session, ctx, worker_id)
        external_id = worker.external_id
        already = worker.blocked
        worker.blocked = True
    from hitkit.providers.base import CrowdProvider

    if type(ctx.provider).cap_worker is not CrowdProvider.cap_worker:
        # The provider's own cap (MTurk: the study's cap qualification; Prolific: the blocklist
        # group) keeps the worker from being offered the study's work at all.
        ctx.provider.cap_worker(external_id)
        where = "hitkit and the provider (the study's cap)"
    else:
        where = "hitkit"
    with session_scope(database_url) as session:
        add_event(
            session,
            ctx.study_id,
            "worker_blocked",
            ACTOR,
            {"worker": external_id, "reason": (reason or "").strip(), "where": where},
        )
    return f"worker {external_id} {'was already' if already else 'is now'} blocked in {where}"


def unblock_worker(database_url: str, ctx: StudyContext, worker_id: int) -> str:
    """Let a blocked worker take HITs in hitkit again (a provider-side block is lifted there)."""
    with session_scope(database_url) as session:
        worker = _worker_in_study(session, ctx, worker_id)
        worker.blocked = False
        add_event(session, ctx.study_id, "worker_unblocked", ACTOR, {"worker": worker.external_id})
        return f"worker {worker.external_id} is no longer blocked in hitkit"
