"""The ledger: the only writer of money (``Payment`` rows), and the one approve path.

Every reward, fee and bonus is a ``Payment`` row written here (bonuses: :mod:`hitkit.money.bonuses`),
*before* the provider is asked to pay, and keyed so that no retry (next tick, ``hitkit sync``, a second click) books or pays twice.
Providers call platforms and return facts; this module decides what those facts mean for money.

Keys, one scheme: ``reward:STUDY:ASSIGNMENT`` and ``fee:STUDY:ASSIGNMENT`` for an approved
assignment; ``bonus:STUDY:ASSIGNMENT:TAG`` for a bonus (TAG is ``1`` for the first bonus granted
from the CLI, ``settle`` for ``hitkit settle --pay``, the form's nonce for the dashboard), and
``KEY:fee`` for each bonus's fee. Databases written before this scheme hold two older bonus keys,
still recognised so an upgrade never pays twice: ``settle:STUDY:ASSIGNMENT`` and the dashboard's
``bonus:STUDY:WORKER:NONCE`` (found by worker and nonce, see :func:`hitkit.money.bonuses.bonus_by_tag`).

The budget: the ``Study.budget`` column is the one copy money decisions read (:func:`budget_of`);
``hitkit launch --resume`` keeps the study-file copy in ``Study.config`` equal to it. The ceiling
itself is :func:`within_budget`, the one place "committed + cost ≤ budget" is written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Hit, Payment, Study, utcnow
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.events import add_event, record_once
from hitkit.money import qc_policy
from hitkit.money.amounts import hit_cost
from hitkit.providers.base import provider_agrees
from hitkit.tables.schema import ACTIVE_STATUSES, UNPOSTED_HITS

if TYPE_CHECKING:
    from hitkit.providers.base import ProviderWork
    from hitkit.study.stored import StudyContext

BONUS_KINDS = ("bonus", "bonus_fee")
REWARD_KINDS = ("reward", "fee")


# -- policy: pure functions -------------------------------------------------------------------------


def within_budget(committed: Decimal, cost: Decimal, budget: Decimal) -> bool:
    """Whether spending ``cost`` more keeps the worst-case spend within the budget (the hard ceiling)."""
    return committed + cost <= budget


def hits_covered(costs: Iterable[Decimal], committed: Decimal, budget: Decimal) -> int:
    """How many of ``costs``, taken in order, fit under the budget on top of ``committed``."""
    n = 0
    for cost in costs:
        if not within_budget(committed, cost, budget):
            break
        committed += cost
        n += 1
    return n


def reward_key(kind: str, study_id: int, assignment_id: int) -> str:
    """The ledger key of an assignment's reward (``kind`` ``reward``) or its fee (``fee``)."""
    return f"{kind}:{study_id}:{assignment_id}"


def bonus_key(study_id: int, assignment_id: int, tag: str | int = 1) -> str:
    """The ledger key of a bonus on an assignment (short enough for MTurk's request token once hashed)."""
    return f"bonus:{study_id}:{assignment_id}:{tag}"


def fee_key(key: str) -> str:
    """The ledger key of the fee on the bonus keyed ``key``."""
    return f"{key}:fee"


# -- reading ----------------------------------------------------------------------------------------


def provider_assignment_of(a: Assignment) -> str:
    """The assignment's id on the provider, which admission records for every assignment (an id of its own,
    ``PROVIDER-aID``, where the platform gives none); HitkitError if a row lacks one."""
    if a.provider_assignment_id is None:
        raise HitkitError(f"assignment {a.id} has no id on the provider; hitkit's admission gives every assignment one")
    return a.provider_assignment_id


def submitted_before(session: Session, study_id: int, cutoff: dt.datetime) -> list[Assignment]:
    """The study's assignments submitted (not yet approved or rejected) at or before ``cutoff``, in id order:
    the work that has waited long enough to be approved, or handed in on the provider."""
    return list(
        session.scalars(
            select(Assignment)
            .join(Hit)
            .where(Hit.study_id == study_id, Assignment.status == "submitted", Assignment.submitted_at <= cutoff)
            .order_by(Assignment.id)
        )
    )


