"""Admitting a worker: the first step of the worker's path (:mod:`hitkit.worker.flow` has the rest).

The provider reads the arrival's query parameters, asking its platform if it must
(:mod:`hitkit.worker.arrivals`: bounded, cached, and before any transaction is open; :func:`admit`). A
preview gets the task read-only and no token. A worker gets an assignment (new, or the one they
already hold on that HIT) and an HMAC token bound to it (:func:`enter`). A place is chosen with the
study's row locked, so simultaneous arrivals fill different HITs and two workers racing for the
last place cannot both get it; the worker's row is locked too, for the cap on HITs per worker.

Every function taking a session leaves committing to the caller (one request, one transaction).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Mapping

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Hit, HitUnit, Response, Study, Worker, utcnow
from hitkit.db.session import session_scope
from hitkit.errors import FlowError
from hitkit.events import add_event
from hitkit.i18n import N_
from hitkit.protocols.base import TaskType
from hitkit.providers.base import Arrival, ProviderWork
from hitkit.study.stored import StudyContext
from hitkit.tables.schema import ACTIVE_STATUSES, CAP_STATUSES
from hitkit.worker import arrivals, tokens
from hitkit.worker.flow import MAX_ROW_ID, status_word

MAX_ID_CHARS = 128
"""Longest worker or assignment id a provider may hand over (the width of those columns)."""


@dataclass(frozen=True)
class Entry:
    """The outcome of an arrival: a preview of ``hit``, or ``token`` for the worker's assignment."""

    preview: bool
    hit: Hit | None
    token: str | None = None
    assignment: Assignment | None = None
    views: list[dict[str, Any]] = field(default_factory=list)
    """For a preview made by :func:`admit`: what the page shows of each unit (no answers, no ids to act on)."""


def _accepting(study: Study) -> None:
    if study.status != "running":
        raise FlowError(N_("this study is not accepting new work at the moment"), 410)


def _worker(session: Session, provider: str, external_id: str) -> Worker:
    """The worker row, created on first arrival (safe against two first arrivals at once)."""
    query = select(Worker).where(Worker.provider == provider, Worker.external_id == external_id)
    worker = session.scalar(query)
    if worker is None:
        try:
            with session.begin_nested():
                worker = Worker(provider=provider, external_id=external_id)
                session.add(worker)
        except IntegrityError:
            worker = session.execute(query).scalar_one()  # a rival's first arrival made it meanwhile
    return worker


def open_hits(
    session: Session, study_id: int, worker: Worker | None, now: dt.datetime, task: TaskType | None = None
) -> list[Hit]:
    """The posted, unexpired HITs of the study with a free place that ``worker`` has not taken, in order.

    With ``task``, HITs the task type refuses to ``worker`` (:meth:`TaskType.refuses`) are left out.
    """
    active = (
        select(func.count())
        .select_from(Assignment)
        .where(Assignment.hit_id == Hit.id, Assignment.status.in_(ACTIVE_STATUSES))
        .scalar_subquery()
    )
    query = select(Hit).where(
        Hit.study_id == study_id,
        Hit.status == "posted",
        active < Hit.max_assignments,
        (Hit.expires_at.is_(None)) | (Hit.expires_at > now),
    )
    if worker is not None:
        query = query.where(Hit.id.not_in(select(Assignment.hit_id).where(Assignment.worker_id == worker.id)))
    hits = list(session.scalars(query.order_by(Hit.index)))
    if task is not None and worker is not None:
        hits = [h for h in hits if task.refuses(session, h, worker) is None]
    return hits


def next_open_hit(
    session: Session, study_id: int, worker: Worker | None, now: dt.datetime, task: TaskType | None = None
) -> Hit | None:
    """The first of :func:`open_hits`, or None."""
    hits = open_hits(session, study_id, worker, now, task)
    return hits[0] if hits else None


class _Confirm(Exception):
    """Raised inside :func:`enter` when the platform must confirm an assignment id: asked outside the transaction."""

    def __init__(self, given: str):
        super().__init__(given)
        self.given = given


