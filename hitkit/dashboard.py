"""The coordinator dashboard's logic as plain functions: who may log in, what a study's progress is,
and the coordinator's actions on workers, each through the provider and the ledger.

``server/dashboard.py`` is the thin HTTP layer over this module; nothing here knows about Flask.

Login is one coordinator account from the environment (HITKIT_DASHBOARD_USER and
HITKIT_DASHBOARD_PASSWORD, or HITKIT_DASHBOARD_PASSWORD_HASH made by werkzeug's
``generate_password_hash``); with none configured the dashboard is off. The session is a signed,
expiring cookie bound to the configured credentials, so changing the password logs everyone out.

Actions write the ledger row and commit it *before* the provider is called, then record the
outcome: a crash in between leaves a ``pending`` row whose idempotency key stops a retry from
paying twice (the scheduler's rule for rewards, applied to the coordinator's clicks).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hitkit import tokens
from hitkit.db.models import (
    DONE_STATUSES,
    Assignment,
    Conversation,
    Event,
    Hit,
    HitUnit,
    Payment,
    Response,
    Study,
    System,
    Turn,
    Unit,
    Worker,
    utcnow,
)
from hitkit.db import settings
from hitkit.db.session import get_engine, session_scope
from hitkit.errors import BudgetError, ConfigError, HitkitError
from hitkit.money import cents
from hitkit.prescreen.similarity import distinct_n
from hitkit.protocols import PROTOCOLS
from hitkit.prescreen.similarity import tokens as word_tokens
from hitkit.qc_policy import held_assignment_ids
from hitkit.study import StudyContext, unit_answer_counts

ACTOR = "dashboard"
SESSION_HOURS = 12
IN_FLIGHT = dt.timedelta(seconds=60)
"""A pending bonus younger than this is being paid by another request; an older one is retried."""


class ActionError(HitkitError):
    """A coordinator's action that cannot be done as asked; the message says why and what to do."""


# Login -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Credentials:
    """The coordinator's account: a user name and a password, or a werkzeug password hash."""

    username: str
    password: str | None = None
    password_hash: str | None = None

    def check(self, username: str, password: str) -> bool:
        """True when both match; every comparison is constant-time and always runs."""
        from werkzeug.security import check_password_hash

        user_ok = hmac.compare_digest(username.encode(), self.username.encode())
        if self.password_hash is not None:
            try:
                password_ok = check_password_hash(self.password_hash, password)
            except (ValueError, TypeError):
                password_ok = False
        else:
            password_ok = hmac.compare_digest(password.encode(), (self.password or "").encode())
        return user_ok and password_ok

    @property
    def fingerprint(self) -> str:
        """Binds sessions to these credentials: a new password invalidates every old session."""
        material = f"{self.username}\0{self.password_hash or self.password}"
        return hashlib.sha256(material.encode()).hexdigest()[:16]


def credentials_from_env(environ: Mapping[str, str]) -> Credentials | None:
    """The dashboard's account from the environment, or None (dashboard disabled) when none is set."""
    user = (environ.get("HITKIT_DASHBOARD_USER") or "").strip()
    password = environ.get("HITKIT_DASHBOARD_PASSWORD") or None
    hashed = (environ.get("HITKIT_DASHBOARD_PASSWORD_HASH") or "").strip() or None
    if not user and not password and not hashed:
        return None
    if not user:
        raise ConfigError("HITKIT_DASHBOARD_PASSWORD(_HASH) is set but HITKIT_DASHBOARD_USER is not; "
                          "set the coordinator's user name too, or unset both to disable the dashboard")
    if password and hashed:
        raise ConfigError("both HITKIT_DASHBOARD_PASSWORD and HITKIT_DASHBOARD_PASSWORD_HASH are set; keep one "
                          "(the hash, made with werkzeug.security.generate_password_hash, keeps the password "
                          "out of the environment)")
    if not password and not hashed:
        raise ConfigError("HITKIT_DASHBOARD_USER is set without a password; set HITKIT_DASHBOARD_PASSWORD or "
                          "HITKIT_DASHBOARD_PASSWORD_HASH")
    if password is not None and len(password) < 8:
        raise ConfigError(f"HITKIT_DASHBOARD_PASSWORD has {len(password)} characters; use at least 8")
    return Credentials(user, password, hashed)


def session_token(secret: str, creds: Credentials, generation: int = 0, now: float | None = None) -> str:
    """A signed session for the coordinator that expires after :data:`SESSION_HOURS`, or sooner when
    the coordinator logs out (``generation``: :func:`session_generation` when it was made)."""
    expires = int((now if now is not None else time.time()) + SESSION_HOURS * 3600)
    return tokens.sign(secret, f"dashboard:{creds.fingerprint}", f"{expires}:{generation}:{secrets.token_hex(8)}")


def session_valid(secret: str, creds: Credentials, token: str | None, generation: int = 0,
                  now: float | None = None) -> bool:
    """True for a genuine, unexpired session made for the current credentials since the last logout
    (its generation is the current ``generation``)."""
    if not token:
        return False
    payload = tokens.verify(secret, f"dashboard:{creds.fingerprint}", token)
    if payload is None:
        return False
    expires, made_in, _ = (payload.split(":") + ["", ""])[:3]
    return (expires.isdigit() and int(expires) > (now if now is not None else time.time())
            and made_in == str(generation))


