"""The scheduler: one idempotent ``tick`` per study, run by APScheduler with its jobs in the database.

Each tick reads the truth from the database and moves the study one step: expire assignments held
too long (their places open again), re-open HITs whose listing ran out while work is left, approve
and pay submitted work (each assignment on its own: one the provider fails on waits for the next
tick), tell the provider about workers at the per-worker cap, post the next wave within the budget
and the concurrency cap, and mark the study complete at its target. Because every step is decided
from rows, a tick after ``kill -9`` simply continues; nothing is remembered in memory between ticks.
"""
from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import func, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from hitkit.db.models import (
    DONE_STATUSES,
    Assignment,
    Event,
    Hit,
    Payment,
    Study,
    Worker,
    utcnow,
)
from hitkit import qc_policy
from hitkit.db.session import session_scope
from hitkit.errors import BudgetError, ConfigError, HitkitError
from hitkit.money import cents, hit_cost
from hitkit.providers.base import ProviderWork, WorkStatus
from hitkit.study import StudyContext, resolve_secret

log = logging.getLogger(__name__)


def hits_to_post(pending_costs: Sequence[Decimal], committed: Decimal, budget: Decimal, open_hits: int,
                 max_concurrent: int, wave_size: int) -> int:
    """How many of the pending HITs (in order, with these worst-case costs) to post now.

    Never more than the wave, never more open HITs than the cap, and never so many that the
    worst-case spend of everything posted could pass the budget.
    """
    room = max(0, min(wave_size, max_concurrent - open_hits))
    n = 0
    for cost in pending_costs[:room]:
        if committed + cost > budget:
            break
        committed += cost
        n += 1
    return n


@dataclass
class TickReport:
    expired: int = 0
    reopened: int = 0
    approved: int = 0
    approve_failed: int = 0
    released: int = 0
    handed_in: int = 0
    capped: int = 0
    posted: int = 0
    completed_hits: int = 0
    study_completed: bool = False


def committed_spend(session: Session, ctx: StudyContext) -> Decimal:
    """Worst-case spend of every posted HIT plus every bonus in the ledger."""
    total = Decimal(0)
    for hit in session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status != "pending")):
        total += hit_cost(hit.reward, hit.max_assignments, ctx.fee(hit.reward, hit.max_assignments))
    bonuses = session.scalar(select(func.coalesce(func.sum(Payment.amount), 0))
                             .where(Payment.study_id == ctx.study_id, Payment.kind.in_(("bonus", "bonus_fee"))))
    return total + Decimal(bonuses)


def expire_stale_assignments(session: Session, ctx: StudyContext, now: dt.datetime) -> int:
    """Assignments accepted longer ago than the time limit lose their place.

    One conditional UPDATE per stale assignment (``WHERE status = 'accepted'``): a submit in flight
    holds the assignment's row lock, so the update waits for it and then finds the row no longer
    accepted, and leaves it alone; only the updates that hit a row write an event.
    """
    limit = dt.timedelta(minutes=ctx.config.hit.assignment_minutes)
    stale = session.scalars(select(Assignment.id).join(Hit).where(
        Hit.study_id == ctx.study_id, Assignment.status == "accepted", Assignment.accepted_at < now - limit)).all()
    expired = 0
    for assignment_id in stale:
        done = session.execute(update(Assignment)
                               .where(Assignment.id == assignment_id, Assignment.status == "accepted",
                                      Assignment.accepted_at < now - limit)
                               .values(status="expired").execution_options(synchronize_session="fetch"))
        if done.rowcount == 1:
            expired += 1
            session.add(Event(study_id=ctx.study_id, kind="assignment_expired", actor="scheduler",
                              data={"assignment": assignment_id}))
    return expired


