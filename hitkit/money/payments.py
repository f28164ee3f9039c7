"""Payment states: each bonus moves planned → created → sending → paid → confirmed, one step at a time.

The ledger (:mod:`hitkit.money.ledger`) writes a bonus as ``planned``. Paying it is a walk through explicit
states, each recorded under the row's lock (``SELECT … FOR UPDATE`` on PostgreSQL, SQLite's writer lock)
in a transaction that also checks this process still leads the study (:func:`hitkit.study.lease.check`):

- ``planned``: nothing is on the platform. A two-step platform (Prolific) is asked to *set up* the bonus,
  which pays nothing; its id is recorded and the row becomes ``created``. (A crash before the id is
  recorded leaves an unpaid set-up on the platform; setting up again costs nothing.)
- ``created`` → ``sending`` is recorded *before* the pay call, which is not idempotent.
- the pay call answered → ``paid``; refused with an answer (nothing was paid) → back to ``created``;
  no answer → it stays ``sending``.
- ``sending`` is left only by asking the platform (:meth:`CrowdProvider.settle_bonus`): shown paid →
  ``confirmed``; shown unpaid (for Prolific: still not in the submission's ``bonus_payments`` an hour
  after the call) → back to the step before, and paid from there; cannot tell, or the payment shown could
  be this bonus's or a twin's (same amount, same assignment, also sent without an answer) → it waits for
  the coordinator. Never "no record, so pay again", never "a payment of some bonus, so this one".
- ``paid`` → ``confirmed`` once the platform shows it (``hitkit sync``).

One-step platforms (MTurk's SendBonus with its request token, hitkit's own providers) go planned →
sending → paid. Each walk runs under the study's lease, so two processes never walk one study's
payments at once; the row lock and state checks keep a step from being taken twice even so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Payment, utcnow
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.events import add_event
from hitkit.money.ledger import provider_assignment_of
from hitkit.providers.base import BonusOutcome, PendingBonus
from hitkit.study import lease

if TYPE_CHECKING:
    from hitkit.study.stored import StudyContext

STATES = ("planned", "created", "sending", "paid", "confirmed", "failed")
DONE = ("paid", "confirmed")
OPEN = ("planned", "created", "sending")


class PaymentUncertain(HitkitError):
    """A pay call went out without an answer: only the platform's record can settle it (``hitkit sync``)."""


def state_of(row: Payment) -> str:
    """The row's state; rows written without one (older hitkit) count from their status."""
    if row.status == "paid":
        return row.state if row.state in DONE else "paid"
    if row.state:
        return row.state
    return {"paid": "paid", "failed": "failed"}.get(row.status, "planned")


def legacy_keys(key: str) -> list[str]:
    """Keys an older hitkit gave the bonus now keyed ``key`` (``settle:S:A`` for ``bonus:S:A:settle``)."""
    parts = key.split(":")
    if len(parts) == 4 and parts[0] == "bonus" and parts[3] == "settle":
        return [f"settle:{parts[1]}:{parts[2]}"]
    return []


def bonus_keys(key: str) -> list[str]:
    return [key, *legacy_keys(key)]


def locked_bonus(session: Session, key: str) -> Payment | None:
    """The bonus row keyed ``key`` (or an older key), locked for this transaction."""
    return session.scalar(
        select(Payment).where(Payment.idempotency_key.in_(bonus_keys(key)), Payment.kind == "bonus").with_for_update()
    )


def move(
    database_url: str,
    study_id: int,
    key: str,
    frm: tuple[str, ...],
    to: str,
    ref: str | None = None,
    at: dt.datetime | None = None,
    actor: str = "scheduler",
) -> bool:
    """Move the bonus (and its fee) from one of ``frm`` to ``to`` under the row lock and the lease; False
    when the row is no longer in ``frm`` (another step was taken meanwhile)."""
    with session_scope(database_url) as session:
        lease.check(session, study_id)
        row = locked_bonus(session, key)
        if row is None or state_of(row) not in frm:
            return False
        now = utcnow()
        fee = session.scalar(
            select(Payment).where(Payment.idempotency_key == f"{row.idempotency_key}:fee").with_for_update()
        )
        for p in (row, fee):
            if p is None:
                continue
            p.state, p.state_at = to, at or now
            p.status = "paid" if to in DONE else "pending"
        if ref:
            row.provider_ref = ref
        add_event(
            session,
            study_id,
            "bonus_state",
            actor,
            {
                "key": row.idempotency_key,
                "from": frm[0] if len(frm) == 1 else list(frm),
                "to": to,
                "ref": row.provider_ref,
            },
        )
    return True


def pending_of(session: Session, row: Payment) -> PendingBonus:
    """What a provider needs to settle the bonus ``row``: ids, amount, when it was sent, its paid twins and its
    twins also sent without an answer (same amount, same assignment)."""
    a = session.get_one(Assignment, row.assignment_id)
    alike = (
        select(func.count())
        .select_from(Payment)
        .where(
            Payment.assignment_id == row.assignment_id,
            Payment.kind == "bonus",
            Payment.id != row.id,
            Payment.amount == row.amount,
        )
    )
    twins = session.execute(
        alike.where((Payment.state.in_(DONE)) | (Payment.state.is_(None) & (Payment.status == "paid")))
    ).scalar_one()
    sending = session.execute(alike.where(Payment.state == "sending")).scalar_one()
    sent_at = row.state_at if state_of(row) == "sending" else None
    return PendingBonus(
        row.idempotency_key,
        a.worker.external_id,
        provider_assignment_of(a),
        Decimal(row.amount),
        state_of(row),
        row.provider_ref,
        twins,
        sent_at,
        sending,
    )


