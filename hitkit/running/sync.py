"""``hitkit sync``: make the database agree with the provider, without ever paying twice.

The provider is the truth about money and decisions (what it approved, rejected, paid); hitkit's
server is the truth about work (who completed what). Sync lists every assignment the provider holds
for the study's posted HITs and, for each, applies :func:`decide`:

- approve only work the provider shows as submitted *and* hitkit recorded as completed by the same
  worker (the provider's worker id equals the Worker row's external id);
- take over decisions the provider already holds (approved, rejected), with their ledger rows;
- record every disagreement as a ``sync_mismatch`` Event and report it, changing nothing.

Then it walks the ledger's open bonuses on from their recorded states (:mod:`hitkit.money.payments`): one
whose pay call may have gone out is settled only from the platform's record of payments
(:meth:`CrowdProvider.settle_bonus`), one that cannot be told yet is left for the coordinator, and paid
ones the platform now shows become confirmed. All of it under the study's lease.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Event, Hit, Payment, utcnow
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.events import add_event, record_once
from hitkit.money import ledger, payments
from hitkit.providers.base import ProviderWork, WorkStatus
from hitkit.study import lease
from hitkit.study.stored import StudyContext, resolve_secret
from hitkit.tables.schema import DONE_STATUSES

BONUS_MIN_AGE_S = 120.0
"""A pending bonus younger than this may still be in the hands of the process paying it; sync waits."""


@dataclass
class SyncReport:
    """What one sync did and found; every list holds plain data for ``--json``."""

    study: str
    checked: int = 0
    approved: list[int] = field(default_factory=list)
    marked: list[dict[str, Any]] = field(default_factory=list)
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    bonuses_paid: list[str] = field(default_factory=list)
    bonuses_confirmed: list[str] = field(default_factory=list)
    needs_review: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    """Of ``needs_review``: bonuses the platform shows a payment for that could be another bonus's (same amount)."""
    bonuses_waiting: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    not_handed_in: list[dict[str, Any]] = field(default_factory=list)
    """Work submitted in hitkit that the provider shows returned or timed out: the coordinator settles it."""
    reconciled: bool = True
    """False for providers whose marketplace is hitkit's own database (nothing to compare with)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def decide(ours_status: str | None, ours_worker: str | None, theirs: ProviderWork | None) -> str:
    """The action for one assignment: approve, mark_approved, mark_rejected, mark_returned, none, or ``mismatch:why``.

    ``ours_*`` describe hitkit's row (None when it has none); ``theirs`` the provider's (None when it
    lists none). Money follows the provider; approval needs both sides to agree on worker and work.
    """
    if theirs is None:
        return "mismatch:not submitted on the provider" if ours_status in DONE_STATUSES else "none"
    if ours_status is None:
        if theirs.status in (WorkStatus.SUBMITTED, WorkStatus.APPROVED):
            return "mismatch:the provider holds work hitkit has no record of"
        return "none"
    if theirs.worker_id != ours_worker:
        return "mismatch:the provider records another worker on this assignment"
    if theirs.status is WorkStatus.APPROVED:
        if ours_status == "approved":
            return "none"
        if ours_status in DONE_STATUSES:
            return "mark_approved"
        # Paid on the provider, but hitkit never saw the work finished: its answers must not count.
        return f"mismatch:approved on the provider but {ours_status} in hitkit"
    if theirs.status is WorkStatus.REJECTED:
        return "none" if ours_status == "rejected" else "mark_rejected"
    if theirs.status is WorkStatus.SUBMITTED:
        if ours_status in DONE_STATUSES:
            return "approve"
        return f"mismatch:submitted on the provider but {ours_status} in hitkit"
    if ours_status == "submitted" and theirs.status is WorkStatus.WORKING:
        return "none"  # not handed in on the provider yet: the scheduler hands it in (or lists it) in time
    if ours_status in DONE_STATUSES:
        return f"mismatch:completed in hitkit but {theirs.status.value} on the provider"
    if ours_status == "accepted" and theirs.status is WorkStatus.RETURNED:
        return "mark_returned"  # given back or timed out on the provider: its place is free again
    return "none"


def sync_study(
    database_url: str, study_name: str, bonus_min_age_s: float = BONUS_MIN_AGE_S, wait_s: float = lease.WAIT_S
) -> SyncReport:
    """Reconcile one study with its provider, then settle its pending bonuses (see the module docstring).

    Sync acts only while it holds the study's lease (:mod:`hitkit.study.lease`): it waits up to
    ``wait_s`` for a leading scheduler to hand over at the end of its tick, so two syncs, or a sync and
    a scheduler, never act on one study at once. The provider is only ever called with no transaction
    open, and every payment moves one recorded state at a time (:mod:`hitkit.money.payments`), so running it
    again repeats nothing. Bonuses recorded less than ``bonus_min_age_s`` ago are left alone: the
    process that recorded them may be about to pay them.
    """
    secret = resolve_secret(database_url)
    with session_scope(database_url) as session:
        ctx = StudyContext.load(session, study_name, secret)
    with lease.held(database_url, ctx.study_id, "sync", wait_s=wait_s):
        return _sync(database_url, ctx, study_name, bonus_min_age_s)


def _sync(database_url: str, ctx: StudyContext, study_name: str, bonus_min_age_s: float) -> SyncReport:
    with session_scope(database_url) as session:
        hit_ids = [
            h
            for h in session.scalars(
                select(Hit.provider_hit_id)
                .where(Hit.study_id == ctx.study_id, Hit.provider_hit_id.is_not(None), Hit.status != "pending")
                .order_by(Hit.index)
            )
            if h is not None
        ]  # IS NOT NULL above; narrowed for the type checker
    report = SyncReport(study_name)
    listed = ctx.provider.list_work(hit_ids)
    if listed is None:
        report.reconciled = False
    else:
        to_approve = _reconcile(database_url, ctx, listed, report)
        now = utcnow()
        for assignment_id, work in to_approve:
            try:
                # The platform lists it as this worker's: the same guards as the scheduler's (review
                # window, confirmation, QC outcome policy) decide whether it is approved now.
                if ledger.approve(database_url, ctx, assignment_id, now, seen=work) == "approved":
                    report.approved.append(assignment_id)
            except SQLAlchemyError:
                raise
            except Exception as exc:  # noqa: BLE001 - one failure must not stop the others; sync runs again
                report.errors.append(f"assignment {assignment_id}: {type(exc).__name__}: {exc}")
                with session_scope(database_url) as session:
                    add_event(
                        session,
                        ctx.study_id,
                        "sync_failed",
                        "cli",
                        {"assignment": assignment_id, "error": f"{type(exc).__name__}: {exc}"[:1000]},
                    )
        with session_scope(database_url) as session:
            add_event(
                session,
                ctx.study_id,
                "sync",
                "cli",
                {
                    "checked": report.checked,
                    "approved": len(report.approved),
                    "mismatches": len(report.mismatches),
                },
            )
    with session_scope(database_url) as session:
        report.not_handed_in = [
            d
            for d in session.scalars(
                select(Event.data).where(Event.study_id == ctx.study_id, Event.kind == "work_not_handed_in")
            )
            if session.scalar(select(Assignment.status).where(Assignment.id == d.get("assignment"))) == "submitted"
        ]
    _settle_bonuses(database_url, ctx, report, utcnow() - dt.timedelta(seconds=bonus_min_age_s))
    return report


def _reconcile(
    database_url: str, ctx: StudyContext, listed: list[ProviderWork], report: SyncReport
) -> list[tuple[int, ProviderWork]]:
    """Record what the provider's listing settles; return the assignments to approve, each with its listing."""
    theirs = {w.provider_assignment_id: w for w in listed}
    to_approve: list[tuple[int, ProviderWork]] = []
    with session_scope(database_url) as session:
        # A forged arrival can put a second row on someone's assignment id, so rows are not keyed by it.
        ours = list(
            session.scalars(select(Assignment).join(Hit).where(Hit.study_id == ctx.study_id).order_by(Assignment.id))
        )
        pids = {a.id: ledger.provider_assignment_of(a) for a in ours}
        known = set(pids.values())
        pairs: list[tuple[str, Assignment | None, ProviderWork | None]] = [
            (pids[a.id], a, theirs.get(pids[a.id])) for a in ours
        ]
        pairs += [(pid, None, work) for pid, work in theirs.items() if pid not in known]
        now = utcnow()
        for pid, a, work in pairs:
            action = decide(a.status if a else None, a.worker.external_id if a else None, work)
            report.checked += 1
            if action == "none":
                continue
            if action.startswith("mismatch:"):
                data = {
                    "provider_assignment_id": pid,
                    "reason": action.split(":", 1)[1],
                    "assignment": a.id if a else None,
                    "hitkit_status": a.status if a else None,
                    "hitkit_worker": a.worker.external_id if a else None,
                    "provider_status": work.status.value if work else None,
                    "provider_worker": work.worker_id if work else None,
                }
                record_once(session, ctx.study_id, "sync_mismatch", data)
                report.mismatches.append(data)
                if (
                    a is not None
                    and work is not None
                    and work.status is WorkStatus.APPROVED
                    and work.worker_id == a.worker.external_id
                ):
                    ledger.book_reward(session, ctx, a, paid=True)  # the money left the account all the same
                continue
            if a is None or work is None:  # decide() acts only on work both hitkit and the provider list
                raise HitkitError(f"sync cannot {action} {pid}: hitkit or the provider does not list it")
            if action == "approve":
                to_approve.append((a.id, work))
            elif action == "mark_returned":
                a.status = "returned"
                add_event(
                    session,
                    ctx.study_id,
                    "assignment_returned",
                    "cli",
                    {"assignment": a.id, "provider_assignment_id": pid},
                )
                report.marked.append({"assignment": a.id, "status": "returned"})
            else:
                status = "approved" if action == "mark_approved" else "rejected"
                if status == "approved":
                    ledger.book_reward(session, ctx, a)
                ledger.record_decision(session, ctx, a, status, now)
                report.marked.append({"assignment": a.id, "status": status})
    return to_approve


