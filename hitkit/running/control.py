"""The coordinator's hand on a running study: pause, resume, stop, and settling work a provider lost.

Each command records its decision in the database first (so the scheduler, the worker pages and
every other process see it at once), then tells the provider, with no transaction open. A study
paused by its coordinator stays paused: only ``resume`` restarts it, never the scheduler.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from hitkit.db.models import Assignment, Hit, Study, utcnow
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.events import add_event
from hitkit.study.stored import StudyContext, resolve_secret

ACTOR = "cli"


def _set_status(database_url: str, study_name: str, allowed: tuple[str, ...], new: str, kind: str) -> StudyContext:
    with session_scope(database_url) as session:
        ctx = StudyContext.load(session, study_name, resolve_secret(database_url))
        study = session.get_one(Study, ctx.study_id)
        if study.status not in allowed:
            raise HitkitError(
                f"study '{study_name}' is {study.status}; only a study that is {' or '.join(allowed)} can be {new}"
            )
        study.status = new
        add_event(session, ctx.study_id, kind, ACTOR, {})
    return ctx


def _as_leader(database_url: str, ctx: StudyContext, call) -> None:
    """Tell the provider under the study's lease (:mod:`hitkit.study.lease`): one process acts at a time."""
    from hitkit.study import lease

    if callable(call):
        with lease.held(database_url, ctx.study_id, "cli"):
            call()


def coordinator_line(study: str, status: str, done: int, total: int, config_path: Path) -> str:
    """What a running ``hitkit launch`` says when the coordinator stops or pauses its study from elsewhere."""
    if status == "stopped":
        return f"study '{study}' was stopped (`hitkit stop`) with {done} of {total} answers; exporting and analysing what is in"
    return (
        f"study '{study}' is paused (`hitkit pause`) with {done} of {total} answers: waiting; "
        f"`hitkit resume {config_path}` recruits again, `hitkit stop {config_path}` ends this launch"
    )


def pause_study(database_url: str, study_name: str) -> str:
    """Stop recruiting (hitkit's pages and the provider's listing); work in progress may still be handed in."""
    ctx = _set_status(database_url, study_name, ("running", "paused"), "paused", "study_paused")
    _as_leader(database_url, ctx, getattr(ctx.provider, "pause", None))
    return f"study '{study_name}' is paused; `hitkit resume` recruits again"


def resume_study(database_url: str, study_name: str) -> str:
    """Recruit again after a pause (or after a provider refused to post and the cause was fixed)."""
    ctx = _set_status(database_url, study_name, ("paused", "running"), "running", "study_resumed")
    with session_scope(database_url) as session:
        # Clears a lasting refusal to post: the coordinator says its cause is fixed.
        add_event(session, ctx.study_id, "posting_resumed", ACTOR, {})
    _as_leader(database_url, ctx, getattr(ctx.provider, "resume", None))
    return f"study '{study_name}' is running"


def stop_study(database_url: str, study_name: str) -> str:
    """Stop recruiting for good; submitted work is still reviewed and paid by the scheduler and `hitkit sync`."""
    ctx = _set_status(database_url, study_name, ("running", "paused"), "stopped", "study_stopped")
    _as_leader(database_url, ctx, getattr(ctx.provider, "stop", None))
    return f"study '{study_name}' is stopped; submitted work is still reviewed and paid"


def settle_assignment(database_url: str, study_name: str, assignment_id: int, pay: bool) -> str:
    """Settle work submitted in hitkit that the provider can no longer approve (returned or timed out there).

    ``pay`` pays its reward as a bonus (once: the bonus key is the assignment's) and counts it as
    approved; otherwise its answers are dropped (the assignment counts as returned).
    """
    from hitkit.money.bonuses import grant_bonus

    with session_scope(database_url) as session:
        ctx = StudyContext.load(session, study_name, resolve_secret(database_url))
        a = session.get(Assignment, assignment_id)
        if a is None or a.hit.study_id != ctx.study_id:
            raise HitkitError(f"there is no assignment {assignment_id} in study '{study_name}'")
        if a.status != "submitted":
            raise HitkitError(f"assignment {assignment_id} is {a.status}; only submitted work is settled this way")
        reward = session.execute(select(Hit.reward).where(Hit.id == a.hit_id)).scalar_one()
    if pay:
        grant_bonus(
            database_url,
            study_name,
            assignment_id,
            reward,
            f"Payment for the work you submitted, which {ctx.provider.name} could no longer approve",
            tag="settle",
        )
    with session_scope(database_url) as session:
        a = session.get_one(Assignment, assignment_id)
        if a.status == "submitted":
            a.status = "approved" if pay else "returned"
            if pay and a.confirmed_at is None:
                a.confirmed_at = utcnow()  # the coordinator paying for it vouches for it
            add_event(session, ctx.study_id, "assignment_settled", ACTOR, {"assignment": assignment_id, "paid": pay})
    return (
        f"assignment {assignment_id}: its reward of {reward} was paid as a bonus"
        if pay
        else f"assignment {assignment_id}: dropped; its answers are not counted"
    )
