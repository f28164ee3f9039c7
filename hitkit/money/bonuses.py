"""Bonuses in the ledger: booked within the budget under one key each, then paid once per key.

A bonus and its fee are ``Payment`` rows written here as ``pending``/``planned`` *before* the provider
is asked to pay (keys: :func:`hitkit.money.ledger.bonus_key`, :func:`hitkit.money.ledger.fee_key`, and
the older keys of :func:`hitkit.money.payments.legacy_keys`); paying walks the payment states of
:mod:`hitkit.money.payments` under the study's lease. The budget check is the ledger's
(:func:`hitkit.money.ledger.within_budget` on its committed spend), so a bonus never passes the ceiling.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Event, Payment
from hitkit.db.session import session_scope
from hitkit.errors import BudgetError, HitkitError
from hitkit.events import add_event
from hitkit.money.amounts import cents
from hitkit.money.ledger import bonus_key, budget_of, committed_spend, fee_key, within_budget
from hitkit.money.payments import legacy_keys

if TYPE_CHECKING:
    from hitkit.study.stored import StudyContext


def bonus_by_tag(session: Session, study_id: int, worker_id: int, tag: str) -> Payment | None:
    """The worker's bonus whose key ends in ``tag`` (a dashboard form's nonce), in either key format."""
    for row in session.scalars(
        select(Payment).where(Payment.study_id == study_id, Payment.worker_id == worker_id, Payment.kind == "bonus")
    ):
        if row.idempotency_key.rsplit(":", 1)[-1] == tag:
            return row
    return None


def bonus_row(session: Session, key: str) -> Payment | None:
    """The ledger's bonus row keyed ``key``, or under one of its older keys (:func:`legacy_keys`)."""
    return session.scalar(
        select(Payment).where(Payment.idempotency_key.in_([key, *legacy_keys(key)]), Payment.kind == "bonus")
    )


def record_bonus(
    session: Session, ctx: StudyContext, a: Assignment, amount: Decimal, key: str, reason: str, actor: str
) -> Payment:
    """The bonus keyed ``key`` and its fee as pending rows (once), within the budget; return the bonus row.

    A key already used for another amount or assignment is refused (HitkitError); a bonus that
    would take the committed spend past the budget is refused (BudgetError) before anything is written.
    """
    row = bonus_row(session, key)
    if row is not None:
        if row.amount != amount or row.assignment_id != a.id:
            raise HitkitError(
                f"bonus key {row.idempotency_key} was already used for {row.amount} on assignment "
                f"{row.assignment_id}; give every distinct bonus its own key"
            )
        return row
    fee = ctx.provider.bonus_fee(amount)
    committed, budget = committed_spend(session, ctx), budget_of(session, ctx.study_id)
    if not within_budget(committed, amount + fee, budget):
        raise BudgetError(
            f"a bonus of {amount} (+ {fee} fee) would take the committed spend from {committed} past "
            f"the budget of {budget} {ctx.config.provider.currency}; raise 'budget:' in the study file "
            f"and resume the study, or pay less"
        )
    common = {
        "study_id": ctx.study_id,
        "assignment_id": a.id,
        "worker_id": a.worker_id,
        "currency": ctx.config.provider.currency,
        "status": "pending",
        "state": "planned",
    }
    row = Payment(kind="bonus", amount=amount, idempotency_key=key, **common)
    session.add_all([row, Payment(kind="bonus_fee", amount=fee, idempotency_key=fee_key(key), **common)])
    add_event(
        session,
        ctx.study_id,
        "bonus_recorded",
        actor,
        {"key": key, "assignment": a.id, "amount": str(amount), "reason": reason},
    )
    session.flush()
    return row


def pay_bonus(
    database_url: str, ctx: StudyContext, key: str, actor: str = "scheduler", note: dict | None = None
) -> str:
    """Pay the ledger's bonus ``key`` through the provider, one recorded state at a time, under the study's
    lease (:func:`hitkit.money.payments.pay`); the provider's reference. A bonus whose pay call went out without
    an answer is not paid again here (PaymentUncertain): ``hitkit sync`` settles it from the platform.
    """
    from hitkit.money.payments import pay

    with session_scope(database_url) as session:
        row = bonus_row(session, key)
        if row is None:
            raise HitkitError(f"the ledger holds no bonus keyed {key}")
        key = row.idempotency_key
        reason = (
            next(
                (
                    d.get("reason")
                    for d in session.scalars(
                        select(Event.data).where(Event.study_id == ctx.study_id, Event.kind == "bonus_recorded")
                    )
                    if d.get("key") == key
                ),
                None,
            )
            or "Bonus for your work"
        )

    def paid(ref: str) -> None:
        with session_scope(database_url) as session:
            add_event(session, ctx.study_id, "bonus_paid", actor, {"key": key, "ref": ref, **(note or {})})

    return pay(database_url, ctx, key, reason, actor, on_paid=paid)[1]


def grant_bonus(
    database_url: str,
    study_name: str,
    assignment_id: int,
    amount: Decimal,
    reason: str,
    key: str | None = None,
    tag: str | int = 1,
) -> str:
    """Pay a bonus on an assignment exactly once per key (``bonus_key(study, assignment, tag)`` unless given).

    The bonus and its fee are committed to the ledger as ``pending`` before the provider is called,
    so a crash or a lost answer leaves a row that ``hitkit sync`` settles without paying twice.
    The budget is a hard ceiling: a bonus that would pass it is refused (BudgetError).
    """
    from hitkit.study.stored import StudyContext, resolve_secret
    from hitkit.tables.schema import DONE_STATUSES

    amount = cents(amount)
    if amount <= 0:
        raise HitkitError(f"a bonus must be positive; got {amount}")
    with session_scope(database_url) as session:
        ctx = StudyContext.load(session, study_name, resolve_secret(database_url))
        a = session.get(Assignment, assignment_id)
        if a is None or a.hit.study_id != ctx.study_id or a.status not in DONE_STATUSES:
            raise HitkitError(
                f"assignment {assignment_id} is not submitted or approved work of study "
                f"'{study_name}'; bonuses go to work that was handed in"
            )
        key = record_bonus(
            session, ctx, a, amount, key or bonus_key(ctx.study_id, a.id, tag), reason, "scheduler"
        ).idempotency_key
    return pay_bonus(database_url, ctx, key)
