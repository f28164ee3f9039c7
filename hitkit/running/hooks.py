"""A platform's webhooks in a study's life: received, queued, drained by the scheduler, subscribed and ended.

- :func:`receive` is all the web route does: check the delivery's signature and timestamp against the
  study's stored secrets (refused: only a counter of refusals by cause goes up), then queue it once per
  signed delivery (timestamp + body, never the unsigned event id alone). It answers at once; nothing in
  it calls the platform.
- :func:`drain` (each scheduler tick) takes the queued events and, for each, asks the platform for the
  resource's *current* state before acting: an event is a hint. So a duplicated, replayed, reordered or
  stale event can never pay, approve, reject or free a place by itself; the only things a drained event
  does are what polling would do a little later (free a place the platform shows given back, note a paused
  study, react to a high return rate).
- :func:`tend` (each scheduler tick) subscribes a study whose file gives a public https address, drains
  its queue, and ends its subscriptions once the study is over. Polling stays the fallback: a study whose
  webhooks are all lost ends the same (:mod:`hitkit.running.provider_side`, ``hitkit sync``).
- :func:`health` is what the dashboard shows.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from hitkit.db.hook_models import HookEvent, HookSubscription
from hitkit.db.models import Assignment, Event, Hit, Study, utcnow
from hitkit.db.session import session_scope
from hitkit.events import add_event, record_once
from hitkit.running.hook_refusals import count_refusal, refused_counts

if TYPE_CHECKING:
    from hitkit.providers.prolific.webhooks import Headers

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
"""A queued event whose draining fails this often is left as failed (polling covers what it hinted at)."""
GIVEN_BACK = ("RETURNED", "TIMED-OUT", "SCREENED OUT", "SCREENED_OUT", "SCREENED-OUT")
"""Submission statuses that gave the place back (PLATFORMS.md: submission states)."""
OVER = ("completed", "stopped")
RETRY_SUBSCRIBE_S = 600.0
"""Seconds before a subscription that failed is tried again: each try is several API calls (the secret,
the subscription, its confirmation) per event type, and a failure that lasts (an address Prolific refuses)
would otherwise spend them on every tick against Prolific's rate limit; polling covers the study meanwhile."""


def _hooks(ctx):
    return getattr(ctx.provider, "hooks", None)


# -- receiving (the web route) ---------------------------------------------------------------------


def receive(
    database_url: str,
    provider: str,
    study_name: str,
    headers: Headers,
    raw: bytes,
    payload: Any,
    now: float | None = None,
) -> tuple[int, str]:
    """Check and queue one delivery: (HTTP status, what happened). A refused delivery only counts its cause."""
    from hitkit.providers.prolific import webhooks

    if provider != "prolific":
        return 404, "no such platform"
    with session_scope(database_url) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == study_name))
        secrets = (
            [
                s
                for s in session.scalars(
                    select(HookSubscription.secret).where(
                        HookSubscription.study_id == study_id, HookSubscription.provider == provider
                    )
                )
                if s
            ]
            if study_id
            else []
        )
    if study_id is None:
        return 404, "no such study"
    refused = webhooks.check(secrets, headers, raw, time.time() if now is None else now)
    if refused is not None:
        count_refusal(database_url, study_id, refused[0])
        return 401, refused[1]
    delivery = webhooks.parse(headers, payload)
    if isinstance(delivery, str):
        count_refusal(database_url, study_id, "malformed")
        return 400, delivery
    key, digest = webhooks.signed_key(headers, raw), webhooks.body_digest(raw)
    try:
        with session_scope(database_url) as session:
            alike = session.execute(
                select(HookEvent.event_id, HookEvent.body).where(
                    HookEvent.study_id == study_id,
                    HookEvent.provider == provider,
                    (HookEvent.event_id == key)
                    | ((HookEvent.resource_id == delivery.resource_id) & (HookEvent.event_type == delivery.event_type)),
                )
            ).all()
            if any(k == key or webhooks.same_event(body, delivery.event_id, digest) for k, body in alike):
                return 200, "already received"
            session.add(
                HookEvent(
                    study_id=study_id,
                    provider=provider,
                    event_id=key,  # what the signature covers; the unsigned X-Event-ID is kept in the body
                    event_type=delivery.event_type,
                    resource_id=delivery.resource_id,
                    sent_at=delivery.sent_at,
                    body={**delivery.body, "delivery": {"event_id": delivery.event_id, "body_sha256": digest}},
                    status="queued",
                )
            )
    except IntegrityError:
        return 200, "already received"  # the same delivery, twice at once: the other one queued it
    return 200, "queued"


