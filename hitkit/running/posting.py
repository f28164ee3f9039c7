"""Posting: the next wave of HITs the budget and the concurrency cap allow, and what stops posting.

A wave is chosen from the rows (pending HITs in order, or an adaptive design's order), capped by
the wave size, the open-HIT cap and the budget's worst case (:func:`hits_to_post`), then each HIT is
posted with no transaction open and recorded under the study's lease. A provider's lasting refusal
(:func:`posting_blocked`) or a budget that covers no pending HIT (:func:`budget_blocked`) stops
posting until the coordinator acts. The scheduler's tick (:mod:`hitkit.running.scheduler`) calls
:func:`post_wave`; ``hitkit launch`` watches the two blocks.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from hitkit.db.models import Event, Hit
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError, HitkitError
from hitkit.events import add_event, record_once
from hitkit.money import ledger
from hitkit.running import stopping
from hitkit.study import lease
from hitkit.study.stored import StudyContext
from hitkit.worker import screener

log = logging.getLogger(__name__)


def hits_to_post(
    pending_costs: Sequence[Decimal],
    committed: Decimal,
    budget: Decimal,
    open_hits: int,
    max_concurrent: int,
    wave_size: int,
) -> int:
    """How many of the pending HITs (in order, with these worst-case costs) to post now.

    Never more than the wave, never more open HITs than the cap, and never so many that the
    worst-case spend of everything posted could pass the budget.
    """
    room = max(0, min(wave_size, max_concurrent - open_hits))
    return ledger.hits_covered(pending_costs[:room], committed, budget)


def posting_blocked(session: Session, study_id: int) -> str | None:
    """The reason of a provider's lasting refusal to post, unless the coordinator resumed since; else None."""
    last = session.scalar(
        select(Event)
        .where(Event.study_id == study_id, Event.kind.in_(("provider_refused_post", "posting_resumed")))
        .order_by(Event.id.desc())
        .limit(1)
    )
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
        open_hits = session.execute(
            select(func.count()).select_from(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "posted")
        ).scalar_one()
        query = select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "pending").order_by(Hit.index)
        pending: Sequence[Hit]
        if ctx.config.design == "adaptive":
            pending = stopping.order_pending(session, ctx, session.scalars(query).all())[: sched.wave_size]
        else:
            pending = session.scalars(query.limit(sched.wave_size)).all()
        costs = [ledger.worst_case(ctx, h) for h in pending]
        committed = ledger.committed_spend(session, ctx) + screener.reserve(session, ctx)  # screen-outs' worst case
        n = hits_to_post(
            costs, committed, ledger.budget_of(session, ctx.study_id), open_hits, sched.max_concurrent, sched.wave_size
        )
        wave = [(h.id, h.index, h.reward, h.max_assignments, h.lifetime_s) for h in pending[:n]]
        if pending and n == 0 and open_hits == 0:
            add_event(session, ctx.study_id, "budget_exhausted", "scheduler", {"pending": len(pending)})
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
                record_once(
                    session,
                    ctx.study_id,
                    "provider_refused_post",
                    {"hit": hit_id, "reason": str(exc), "permanent": permanent},
                )
            log.warning(
                "the provider refused to post HIT %s%s: %s", hit_id, "" if permanent else " (retried next tick)", exc
            )
            return posted_now
        with session_scope(database_url) as session:
            lease.check(session, ctx.study_id)  # a process that lost the lead records nothing
            hit = session.get_one(Hit, hit_id, with_for_update=True)
            if hit.status != "pending":
                continue
            hit.provider_hit_id, hit.status = posted.provider_hit_id, "posted"
            hit.posted_at, hit.expires_at = now, now + dt.timedelta(seconds=lifetime_s)
            add_event(
                session,
                ctx.study_id,
                "hit_posted",
                "scheduler",
                {"hit": hit_id, "provider_hit_id": posted.provider_hit_id},
            )
        posted_now += 1
    return posted_now


def budget_blocked(session: Session, ctx: StudyContext) -> int:
    """How many HITs wait unposted because the budget cannot cover them (0 while work is open)."""
    open_hits = session.scalar(
        select(func.count()).select_from(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "posted")
    )
    pending = session.scalars(
        select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "pending").order_by(Hit.index)
    ).all()
    if open_hits or not pending:
        return 0
    fits = ledger.within_budget(
        ledger.committed_spend(session, ctx),
        ledger.worst_case(ctx, pending[0]),
        ledger.budget_of(session, ctx.study_id),
    )
    return 0 if fits else len(pending)
