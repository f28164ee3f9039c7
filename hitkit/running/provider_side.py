"""Scheduler jobs for work whose fate is decided on the provider's side, not in hitkit.

A worker may give a place back on the provider (return, time-out) while hitkit still holds it as
accepted: :func:`release_returned` frees it. A worker may submit in hitkit and close the tab before
the provider's completion page: :func:`hand_in_unfinished` hands that work in on the provider, or
lists it for the coordinator. Neither holds a transaction open while the provider answers.
"""

from __future__ import annotations

import datetime as dt
import logging

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError

from hitkit.db.models import Assignment, Event, Hit, Worker
from hitkit.db.session import session_scope
from hitkit.events import add_event, record_once
from hitkit.money.ledger import provider_assignment_of, submitted_before
from hitkit.providers.base import WorkStatus
from hitkit.study.stored import StudyContext
from hitkit.tables.schema import CAP_STATUSES

log = logging.getLogger(__name__)

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
        accepted = session.scalar(
            select(func.count())
            .select_from(Assignment)
            .join(Hit)
            .where(Hit.study_id == ctx.study_id, Assignment.status == "accepted")
        )
    if not accepted:
        return 0
    listed = ctx.provider.list_work([])  # no transaction open while the provider answers
    _returns_checked[key] = time.monotonic()
    gone = {w.provider_assignment_id for w in listed or [] if w.status is WorkStatus.RETURNED}
    if not gone:
        return 0
    n = 0
    with session_scope(database_url) as session:
        for a in session.scalars(
            select(Assignment)
            .join(Hit)
            .where(
                Hit.study_id == ctx.study_id,
                Assignment.status == "accepted",
                Assignment.provider_assignment_id.in_(gone),
            )
        ):
            a.status = "returned"
            add_event(
                session,
                ctx.study_id,
                "assignment_returned",
                "scheduler",
                {"assignment": a.id, "provider_assignment_id": a.provider_assignment_id},
            )
            n += 1
    return n


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
    # The provider's own section (Prolific's ``complete_after_s``); 10 minutes where it has none.
    after = dt.timedelta(seconds=getattr(getattr(ctx.provider, "settings", None), "complete_after_s", 600))
    with session_scope(database_url) as session:
        settled = {
            d.get("assignment")
            for d in session.scalars(
                select(Event.data).where(
                    Event.study_id == ctx.study_id, Event.kind.in_(("work_handed_in", "work_not_handed_in"))
                )
            )
        }
        rows = [
            (a.id, provider_assignment_of(a))
            for a in submitted_before(session, ctx.study_id, now - after)
            if a.id not in settled
        ]
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
                kind, data = (
                    "work_not_handed_in",
                    {"assignment": assignment_id, "provider_assignment_id": provider_assignment_id},
                )
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

    taken = func.count(Assignment.id)
    with session_scope(database_url) as session:
        full = session.execute(
            select(Worker.external_id, taken)
            .join(Assignment, Assignment.worker_id == Worker.id)
            .join(Hit)
            .where(Hit.study_id == ctx.study_id, Assignment.status.in_(CAP_STATUSES))
            .group_by(Worker.external_id)
            .having(taken >= ctx.config.schedule.per_worker_cap)
        ).all()
        done = {
            d.get("worker")
            for d in session.scalars(
                select(Event.data).where(Event.study_id == ctx.study_id, Event.kind == "worker_capped")
            )
        }
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
                add_event(
                    session,
                    ctx.study_id,
                    "cap_failed",
                    "scheduler",
                    {"worker": external_id, "error": f"{type(exc).__name__}: {exc}"[:1000]},
                )
            continue
        with session_scope(database_url) as session:
            add_event(session, ctx.study_id, "worker_capped", "scheduler", {"worker": external_id, "taken": count})
        n += 1
    return n