def _generation_key(creds: Credentials) -> str:
    return f"dashboard_sessions:{creds.fingerprint}"


def session_generation(database_url: str, creds: Credentials) -> int:
    """The coordinator's current session generation (0 until the first logout), kept in the database so
    that every web worker and host agrees on which sessions a logout ended."""
    with get_engine(database_url).connect() as conn:
        value = settings.read(conn, _generation_key(creds))
    return int(value) if value is not None else 0


def revoke_sessions(database_url: str, creds: Credentials) -> int:
    """Log the coordinator out everywhere: every session made so far stops being valid at once, in
    every process (the server-side half of logout; the cookie is deleted too). The new generation."""
    with get_engine(database_url).begin() as conn:
        return settings.increment(conn, _generation_key(creds))


def csrf_token(secret: str, bound_to: str) -> str:
    """The form field a dashboard POST must carry: only a page rendered for this cookie knows it."""
    return hmac.new(secret.encode(), f"dashboard-csrf:{bound_to}".encode(), hashlib.sha256).hexdigest()[:32]


def csrf_ok(secret: str, bound_to: str | None, given: str | None) -> bool:
    """Constant-time check of a POST's CSRF field against the cookie it is bound to."""
    if not bound_to or not given:
        return False
    return hmac.compare_digest(given.encode(), csrf_token(secret, bound_to).encode())


# Static shape of a study, cached: units and HITs never change once a study is created ------------
@dataclass(frozen=True)
class StudyShape:
    unit_systems: dict[int, tuple[str, ...]]
    unit_required: dict[int, int]
    hit_systems: dict[int, frozenset[str]]


_shapes: dict[tuple[str, int], StudyShape] = {}
_lock = threading.Lock()


def unit_systems(payload: Mapping[str, Any]) -> tuple[str, ...]:
    """The systems one unit involves: pairwise and Spot The Bot name two, a live-chat slot one."""
    if isinstance(payload.get("systems"), list):
        return tuple(dict.fromkeys(str(s) for s in payload["systems"]))
    if payload.get("system") is not None:
        return (str(payload["system"]),)
    return ()


def study_shape(session: Session, key: str, study_id: int) -> StudyShape:
    """Which systems each unit and HIT involves (computed once per process and study)."""
    with _lock:
        if (key, study_id) in _shapes:
            return _shapes[(key, study_id)]
    units = session.execute(select(Unit.id, Unit.payload, Unit.required_answers)
                            .where(Unit.study_id == study_id)).all()
    systems = {uid: unit_systems(payload) for uid, payload, _ in units}
    hits: dict[int, set[str]] = defaultdict(set)
    for hit_id, unit_id in session.execute(select(HitUnit.hit_id, HitUnit.unit_id).join(Hit)
                                           .where(Hit.study_id == study_id)):
        hits[hit_id].update(systems.get(unit_id, ()))
    shape = StudyShape(systems, {uid: req for uid, _, req in units}, {h: frozenset(s) for h, s in hits.items()})
    with _lock:
        _shapes[(key, study_id)] = shape
    return shape


# Progress --------------------------------------------------------------------------------------
@dataclass
class SystemProgress:
    name: str
    is_control: bool
    units: int = 0
    units_done: int = 0
    answers: int = 0
    answers_needed: int = 0
    hits_posted: int = 0
    accepted: int = 0
    submitted: int = 0
    approved: int = 0
    conversations: int = 0


@dataclass
class QcSummary:
    """How many of the workers with counted work pass the task's quality check so far."""

    method: str
    workers: int
    passed: int
    by_worker: dict[str, bool] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        return self.passed / self.workers if self.workers else None


@dataclass
class StudyProgress:
    name: str
    task: str
    provider: str
    status: str
    currency: str
    budget: Decimal
    spent: Decimal
    committed: Decimal
    hits_total: int
    hits: dict[str, int]
    assignments: dict[str, int]
    workers: int
    answers_done: int
    answers_needed: int
    work_time_median_s: float | None
    work_time_mean_s: float | None
    qc: QcSummary | None
    systems: list[SystemProgress]
    bots: dict[str, Any] = field(default_factory=dict)
    held: int = 0

    @property
    def hits_posted(self) -> int:
        return sum(n for status, n in self.hits.items() if status != "pending")

    def to_json(self) -> dict[str, Any]:
        """Plain JSON for the dashboard's live refresh."""
        qc = None
        if self.qc is not None:
            qc = {"method": self.qc.method, "workers": self.qc.workers, "passed": self.qc.passed,
                  "rate": self.qc.rate}
        return {
            "name": self.name, "task": self.task, "provider": self.provider, "status": self.status,
            "currency": self.currency, "budget": str(self.budget), "spent": str(self.spent),
            "committed": str(self.committed), "hits_total": self.hits_total, "hits_posted": self.hits_posted,
            "hits": self.hits, "assignments": self.assignments, "accepted": self.assignments.get("accepted", 0),
            "submitted": self.assignments.get("submitted", 0), "approved": self.assignments.get("approved", 0),
            "rejected": self.assignments.get("rejected", 0), "workers": self.workers,
            "answers_done": self.answers_done, "answers_needed": self.answers_needed,
            "work_time_median_s": self.work_time_median_s, "work_time_mean_s": self.work_time_mean_s,
            "qc": qc, "systems": [asdict(s) for s in self.systems], "display": self.display(),
            "bots": [{"name": r.name, "state": r.state, "owed": r.owed, "text": r.describe(),
                      "recent": r.recent, "total": r.total} for r in self.bots.get("rows", [])],
            "bots_failing": self.bots.get("failing", []), "held": self.held,
        }

    def display(self) -> dict[str, str]:
        """The figures as the dashboard writes them, so the page and its live refresh agree."""
        qc = "–"
        if self.qc is not None and self.qc.rate is not None:
            qc = f"{100 * self.qc.rate:.0f} % of {self.qc.workers}"
        share = f"{100 * self.answers_done / self.answers_needed:.0f} %" if self.answers_needed else "–"
        return {"qc": qc, "work_time": fmt_seconds(self.work_time_median_s),
                "spent": f"{self.spent} {self.currency}", "committed": f"{self.committed} {self.currency}",
                "budget": f"{self.budget} {self.currency}", "answers": f"{self.answers_done} / {self.answers_needed}",
                "share": share, "bots": self.bots.get("summary") or ("ok" if self.bots.get("rows") else "–"),
                "held": str(self.held)}