def reopen_lapsed_hits(database_url: str, ctx: StudyContext, now: dt.datetime) -> int:
    """Posted HITs whose listing lapsed while places are still unfilled get a fresh lifetime."""
    with session_scope(database_url) as session:
        lapsed = [(h.id, h.provider_hit_id, h.lifetime_s) for h in session.scalars(select(Hit).where(
            Hit.study_id == ctx.study_id, Hit.status == "posted", Hit.expires_at <= now))]
    n = 0
    for hit_id, provider_hit_id, lifetime_s in lapsed:
        ctx.provider.extend_hit(provider_hit_id, 0, lifetime_s)  # no transaction open: the provider may be slow
        with session_scope(database_url) as session:
            hit = session.get(Hit, hit_id)
            hit.expires_at = now + dt.timedelta(seconds=lifetime_s)
            session.add(Event(study_id=ctx.study_id, kind="hit_reopened", actor="scheduler", data={"hit": hit_id}))
        n += 1
    return n


RETURNS_EVERY_S = 30.0
"""Seconds between two listings of the provider's returned and timed-out work (a throttle, per process)."""
_returns_checked: dict[tuple[str, int], float] = {}


def release_returned(database_url: str, ctx: StudyContext) -> int:
    """Assignments the worker gave back on the provider (returned, timed out) free their place in hitkit.

    Only providers that list such work (``lists_returns``) are asked, at most every
    :data:`RETURNS_EVERY_S`, and only while hitkit holds accepted work that could be affected.
    """
    if not getattr(ctx.provider, "lists_returns", False):
        return 0
    import time

    key = (database_url, ctx.study_id)
    if time.monotonic() - _returns_checked.get(key, -1e18) < RETURNS_EVERY_S:
        return 0
    with session_scope(database_url) as session:
        accepted = session.scalar(select(func.count()).select_from(Assignment).join(Hit).where(
            Hit.study_id == ctx.study_id, Assignment.status == "accepted"))
    if not accepted:
        return 0
    listed = ctx.provider.list_work([])  # no transaction open while the provider answers
    _returns_checked[key] = time.monotonic()
    gone = {w.provider_assignment_id for w in listed or [] if w.status is WorkStatus.RETURNED}
    if not gone:
        return 0
    n = 0
    with session_scope(database_url) as session:
        for a in session.scalars(select(Assignment).join(Hit).where(
                Hit.study_id == ctx.study_id, Assignment.status == "accepted",
                Assignment.provider_assignment_id.in_(gone))):
            a.status = "returned"
            session.add(Event(study_id=ctx.study_id, kind="assignment_returned", actor="scheduler",
                              data={"assignment": a.id, "provider_assignment_id": a.provider_assignment_id}))
            n += 1
    return n


def record_once(session: Session, study_id: int, kind: str, data: dict) -> bool:
    """Add an Event unless one of this kind with the same data exists: a state that lasts is logged once."""
    seen = session.scalars(select(Event.data).where(Event.study_id == study_id, Event.kind == kind))
    if any(d == data for d in seen):
        return False
    session.add(Event(study_id=study_id, kind=kind, actor="scheduler", data=data))
    return True


def note_approve_failure(session: Session, study_id: int, assignment_id: int, error: str,
                         now: dt.datetime) -> None:
    """One ``approve_failed`` event per assignment and error, counting its attempts.

    A provider that is down for hours fails the same approval on every tick: that is one event
    whose ``attempts`` and ``last_at`` grow, not one event a tick. A different error is a new event.
    """
    for event in session.scalars(select(Event).where(Event.study_id == study_id, Event.kind == "approve_failed")):
        if event.data.get("assignment") == assignment_id and event.data.get("error") == error:
            # A new dict, not an in-place change: the JSON column only notices assignment.
            event.data = {**event.data, "attempts": event.data.get("attempts", 1) + 1, "last_at": now.isoformat()}
            return
    session.add(Event(study_id=study_id, kind="approve_failed", actor="scheduler",
                      data={"assignment": assignment_id, "error": error, "attempts": 1, "last_at": now.isoformat()}))


