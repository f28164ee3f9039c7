"""What the approval step does with work from a worker who fails quality control.

On a real crowd, paying a spammer is money lost and rejecting an honest worker harms them, so the
default on Prolific and MTurk is to *hold* such work for the coordinator, who approves or rejects it
on the dashboard or with ``hitkit held``. ``schedule.qc_failures`` picks ``hold``, ``pay`` or
``reject`` (with ``schedule.qc_reject_reason``, the message the worker reads).

The QC check is the one the dashboard shows (:func:`hitkit.money.qc.qc_summary`), over the work
counted so far. :func:`decide` is the policy itself, a pure function; :func:`gate` is the one call
the scheduler makes before approving an assignment.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Event
from hitkit.events import add_event

Decision = Literal["approve", "hold", "reject"]
HELD_EVENT = "qc_held"
"""Event kind recorded (once per assignment) when QC-failing work is held for review."""


def decide(policy: str, passed: bool | None) -> Decision:
    """The outcome for one worker's submitted work under ``policy`` (hold | pay | reject).

    ``passed`` is the worker's QC result so far; None (no verdict yet, e.g. too little work to test)
    never holds or rejects anybody: only a failed check does.
    """
    if passed is not False or policy == "pay":
        return "approve"
    if policy == "reject":
        return "reject"
    if policy == "hold":
        return "hold"
    raise ValueError(f"unknown QC outcome policy {policy!r}; use hold, pay or reject")


def held_assignment_ids(session: Session, study_id: int) -> set[int]:
    """Assignments of the study held for review and not decided since."""
    held = {
        int(e.data["assignment"])
        for e in session.scalars(select(Event).where(Event.study_id == study_id, Event.kind == HELD_EVENT))
    }
    if not held:
        return set()
    still = session.scalars(select(Assignment.id).where(Assignment.id.in_(held), Assignment.status == "submitted"))
    return set(still)


def gate(session: Session, ctx, a: Assignment) -> str | None:
    """Apply the study's QC outcome policy to submitted assignment ``a`` before the scheduler approves it.

    None: approve it. ``"hold"``: it is held for review (an event says why, once); held work stays
    held until the coordinator decides it, even if the worker's QC result changes later.
    ``"reject"``: the caller rejects it with the study's reason (outside any transaction, since that
    asks the platform), records the decision in the ledger and logs it with :func:`note_rejected`.
    """
    policy = ctx.config.qc_failures
    if policy == "pay":
        return None  # no QC computation at all on the default path of simulated/local crowds
    if a.id in held_assignment_ids(session, ctx.study_id):
        return "hold"
    from hitkit.money.qc import qc_summary

    qc = qc_summary(session, ctx, cache_key=f"qc-policy:{session.get_bind().engine.url}")
    passed = qc.by_worker.get(a.worker.external_id) if qc is not None else None
    outcome = decide(policy, passed)
    if outcome == "approve":
        return None
    if outcome == "hold":
        add_event(
            session,
            ctx.study_id,
            HELD_EVENT,
            "scheduler",
            {
                "assignment": a.id,
                "worker": a.worker.external_id,
                "check": qc.method if qc else None,
                "reason": "the worker fails quality control so far; approve or reject it on the "
                "dashboard or with `hitkit held`",
            },
        )
        return "hold"
    return "reject"


def note_rejected(session: Session, ctx, a: Assignment) -> None:
    """Log why a QC rejection the platform has accepted was made (the ledger records the decision)."""
    add_event(
        session,
        ctx.study_id,
        "qc_rejected",
        "scheduler",
        {
            "assignment": a.id,
            "worker": a.worker.external_id,
            "reason": ctx.config.schedule.qc_reject_reason or "",
        },
    )


def held_work(session: Session, ctx) -> list[dict]:
    """The held assignments of a study, for the dashboard and ``hitkit held``: id, worker, since, check."""
    events = {
        int(e.data["assignment"]): e
        for e in session.scalars(
            select(Event).where(Event.study_id == ctx.study_id, Event.kind == HELD_EVENT).order_by(Event.id)
        )
    }
    open_ids = held_assignment_ids(session, ctx.study_id)
    return [
        {"assignment": aid, "worker": e.data.get("worker"), "since": e.created_at, "check": e.data.get("check")}
        for aid, e in events.items()
        if aid in open_ids
    ]