def study_progress(session: Session, ctx: StudyContext, cache_key: str = "") -> StudyProgress:
    """Everything the dashboard shows live about one study, read from its rows."""
    from hitkit.ledger import committed_spend

    study = session.get(Study, ctx.study_id)
    shape = study_shape(session, cache_key, study.id)
    hit_status = dict(session.execute(select(Hit.id, Hit.status).where(Hit.study_id == study.id)).all())
    per_hit = session.execute(select(Assignment.hit_id, Assignment.status, func.count()).join(Hit)
                              .where(Hit.study_id == study.id)
                              .group_by(Assignment.hit_id, Assignment.status)).all()
    counts = unit_answer_counts(session, study.id)
    times = [t for (t,) in session.execute(select(Assignment.work_time_s).join(Hit).where(
        Hit.study_id == study.id, Assignment.status.in_(DONE_STATUSES), Assignment.work_time_s.is_not(None)))]
    workers = session.scalar(select(func.count(func.distinct(Assignment.worker_id))).join(Hit)
                             .where(Hit.study_id == study.id)) or 0
    spent = session.scalar(select(func.coalesce(func.sum(Payment.amount), 0))
                           .where(Payment.study_id == study.id, Payment.status == "paid"))
    turns_by_system = dict(session.execute(
        select(Turn.system_id, func.count(func.distinct(Turn.conversation_id))).join(Conversation)
        .where(Conversation.study_id == study.id, Turn.system_id.is_not(None)).group_by(Turn.system_id)).all())

    rows = {s.name: SystemProgress(s.name, s.is_control, conversations=turns_by_system.get(s.id, 0))
            for s in session.scalars(select(System).where(System.study_id == study.id).order_by(System.id))}
    for names in shape.unit_systems.values():
        for name in names:
            rows.setdefault(name, SystemProgress(name, False))
    for uid, names in shape.unit_systems.items():
        need = shape.unit_required.get(uid, 0)
        got = min(need, counts.get(uid, 0))
        for name in names:
            r = rows[name]
            r.units += 1
            r.units_done += got >= need
            r.answers += got
            r.answers_needed += need
    for hit_id, status in hit_status.items():
        if status != "pending":
            for name in shape.hit_systems.get(hit_id, ()):
                rows[name].hits_posted += 1
    assignments: Counter[str] = Counter()
    for hit_id, status, n in per_hit:
        assignments[status] += n
        if status in ("accepted", "submitted", "approved"):
            for name in shape.hit_systems.get(hit_id, ()):
                setattr(rows[name], status, getattr(rows[name], status) + n)

    need_total = sum(shape.unit_required.values())
    done_total = sum(min(n, counts.get(uid, 0)) for uid, n in shape.unit_required.items())
    return StudyProgress(
        name=study.name, task=study.task_type, provider=study.provider, status=study.status,
        currency=study.currency, budget=study.budget, spent=cents(Decimal(spent)),
        committed=cents(committed_spend(session, ctx)), hits_total=len(hit_status),
        hits=dict(Counter(hit_status.values())), assignments=dict(assignments), workers=workers,
        answers_done=done_total, answers_needed=need_total,
        work_time_median_s=round(statistics.median(times), 1) if times else None,
        work_time_mean_s=round(statistics.fmean(times), 1) if times else None,
        qc=qc_summary(session, ctx, cache_key), systems=list(rows.values()), bots=bot_health(session, ctx),
        held=len(held_assignment_ids(session, study.id)))


# Quality control as it develops ------------------------------------------------------------------
_qc_cache: dict[tuple[str, int], tuple[tuple[int, int], QcSummary | None]] = {}


def qc_summary(session: Session, ctx: StudyContext, cache_key: str = "") -> QcSummary | None:
    """The task's quality check over the work counted so far, recomputed only when that work grows
    or more of it is confirmed (``hitkit confirm`` changes what counts without finishing anything)."""
    done = tuple(session.execute(select(func.count(), func.count(Assignment.confirmed_at)).select_from(Assignment)
                                 .join(Hit).where(Hit.study_id == ctx.study_id,
                                                  Assignment.status.in_(DONE_STATUSES))).one())
    with _lock:
        cached = _qc_cache.get((cache_key, ctx.study_id))
    if cached is not None and cached[0] == done:
        return cached[1]
    result = _compute_qc(session, ctx) if done[0] else None
    with _lock:
        _qc_cache[(cache_key, ctx.study_id)] = (done, result)
    return result