def _open_bonuses(session: Session, ctx: StudyContext, recorded_before: dt.datetime, report: SyncReport) -> list[str]:
    """The keys of bonuses not yet known paid (state planned, created or sending), oldest first."""
    rows = session.scalars(
        select(Payment)
        .where(
            Payment.study_id == ctx.study_id,
            Payment.kind == "bonus",
            Payment.state.in_(payments.OPEN) | (Payment.state.is_(None) & Payment.status.in_(("pending", "paying"))),
        )
        .order_by(Payment.id)
    )
    out = []
    for p in rows:
        if p.created_at > recorded_before:
            report.bonuses_waiting.append(p.idempotency_key)
            continue
        out.append(p.idempotency_key)
    return out


def _settle_bonuses(database_url: str, ctx: StudyContext, report: SyncReport, recorded_before: dt.datetime) -> None:
    with session_scope(database_url) as session:
        keys = _open_bonuses(session, ctx, recorded_before, report)
    for key in keys:
        try:
            outcome, _ = payments.pay(database_url, ctx, key, _reason(database_url, ctx, key), "sync", resolve=True)
            if outcome == "found":
                with session_scope(database_url) as session:
                    add_event(session, ctx.study_id, "bonus_confirmed", "cli", {"key": key})
                report.bonuses_confirmed.append(key)
            elif outcome == "paid":
                report.bonuses_paid.append(key)
            elif outcome in ("unknown", "ambiguous"):
                with session_scope(database_url) as session:
                    with session.no_autoflush:
                        row = session.execute(select(Payment).where(Payment.idempotency_key == key)).scalar_one()
                        worker = session.get_one(Assignment, row.assignment_id).worker.external_id
                    record_once(
                        session,
                        ctx.study_id,
                        "bonus_needs_review",
                        {
                            "key": key,
                            "provider_ref": row.provider_ref,
                            "amount": str(row.amount),
                            "worker": worker,
                            "why": outcome,
                        },
                    )
                report.needs_review.append(key)
                if outcome == "ambiguous":
                    report.ambiguous.append(key)
        except (SQLAlchemyError, lease.LeaseLost):
            raise
        except Exception as exc:  # noqa: BLE001 - the bonus stays where it is; the next sync goes on from there
            report.errors.append(f"bonus {key}: {type(exc).__name__}: {exc}")
    try:
        report.bonuses_confirmed += [
            k for k in payments.confirm_paid(database_url, ctx, "sync") if k not in report.bonuses_paid
        ]
    except (SQLAlchemyError, lease.LeaseLost):
        raise
    except Exception as exc:  # noqa: BLE001 - confirming is tried again by the next sync
        report.errors.append(f"confirming paid bonuses: {type(exc).__name__}: {exc}")


