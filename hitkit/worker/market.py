"""The simulated marketplace's listing: what a synthetic worker sees of a study's work before taking a HIT.

A person on a platform sees the work they may take; the simulated crowd (:mod:`hitkit.simulation.crowd`)
asks the server for the same over HTTP (``GET /s/STUDY/market?workerId=ID``) rather than reading the
database, so it acts as a person does. Only a provider whose marketplace lists work
(:attr:`~hitkit.providers.base.CrowdProvider.lists_work`: the simulated one) answers; on a real platform
the platform's own marketplace does.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Hit, Study, Worker, utcnow
from hitkit.errors import FlowError
from hitkit.study.stored import StudyContext
from hitkit.tables.schema import CAP_STATUSES
from hitkit.worker.admission import open_hits


def listing(session: Session, ctx: StudyContext, external_id: str) -> dict[str, Any]:
    """The study's status, the HIT the worker holds (accepted, not yet handed in), how many HITs the worker
    has taken (those that count toward ``schedule.per_worker_cap``), and the open HITs the worker may take
    (:func:`~hitkit.worker.admission.open_hits`, in order): JSON-able."""
    if not getattr(ctx.provider, "lists_work", False):
        raise FlowError(f"study '{ctx.name}' runs on {ctx.provider.name}, whose marketplace is not this server", 404)
    if not external_id:
        raise FlowError("the listing needs the worker's id (workerId)", 400)
    study = session.get_one(Study, ctx.study_id)
    row = session.scalar(select(Worker).where(Worker.provider == ctx.provider.name, Worker.external_id == external_id))
    held = taken = None
    if row is not None:
        held = session.scalar(
            select(Hit)
            .join(Assignment, Assignment.hit_id == Hit.id)
            .where(Hit.study_id == study.id, Assignment.worker_id == row.id, Assignment.status == "accepted")
        )
        taken = session.execute(
            select(func.count())
            .select_from(Assignment)
            .join(Hit)
            .where(Hit.study_id == study.id, Assignment.worker_id == row.id, Assignment.status.in_(CAP_STATUSES))
        ).scalar_one()
    return {
        "status": study.status,
        "held": _hit(held) if held is not None else None,
        "taken": taken,
        "hits": [_hit(h) for h in open_hits(session, study.id, row, utcnow(), ctx.task)],
    }


def _hit(hit: Hit) -> dict[str, Any]:
    return {"id": hit.id, "index": hit.index, "provider_hit_id": hit.provider_hit_id}