def arrive(ctx: StudyContext, args: Mapping[str, str], client: str = "") -> Arrival:
    """Who arrived, by the provider's word (bounded, cached; call it with no transaction open)."""
    key = arrivals.link_key("arrival", ctx.provider.name, f"{ctx.config.database_url}#{ctx.name}", args)
    remote = bool(getattr(ctx.provider, "arrival_calls_platform", False))
    return arrivals.CHECKS.check(key, lambda: ctx.provider.arrival(args), client, charge=remote)


def _confirmed_work(ctx: StudyContext, given: str, client: str) -> ProviderWork | None:
    key = arrivals.link_key(
        "work_of", ctx.provider.name, f"{ctx.config.database_url}#{ctx.name}", {"assignment": given}
    )
    try:
        return arrivals.CHECKS.check(key, lambda: ctx.provider.work_of(given), client)
    except FlowError as exc:
        if exc.status >= 500:
            raise FlowError(
                N_("the crowd site could not confirm this assignment just now; please reload in a moment"), 503
            ) from exc
        raise


def admit(
    database_url: str,
    ctx: StudyContext,
    hit_id: int | None,
    args: Mapping[str, str],
    client: str = "",
    held_token: str | None = None,
) -> Entry:
    """One arrival, end to end: the provider's checks with no transaction open, then :func:`enter` in one.

    Each platform call (the arrival check, and the confirmation of a changed assignment id) is made
    before the transaction that uses its answer, so a slow platform holds no lock and no connection.
    """
    arrival = arrive(ctx, args, client)
    works: dict[str, ProviderWork | None] = {}

    def work_of(given: str) -> ProviderWork | None:
        if given not in works:
            raise _Confirm(given)
        return works[given]

    for _ in range(3):
        try:
            with session_scope(database_url) as session:
                entry = enter(session, ctx, hit_id, arrival, work_of=work_of, held_token=held_token)
                views = (
                    [ctx.task.view(hu.unit, {}) for hu in _preview_units(entry.hit)]
                    if entry.preview and entry.hit is not None
                    else []
                )
            return Entry(entry.preview, entry.hit, entry.token, entry.assignment, views)
        except _Confirm as need:
            works[need.given] = _confirmed_work(ctx, need.given, client)
    raise FlowError(N_("this arrival could not be confirmed; open the task again from the crowd site"), 409)


def _preview_units(hit: Hit) -> list[HitUnit]:
    # Ordered by the random public key, not by creation or packing: nothing in a preview's order
    # tells one unit from another.
    return sorted(hit.units, key=lambda hu: hu.unit.public_key)