def _compute_qc(session: Session, ctx: StudyContext) -> QcSummary | None:
    study = session.get(Study, ctx.study_id)
    tables = ctx.task.export(session, study)
    checked = PROTOCOLS[ctx.config.task].module("analysis").worker_qc(tables, ctx.config)
    if checked is None:
        return None
    method, by_worker = checked
    return QcSummary(method, len(by_worker), sum(by_worker.values()), by_worker)


# Workers ------------------------------------------------------------------------------------------
@dataclass
class WorkerRow:
    id: int
    external_id: str
    provider: str
    blocked: bool
    statuses: dict[str, int]
    paid: Decimal
    bonuses: Decimal
    median_work_s: float | None
    qc_passed: bool | None
    feedback: list[str]
    submitted: list[int]
    """Ids of the worker's submitted (undecided) assignments, for approve / reject."""
    bonus_assignment: int | None
    """The assignment a bonus is paid against: the worker's latest counted one."""
    held: list[int] = field(default_factory=list)
    """Ids of the worker's assignments held for review by the QC outcome policy (schedule.qc_failures)."""


def worker_rows(session: Session, ctx: StudyContext, qc: QcSummary | None) -> list[WorkerRow]:
    """Every worker who took a HIT of the study, with what they did and what they were paid."""
    rows = session.execute(select(Assignment, Worker).join(Hit, Assignment.hit_id == Hit.id)
                           .join(Worker, Assignment.worker_id == Worker.id)
                           .where(Hit.study_id == ctx.study_id).order_by(Worker.id, Assignment.id)).all()
    pay = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for worker_id, kind, amount in session.execute(
            select(Payment.worker_id, Payment.kind, func.sum(Payment.amount))
            .where(Payment.study_id == ctx.study_id, Payment.status == "paid", Payment.kind.in_(("reward", "bonus")))
            .group_by(Payment.worker_id, Payment.kind)):
        pay[worker_id][0] += Decimal(amount)
        if kind == "bonus":
            pay[worker_id][1] += Decimal(amount)
    out: dict[int, WorkerRow] = {}
    times: dict[int, list[float]] = defaultdict(list)
    held = held_assignment_ids(session, ctx.study_id)
    for a, w in rows:
        row = out.get(w.id)
        if row is None:
            row = out[w.id] = WorkerRow(w.id, w.external_id, w.provider, w.blocked, {}, cents(pay[w.id][0]),
                                        cents(pay[w.id][1]), None,
                                        qc.by_worker.get(w.external_id) if qc else None, [], [], None)
        row.statuses[a.status] = row.statuses.get(a.status, 0) + 1
        if a.feedback:
            row.feedback.append(a.feedback)
        if a.status == "submitted":
            row.submitted.append(a.id)
            if a.id in held:
                row.held.append(a.id)
        if a.status in DONE_STATUSES:
            row.bonus_assignment = a.id
            if a.work_time_s is not None:
                times[w.id].append(a.work_time_s)
    for wid, ts in times.items():
        out[wid].median_work_s = round(statistics.median(ts), 1)
    return list(out.values())


# Actions: through the provider and the ledger ------------------------------------------------------
def _assignment_in_study(session: Session, ctx: StudyContext, assignment_id: int) -> Assignment:
    a = session.scalar(select(Assignment).where(Assignment.id == assignment_id).with_for_update())
    if a is None or a.hit.study_id != ctx.study_id:
        raise ActionError(f"assignment {assignment_id} is not part of study '{ctx.name}'")
    return a


def _worker_in_study(session: Session, ctx: StudyContext, worker_id: int) -> Worker:
    worker = session.get(Worker, worker_id)
    took = session.scalar(select(func.count()).select_from(Assignment).join(Hit).where(
        Assignment.worker_id == worker_id, Hit.study_id == ctx.study_id)) if worker else 0
    if not took:
        raise ActionError(f"worker {worker_id} has no assignment in study '{ctx.name}'")
    return worker


def approve_assignment(database_url: str, ctx: StudyContext, assignment_id: int,
                       override_platform: str | None = None) -> str:
    """Approve submitted work now, through the ledger's one approve path as the coordinator's decision.

    The coordinator's approval replaces the review window, a panel's confirmation and the QC hold,
    but not the platform check: the platform must show the work handed in by this worker, as for the
    scheduler and ``hitkit sync``. ``override_platform``, the coordinator's reason, skips that check
    explicitly and is logged as an ``approve_override`` event; nothing passes it by default.
    """
    from hitkit.ledger import approve

    with session_scope(database_url) as session:
        a = _assignment_in_study(session, ctx, assignment_id)
        if a.status == "approved":
            return f"assignment {assignment_id} was already approved"
        if a.status != "submitted":
            raise ActionError(f"assignment {assignment_id} is {a.status}; only submitted work can be approved")
        worker = a.worker.external_id
    outcome = approve(database_url, ctx, assignment_id, utcnow(), actor=ACTOR, coordinator=True,
                      override_platform=override_platform)
    if outcome == "refused":
        raise ActionError(f"the {ctx.provider.name} platform records another worker on assignment "
                          f"{assignment_id}; it cannot be approved for {worker}")
    if outcome == "waiting":
        raise ActionError(f"assignment {assignment_id} is not handed in on {ctx.provider.name} yet; approve "
                          f"it once it is")
    if outcome != "approved":
        with session_scope(database_url) as session:
            status = session.get(Assignment, assignment_id).status
        return f"assignment {assignment_id} is {status} now; nothing done"
    return f"assignment {assignment_id} approved"