def book_reward(session: Session, ctx: StudyContext, a: Assignment) -> None:
    """The assignment's reward and fee as pending ledger rows, each once (keyed by study and assignment).

    Written before the provider is asked to approve: a call that fails or whose answer is lost
    leaves pending rows whose keys stop any retry (next tick, `hitkit sync`, the dashboard) booking
    twice. Every path that approves uses these keys.
    """
    fee = ctx.fee(a.hit.reward, a.hit.max_assignments)
    for kind, amount in (("reward", a.hit.reward), ("fee", fee)):
        key = f"{kind}:{ctx.study_id}:{a.id}"
        if session.scalar(select(Payment.id).where(Payment.idempotency_key == key)) is None:
            session.add(Payment(study_id=ctx.study_id, assignment_id=a.id, worker_id=a.worker_id, kind=kind,
                                amount=amount, currency=ctx.config.provider.currency, idempotency_key=key,
                                status="pending"))
    session.flush()


def approve_outside(database_url: str, ctx: StudyContext, assignment_id: int, now: dt.datetime) -> bool:
    """Book the reward (committed), ask the provider to approve with no transaction open, then record it.

    Safe to repeat: the reward rows are keyed, the provider's approve is idempotent, and an
    assignment already decided is left as it is. False when the assignment is no longer submitted.
    """
    with session_scope(database_url) as session:
        a = session.get(Assignment, assignment_id)
        if a is None or a.status != "submitted":
            return False
        book_reward(session, ctx, a)
        provider_assignment_id = a.provider_assignment_id
    ctx.provider.approve(provider_assignment_id)
    with session_scope(database_url) as session:
        a = session.get(Assignment, assignment_id)
        if a.status == "submitted":
            mark_decided(session, ctx, a, "approved", now)
    return True


def mark_decided(session: Session, ctx: StudyContext, a: Assignment, status: str, now: dt.datetime) -> None:
    """Record a decision the provider holds: the assignment's status, and its reward rows paid or failed."""
    for p in session.scalars(select(Payment).where(Payment.assignment_id == a.id, Payment.status == "pending",
                                                   Payment.kind.in_(("reward", "fee")))):
        p.status = "paid" if status == "approved" else "failed"
    a.status, a.decided_at = status, now
    if status == "approved" and ctx.provider.confirmation == "platform" and a.confirmed_at is None:
        a.confirmed_at = now  # every caller approves only work the platform shows as this worker's
    session.add(Event(study_id=ctx.study_id, kind=f"assignment_{status}", actor="scheduler",
                      data={"assignment": a.id}))


def provider_agrees(work: ProviderWork | None, worker_external_id: str) -> bool | None:
    """Whether the provider's view lets hitkit approve: True yes, False never (another worker), None not yet.

    MTurk's arrival parameters are not signed, so a worker id in a URL proves nothing; the
    provider's own record of who holds the assignment decides.
    """
    if work is None:
        return True
    if work.worker_id and work.worker_id != worker_external_id:
        return False
    return True if work.status in (WorkStatus.SUBMITTED, WorkStatus.APPROVED) else None


