"""Re-contact and blocklists on the platform: the workers who passed quality control into a participant group
(a later study's allowlist), the workers who failed it into a persistent blocklist group, and messages.

Quality control is the protocol's own check over the work counted so far (:func:`hitkit.money.qc.qc_summary`).
Only providers with participant groups (``provider.groups``) or messages (``provider.send_message``) can
do this; for the others each function says so.
"""

from __future__ import annotations

import logging

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from hitkit.db.models import Assignment, Event, Hit, Worker
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.events import add_event
from hitkit.study.stored import StudyContext, resolve_secret

log = logging.getLogger(__name__)


def context(database_url: str, study_name: str) -> StudyContext:
    with session_scope(database_url) as session:
        return StudyContext.load(session, study_name, resolve_secret(database_url))


def qc_outcomes(database_url: str, ctx: StudyContext) -> dict[str, bool | None]:
    """Each worker with counted work: whether they pass the protocol's quality check (worker id → passed;
    None for a worker the check cannot judge yet, who is not invited as one who passed)."""
    from hitkit.money.qc import qc_summary

    with session_scope(database_url) as session:
        summary = qc_summary(session, ctx, cache_key="recontact")
    return dict(summary.by_worker) if summary is not None else {}


def _groups(ctx: StudyContext):
    groups = getattr(ctx.provider, "groups", None)
    if groups is None:
        raise HitkitError(f"participant groups are a Prolific feature; study '{ctx.name}' runs on {ctx.provider.name}")
    return groups


def passed_to_group(database_url: str, study_name: str, group: str) -> tuple[str, list[str]]:
    """Put the study's workers who passed QC into the participant group ``group`` (made if absent):
    (group id, the workers added). A second study with ``allowlist: GROUP`` invites only them."""
    ctx = context(database_url, study_name)
    passed = sorted(w for w, ok in qc_outcomes(database_url, ctx).items() if ok)
    if not passed:
        raise HitkitError(
            f"no worker of study '{study_name}' has passed quality control yet (or its protocol "
            f"has no per-worker check); nothing was added to '{group}'"
        )
    groups = _groups(ctx)
    group_id = groups.ensure(group)
    groups.add(group_id, passed)
    with session_scope(database_url) as session:
        add_event(
            session, ctx.study_id, "workers_to_group", "cli", {"group": group, "group_id": group_id, "workers": passed}
        )
    return group_id, passed


def block_qc_failures(database_url: str, ctx: StudyContext) -> int:
    """Add the study's workers who fail QC to ``qc_failures_blocklist`` (each once); how many were added now."""
    name = getattr(getattr(ctx.provider, "settings", None), "qc_failures_blocklist", None)
    if not name:
        return 0
    failed = {w for w, ok in qc_outcomes(database_url, ctx).items() if ok is False}  # never one not judged yet
    with session_scope(database_url) as session:
        done = {
            w
            for d in session.scalars(
                select(Event.data).where(Event.study_id == ctx.study_id, Event.kind == "worker_blocklisted")
            )
            for w in d.get("workers", [])
        }
    new = sorted(failed - done)
    if not new:
        return 0
    try:
        groups = _groups(ctx)
        groups.add(groups.ensure(name), new)
    except SQLAlchemyError:
        raise
    except Exception as exc:  # noqa: BLE001 - tried again next tick
        log.warning("adding QC failures to the blocklist group %s failed (retried next tick): %s", name, exc)
        return 0
    with session_scope(database_url) as session:
        add_event(session, ctx.study_id, "worker_blocklisted", "scheduler", {"group": name, "workers": new})
    return len(new)


def study_participants(database_url: str, ctx: StudyContext) -> list[str]:
    """Everyone who took part in the study (started any HIT), by their platform id."""
    with session_scope(database_url) as session:
        return sorted(
            set(
                session.scalars(
                    select(Worker.external_id)
                    .join(Assignment, Assignment.worker_id == Worker.id)
                    .join(Hit)
                    .where(Hit.study_id == ctx.study_id)
                )
            )
        )


def message(database_url: str, study_name: str, to: list[str] | None, body: str, actor: str = "cli") -> int:
    """Write ``body`` to the participants ``to`` (None: everyone in the study); how many were written to."""
    ctx = context(database_url, study_name)
    send = getattr(ctx.provider, "send_message", None)
    if send is None:
        raise HitkitError(
            f"hitkit can write to participants on Prolific only; study '{study_name}' runs on {ctx.provider.name}"
        )
    everyone = study_participants(database_url, ctx)
    ids = everyone if to is None else list(to)
    strangers = sorted(set(ids) - set(everyone))
    if strangers:
        raise HitkitError(
            f"{', '.join(strangers[:3])} did not take part in study '{study_name}'; write only to its participants"
        )
    n = send(ids, body)
    with session_scope(database_url) as session:
        add_event(session, ctx.study_id, "message_sent", actor, {"to": ids, "chars": len(body.strip())})
    return n