def budget_of(session: Session, study_id: int) -> Decimal:
    """The study's budget: the ``Study.budget`` column, the one copy money decisions read."""
    return Decimal(session.execute(select(Study.budget).where(Study.id == study_id)).scalar_one())


def worst_case(ctx: StudyContext, hit: Hit) -> Decimal:
    """The most one HIT can cost: every place taken, paid and charged the provider's fee."""
    return hit_cost(hit.reward, hit.max_assignments, ctx.fee(hit.reward, hit.max_assignments))


def booked_bonuses(session: Session, study_id: int) -> dict[str, Decimal]:
    """The ledger's bonuses and bonus fees (any status), by kind."""
    rows = dict(
        session.execute(
            select(Payment.kind, func.sum(Payment.amount))
            .where(Payment.study_id == study_id, Payment.kind.in_(BONUS_KINDS))
            .group_by(Payment.kind)
        ).all()
    )
    return {kind: Decimal(rows.get(kind) or 0) for kind in BONUS_KINDS}


def committed_spend(session: Session, ctx: StudyContext) -> Decimal:
    """Worst-case spend of every posted HIT plus every bonus in the ledger. A HIT the stopping rule closed
    takes no one new: only its places already held (or handed in) can still be paid."""
    posted = session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status.not_in(UNPOSTED_HITS)))
    held = dict(
        session.execute(
            select(Assignment.hit_id, func.count())
            .join(Hit)
            .where(Hit.study_id == ctx.study_id, Hit.status == "closed", Assignment.status.in_(ACTIVE_STATUSES))
            .group_by(Assignment.hit_id)
        ).all()
    )
    spend = sum(
        (
            hit_cost(h.reward, min(held.get(h.id, 0), h.max_assignments), ctx.fee(h.reward, h.max_assignments))
            if h.status == "closed"
            else worst_case(ctx, h)
            for h in posted
        ),
        Decimal(0),
    )
    return spend + sum(booked_bonuses(session, ctx.study_id).values())


# -- writing ----------------------------------------------------------------------------------------


def book_reward(session: Session, ctx: StudyContext, a: Assignment, paid: bool = False) -> None:
    """The assignment's reward and fee as ledger rows, each once; ``paid`` when the provider already paid.

    Written before the provider is asked to approve: a call that fails or whose answer is lost
    leaves pending rows whose keys stop any retry (next tick, ``hitkit sync``, the dashboard)
    booking twice.
    """
    fee = ctx.fee(a.hit.reward, a.hit.max_assignments)
    for kind, amount in (("reward", a.hit.reward), ("fee", fee)):
        key = reward_key(kind, ctx.study_id, a.id)
        row = session.scalar(select(Payment).where(Payment.idempotency_key == key))
        if row is None:
            row = Payment(
                study_id=ctx.study_id,
                assignment_id=a.id,
                worker_id=a.worker_id,
                kind=kind,
                amount=amount,
                currency=ctx.config.provider.currency,
                idempotency_key=key,
                status="pending",
                state="planned",
            )
            session.add(row)
        if paid:
            row.status, row.state, row.state_at = "paid", "confirmed", utcnow()
    session.flush()


def book_screen_out(session: Session, ctx: StudyContext, a: Assignment, amount: Decimal, paid: bool) -> str:
    """A screen-out's pay and fee rows (``screen_out``, ``fee``), once each; ``paid`` unless the platform pays later."""
    key = f"screen_out:{ctx.study_id}:{a.id}"
    for kind, value, k in (("screen_out", amount, key), ("fee", ctx.fee(amount, 1), fee_key(key))):
        if (value > 0 or kind == "screen_out") and not session.scalar(
            select(Payment.id).where(Payment.idempotency_key == k)
        ):
            session.add(
                Payment(
                    study_id=ctx.study_id,
                    assignment_id=a.id,
                    worker_id=a.worker_id,
                    kind=kind,
                    amount=value,
                    currency=ctx.config.provider.currency,
                    idempotency_key=k,
                    status="paid" if paid else "pending",
                )
            )
    return key