def approve_if_ready(database_url: str, ctx: StudyContext, assignment_id: int, now: dt.datetime,
                     platform_agrees: bool = False) -> str:
    """Approve one submitted assignment if every guard lets it through; the one approve path of the
    scheduler and ``hitkit sync``.

    The guards, in order: the review window (``schedule.approve_after_s``), the platform's or the
    coordinator's confirmation of who did the work, and the QC outcome policy
    (``schedule.qc_failures``). ``platform_agrees`` says the caller has just seen the platform list
    this work as this worker's, which confirms it. Returns ``approved``, ``waiting`` (not yet),
    ``held``, ``rejected`` or ``gone`` (no longer submitted). No transaction is open while the
    platform is asked.
    """
    delay = dt.timedelta(seconds=ctx.config.schedule.approve_after_s)
    with session_scope(database_url) as session:
        a = session.scalar(select(Assignment).where(Assignment.id == assignment_id, Assignment.status == "submitted",
                                                    Assignment.submitted_at <= now - delay))
        if a is None:
            gone = session.scalar(select(Assignment.status).where(Assignment.id == assignment_id)) != "submitted"
            return "gone" if gone else "waiting"
        if platform_agrees and ctx.provider.confirmation == "platform" and a.confirmed_at is None:
            a.confirmed_at = now  # the platform lists this work as this worker's: it counts from here
            session.flush()
        if ctx.provider.confirmation == "coordinator" and a.confirmed_at is None:
            return "waiting"  # a panel's work is approved once `hitkit confirm` has confirmed it
        outcome = qc_policy.gate(session, ctx, a)
        provider_assignment_id = a.provider_assignment_id
    if outcome == "hold":
        return "held"  # for the coordinator (dashboard or `hitkit held`)
    if outcome == "reject":  # schedule.qc_failures: rejected with the study's reason
        ctx.provider.reject(provider_assignment_id, ctx.config.schedule.qc_reject_reason or "")
        with session_scope(database_url) as session:
            a = session.get(Assignment, assignment_id)
            if a.status == "submitted":
                qc_policy.record_rejected(session, ctx, a, now)
        return "rejected"
    return "approved" if approve_outside(database_url, ctx, assignment_id, now) else "gone"


def approve_submitted(database_url: str, ctx: StudyContext, now: dt.datetime,
                      report: TickReport | None = None) -> int:
    """Approve submitted work after the configured delay and record the reward and fee, once each.

    Each assignment stands alone: one the provider refuses or fails on is logged and left
    submitted for the next tick, and the others go ahead. No transaction is open while the
    provider is asked (a slow provider must not hold the database). Work held for QC review is not
    looked at again (nor asked about on the platform) until the coordinator decides it.
    """
    delay = dt.timedelta(seconds=ctx.config.schedule.approve_after_s)
    with session_scope(database_url) as session:
        held = qc_policy.held_assignment_ids(session, ctx.study_id)
        rows = [(a.id, a.provider_assignment_id, a.worker.external_id) for a in session.scalars(
            select(Assignment).join(Hit).where(Hit.study_id == ctx.study_id, Assignment.status == "submitted",
                                               Assignment.submitted_at <= now - delay).order_by(Assignment.id))
                if a.id not in held]
    approved = 0
    for assignment_id, provider_assignment_id, external_id in rows:
        try:
            agrees = provider_agrees(ctx.provider.work_of(provider_assignment_id), external_id)
            if agrees is False:
                with session_scope(database_url) as session:
                    record_once(session, ctx.study_id, "approve_held",
                                {"assignment": assignment_id,
                                 "reason": "the provider records another worker on this assignment"})
                continue
            if agrees is None:
                continue  # not handed in on the provider yet; the next tick looks again
            if approve_if_ready(database_url, ctx, assignment_id, now, platform_agrees=True) == "approved":
                approved += 1
        except SQLAlchemyError:
            raise  # the database itself failed: the tick cannot go on
        except Exception as exc:  # noqa: BLE001 - a provider failure is this assignment's, not the tick's
            log.warning("approving assignment %s failed (retried next tick): %s", assignment_id, exc)
            with session_scope(database_url) as session:
                note_approve_failure(session, ctx.study_id, assignment_id, f"{type(exc).__name__}: {exc}"[:1000], now)
            if report is not None:
                report.approve_failed += 1
    return approved