def reject_assignment(database_url: str, ctx: StudyContext, assignment_id: int, reason: str) -> str:
    """Reject submitted work through the provider, with the reason the worker will read."""
    reason = (reason or "").strip()
    if not reason:
        raise ActionError("give the worker a reason for the rejection")
    with session_scope(database_url) as session:
        a = _assignment_in_study(session, ctx, assignment_id)
        if a.status == "rejected":
            return f"assignment {assignment_id} was already rejected"
        if a.status != "submitted":
            raise ActionError(f"assignment {assignment_id} is {a.status}; only submitted work can be rejected")
        provider_id = a.provider_assignment_id
    ctx.provider.reject(provider_id, reason)
    with session_scope(database_url) as session:
        a = session.get(Assignment, assignment_id)
        a.status, a.decided_at = "rejected", utcnow()
        session.add(Event(study_id=ctx.study_id, kind="assignment_rejected", actor=ACTOR,
                          data={"assignment": a.id, "reason": reason}))
    return f"assignment {assignment_id} rejected"


_AMOUNT = re.compile(r"^\s*\d{1,6}(\.\d{1,2})?\s*$")


def parse_amount(text: str | None) -> Decimal:
    """A bonus amount typed by the coordinator: a positive number of at most two decimals."""
    if text is None or not _AMOUNT.match(text):
        raise ActionError(f"the bonus {text!r} is not an amount; write it like 0.50")
    try:
        amount = Decimal(text.strip())
    except InvalidOperation:
        raise ActionError(f"the bonus {text!r} is not an amount; write it like 0.50") from None
    if amount <= 0:
        raise ActionError("the bonus must be more than 0")
    return amount


def bonus_worker(database_url: str, ctx: StudyContext, worker_id: int, amount: Decimal, reason: str,
                 key: str) -> str:
    """Pay ``worker_id`` a bonus once per ``key`` (the form's nonce): a second click pays nothing more.

    The bonus is the ledger's (``hitkit.ledger.bonus_key`` with the nonce as its tag), on the
    worker's latest handed-in assignment; a retry of the same form finds it by worker and nonce.
    """
    from hitkit.ledger import pay_bonus

    reason = (reason or "").strip() or "Thank you for your careful work."
    if not re.fullmatch(r"[A-Za-z0-9_-]{8,64}", key or ""):
        raise ActionError("this bonus form has no valid key; reload the page and try again")
    try:
        prepared = _prepare_bonus(database_url, ctx, worker_id, amount, reason, key)
    except IntegrityError:  # the same form, clicked twice at once: the other click pays it
        return "this bonus is being paid"
    if isinstance(prepared, str):
        return prepared
    external_id, ledger_key, amount = prepared
    # The ledger rows are committed: only now does the provider hear of the bonus.
    try:
        pay_bonus(database_url, ctx, ledger_key, actor=ACTOR,
                  note={"worker": external_id, "amount": str(amount), "reason": reason})
    except Exception as exc:
        with session_scope(database_url) as session:
            session.add(Event(study_id=ctx.study_id, kind="bonus_failed", actor=ACTOR,
                              data={"worker": external_id, "amount": str(amount), "error": str(exc)[:500]}))
        raise ActionError(f"the provider did not pay the bonus ({exc}); the ledger keeps it pending under its key, "
                          f"so sending the same form again in a minute retries it without paying twice") from exc
    return f"bonus of {amount} {ctx.config.provider.currency} paid to {external_id}"


def _prepare_bonus(database_url: str, ctx: StudyContext, worker_id: int, amount: Decimal, reason: str,
                   nonce: str) -> tuple[str, str, Decimal] | str:
    """Have the ledger write (and commit) the pending bonus and fee; a message instead when nothing is left to do."""
    from hitkit.ledger import bonus_by_tag, bonus_key, record_bonus

    with session_scope(database_url) as session:
        # One coordinator action at a time per worker: the worker row is the lock.
        session.execute(select(Worker.id).where(Worker.id == worker_id).with_for_update())
        existing = bonus_by_tag(session, ctx.study_id, worker_id, nonce)
        if existing is not None and existing.status == "paid":
            return f"this bonus of {existing.amount} {existing.currency} was already paid"
        worker = _worker_in_study(session, ctx, worker_id)
        if existing is not None:
            if existing.amount != amount:
                raise ActionError(f"this form already started a bonus of {existing.amount}; reload the page for a "
                                  f"new one")
            if utcnow() - existing.created_at < IN_FLIGHT:
                # Another click of the same form is paying it right now; a second provider call is not needed.
                return f"this bonus of {existing.amount} {existing.currency} is being paid"
            return worker.external_id, existing.idempotency_key, amount
        assignment = session.scalar(select(Assignment).join(Hit).where(
            Hit.study_id == ctx.study_id, Assignment.worker_id == worker_id,
            Assignment.status.in_(DONE_STATUSES)).order_by(Assignment.id.desc()).limit(1))
        if assignment is None:
            raise ActionError(f"worker {worker.external_id} has no submitted or approved work to pay a bonus on")
        try:
            row = record_bonus(session, ctx, assignment, amount, bonus_key(ctx.study_id, assignment.id, nonce),
                               reason, ACTOR)
        except BudgetError as exc:
            raise ActionError(str(exc)) from None
        return worker.external_id, row.idempotency_key, amount