def _reason(database_url: str, ctx: StudyContext, key: str) -> str:
    with session_scope(database_url) as session:
        return (
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


def describe(report: SyncReport) -> str:
    """The report as a few lines a coordinator can act on."""
    if not report.reconciled:
        lines = [f"{report.study}: the provider keeps no state of its own; nothing to reconcile."]
    else:
        lines = [
            (
                f"{report.study}: {report.checked} assignment(s) checked, {len(report.approved)} approved, "
                f"{len(report.marked)} decision(s) taken over from the provider."
            )
        ]
    for m in report.mismatches:
        lines.append(
            f"  mismatch {m['provider_assignment_id']}: {m['reason']} (hitkit: {m['hitkit_status']} "
            f"by {m['hitkit_worker']}; provider: {m['provider_status']} by {m['provider_worker']})"
        )
    if report.bonuses_paid or report.bonuses_confirmed:
        lines.append(f"  bonuses: {len(report.bonuses_paid)} paid now, {len(report.bonuses_confirmed)} found paid")
    if report.bonuses_waiting:
        lines.append(
            f"  {len(report.bonuses_waiting)} bonus(es) recorded in the last {BONUS_MIN_AGE_S:.0f} s may still "
            f"be being paid; run `hitkit sync` again later"
        )
    for key in report.needs_review:
        if key in report.ambiguous:
            lines.append(
                f"  bonus {key}: its pay call got no answer, and the provider shows a payment of its amount "
                f"that could be this bonus or another one of the same amount to the same worker; check them on "
                f"the provider's site, then set each ledger row to paid (or pending to pay it)"
            )
            continue
        lines.append(
            f"  bonus {key}: its pay call got no answer and the provider cannot say whether it was paid; "
            f"check it on the provider's site, then set its ledger row to paid (or pending to pay it)"
        )
    for item in report.not_handed_in:
        lines.append(
            f"  assignment {item['assignment']} ({item.get('provider_assignment_id')}): submitted in hitkit "
            f"but returned or timed out on the provider, which can no longer approve it; settle it with "
            f"`hitkit settle STUDY_FILE {item['assignment']} --pay` (its reward as a bonus) or `--drop` "
            f"(its answers are not counted)"
        )
    for err in report.errors:
        lines.append(f"  error: {err} (run `hitkit sync` again)")
    return "\n".join(lines)