def hand_in_unfinished(database_url: str, ctx: StudyContext, now: dt.datetime) -> int:
    """Work submitted in hitkit but never handed in on the provider is handed in there, or listed.

    A worker who closed the tab before the provider's completion page leaves work the provider
    still shows in progress: after ``complete_after_s`` hitkit hands it in through the provider's
    documented completion (Prolific's COMPLETE transition). Work the provider shows returned or
    timed out cannot be handed in: it is listed once (``work_not_handed_in``) for the coordinator,
    whom ``hitkit sync`` tells how to settle it. Each assignment is checked until it is settled.
    """
    complete = getattr(ctx.provider, "complete_submission", None)
    if complete is None:
        return 0
    after = dt.timedelta(seconds=getattr(ctx.provider.settings, "complete_after_s", 600))
    with session_scope(database_url) as session:
        settled = {d.get("assignment") for d in session.scalars(select(Event.data).where(
            Event.study_id == ctx.study_id, Event.kind.in_(("work_handed_in", "work_not_handed_in"))))}
        rows = [(a.id, a.provider_assignment_id) for a in session.scalars(
            select(Assignment).join(Hit).where(Hit.study_id == ctx.study_id, Assignment.status == "submitted",
                                               Assignment.submitted_at <= now - after).order_by(Assignment.id))
                if a.id not in settled]
    n = 0
    for assignment_id, provider_assignment_id in rows:
        try:
            work = ctx.provider.work_of(provider_assignment_id)
            if work is None:
                continue
            if work.status is WorkStatus.WORKING:
                complete(provider_assignment_id)
                kind, data = "work_handed_in", {"assignment": assignment_id, "by": "hitkit"}
                n += 1
            elif work.status is WorkStatus.RETURNED:
                kind, data = "work_not_handed_in", {"assignment": assignment_id,
                                                    "provider_assignment_id": provider_assignment_id}
            else:
                kind, data = "work_handed_in", {"assignment": assignment_id, "by": "worker"}
        except SQLAlchemyError:
            raise
        except Exception as exc:  # noqa: BLE001 - retried next tick
            log.warning("handing in assignment %s on the provider failed (retried next tick): %s", assignment_id, exc)
            continue
        with session_scope(database_url) as session:
            record_once(session, ctx.study_id, kind, data)
    return n


def cap_full_workers(database_url: str, ctx: StudyContext) -> int:
    """Tell the provider about workers who reached the per-worker cap, once each (retried if it fails)."""
    from hitkit.flow import CAP_STATUSES

    taken = func.count(Assignment.id)
    with session_scope(database_url) as session:
        full = session.execute(
            select(Worker.external_id, taken).join(Assignment, Assignment.worker_id == Worker.id).join(Hit)
            .where(Hit.study_id == ctx.study_id, Assignment.status.in_(CAP_STATUSES))
            .group_by(Worker.external_id).having(taken >= ctx.config.schedule.per_worker_cap)).all()
        done = {d.get("worker") for d in session.scalars(
            select(Event.data).where(Event.study_id == ctx.study_id, Event.kind == "worker_capped"))}
    n = 0
    for external_id, count in full:
        if external_id in done:
            continue
        try:
            ctx.provider.cap_worker(external_id)  # no transaction open while the provider answers
        except SQLAlchemyError:
            raise
        except Exception as exc:  # noqa: BLE001 - the next tick retries this worker
            log.warning("capping worker %s failed (retried next tick): %s", external_id, exc)
            with session_scope(database_url) as session:
                session.add(Event(study_id=ctx.study_id, kind="cap_failed", actor="scheduler",
                                  data={"worker": external_id, "error": f"{type(exc).__name__}: {exc}"[:1000]}))
            continue
        with session_scope(database_url) as session:
            session.add(Event(study_id=ctx.study_id, kind="worker_capped", actor="scheduler",
                              data={"worker": external_id, "taken": count}))
        n += 1
    return n