# -- draining (the scheduler) ----------------------------------------------------------------------


def drain(database_url: str, ctx, limit: int = 200) -> int:
    """Act on the study's queued events, oldest sent first, each after asking the platform; how many were done."""
    hooks = _hooks(ctx)
    if hooks is None:
        return 0
    with session_scope(database_url) as session:
        rows = [
            (e.id, e.event_type, e.resource_id)
            for e in session.scalars(
                select(HookEvent)
                .where(HookEvent.study_id == ctx.study_id, HookEvent.status == "queued")
                .order_by(HookEvent.sent_at, HookEvent.id)
                .limit(limit)
            )
        ]
    done = 0
    for row_id, event_type, resource_id in rows:
        try:
            facts = hooks.current(event_type, resource_id)  # no transaction open while the platform answers
            with session_scope(database_url) as session:
                outcome = act(session, ctx, event_type, resource_id, facts)
                session.execute(
                    update(HookEvent)
                    .where(HookEvent.id == row_id)
                    .values(status="done", outcome=outcome, done_at=utcnow(), attempts=HookEvent.attempts + 1)
                )
            done += 1
            if outcome == "pause":
                _pause(database_url, ctx)
        except SQLAlchemyError:
            raise
        except Exception as exc:  # noqa: BLE001 - one event's failure waits for the next tick
            log.warning("acting on webhook event %s failed (retried next tick): %s", row_id, exc)
            with session_scope(database_url) as session:
                event = session.get_one(HookEvent, row_id)
                event.attempts += 1
                event.outcome = f"{type(exc).__name__}: {exc}"[:1000]
                if event.attempts >= MAX_ATTEMPTS:
                    event.status = "failed"
    return done


def act(session, ctx, event_type: str, resource_id: str, facts) -> str:
    """What one event leads to, decided from the platform's current state (``facts``), never from the event."""
    if not facts.ours:
        return "ignored: not this study's"
    if event_type == "submission.status.change":
        if facts.status in GIVEN_BACK:
            freed = session.execute(
                update(Assignment)
                .where(
                    Assignment.provider_assignment_id == resource_id,
                    Assignment.status == "accepted",
                    Assignment.hit_id.in_(select(Hit.id).where(Hit.study_id == ctx.study_id)),
                )
                .values(status="returned")
                .execution_options(synchronize_session=False)
            )
            if freed.rowcount:
                assignment = session.scalar(
                    select(Assignment.id).where(Assignment.provider_assignment_id == resource_id)
                )
                add_event(
                    session,
                    ctx.study_id,
                    "assignment_returned",
                    "webhook",
                    {"assignment": assignment, "provider_assignment_id": resource_id},
                )
                return f"freed the place ({facts.status})"
        return f"noted ({facts.status})"
    if event_type == "study.has_high_return_rate":
        record_once(session, ctx.study_id, "high_return_rate", {"study": resource_id})
        study = session.get_one(Study, ctx.study_id)
        if ctx.config.provider.prolific.on_high_return_rate == "pause" and study.status == "running":
            return "pause"
        return "warned"
    return f"noted ({facts.status})"


def _pause(database_url: str, ctx) -> None:
    from hitkit.running.control import pause_study

    pause_study(database_url, ctx.name)
    with session_scope(database_url) as session:
        add_event(session, ctx.study_id, "paused_for_high_return_rate", "webhook", {})


# -- subscribing and ending (the scheduler) --------------------------------------------------------


def tend(database_url: str, ctx) -> int:
    """Subscribe (once posted), drain, and unsubscribe once the study is over; the events drained.
    Also publishes a Prolific study a test run left unpublished, once no test runs (:mod:`...test_run`)."""
    hooks = _hooks(ctx)
    if hooks is not None:
        from hitkit.providers.prolific import test_run

        try:
            test_run.publish_after_test(ctx.provider)
        except SQLAlchemyError:
            raise
        except Exception as exc:  # noqa: BLE001 - the next tick tries again
            log.warning("publishing %s after its test run failed (retried next tick): %s", ctx.name, exc)
    if hooks is None or not hooks.wanted:
        if hooks is not None and ctx.config.screener is not None:
            from hitkit.worker import screener

            screener.settle(database_url, ctx)
        return drain(database_url, ctx)
    with session_scope(database_url) as session:
        status = session.get_one(Study, ctx.study_id).status
        have = {
            s.event_type: (s.status, s.updated_at)
            for s in session.scalars(select(HookSubscription).where(HookSubscription.study_id == ctx.study_id))
        }
    from hitkit.providers.prolific.webhooks import EVENT_TYPES

    if status not in OVER and hooks.posted():
        for event_type in EVENT_TYPES:
            state, at = have.get(event_type, (None, None))
            # A failed subscription is tried again after a while, not on every tick (polling covers meanwhile).
            if state is None or (
                state == "failed" and at is not None and (utcnow() - at).total_seconds() >= RETRY_SUBSCRIBE_S
            ):
                _subscribe(database_url, ctx, hooks, event_type)
    done = drain(database_url, ctx)
    if ctx.config.screener is not None:
        from hitkit.worker import screener

        screener.settle(database_url, ctx)  # screen-out pay Prolific has paid
    if status in OVER:
        unsubscribe_all(database_url, ctx)
    return done