def enter(
    session: Session,
    ctx: StudyContext,
    hit_id: int | None,
    arrival: Arrival | Mapping[str, str],
    work_of: Callable[[str], ProviderWork | None] | None = None,
    held_token: str | None = None,
) -> Entry:
    """Handle one arrival; raise FlowError with the reason a worker cannot take the HIT.

    ``arrival`` is the provider's verdict (:func:`arrive`); given the raw query parameters instead,
    the provider is asked here, inside the caller's transaction (tests and the simulated crowd do
    that; the web tier uses :func:`admit`). ``work_of`` answers the platform's view of an
    assignment id (default: the provider, asked here). ``held_token``: the assignment token the
    worker's browser kept from an earlier arrival (a cookie), the proof a returning worker shows
    where the provider's ids prove nothing (:func:`_check_returning`).
    """
    if not isinstance(arrival, Arrival):
        arrival = ctx.provider.arrival(arrival)
    study = session.get_one(Study, ctx.study_id)
    hit = None
    if hit_id is not None:
        hit = session.get(Hit, hit_id) if 0 < hit_id <= MAX_ROW_ID else None
        if hit is None or hit.study_id != ctx.study_id:
            raise FlowError(N_("this HIT does not exist in this study"), 404)
    if arrival.preview:
        if hit is None:
            hit = session.scalar(select(Hit).where(Hit.study_id == ctx.study_id).order_by(Hit.index).limit(1))
        return Entry(preview=True, hit=hit)
    for what, ident in (("worker id", arrival.worker_id), ("assignment id", arrival.provider_assignment_id)):
        if ident is not None and (len(ident) > MAX_ID_CHARS or "\x00" in ident):
            raise FlowError(
                f"the {what} in this link is not valid (over {MAX_ID_CHARS} characters or with a NUL "
                "character); open the task again from the crowd site",
                400,
            )

    worker = _worker(session, ctx.provider.name, arrival.worker)
    # Lock the worker row: one worker opening two HITs at once must not slip past the cap.
    worker = session.execute(
        select(Worker).where(Worker.id == worker.id).with_for_update().execution_options(populate_existing=True)
    ).scalar_one()
    if worker.blocked:
        raise FlowError(N_("you are not able to take part in this study"), 403)
    now = utcnow()
    existing = None
    if hit is None or ctx.provider.resume_needs_proof:
        existing = session.scalar(
            select(Assignment)
            .join(Hit)
            .where(Hit.study_id == ctx.study_id, Assignment.worker_id == worker.id, Assignment.status == "accepted")
        )
        if existing is not None and hit is not None and existing.hit_id != hit.id:
            # A typed participant id holding work elsewhere opens nothing new under it without proof.
            _check_returning(ctx, existing, arrival, held_token)
    if hit is None:
        if existing is not None:
            hit = existing.hit
        else:
            _accepting(study)
            # Lock the study row before choosing: every fresh arrival of the study chooses in turn,
            # each seeing the places the ones before it took, so a burst fills different HITs
            # instead of all picking the first open one and all but a few finding it full.
            session.execute(select(Study.id).where(Study.id == ctx.study_id).with_for_update())
            hit = next_open_hit(session, ctx.study_id, worker, now, ctx.task)
        if hit is None:
            raise FlowError(N_("there is no work left for you in this study right now — thank you!"), 409)
    # Lock the HIT row: its places are counted and taken in one step.
    hit = session.execute(
        select(Hit).where(Hit.id == hit.id).with_for_update().execution_options(populate_existing=True)
    ).scalar_one()

    assignment = session.scalar(
        select(Assignment)
        .where(Assignment.hit_id == hit.id, Assignment.worker_id == worker.id)
        .execution_options(populate_existing=True)
    )
    if assignment is not None:
        if assignment.status in ACTIVE_STATUSES:
            _check_returning(ctx, assignment, arrival, held_token)
            _check_same_assignment(ctx, assignment, worker, arrival, work_of or ctx.provider.work_of)
            return Entry(
                False, hit, tokens.assignment_token(ctx.secret, assignment.id, assignment.token_nonce), assignment
            )
        raise FlowError(
            N_(
                "you already took this HIT (it is %(status)s); it cannot be taken again",
                status=status_word(assignment.status),
            ),
            409,
        )
    # A paused or stopped study takes no one new; those already at work may come back and finish
    # (Prolific: participants who started a paused study can still complete it).
    _accepting(study)

    if hit.status != "posted" or (hit.expires_at is not None and hit.expires_at <= now):
        raise FlowError(N_("this HIT is no longer available"), 410)
    done_by_worker = session.execute(
        select(func.count())
        .select_from(Assignment)
        .join(Hit)
        .where(Hit.study_id == ctx.study_id, Assignment.worker_id == worker.id, Assignment.status.in_(CAP_STATUSES))
    ).scalar_one()
    cap = ctx.config.schedule.per_worker_cap
    if done_by_worker >= cap:
        raise FlowError(
            N_("you have already done the most HITs one person may do in this study (%(cap)s)", cap=cap), 403
        )
    taken = session.execute(
        select(func.count())
        .select_from(Assignment)
        .where(Assignment.hit_id == hit.id, Assignment.status.in_(ACTIVE_STATUSES))
    ).scalar_one()
    if taken >= hit.max_assignments:
        raise FlowError(N_("every place on this HIT is taken"), 409)
    refusal = ctx.task.refuses(session, hit, worker)
    if refusal is not None:
        raise FlowError(refusal, 409)

    units = [hu.unit for hu in hit.units]
    rng = random.Random(f"{ctx.config.seed}:{hit.id}:{worker.external_id}")
    assignment = Assignment(
        hit_id=hit.id,
        worker_id=worker.id,
        provider_assignment_id=arrival.provider_assignment_id,
        status="accepted",
        token_nonce=tokens.new_nonce(),
        layout=ctx.task.layout(units, rng),
        accepted_at=now,
        # A verified arrival confirms the worker; otherwise the platform or coordinator must.
        confirmed_at=now if ctx.provider.confirmation == "arrival" else None,
    )
    session.add(assignment)
    session.flush()
    if assignment.provider_assignment_id is None:
        assignment.provider_assignment_id = f"{ctx.provider.name}-a{assignment.id}"
    for unit in units:
        for question, value in ctx.task.auto_answers(unit).items():
            session.add(
                Response(
                    assignment_id=assignment.id,
                    unit_id=unit.id,
                    question=question,
                    value=value,
                    source="auto",
                    created_at=now,
                    updated_at=now,
                )
            )
    add_event(
        session,
        ctx.study_id,
        "assignment_accepted",
        "server",
        {"assignment": assignment.id, "hit": hit.id, "worker": worker.external_id},
    )
    session.flush()
    return Entry(False, hit, tokens.assignment_token(ctx.secret, assignment.id, assignment.token_nonce), assignment)