def block_worker(database_url: str, ctx: StudyContext, worker_id: int, reason: str) -> str:
    """Refuse the worker in hitkit (every study on this provider) and at the provider where it can."""
    with session_scope(database_url) as session:
        worker = _worker_in_study(session, ctx, worker_id)
        external_id = worker.external_id
        already = worker.blocked
        worker.blocked = True
    from hitkit.providers.base import CrowdProvider

    if type(ctx.provider).cap_worker is not CrowdProvider.cap_worker:
        # The provider's own cap (MTurk: the study's cap qualification; Prolific: the blocklist
        # group) keeps the worker from being offered the study's work at all.
        ctx.provider.cap_worker(external_id)
        where = "hitkit and the provider (the study's cap)"
    else:
        where = "hitkit"
    with session_scope(database_url) as session:
        session.add(Event(study_id=ctx.study_id, kind="worker_blocked", actor=ACTOR,
                          data={"worker": external_id, "reason": (reason or "").strip(), "where": where}))
    return f"worker {external_id} {'was already' if already else 'is now'} blocked in {where}"


def unblock_worker(database_url: str, ctx: StudyContext, worker_id: int) -> str:
    """Let a blocked worker take HITs in hitkit again (a provider-side block is lifted there)."""
    with session_scope(database_url) as session:
        worker = _worker_in_study(session, ctx, worker_id)
        worker.blocked = False
        session.add(Event(study_id=ctx.study_id, kind="worker_unblocked", actor=ACTOR,
                          data={"worker": worker.external_id}))
        return f"worker {worker.external_id} is no longer blocked in hitkit"


# Conversations ---------------------------------------------------------------------------------------
@dataclass
class Page:
    items: list
    page: int
    pages: int
    total: int