def complete_full_hits(database_url: str, ctx: StudyContext) -> int:
    """Posted HITs whose every place holds finished work are complete (then the provider hears of it)."""
    done = (select(func.count()).select_from(Assignment)
            .where(Assignment.hit_id == Hit.id, Assignment.status.in_(DONE_STATUSES)).scalar_subquery())
    with session_scope(database_url) as session:
        hits = session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "posted",
                                                 done >= Hit.max_assignments)).all()
        finished = [h.provider_hit_id for h in hits]
        for hit in hits:
            hit.status = "completed"
    for provider_hit_id in finished:
        try:
            ctx.provider.expire_hit(provider_hit_id)
        except SQLAlchemyError:
            raise
        except Exception as exc:  # noqa: BLE001 - a listing left open costs nothing: its places are full
            log.warning("expiring HIT %s on the provider failed: %s", provider_hit_id, exc)
            with session_scope(database_url) as session:
                session.add(Event(study_id=ctx.study_id, kind="expire_failed", actor="scheduler",
                                  data={"provider_hit_id": provider_hit_id, "error": str(exc)[:1000]}))
    return len(finished)


def posting_blocked(session: Session, study_id: int) -> str | None:
    """The reason of a provider's lasting refusal to post, unless the coordinator resumed since; else None."""
    last = session.scalar(select(Event).where(
        Event.study_id == study_id, Event.kind.in_(("provider_refused_post", "posting_resumed")))
        .order_by(Event.id.desc()).limit(1))
    if last is not None and last.kind == "provider_refused_post" and last.data.get("permanent"):
        return last.data.get("reason")
    return None


def post_wave(database_url: str, ctx: StudyContext, now: dt.datetime, base_url: str) -> int:
    """Post the next HITs the budget and the concurrency cap allow.

    The wave is chosen in one transaction, each HIT is posted with none open, and each posting is
    recorded in its own (the provider's post is keyed by the HIT, so a crash in between re-posts
    nothing). A provider's refusal is an event, not an error: a lasting one (a rule the study
    breaks, a currency mismatch, an empty balance) stops posting until ``hitkit resume``.
    """
    sched = ctx.config.schedule
    with session_scope(database_url) as session:
        if posting_blocked(session, ctx.study_id) is not None:
            return 0
        open_hits = session.scalar(select(func.count()).select_from(Hit)
                                   .where(Hit.study_id == ctx.study_id, Hit.status == "posted"))
        pending = session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "pending")
                                  .order_by(Hit.index).limit(sched.wave_size)).all()
        costs = [hit_cost(h.reward, h.max_assignments, ctx.fee(h.reward, h.max_assignments)) for h in pending]
        n = hits_to_post(costs, committed_spend(session, ctx), ctx.config.budget, open_hits,
                         sched.max_concurrent, sched.wave_size)
        wave = [(h.id, h.index, h.reward, h.max_assignments, h.lifetime_s) for h in pending[:n]]
        if pending and n == 0 and open_hits == 0:
            session.add(Event(study_id=ctx.study_id, kind="budget_exhausted", actor="scheduler",
                              data={"pending": len(pending)}))
    posted_now = 0
    for hit_id, index, reward, max_assignments, lifetime_s in wave:
        entry = f"{base_url.rstrip('/')}/s/{ctx.name}/hit/{hit_id}"
        try:
            posted = ctx.provider.post_hit(f"{ctx.name}-{index}", entry, reward, max_assignments, lifetime_s)
        except SQLAlchemyError:
            raise
        except HitkitError as exc:
            # The provider's own account or rules refuse it (MTurk's balance, Prolific's pay rules...):
            # stop this wave, keep what was posted, and say why once.
            permanent = bool(getattr(exc, "permanent", False)) or isinstance(exc, ConfigError)
            with session_scope(database_url) as session:
                record_once(session, ctx.study_id, "provider_refused_post",
                            {"hit": hit_id, "reason": str(exc), "permanent": permanent})
            log.warning("the provider refused to post HIT %s%s: %s", hit_id,
                        "" if permanent else " (retried next tick)", exc)
            return posted_now
        with session_scope(database_url) as session:
            hit = session.get(Hit, hit_id)
            if hit.status != "pending":
                continue
            hit.provider_hit_id, hit.status = posted.provider_hit_id, "posted"
            hit.posted_at, hit.expires_at = now, now + dt.timedelta(seconds=lifetime_s)
            session.add(Event(study_id=ctx.study_id, kind="hit_posted", actor="scheduler",
                              data={"hit": hit_id, "provider_hit_id": posted.provider_hit_id}))
        posted_now += 1
    return posted_now