def _subscribe(database_url: str, ctx, hooks, event_type: str) -> None:
    try:
        remote_id, secret = hooks.subscribe(event_type)
        values: dict[str, Any] = {"remote_id": remote_id, "secret": secret, "status": "confirmed", "error": None}
    except SQLAlchemyError:
        raise
    except Exception as exc:  # noqa: BLE001 - polling covers the study; the next tick tries again
        log.warning("subscribing %s to Prolific's %s webhooks failed: %s", ctx.name, event_type, exc)
        values = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:1000]}
    with session_scope(database_url) as session:
        row = session.scalar(
            select(HookSubscription).where(
                HookSubscription.study_id == ctx.study_id, HookSubscription.event_type == event_type
            )
        )
        if row is None:
            row = HookSubscription(
                study_id=ctx.study_id, provider=hooks.provider, event_type=event_type, target_url=hooks.target()
            )
            session.add(row)
        for key, value in values.items():
            setattr(row, key, value)
        row.updated_at = utcnow()


def unsubscribe_all(database_url: str, ctx) -> int:
    """End the study's confirmed subscriptions (its deliveries stop); the ones ended now."""
    hooks = _hooks(ctx)
    if hooks is None:
        return 0
    with session_scope(database_url) as session:
        live = [
            (s.id, s.remote_id)
            for s in session.scalars(
                select(HookSubscription).where(
                    HookSubscription.study_id == ctx.study_id, HookSubscription.status == "confirmed"
                )
            )
        ]
    n = 0
    for row_id, remote_id in live:
        try:
            hooks.unsubscribe(remote_id)
        except SQLAlchemyError:
            raise
        except Exception as exc:  # noqa: BLE001 - tried again next time
            log.warning("ending webhook subscription %s failed: %s", remote_id, exc)
            continue
        with session_scope(database_url) as session:
            row = session.get_one(HookSubscription, row_id)
            row.status, row.updated_at = "deleted", utcnow()
        n += 1
    return n


# -- what the dashboard shows ----------------------------------------------------------------------


def health(session, study_id: int) -> dict[str, Any]:
    """Webhook health: the mode (webhooks or polling only), subscriptions, the last event, failures, and the
    deliveries refused by cause (``refused``; a rotated secret shows here as every delivery "bad signature")."""
    subs = session.scalars(select(HookSubscription).where(HookSubscription.study_id == study_id)).all()
    confirmed = [s for s in subs if s.status == "confirmed"]
    last = session.scalar(select(func.max(HookEvent.received_at)).where(HookEvent.study_id == study_id))
    failed_events = session.scalar(
        select(func.count()).select_from(HookEvent).where(HookEvent.study_id == study_id, HookEvent.status == "failed")
    )
    queued = session.scalar(
        select(func.count()).select_from(HookEvent).where(HookEvent.study_id == study_id, HookEvent.status == "queued")
    )
    high = session.scalar(
        select(func.count()).select_from(Event).where(Event.study_id == study_id, Event.kind == "high_return_rate")
    )
    refused, last_refused = refused_counts(session, study_id)
    return {
        "mode": "webhooks" if confirmed else "polling only",
        "subscribed": sorted(s.event_type for s in confirmed),
        "subscription_errors": [f"{s.event_type}: {s.error}" for s in subs if s.status == "failed"],
        "last_event_at": last.isoformat() if last else None,
        "queued": queued,
        "failures": failed_events + sum(1 for s in subs if s.status == "failed"),
        "high_return_rate": bool(high),
        "refused": refused,
        "refused_total": sum(refused.values()),
        "last_refused": last_refused,
    }