def pay(
    database_url: str,
    ctx: StudyContext,
    key: str,
    reason: str,
    actor: str = "scheduler",
    resolve: bool = False,
    on_paid: Callable[[str], None] | None = None,
) -> tuple[str, str]:
    """Walk the bonus ``key`` to paid; (outcome, the platform's reference).

    Outcomes: ``paid`` (paid now), ``found`` (the platform shows it paid), ``done`` (already paid),
    ``unknown`` (a pay call without an answer that the platform cannot settle yet), ``ambiguous`` (the
    platform shows a payment that could be this bonus's or a twin's). A ``sending`` bonus
    is settled from the platform only when ``resolve`` (``hitkit sync``); otherwise PaymentUncertain.
    """
    provider = ctx.provider
    with lease.held(database_url, ctx.study_id, actor):
        for _ in range(6):
            with session_scope(database_url) as session:
                row = locked_bonus(session, key)
                if row is None:
                    raise HitkitError(f"the ledger holds no bonus keyed {key}")
                step, key = state_of(row), row.idempotency_key
                bonus = pending_of(session, row)
            if step in DONE:
                return "done", bonus.provider_ref or ""
            if step == "failed":
                raise HitkitError(f"the bonus {key} was marked failed; record a new bonus to pay it")
            if step == "planned" and provider.two_step_bonus:
                legacy = provider.recorded_bonus(key)  # steps an older hitkit remembered as events
                if legacy and legacy.get("paid"):
                    move(database_url, ctx.study_id, key, ("planned",), "paid", legacy["bonus_id"], actor=actor)
                elif legacy and legacy.get("sent_at") is not None:
                    move(
                        database_url,
                        ctx.study_id,
                        key,
                        ("planned",),
                        "sending",
                        legacy["bonus_id"],
                        at=legacy["sent_at"],
                        actor=actor,
                    )
                elif legacy:
                    move(database_url, ctx.study_id, key, ("planned",), "created", legacy["bonus_id"], actor=actor)
                else:
                    ref = provider.create_bonus(bonus.provider_assignment_id, bonus.amount)
                    move(database_url, ctx.study_id, key, ("planned",), "created", ref, actor=actor)
                continue
            if step in ("planned", "created"):
                set_up = bonus.provider_ref if provider.two_step_bonus else None
                if provider.two_step_bonus and set_up is None:  # `created` is recorded with the set-up's id
                    raise HitkitError(
                        f"the bonus {key} is {step} on {provider.name} without the id of its set-up "
                        "there, so it cannot be sent; nothing was paid"
                    )
                if not move(database_url, ctx.study_id, key, (step,), "sending", actor=actor):
                    continue
                try:
                    if set_up is not None:
                        provider.send_bonus(set_up)
                        ref = set_up
                    else:
                        ref = provider.pay_bonus(
                            bonus.worker_id, bonus.provider_assignment_id, bonus.amount, reason, key
                        )
                except Exception as exc:
                    if getattr(exc, "outcome_unknown", True) is False:  # refused with an answer: nothing paid
                        move(database_url, ctx.study_id, key, ("sending",), step, actor=actor)
                    raise
                move(database_url, ctx.study_id, key, ("sending",), "paid", ref, actor=actor)
                if on_paid is not None:
                    on_paid(ref or "")
                return "paid", ref or ""
            # sending: the pay call may have gone out; only the platform can say
            if not resolve:
                raise PaymentUncertain(
                    f"the bonus {key} ({bonus.provider_ref or 'no platform id'}) was sent to {provider.name}'s pay "
                    f"call without an answer; `hitkit sync` settles it from the platform's record of payments "
                    f"— hitkit will not risk paying twice"
                )
            outcome = provider.settle_bonus(bonus)
            if outcome is BonusOutcome.PAID:
                move(database_url, ctx.study_id, key, ("sending",), "confirmed", actor=actor)
                return "found", bonus.provider_ref or ""
            if outcome in (BonusOutcome.UNKNOWN, BonusOutcome.AMBIGUOUS):
                return outcome.value, bonus.provider_ref or ""
            back = "created" if provider.two_step_bonus and bonus.provider_ref else "planned"
            move(database_url, ctx.study_id, key, ("sending",), back, actor=actor)
        raise HitkitError(f"the bonus {key} did not settle in six steps; run `hitkit sync` again")


def confirm_paid(database_url: str, ctx: StudyContext, actor: str = "cli") -> list[str]:
    """Bonuses ``paid`` that the platform now shows become ``confirmed`` (two-step platforms list them)."""
    if not ctx.provider.two_step_bonus:
        return []
    with session_scope(database_url) as session:
        rows = session.scalars(
            select(Payment)
            .where(Payment.study_id == ctx.study_id, Payment.kind == "bonus", Payment.state == "paid")
            .order_by(Payment.id)
        ).all()
        by_sub: dict[tuple[str, Decimal], list[str]] = {}
        for row in rows:
            b = pending_of(session, row)
            by_sub.setdefault((b.provider_assignment_id, b.amount), []).append(row.idempotency_key)
        confirmed = {
            k: session.execute(
                select(func.count())
                .select_from(Payment)
                .where(
                    Payment.assignment_id
                    == session.scalar(select(Assignment.id).where(Assignment.provider_assignment_id == k[0]).limit(1)),
                    Payment.kind == "bonus",
                    Payment.amount == k[1],
                    Payment.state == "confirmed",
                )
            ).scalar_one()
            for k in by_sub
        }
    out = []
    with lease.held(database_url, ctx.study_id, actor):
        for (sub, amount), keys in by_sub.items():
            shown = ctx.provider.bonuses_shown(sub, amount)
            for key in keys[: max(0, shown - confirmed[(sub, amount)])]:
                if move(database_url, ctx.study_id, key, ("paid",), "confirmed", actor=actor):
                    out.append(key)
    return out