def budget_blocked(session: Session, ctx: StudyContext) -> int:
    """How many HITs wait unposted because the budget cannot cover them (0 while work is open)."""
    open_hits = session.scalar(select(func.count()).select_from(Hit)
                               .where(Hit.study_id == ctx.study_id, Hit.status == "posted"))
    pending = session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "pending")
                              .order_by(Hit.index)).all()
    if open_hits or not pending:
        return 0
    first = pending[0]
    cost = hit_cost(first.reward, first.max_assignments, ctx.fee(first.reward, first.max_assignments))
    return len(pending) if committed_spend(session, ctx) + cost > ctx.config.budget else 0


def tick(database_url: str, study_name: str, base_url: str) -> TickReport:
    """One scheduler step for one study (the APScheduler job; safe to run again at any time).

    Each step reads in a short transaction, calls the provider with no transaction open, and
    records the outcome in another, so a slow or throttling provider never holds the database
    that workers' answers are written to. A paused or stopped study is still tended (returns,
    approvals) but gets no new work.
    """
    report = TickReport()
    with session_scope(database_url) as session:
        ctx = StudyContext.load(session, study_name, resolve_secret(database_url))
        status = session.get(Study, ctx.study_id).status
        if status not in ("running", "paused", "stopped"):
            return report
        now = utcnow()
        report.expired = expire_stale_assignments(session, ctx, now)
    report.released = release_returned(database_url, ctx)
    if status == "running":
        report.reopened = reopen_lapsed_hits(database_url, ctx, now)
    report.handed_in = hand_in_unfinished(database_url, ctx, now)
    report.approved = approve_submitted(database_url, ctx, now, report)
    report.capped = cap_full_workers(database_url, ctx)
    report.completed_hits = complete_full_hits(database_url, ctx)
    if status == "running":
        report.posted = post_wave(database_url, ctx, now, base_url)
    with session_scope(database_url) as session:
        study = session.get(Study, ctx.study_id)
        remaining = session.scalar(select(func.count()).select_from(Hit)
                                   .where(Hit.study_id == ctx.study_id, Hit.status.in_(("pending", "posted"))))
        undecided = session.scalar(select(func.count()).select_from(Assignment).join(Hit)
                                   .where(Hit.study_id == ctx.study_id, Assignment.status == "submitted"))
        if study.status == "running" and remaining == 0 and undecided == 0:
            study.status, study.completed_at = "completed", now
            session.add(Event(study_id=ctx.study_id, kind="study_completed", actor="scheduler", data={}))
            report.study_completed = True
    return report


def bonus_key(study_id: int, assignment_id: int, n: int = 1) -> str:
    """The ledger key of an assignment's ``n``-th bonus (short enough to be MTurk's request token)."""
    return f"bonus:{study_id}:{assignment_id}:{n}"