def settle_reward(session: Session, a: Assignment, approved: bool) -> None:
    """The assignment's pending reward and fee rows become paid (approved) or failed (rejected)."""
    for p in session.scalars(
        select(Payment).where(
            Payment.assignment_id == a.id, Payment.status == "pending", Payment.kind.in_(REWARD_KINDS)
        )
    ):
        p.status = "paid" if approved else "failed"
        p.state, p.state_at = p.status, utcnow()


# -- estimates --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostEstimate:
    """The most the study can cost, in parts, against its budget (METHODS.md §5)."""

    hits: int
    assignments: int
    rewards: Decimal
    fees: Decimal
    """The provider's fees on the rewards."""
    total: Decimal
    budget: Decimal
    currency: str
    bonuses: Decimal = Decimal(0)
    """Bonuses already in the ledger; no bonus is planned ahead, and each one is checked against the budget."""
    bonus_fees: Decimal = Decimal(0)
    hits_covered: int = 0
    """How many HITs, in posting order, the budget covers at their worst case."""

    @property
    def within_budget(self) -> bool:
        """Whether every HIT and every booked bonus fit the budget."""
        return within_budget(Decimal(0), self.total, self.budget)

    def describe(self) -> str:
        """One sentence for the coordinator: the parts, the total and the budget."""
        text = (
            f"{self.hits} HITs × their places = {self.assignments} assignments; rewards {self.rewards} "
            f"+ fees {self.fees} + bonuses {self.bonuses} (+ fees {self.bonus_fees}) = {self.total} "
            f"{self.currency} at most (budget {self.budget})"
        )
        if not self.within_budget:
            text += f"; the budget covers the first {self.hits_covered} of {self.hits} HITs"
        return text


def estimate_cost(session: Session, ctx: StudyContext) -> CostEstimate:
    """What the whole study costs if every place of every HIT is taken and paid, plus the ledger's bonuses."""
    hits = session.scalars(select(Hit).where(Hit.study_id == ctx.study_id).order_by(Hit.index)).all()
    costs = [worst_case(ctx, h) for h in hits]
    rewards = sum((h.reward * h.max_assignments for h in hits), Decimal(0))
    booked = booked_bonuses(session, ctx.study_id)
    bonuses, bonus_fees = booked["bonus"], booked["bonus_fee"]
    hit_total, budget = sum(costs, Decimal(0)), budget_of(session, ctx.study_id)
    return CostEstimate(
        len(hits),
        sum(h.max_assignments for h in hits),
        rewards,
        hit_total - rewards,
        hit_total + bonuses + bonus_fees,
        budget,
        ctx.config.provider.currency,
        bonuses,
        bonus_fees,
        hits_covered(costs, bonuses + bonus_fees, budget),
    )


# -- the one approve path ---------------------------------------------------------------------------


def record_decision(
    session: Session, ctx: StudyContext, a: Assignment, status: str, now: dt.datetime, actor: str = "scheduler"
) -> None:
    """Record a decision the provider holds: the assignment's status, and its reward rows paid or failed."""
    settle_reward(session, a, approved=status == "approved")
    a.status, a.decided_at = status, now
    if status == "approved" and ctx.provider.confirmation == "platform" and a.confirmed_at is None:
        a.confirmed_at = now  # every caller approves only work the platform shows as this worker's
    add_event(session, ctx.study_id, f"assignment_{status}", actor, {"assignment": a.id})


