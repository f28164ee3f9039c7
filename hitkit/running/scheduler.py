"""The scheduler: one idempotent ``tick`` per study, run by APScheduler with its jobs in the database.

Each tick reads the truth from the database and moves the study one step: expire assignments held
too long (their places open again), re-open HITs whose listing ran out while work is left, approve
and pay submitted work (each assignment on its own: one the provider fails on waits for the next
tick), tell the provider about workers at the per-worker cap, post the next wave within the budget
and the concurrency cap (:mod:`hitkit.running.posting`), and mark the study complete at its target;
every step is decided from rows. Only the process holding the study's lease acts; another scheduler
stands by to take over.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Event, Hit, Study, utcnow
from hitkit.db.session import rowcount, session_scope
from hitkit.errors import HitkitError
from hitkit.events import add_event
from hitkit.judges import second_wave
from hitkit.money import ledger, qc_policy
from hitkit.running import hooks, posting, provider_side, recontact, stopping
from hitkit.study import lease
from hitkit.study.stored import StudyContext, resolve_secret, store_work
from hitkit.tables.schema import DONE_STATUSES

log = logging.getLogger(__name__)


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
    hook_events: int = 0
    standby: bool = False  # another process leads the study: this tick did nothing


def expire_stale_assignments(session: Session, ctx: StudyContext, now: dt.datetime) -> int:
    """Assignments accepted longer ago than the time limit lose their place.

    One conditional UPDATE per stale assignment (``WHERE status = 'accepted'``): a submit in flight
    holds the assignment's row lock, so the update waits for it and then finds the row no longer
    accepted, and leaves it alone; only the updates that hit a row write an event.
    """
    limit = dt.timedelta(minutes=ctx.config.hit.assignment_minutes)
    stale = session.scalars(
        select(Assignment.id)
        .join(Hit)
        .where(Hit.study_id == ctx.study_id, Assignment.status == "accepted", Assignment.accepted_at < now - limit)
    ).all()
    expired = 0
    for assignment_id in stale:
        done = session.execute(
            update(Assignment)
            .where(
                Assignment.id == assignment_id, Assignment.status == "accepted", Assignment.accepted_at < now - limit
            )
            .values(status="expired")
            .execution_options(synchronize_session="fetch")
        )
        if rowcount(done) == 1:
            expired += 1
            add_event(session, ctx.study_id, "assignment_expired", "scheduler", {"assignment": assignment_id})
    return expired


def reopen_lapsed_hits(database_url: str, ctx: StudyContext, now: dt.datetime) -> int:
    """Posted HITs whose listing lapsed while places are still unfilled get a fresh lifetime."""
    with session_scope(database_url) as session:
        lapsed = [
            (h.id, h.provider_hit_id, h.lifetime_s)
            for h in session.scalars(
                select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "posted", Hit.expires_at <= now)
            )
        ]
    n = 0
    for hit_id, provider_hit_id, lifetime_s in lapsed:
        if provider_hit_id is None:  # posting records the provider's id with the status (posting.post_wave)
            raise HitkitError(f"HIT {hit_id} is posted without the provider's id for it")
        ctx.provider.extend_hit(provider_hit_id, 0, lifetime_s)  # no transaction open: the provider may be slow
        with session_scope(database_url) as session:
            hit = session.get_one(Hit, hit_id)
            hit.expires_at = now + dt.timedelta(seconds=lifetime_s)
            add_event(session, ctx.study_id, "hit_reopened", "scheduler", {"hit": hit_id})
        n += 1
    return n


def note_approve_failure(session: Session, study_id: int, assignment_id: int, error: str, now: dt.datetime) -> None:
    """One ``approve_failed`` event per assignment and error, counting its attempts.

    A provider that is down for hours fails the same approval on every tick: that is one event
    whose ``attempts`` and ``last_at`` grow, not one event a tick. A different error is a new event.
    """
    for event in session.scalars(select(Event).where(Event.study_id == study_id, Event.kind == "approve_failed")):
        if event.data.get("assignment") == assignment_id and event.data.get("error") == error:
            # A new dict, not an in-place change: the JSON column only notices assignment.
            event.data = {**event.data, "attempts": event.data.get("attempts", 1) + 1, "last_at": now.isoformat()}
            return
    add_event(
        session,
        study_id,
        "approve_failed",
        "scheduler",
        {"assignment": assignment_id, "error": error, "attempts": 1, "last_at": now.isoformat()},
    )


def approve_submitted(database_url: str, ctx: StudyContext, now: dt.datetime, report: TickReport | None = None) -> int:
    """Approve submitted work after the configured delay and record the reward and fee, once each.

    Each assignment stands alone: one the provider refuses or fails on is logged and left
    submitted for the next tick, and the others go ahead. No transaction is open while the
    provider is asked (a slow provider must not hold the database). Work held for QC review is not
    looked at again (nor asked about on the platform) until the coordinator decides it.
    """
    delay = dt.timedelta(seconds=ctx.config.schedule.approve_after_s)
    with session_scope(database_url) as session:
        held = qc_policy.held_assignment_ids(session, ctx.study_id)
        rows = [a.id for a in ledger.submitted_before(session, ctx.study_id, now - delay) if a.id not in held]
    approved = 0
    for assignment_id in rows:
        try:
            approved += ledger.approve(database_url, ctx, assignment_id, now) == "approved"
        except SQLAlchemyError:
            raise  # the database itself failed: the tick cannot go on
        except Exception as exc:  # noqa: BLE001 - a provider failure is this assignment's, not the tick's
            log.warning("approving assignment %s failed (retried next tick): %s", assignment_id, exc)
            with session_scope(database_url) as session:
                note_approve_failure(session, ctx.study_id, assignment_id, f"{type(exc).__name__}: {exc}"[:1000], now)
            if report is not None:
                report.approve_failed += 1
    return approved


def complete_full_hits(database_url: str, ctx: StudyContext) -> int:
    """Posted HITs whose every place holds finished work are complete (then the provider hears of it)."""
    done = (
        select(func.count())
        .select_from(Assignment)
        .where(Assignment.hit_id == Hit.id, Assignment.status.in_(DONE_STATUSES))
        .scalar_subquery()
    )
    with session_scope(database_url) as session:
        hits = session.scalars(
            select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "posted", done >= Hit.max_assignments)
        ).all()
        finished = [h.provider_hit_id for h in hits]
        for hit in hits:
            hit.status = "completed"
    for provider_hit_id in finished:
        # A listing left open costs nothing: its places are full.
        _tell_provider(database_url, ctx, ctx.provider.expire_hit, provider_hit_id)
    return len(finished)


def stop_when_settled(database_url: str, ctx: StudyContext, now: dt.datetime) -> bool:
    """True once the study's stopping rule has fired. When it fires, the HITs not yet posted are
    withdrawn, the posted ones are closed to newcomers on the provider (work in progress can still be
    handed in), and the provider closes the study (Prolific: stops it). A provider call that fails is
    tried again on the next tick until it succeeds."""
    if ctx.config.stop is None:
        return False
    with session_scope(database_url) as session:
        fired = stopping.fired_event(session, ctx.study_id) is not None or stopping.check(session, ctx, now)
        if not fired:
            return False
        hits, study_left = stopping.left_open_on_provider(session, ctx.study_id)
    for hit_id, provider_hit_id in hits:
        if _tell_provider(database_url, ctx, ctx.provider.expire_hit, provider_hit_id):
            _record_closed(database_url, ctx, {"hit": hit_id})
    if study_left and _tell_provider(database_url, ctx, ctx.provider.close):
        _record_closed(database_url, ctx, {"study": True})
    return True


def _record_closed(database_url: str, ctx: StudyContext, data: dict) -> None:
    with session_scope(database_url) as session:
        add_event(session, ctx.study_id, stopping.CLOSED, "scheduler", data)


def _tell_provider(database_url: str, ctx: StudyContext, call, *args) -> bool:
    """Call the provider to close a listing (``expire_hit``) or the study (``close``); True when it
    succeeded. A failure is logged and recorded as an ``expire_failed`` event, not raised: the pages
    refuse newcomers to a HIT that is not posted anyway, and the stopping rule's closings are tried
    again next tick (:func:`stop_when_settled`)."""
    try:
        call(*args)
        return True
    except SQLAlchemyError:
        raise
    except Exception as exc:  # noqa: BLE001 - see docstring
        log.warning("closing work on the provider failed: %s", exc)
        with session_scope(database_url) as session:
            add_event(
                session,
                ctx.study_id,
                "expire_failed",
                "scheduler",
                {"provider_hit_id": args[0] if args else None, "error": str(exc)[:1000]},
            )
        return False


def tick(database_url: str, study_name: str, base_url: str) -> TickReport:
    """One scheduler step for one study (the APScheduler job; safe to run again at any time).

    Only the holder of the study's lease acts (:mod:`hitkit.study.lease`); another scheduler's tick is a
    standby that takes over once the leader's lease expires. The leader renews between steps and hands
    over at the end of a tick to a one-shot command (``hitkit sync``, the dashboard) that asked for it.

    Each step reads, calls the provider with no transaction open, and records the outcome in another
    transaction. A paused or stopped study is still tended (returns, approvals) but gets no new work.
    """
    report = TickReport()
    with session_scope(database_url) as session:
        ctx = StudyContext.load(session, study_name, resolve_secret(database_url))
        status = session.get_one(Study, ctx.study_id).status
        if status not in ("running", "paused", "stopped"):
            return report
    try:
        if not lease.lead(database_url, ctx.study_id, ctx.config.schedule.interval_s):
            raise lease.LeaseLost("another process leads")
        _steps(database_url, ctx, status, base_url, report)
    except lease.LeaseLost:
        report.standby = True
        return report
    lease.end_tick(database_url, ctx.study_id, ctx.config.schedule.interval_s)
    return report


def _steps(database_url: str, ctx: StudyContext, status: str, base_url: str, report: TickReport) -> None:
    with session_scope(database_url) as session:
        now = utcnow()
        report.expired = expire_stale_assignments(session, ctx, now)
    report.released = provider_side.release_returned(database_url, ctx)
    if status == "running":
        report.reopened = reopen_lapsed_hits(database_url, ctx, now)
    report.handed_in = provider_side.hand_in_unfinished(database_url, ctx, now)
    lease.renew(database_url, ctx.study_id, ctx.config.schedule.interval_s)
    report.approved = approve_submitted(database_url, ctx, now, report)
    lease.renew(database_url, ctx.study_id, ctx.config.schedule.interval_s)
    report.capped = provider_side.cap_full_workers(database_url, ctx)
    report.completed_hits = complete_full_hits(database_url, ctx)
    if status == "running" and not stop_when_settled(database_url, ctx, now):
        lease.renew(database_url, ctx.study_id, ctx.config.schedule.interval_s)
        report.posted = posting.post_wave(database_url, ctx, now, base_url)
    with session_scope(database_url) as session:
        study = session.get_one(Study, ctx.study_id)
        remaining = session.scalar(
            select(func.count())
            .select_from(Hit)
            .where(Hit.study_id == ctx.study_id, Hit.status.in_(("pending", "posted")))
        )
        # Work still in progress on a HIT the stopping rule closed is waited for, then paid.
        undecided = session.scalar(
            select(func.count())
            .select_from(Assignment)
            .join(Hit)
            .where(
                Hit.study_id == ctx.study_id,
                (Assignment.status == "submitted") | ((Hit.status == "closed") & (Assignment.status == "accepted")),
            )
        )
        # A study whose rule fired completes once the provider has acknowledged every closing.
        unclosed = (
            ctx.config.stop is not None
            and stopping.fired_event(session, ctx.study_id) is not None
            and any(stopping.left_open_on_provider(session, ctx.study_id))
        )
        settled = study.status == "running" and remaining == 0 and undecided == 0 and not unclosed
        # A share drawn where the judge is unsure has a second wave once the pilot's work is in; posted next tick.
        if (
            settled
            and not stopping.fired_event(session, ctx.study_id)
            and second_wave.draw_if_due(session, study, ctx.config, store_work)
        ):
            settled = False
        if settled:
            study.status, study.completed_at = "completed", now
            add_event(session, ctx.study_id, "study_completed", "scheduler", {})
            report.study_completed = True
    # Platform actions, under the lease like every step above.
    report.hook_events = hooks.tend(database_url, ctx)  # webhooks: subscribe, drain, end when over
    recontact.block_qc_failures(database_url, ctx)  # provider.prolific.qc_failures_blocklist


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
    return cls(
        jobstores={"default": SQLAlchemyJobStore(engine=get_engine(database_url))},
        executors={"default": ThreadPoolExecutor(2)},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        timezone=dt.timezone.utc,
    )  # not dt.UTC, which Python 3.10 lacks


def schedule_study(scheduler, database_url: str, study_name: str, base_url: str, interval_s: float) -> None:
    """Add (or replace) the study's tick job."""
    scheduler.add_job(
        tick,
        "interval",
        seconds=interval_s,
        id=job_id(study_name),
        replace_existing=True,
        args=[database_url, study_name, base_url],
        next_run_time=dt.datetime.now(dt.timezone.utc),
    )