def grant_bonus(database_url: str, study_name: str, assignment_id: int, amount: Decimal, reason: str,
                key: str | None = None) -> str:
    """Pay a bonus on an assignment exactly once per ``key``; return the provider's reference.

    The bonus and its fee are committed to the ledger as ``pending`` before the provider is called,
    so a crash or a lost answer leaves a row that ``hitkit sync`` settles without paying twice.
    The budget is a hard ceiling: a bonus that would pass it is refused (BudgetError).
    """
    amount = cents(amount)
    if amount <= 0:
        raise HitkitError(f"a bonus must be positive; got {amount}")
    with session_scope(database_url) as session:
        ctx = StudyContext.load(session, study_name, resolve_secret(database_url))
        a = session.get(Assignment, assignment_id)
        if a is None or a.hit.study_id != ctx.study_id or a.status not in DONE_STATUSES:
            raise HitkitError(f"assignment {assignment_id} is not submitted or approved work of study "
                              f"'{study_name}'; bonuses go to work that was handed in")
        key = key or bonus_key(ctx.study_id, a.id)
        row = session.scalar(select(Payment).where(Payment.idempotency_key == key))
        if row is not None and (row.amount != amount or row.assignment_id != a.id):
            raise HitkitError(f"bonus key {key} was already used for {row.amount} on assignment {row.assignment_id}; "
                              f"give every distinct bonus its own key")
        if row is None:
            fee = ctx.provider.bonus_fee(amount)
            committed = committed_spend(session, ctx)
            if committed + amount + fee > ctx.config.budget:
                raise BudgetError(f"a bonus of {amount} (+ {fee} fee) would take the committed spend from {committed} "
                                  f"past the budget of {ctx.config.budget} {ctx.config.provider.currency}; raise "
                                  f"'budget:' in the study file first")
            common = {"study_id": ctx.study_id, "assignment_id": a.id, "worker_id": a.worker_id,
                      "currency": ctx.config.provider.currency, "status": "pending"}
            session.add(Payment(kind="bonus", amount=amount, idempotency_key=key, **common))
            session.add(Payment(kind="bonus_fee", amount=fee, idempotency_key=f"{key}:fee", **common))
            session.add(Event(study_id=ctx.study_id, kind="bonus_recorded", actor="scheduler",
                              data={"key": key, "assignment": a.id, "amount": str(amount), "reason": reason}))
    return pay_recorded_bonus(database_url, ctx, key)


def pay_recorded_bonus(database_url: str, ctx: StudyContext, key: str) -> str:
    """Pay the ledger's bonus ``key`` through the provider (outside any open transaction) and mark it paid."""
    with session_scope(database_url) as session:
        row = session.scalar(select(Payment).where(Payment.idempotency_key == key))
        if row.status == "paid":
            return row.provider_ref or ""
        a = session.get(Assignment, row.assignment_id)
        worker, provider_assignment_id, amount = a.worker.external_id, a.provider_assignment_id, row.amount
        reason = next((d.get("reason") for d in session.scalars(
            select(Event.data).where(Event.study_id == ctx.study_id, Event.kind == "bonus_recorded"))
            if d.get("key") == key), None) or "Bonus for your work"
    # No transaction is open here: Prolific's bonus commits its own steps, and SQLite has one writer.
    ref = ctx.provider.pay_bonus(worker, provider_assignment_id, amount, reason, key)
    with session_scope(database_url) as session:
        for p in session.scalars(select(Payment).where(Payment.idempotency_key.in_((key, f"{key}:fee")))):
            p.status, p.provider_ref = "paid", p.provider_ref or ref
        session.add(Event(study_id=ctx.study_id, kind="bonus_paid", actor="scheduler", data={"key": key, "ref": ref}))
    return ref


def job_id(study_name: str) -> str:
    return f"tick:{study_name}"


def make_scheduler(database_url: str, blocking: bool = False):
    """An APScheduler whose jobs live in the study database, so they outlive any one process."""
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.schedulers.blocking import BlockingScheduler

    from hitkit.db.session import get_engine

    cls = BlockingScheduler if blocking else BackgroundScheduler
    return cls(jobstores={"default": SQLAlchemyJobStore(engine=get_engine(database_url))},
               executors={"default": ThreadPoolExecutor(2)},
               job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
               timezone=dt.UTC)


def schedule_study(scheduler, database_url: str, study_name: str, base_url: str, interval_s: float) -> None:
    """Add (or replace) the study's tick job."""
    scheduler.add_job(tick, "interval", seconds=interval_s, id=job_id(study_name), replace_existing=True,
                      args=[database_url, study_name, base_url], next_run_time=dt.datetime.now(dt.UTC))