def _check_same_assignment(
    ctx: StudyContext, assignment: Assignment, worker: Worker, arrival, work_of: Callable[[str], ProviderWork | None]
) -> None:
    """Refuse a return visit whose provider assignment id is not the one this worker's assignment holds.

    A worker id alone is no proof of identity on MTurk (it travels unsigned in the URL), so whoever
    knows it must not open the work it holds by arriving with an assignment id of their own. The
    provider's word settles the one honest mismatch: a worker who returned the HIT on the provider
    and accepted it again holds a new assignment id, which the provider shows as theirs. Providers
    without a marketplace of their own (``work_of`` gives None) keep the old behaviour.
    """
    given, stored = arrival.provider_assignment_id, assignment.provider_assignment_id
    synthesized = f"{ctx.provider.name}-a{assignment.id}"  # the provider gave none at the first arrival
    if given is None or stored in (None, given, synthesized):
        return
    try:
        work = work_of(given)
    except (_Confirm, FlowError):
        raise
    except Exception as exc:  # noqa: BLE001 - the check failed: refuse now, the worker may come back
        raise FlowError(
            N_("the crowd site could not confirm this assignment just now; please reload in a moment"), 503
        ) from exc
    if work is None:  # a provider with no marketplace of its own (simulated, local): its ids prove nothing
        return
    if work.worker_id == worker.external_id and assignment.status == "accepted" and work.status.value == "working":
        assignment.provider_assignment_id = given
        return
    raise FlowError(
        N_("this link's assignment id is not the one you accepted; open the task again from the crowd site"), 403
    )


SOMEONE_ELSES = N_(
    "this participant id already holds work in this study under another session, so this link "
    "cannot open it. If it is yours, open the study again from the panel in the browser where you "
    "started it; otherwise ask the study's coordinator."
)


def _check_returning(ctx: StudyContext, assignment: Assignment, arrival: Arrival, held_token: str | None) -> None:
    """Refuse a return visit that proves nothing, where the provider's ids travel unsigned (panels).

    A participant id in a panel URL is typed, not signed: whoever knows someone's id could arrive with
    it and any session id of their own and be handed that person's assignment (read, overwrite,
    submit their work). A returning worker gets their assignment only with the session id stored at
    their first arrival, or with the assignment's own signed token that their browser kept. Anything
    else starts nothing and reads nothing of theirs (403 with a message page).
    """
    if not ctx.provider.resume_needs_proof:
        return
    if held_token:
        held = tokens.read_assignment_token(ctx.secret, held_token)
        if held == (assignment.id, assignment.token_nonce):
            return
    given, stored = arrival.provider_assignment_id, assignment.provider_assignment_id
    synthesized = f"{ctx.provider.name}-a{assignment.id}"  # no session id was given at the first arrival
    if given is not None and stored not in (None, synthesized) and given == stored:
        return
    raise FlowError(SOMEONE_ELSES, 403)
