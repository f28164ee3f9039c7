"""The scheduler: one idempotent ``tick`` per study, run by APScheduler with its jobs in the database.

Each tick reads the truth from the database and moves the study one step: expire assignments held
too long (their places open again), re-open HITs whose listing ran out while work is left, approve
and pay submitted work, post the next wave within the budget and the concurrency cap, and mark the
study complete at its target. Because every step is decided from rows, a tick after ``kill -9``
simply continues; nothing is remembered in memory between ticks.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Sequence

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import DONE_STATUSES, Assignment, Event, Hit, Payment, Study, utcnow
from hitkit.db.session import session_scope
from hitkit.money import hit_cost
from hitkit.errors import BudgetError
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
    posted: int = 0
    completed_hits: int = 0
    study_completed: bool = False


def committed_spend(session: Session, ctx: StudyContext) -> Decimal:
    """Worst-case spend of every posted HIT plus every bonus in the ledger."""
    total = Decimal("0")
    for hit in session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status != "pending")):
        total += hit_cost(hit.reward, hit.max_assignments, ctx.fee(hit.reward, hit.max_assignments))
    bonuses = session.scalar(select(func.coalesce(func.sum(Payment.amount), 0))
                             .where(Payment.study_id == ctx.study_id, Payment.kind.in_(("bonus", "bonus_fee"))))
    return total + Decimal(bonuses)


def expire_stale_assignments(session: Session, ctx: StudyContext, now: dt.datetime) -> int:
    """Assignments accepted longer ago than the time limit lose their place."""
    limit = dt.timedelta(minutes=ctx.config.hit.assignment_minutes)
    stale = session.scalars(select(Assignment).join(Hit).where(
        Hit.study_id == ctx.study_id, Assignment.status == "accepted", Assignment.accepted_at < now - limit)).all()
    for a in stale:
        a.status = "expired"
        session.add(Event(study_id=ctx.study_id, kind="assignment_expired", actor="scheduler", data={"assignment": a.id}))
    return len(stale)


def reopen_lapsed_hits(session: Session, ctx: StudyContext, now: dt.datetime) -> int:
    """Posted HITs whose listing lapsed while places are still unfilled get a fresh lifetime."""
    n = 0
    for hit in session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "posted",
                                                 Hit.expires_at <= now)):
        ctx.provider.extend_hit(hit.provider_hit_id, 0, hit.lifetime_s)
        hit.expires_at = now + dt.timedelta(seconds=hit.lifetime_s)
        session.add(Event(study_id=ctx.study_id, kind="hit_reopened", actor="scheduler", data={"hit": hit.id}))
        n += 1
    return n


def approve_submitted(session: Session, ctx: StudyContext, now: dt.datetime) -> int:
    """Approve submitted work after the configured delay and record the reward and fee, once each."""
    delay = dt.timedelta(seconds=ctx.config.schedule.approve_after_s)
    rows = session.scalars(select(Assignment).join(Hit).where(
        Hit.study_id == ctx.study_id, Assignment.status == "submitted", Assignment.submitted_at <= now - delay)).all()
    currency = ctx.config.provider.currency
    for a in rows:
        fee = ctx.fee(a.hit.reward, a.hit.max_assignments)
        # The ledger row is written before the provider is called: a crash in between leaves a
        # pending row whose key stops the retry from paying again.
        for kind, amount in (("reward", a.hit.reward), ("fee", fee)):
            key = f"{kind}:{ctx.study_id}:{a.id}"
            if session.scalar(select(Payment.id).where(Payment.idempotency_key == key)) is None:
                session.add(Payment(study_id=ctx.study_id, assignment_id=a.id, worker_id=a.worker_id, kind=kind,
                                    amount=amount, currency=currency, idempotency_key=key, status="pending"))
        session.flush()
        ctx.provider.approve(a.provider_assignment_id)
        for p in session.scalars(select(Payment).where(Payment.assignment_id == a.id, Payment.status == "pending")):
            p.status = "paid"
        a.status, a.decided_at = "approved", now
        session.add(Event(study_id=ctx.study_id, kind="assignment_approved", actor="scheduler", data={"assignment": a.id}))
    return len(rows)


def complete_full_hits(session: Session, ctx: StudyContext) -> int:
    """Posted HITs whose every place holds finished work are complete."""
    done = (select(func.count()).select_from(Assignment)
            .where(Assignment.hit_id == Hit.id, Assignment.status.in_(DONE_STATUSES)).scalar_subquery())
    hits = session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "posted",
                                             done >= Hit.max_assignments)).all()
    for hit in hits:
        hit.status = "completed"
        ctx.provider.expire_hit(hit.provider_hit_id)
    return len(hits)


def post_wave(session: Session, ctx: StudyContext, now: dt.datetime, base_url: str) -> int:
    """Post the next HITs the budget and the concurrency cap allow."""
    sched = ctx.config.schedule
    open_hits = session.scalar(select(func.count()).select_from(Hit)
                               .where(Hit.study_id == ctx.study_id, Hit.status == "posted"))
    pending = session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "pending")
                              .order_by(Hit.index).limit(sched.wave_size)).all()
    costs = [hit_cost(h.reward, h.max_assignments, ctx.fee(h.reward, h.max_assignments)) for h in pending]
    n = hits_to_post(costs, committed_spend(session, ctx), ctx.config.budget, open_hits,
                     sched.max_concurrent, sched.wave_size)
    posted_now = 0
    for hit in pending[:n]:
        entry = f"{base_url.rstrip('/')}/s/{ctx.name}/hit/{hit.id}"
        try:
            posted = ctx.provider.post_hit(f"{ctx.name}-{hit.index}", entry, hit.reward, hit.max_assignments,
                                           hit.lifetime_s)
        except BudgetError as exc:
            # The provider's own account cannot cover it (e.g. the MTurk balance): stop this wave,
            # keep what was posted, and say why; the next tick tries again.
            session.add(Event(study_id=ctx.study_id, kind="provider_refused_post", actor="scheduler",
                              data={"hit": hit.id, "reason": str(exc)}))
            return posted_now
        posted_now += 1
        hit.provider_hit_id, hit.status = posted.provider_hit_id, "posted"
        hit.posted_at, hit.expires_at = now, now + dt.timedelta(seconds=hit.lifetime_s)
        session.add(Event(study_id=ctx.study_id, kind="hit_posted", actor="scheduler",
                          data={"hit": hit.id, "provider_hit_id": posted.provider_hit_id}))
    if pending and n == 0 and open_hits == 0:
        session.add(Event(study_id=ctx.study_id, kind="budget_exhausted", actor="scheduler",
                          data={"pending": len(pending)}))
    return n


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
    """One scheduler step for one study (the APScheduler job; safe to run again at any time)."""
    report = TickReport()
    with session_scope(database_url) as session:
        ctx = StudyContext.load(session, study_name, resolve_secret(database_url))
        study = session.get(Study, ctx.study_id)
        if study.status != "running":
            return report
        now = utcnow()
        report.expired = expire_stale_assignments(session, ctx, now)
        report.reopened = reopen_lapsed_hits(session, ctx, now)
        report.approved = approve_submitted(session, ctx, now)
        report.completed_hits = complete_full_hits(session, ctx)
        report.posted = post_wave(session, ctx, now, base_url)
        remaining = session.scalar(select(func.count()).select_from(Hit)
                                   .where(Hit.study_id == ctx.study_id, Hit.status.in_(("pending", "posted"))))
        undecided = session.scalar(select(func.count()).select_from(Assignment).join(Hit)
                                   .where(Hit.study_id == ctx.study_id, Assignment.status == "submitted"))
        if remaining == 0 and undecided == 0:
            study.status, study.completed_at = "completed", now
            session.add(Event(study_id=ctx.study_id, kind="study_completed", actor="scheduler", data={}))
            report.study_completed = True
    return report


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
               timezone=dt.timezone.utc)


def schedule_study(scheduler, database_url: str, study_name: str, base_url: str, interval_s: float) -> None:
    """Add (or replace) the study's tick job."""
    scheduler.add_job(tick, "interval", seconds=interval_s, id=job_id(study_name), replace_existing=True,
                      args=[database_url, study_name, base_url], next_run_time=dt.datetime.now(dt.timezone.utc))