def approve(
    database_url: str,
    ctx: StudyContext,
    assignment_id: int,
    now: dt.datetime,
    *,
    seen: ProviderWork | None = None,
    actor: str = "scheduler",
    coordinator: bool = False,
    override_platform: str | None = None,
) -> str:
    """Approve one submitted assignment if its guards let it through: the path of the scheduler, ``hitkit
    sync`` and the dashboard. Returns ``approved``, ``waiting`` (not yet), ``refused`` (the platform
    records another worker), ``held``, ``rejected`` or ``gone`` (no longer submitted).

    Guards, in order: the review window (``schedule.approve_after_s``); the platform's agreement that
    the work is this worker's and handed in (``seen``, the caller's fresh listing, or else asked now);
    a panel's confirmation by ``hitkit confirm``; the QC outcome policy (``schedule.qc_failures``).
    A ``coordinator`` decision (dashboard, ``hitkit held``) skips the review window, the confirmation
    (the coordinator's approval confirms) and the QC policy, never the platform check unless
    ``override_platform`` gives the coordinator's reason, which is logged as an ``approve_override``
    event. No transaction is open while the platform is asked.
    """
    if override_platform is not None and not (coordinator and override_platform.strip()):
        raise HitkitError("only a coordinator's approval may override the platform check, and it needs a reason")
    delay = dt.timedelta(seconds=ctx.config.schedule.approve_after_s)
    with session_scope(database_url) as session:
        a = session.get(Assignment, assignment_id)
        if a is None or a.status != "submitted":
            return "gone"
        if not coordinator and (a.submitted_at is None or a.submitted_at > now - delay):
            return "waiting"
        provider_assignment_id, worker = provider_assignment_of(a), a.worker.external_id
    if override_platform is None:
        agrees = provider_agrees(seen if seen is not None else ctx.provider.work_of(provider_assignment_id), worker)
        if agrees is None:
            return "waiting"  # not handed in on the provider yet
    with session_scope(database_url) as session:
        a = session.get_one(Assignment, assignment_id)
        if a.status != "submitted":
            return "gone"
        if override_platform is not None:
            add_event(
                session,
                ctx.study_id,
                "approve_override",
                actor,
                {"assignment": a.id, "reason": override_platform.strip()},
            )
        elif agrees is False:
            record_once(
                session,
                ctx.study_id,
                "approve_held",
                {"assignment": a.id, "reason": "the provider records another worker on this assignment"},
            )
            return "refused"
        elif ctx.provider.confirmation == "platform" and a.confirmed_at is None:
            a.confirmed_at = now  # the platform lists this work as this worker's: it counts from here
        if coordinator and ctx.provider.confirmation in ("coordinator", "platform") and a.confirmed_at is None:
            a.confirmed_at = now  # the coordinator's approval confirms a panel's work
        if not coordinator and ctx.provider.confirmation == "coordinator" and a.confirmed_at is None:
            return "waiting"  # a panel's work is approved once `hitkit confirm` has confirmed it
        outcome = None if coordinator else qc_policy.gate(session, ctx, a)
    if outcome == "hold":
        return "held"  # for the coordinator (dashboard or `hitkit held`)
    if outcome == "reject":  # schedule.qc_failures: rejected with the study's reason
        ctx.provider.reject(provider_assignment_id, ctx.config.schedule.qc_reject_reason or "")
        with session_scope(database_url) as session:
            a = session.get_one(Assignment, assignment_id)
            if a.status == "submitted":
                record_decision(session, ctx, a, "rejected", now)
                qc_policy.note_rejected(session, ctx, a)
        return "rejected"
    with session_scope(database_url) as session:  # committed before the provider pays: never twice
        a = session.get_one(Assignment, assignment_id, with_for_update=True)
        if a.status != "submitted":
            return "gone"
        book_reward(session, ctx, a)
    ctx.provider.approve(provider_assignment_id)
    with session_scope(database_url) as session:
        a = session.get_one(Assignment, assignment_id, with_for_update=True)
        if a.status == "submitted":
            record_decision(session, ctx, a, "approved", now, actor)
    return "approved"