def _paginate(total: int, page: int, per_page: int) -> tuple[int, int]:
    pages = max(1, -(-total // per_page))
    return min(max(1, page), pages), pages


def conversations(session: Session, study_id: int, system: str | None = None, page: int = 1,
                  per_page: int = 50) -> Page:
    """The study's conversations, newest first, optionally only those where ``system`` speaks."""
    query = select(Conversation).where(Conversation.study_id == study_id)
    if system:
        sys_id = session.scalar(select(System.id).where(System.study_id == study_id, System.name == system))
        query = query.where(Conversation.id.in_(select(Turn.conversation_id).where(Turn.system_id == sys_id)))
    total = session.scalar(select(func.count()).select_from(query.subquery()))
    page, pages = _paginate(total, page, per_page)
    rows = session.scalars(query.order_by(Conversation.id.desc()).offset((page - 1) * per_page).limit(per_page)).all()
    ids = [c.id for c in rows]
    names = dict(session.execute(select(System.id, System.name).where(System.study_id == study_id)).all())
    speakers: dict[int, set[str]] = defaultdict(set)
    turns: Counter[int] = Counter()
    for conv_id, sys_id in session.execute(select(Turn.conversation_id, Turn.system_id)
                                           .where(Turn.conversation_id.in_(ids))):
        turns[conv_id] += 1
        if sys_id is not None:
            speakers[conv_id].add(names.get(sys_id, "?"))
    items = [{"id": c.id, "key": c.key, "kind": c.kind, "systems": sorted(speakers[c.id]) or _meta_systems(c),
              "turns": turns[c.id], "created_at": c.created_at, "topic": _topic_of(c)} for c in rows]
    return Page(items, page, pages, total)


def _meta_systems(conv: Conversation) -> list[str]:
    """The systems a conversation is with before any of them has spoken (a chat whose bot has not replied)."""
    meta = conv.meta if isinstance(conv.meta, dict) else {}
    if meta.get("system"):
        return [str(meta["system"])]
    return sorted({str(n) for n in meta.get("systems") or [] if n != "human"})


def _topic_of(conv: Conversation) -> str | None:
    return (conv.meta or {}).get("topic") if isinstance(conv.meta, dict) else None


def _answers_by_assignment(session: Session, unit_ids: list[int]) -> list[dict]:
    """Every assignment's answers to these units: worker, status, and question → value."""
    rows = session.execute(select(Response, Assignment, Worker).join(Assignment, Response.assignment_id == Assignment.id)
                           .join(Worker, Assignment.worker_id == Worker.id)
                           .where(Response.unit_id.in_(unit_ids)).order_by(Assignment.id, Response.id)).all()
    out: dict[tuple[int, int], dict] = {}
    for r, a, w in rows:
        entry = out.setdefault((r.unit_id, a.id), {"unit_id": r.unit_id, "assignment": a.id, "worker": w.external_id,
                                                   "worker_id": w.id, "status": a.status, "feedback": a.feedback,
                                                   "layout": a.layout, "answers": {}})
        entry["answers"][r.question] = r.value
    return list(out.values())


def conversation_detail(session: Session, ctx: StudyContext, conversation_id: int) -> dict[str, Any]:
    """One conversation with its turns and every rating, label or vote given on it."""
    conv = session.get(Conversation, conversation_id)
    if conv is None or conv.study_id != ctx.study_id:
        raise ActionError(f"conversation {conversation_id} is not part of study '{ctx.name}'")
    names = dict(session.execute(select(System.id, System.name).where(System.study_id == ctx.study_id)).all())
    turns = [{"index": t.index, "speaker": t.speaker, "system": names.get(t.system_id), "text": t.text,
              "time": t.created_at} for t in conv.turns]
    meta = conv.meta or {}
    if conv.kind == "human_bot" and meta.get("unit_id") is not None:
        units = [session.get(Unit, meta["unit_id"])]
        answers = [x for x in _answers_by_assignment(session, [meta["unit_id"]])
                   if x["assignment"] == meta.get("assignment_id")]
    else:
        units = list(session.scalars(select(Unit).where(Unit.conversation_id == conv.id).order_by(Unit.id)))
        answers = _answers_by_assignment(session, [u.id for u in units])
    by_unit = {u.id: u for u in units if u is not None}
    views = PROTOCOLS[ctx.config.task].module("views")
    for entry in answers:
        unit = by_unit.get(entry["unit_id"])
        entry["unit"] = views.describe_unit(unit.payload) if unit else ""
        entry["answers"] = views.readable_answers(unit.payload if unit else {}, entry)
    return {"conversation": conv, "meta": meta, "turns": turns, "answers": answers}


# A system's profile -----------------------------------------------------------------------------------
def automatic_metrics(texts: list[str]) -> dict[str, float | int | None]:
    """Length and lexical diversity of a system's turns: distinct-n as Li et al. (2016) and ChatEval
    define it, distinct n-grams of all the turns over their number of tokens (the pre-screen's
    :func:`~hitkit.prescreen.similarity.distinct_n`, so the two pages agree)."""
    words = [word_tokens(t) for t in texts]
    has_tokens = any(words)
    return {
        "turns": len(texts),
        "mean_words": round(statistics.fmean(len(ws) for ws in words), 2) if words else None,
        "distinct_1": round(distinct_n(texts, 1), 3) if has_tokens else None,
        "distinct_2": round(distinct_n(texts, 2), 3) if has_tokens else None,
    }


def system_profile(session: Session, ctx: StudyContext, name: str) -> dict[str, Any]:
    """A system's conversations, its scores so far, and automatic metrics of what it said."""
    system = session.scalar(select(System).where(System.study_id == ctx.study_id, System.name == name))
    if system is None:
        raise ActionError(f"study '{ctx.name}' has no system called '{name}'")
    texts = list(session.scalars(select(Turn.text).join(Conversation).where(
        Conversation.study_id == ctx.study_id, Turn.system_id == system.id)))
    study = session.get(Study, ctx.study_id)
    tables = ctx.task.export(session, study)
    scores, score_note = PROTOCOLS[ctx.config.task].module("views").system_scores(tables, ctx.config, name)
    convs = conversations(session, ctx.study_id, system=name, per_page=20)
    return {"system": system, "metrics": automatic_metrics(texts), "scores": scores, "score_note": score_note,
            "conversations": convs}


# Side by side -------------------------------------------------------------------------------------------
def side_by_side(session: Session, ctx: StudyContext, a: str, b: str, limit: int = 30) -> dict[str, Any]:
    """Two systems' responses to the same prompts: pairwise prompts, bot–bot conversations from the same
    seed dialogue, or the same worker's chats with both in one live-chat HIT."""
    names = dict(session.execute(select(System.name, System.id).where(System.study_id == ctx.study_id)).all())
    for n in (a, b):
        if n not in names:
            raise ActionError(f"study '{ctx.name}' has no system called '{n}'")
    by_id = {v: k for k, v in names.items()}
    convs = session.scalars(select(Conversation).where(Conversation.study_id == ctx.study_id)
                            .order_by(Conversation.id)).all()

    def turns_of(conv: Conversation) -> list[dict[str, Any]]:
        return [{"speaker": by_id.get(t.system_id) or t.speaker, "text": t.text,
                 "own": t.system_id in (names[a], names[b])} for t in conv.turns]

    views = PROTOCOLS[ctx.config.task].module("views")
    rows = views.side_by_side(convs, a, b, {a: names[a], b: names[b]}, turns_of, limit)
    return {"a": a, "b": b, "rows": rows}


# Bot health ----------------------------------------------------------------------------------------------
BOT_TROUBLE = {"bot_timeout": "timed out", "bot_unavailable": "unreachable", "bot_slow": "slow"}
"""Event kinds the bots layer records for a reply that timed out, a bot that could not be reached, a slow reply."""
OWED_FAILING_S = 30.0
"""A chat whose bot reply has been owed this long counts against its bot: the worker is left waiting."""
RECENT_S = 600.0
"""The window of "recent" bot trouble on the dashboard and in the launch's status line."""


@dataclass
class BotRow:
    """One system's health in a live-chat study: replies owed now, and timeouts / failures recorded."""

    name: str
    is_control: bool
    owed: int = 0
    oldest_wait_s: float | None = None
    recent: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """failing (workers are left waiting, or recent timeouts/failures), slow, or ok."""
        waiting = self.oldest_wait_s is not None and self.oldest_wait_s >= OWED_FAILING_S
        if waiting or self.recent.get("bot_timeout") or self.recent.get("bot_unavailable"):
            return "failing"
        return "slow" if self.recent.get("bot_slow") else "ok"

    def describe(self) -> str:
        """'2 timed out, 1 unreachable in the last 10 min; 1 reply owed for 45 s' (or 'ok')."""
        parts = [f"{n} {BOT_TROUBLE[k]}" for k, n in self.recent.items() if n]
        text = ", ".join(parts) + f" in the last {RECENT_S / 60:.0f} min" if parts else ""
        if self.owed:
            wait = f" for {fmt_seconds(self.oldest_wait_s)}" if self.oldest_wait_s is not None else ""
            text += ("; " if text else "") + f"{self.owed} repl{'y' if self.owed == 1 else 'ies'} owed{wait}"
        return text or "ok"


def bot_health(session: Session, ctx: StudyContext, now: dt.datetime | None = None) -> dict[str, Any]:
    """Every bot of a live-chat study: replies owed (a worker's message waiting for its answer) and the
    ``bot_*`` events, recent and in total; ``failing`` names the bots in trouble, ``summary`` says it in a line.

    Other tasks chat with no bot while workers wait, so they get no rows.
    """
    from hitkit.db.models import utcnow

    now = now or utcnow()
    if not ctx.task.has_chat:
        return {"rows": [], "failing": [], "summary": "", "window_s": RECENT_S, "owed_failing_s": OWED_FAILING_S}
    systems = list(session.scalars(select(System).where(System.study_id == ctx.study_id).order_by(System.id)))
    rows = {s.name: BotRow(s.name, s.is_control) for s in systems}
    last = (select(Turn.conversation_id, func.max(Turn.index).label("last"))
            .join(Conversation).where(Conversation.study_id == ctx.study_id, Conversation.kind == "human_bot")
            .group_by(Turn.conversation_id).subquery())
    owed = session.execute(
        select(Conversation.meta, Turn.created_at).join(Turn, Turn.conversation_id == Conversation.id)
        .join(last, (last.c.conversation_id == Turn.conversation_id) & (last.c.last == Turn.index))
        .where(Turn.speaker == "worker")).all()
    for meta, since in owed:
        row = rows.get((meta or {}).get("system"))
        if row is None:
            continue
        row.owed += 1
        if since is not None:
            since = since if since.tzinfo else since.replace(tzinfo=dt.timezone.utc)
            wait = max(0.0, (now - since).total_seconds())
            row.oldest_wait_s = max(row.oldest_wait_s or 0.0, wait)
    recent_since = now - dt.timedelta(seconds=RECENT_S)
    for kind, data, created in session.execute(select(Event.kind, Event.data, Event.created_at).where(
            Event.study_id == ctx.study_id, Event.kind.in_(tuple(BOT_TROUBLE)))):
        data = data or {}
        row = rows.get(data.get("system") or data.get("bot") or data.get("model"))
        if row is None:
            continue
        row.total[kind] = row.total.get(kind, 0) + 1
        created = created if created is None or created.tzinfo else created.replace(tzinfo=dt.timezone.utc)
        if created is not None and created >= recent_since:
            row.recent[kind] = row.recent.get(kind, 0) + 1
    failing = [r.name for r in rows.values() if r.state == "failing"]
    summary = ""
    if failing:
        summary = "bots failing: " + "; ".join(f"{r.name} ({r.describe()})" for r in rows.values()
                                               if r.name in failing)
    elif any(r.state == "slow" for r in rows.values()):
        summary = "bots slow: " + ", ".join(r.name for r in rows.values() if r.state == "slow")
    try:  # the bots layer's own summary (latency, queue depth), where it provides one
        from hitkit.bots.health import summary as bots_summary
    except ImportError:
        bots_summary = None
    extra = bots_summary(session, ctx.study_id) if bots_summary is not None else None
    return {"rows": list(rows.values()), "failing": failing, "summary": summary, "window_s": RECENT_S,
            "owed_failing_s": OWED_FAILING_S, "bots": extra}


# Event log --------------------------------------------------------------------------------------------
def events(session: Session, study_id: int | None = None, page: int = 1, per_page: int = 50) -> Page:
    """Event rows, newest first."""
    query = select(Event)
    if study_id is not None:
        query = query.where(Event.study_id == study_id)
    total = session.scalar(select(func.count()).select_from(query.subquery()))
    page, pages = _paginate(total, page, per_page)
    rows = session.scalars(query.order_by(Event.id.desc()).offset((page - 1) * per_page).limit(per_page)).all()
    studies = dict(session.execute(select(Study.id, Study.name)).all())
    items = [{"id": e.id, "time": e.created_at, "study": studies.get(e.study_id), "kind": e.kind, "actor": e.actor,
              "data": e.data} for e in rows]
    return Page(items, page, pages, total)


def event_json(item: Mapping[str, Any]) -> dict[str, Any]:
    """One event of :func:`events` as the live refresh sends it (values as text)."""
    data = item["data"] if isinstance(item["data"], dict) else {"data": item["data"]}
    return {"time": item["time"].strftime("%Y-%m-%d %H:%M:%S") if item["time"] else "–", "study": item["study"],
            "kind": item["kind"], "actor": item["actor"], "data": {str(k): str(v) for k, v in data.items()}}


def studies(session: Session) -> list[Study]:
    """Every study in the database, newest first."""
    return list(session.scalars(select(Study).order_by(Study.id.desc())))


def fmt_seconds(value: float | None) -> str:
    """A duration as the dashboard shows it: ``2 min 05 s``."""
    if value is None:
        return "–"
    delta = dt.timedelta(seconds=round(value))
    minutes, seconds = divmod(int(delta.total_seconds()), 60)
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"
