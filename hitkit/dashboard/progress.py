"""A study's progress as the dashboard shows it: answers per unit and per system, assignments by status,
and the protocol's quality check so far."""

from __future__ import annotations

import statistics
import threading
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.dashboard.bots import bot_health, fmt_seconds
from hitkit.db.models import Assignment, Conversation, Hit, HitUnit, Payment, Study, System, Turn, Unit
from hitkit.money.amounts import cents
from hitkit.money.qc import QcSummary, qc_summary
from hitkit.money.qc_policy import held_assignment_ids
from hitkit.protocols import PROTOCOLS
from hitkit.running import stopping
from hitkit.study.counts import Counts, study_counts
from hitkit.study.stored import StudyContext, unit_answer_counts
from hitkit.tables.schema import ACTIVE_STATUSES, DONE_STATUSES, UNPOSTED_HITS


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
    units = session.execute(select(Unit.id, Unit.payload, Unit.required_answers).where(Unit.study_id == study_id)).all()
    systems = {uid: unit_systems(payload) for uid, payload, _ in units}
    hits: dict[int, set[str]] = defaultdict(set)
    for hit_id, unit_id in session.execute(
        select(HitUnit.hit_id, HitUnit.unit_id).join(Hit).where(Hit.study_id == study_id)
    ):
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
    has_profile: bool = True
    """False for material that no system wrote (Spot The Bot's human–human speakers): it has no profile page."""


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
    """Answers in submitted work (:attr:`hitkit.study.counts.Counts.submitted`)."""
    answers_needed: int
    work_time_median_s: float | None
    work_time_mean_s: float | None
    qc: QcSummary | None
    systems: list[SystemProgress]
    bots: dict[str, Any] = field(default_factory=dict)
    held: int = 0
    stopping: dict[str, Any] | None = None
    """The stopping rule's state (:func:`hitkit.running.stopping.summary`), when the study has one."""
    platform: dict[str, Any] | None = None
    """Webhook health and screen-outs (:func:`hitkit.dashboard.platform.platform_state`), where there are any."""

    leader: dict[str, Any] | None = None
    """The process that leads the study now (:func:`hitkit.study.lease.leader`), None when none does."""
    counts: Counts | None = None
    """The study's progress as the console and ``hitkit status`` show it (:func:`hitkit.study.counts.study_counts`)."""

    @property
    def leader_text(self) -> str:
        """Who acts on the platform for the study, in words. Between two scheduler ticks nobody holds the study's
        lease; the page then names who acted last instead of flickering to "none"."""
        lead = self.leader
        if not lead:
            return "nobody has acted on the platform for this study yet"
        who = f"the {lead['role']} on {lead['host']} (process {lead['pid']})"
        if lead.get("live", True):
            return f"{who}, since {lead['since'][:19].replace('T', ' ')} UTC"
        return f"{who} acted last; its turn ended at {lead['expires_at'][:19].replace('T', ' ')} UTC"

    @property
    def hits_posted(self) -> int:
        return sum(n for status, n in self.hits.items() if status not in UNPOSTED_HITS)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON for the dashboard's live refresh."""
        qc = None
        if self.qc is not None:
            qc = {
                "method": self.qc.method,
                "workers": self.qc.workers,
                "passed": self.qc.passed,
                "rate": self.qc.rate,
                "not_judged": self.qc.not_judged,
            }
        return {
            "name": self.name,
            "task": self.task,
            "provider": self.provider,
            "status": self.status,
            "currency": self.currency,
            "budget": str(self.budget),
            "spent": str(self.spent),
            "committed": str(self.committed),
            "hits_total": self.hits_total,
            "hits_posted": self.hits_posted,
            "hits": self.hits,
            "assignments": self.assignments,
            "accepted": self.assignments.get("accepted", 0),
            "submitted": self.assignments.get("submitted", 0),
            "approved": self.assignments.get("approved", 0),
            "rejected": self.assignments.get("rejected", 0),
            "workers": self.workers,
            "answers_done": self.answers_done,
            "answers_needed": self.answers_needed,
            **(self.counts.as_json() if self.counts is not None else {}),
            "work_time_median_s": self.work_time_median_s,
            "work_time_mean_s": self.work_time_mean_s,
            "qc": qc,
            "systems": [asdict(s) for s in self.systems],
            "display": self.display(),
            "leader": self.leader,
            "leader_text": self.leader_text,
            "bots": [
                {
                    "name": r.name,
                    "state": r.state,
                    "owed": r.owed,
                    "text": r.describe(),
                    "recent": r.recent,
                    "total": r.total,
                }
                for r in self.bots.get("rows", [])
            ],
            "bots_failing": self.bots.get("failing", []),
            "held": self.held,
            "stopping": self.stopping,
            "platform": self.platform,
        }

    @property
    def has_chat(self) -> bool:
        """Whether the study's workers chat with bots (its page then shows the bots' health)."""
        return PROTOCOLS[self.task].has_chat

    def display(self) -> dict[str, str]:
        """The figures as the dashboard writes them, so the page and its live refresh agree."""
        qc = "–"
        if self.qc is not None and self.qc.rate is not None:
            qc = f"{100 * self.qc.rate:.0f} % of {self.qc.workers}"
        if self.qc is not None and self.qc.not_judged:
            qc = ("" if qc == "–" else qc + "; ") + f"{self.qc.not_judged} not judged yet"
        share = f"{100 * self.answers_done / self.answers_needed:.0f} %" if self.answers_needed else "–"
        return {
            "qc": qc,
            "work_time": fmt_seconds(self.work_time_median_s),
            "spent": f"{self.spent} {self.currency}",
            "committed": f"{self.committed} {self.currency}",
            "budget": f"{self.budget} {self.currency}",
            "answers": self.counts.answers_text()
            if self.counts is not None
            else f"{self.answers_done}/{self.answers_needed}",
            "chat_messages": self.counts.chat_text() if self.counts is not None else "",
            "share": share,
            "bots": self.bots.get("summary") or ("ok" if self.bots.get("rows") else "–"),
            "held": str(self.held),
        }


def study_progress(session: Session, ctx: StudyContext, cache_key: str = "") -> StudyProgress:
    """Everything the dashboard shows live about one study, read from its rows."""
    from hitkit.dashboard.platform import platform_state
    from hitkit.money.ledger import committed_spend
    from hitkit.study.lease import leader

    study = session.get_one(Study, ctx.study_id)
    shape = study_shape(session, cache_key, study.id)
    hit_status = dict(session.execute(select(Hit.id, Hit.status).where(Hit.study_id == study.id)).all())
    per_hit = session.execute(
        select(Assignment.hit_id, Assignment.status, func.count())
        .join(Hit)
        .where(Hit.study_id == study.id)
        .group_by(Assignment.hit_id, Assignment.status)
    ).all()
    counts = unit_answer_counts(session, study.id)
    times = [
        t
        for (t,) in session.execute(
            select(Assignment.work_time_s)
            .join(Hit)
            .where(Hit.study_id == study.id, Assignment.status.in_(DONE_STATUSES), Assignment.work_time_s.is_not(None))
        )
        if t is not None
    ]  # the query's condition, for the type checker
    workers = (
        session.scalar(
            select(func.count(func.distinct(Assignment.worker_id)))
            .join(Hit)  # screened out: not
            .where(Hit.study_id == study.id, Assignment.status != "screened_out")
        )
        or 0
    )  # workers
    spent = session.execute(
        select(func.coalesce(func.sum(Payment.amount), 0)).where(Payment.study_id == study.id, Payment.status == "paid")
    ).scalar_one()
    turns_by_system = dict(
        session.execute(
            select(Turn.system_id, func.count(func.distinct(Turn.conversation_id)))
            .join(Conversation)
            .where(Conversation.study_id == study.id, Turn.system_id.is_not(None))
            .group_by(Turn.system_id)
        ).all()
    )

    rows = {
        s.name: SystemProgress(s.name, s.is_control, conversations=turns_by_system.get(s.id, 0))
        for s in session.scalars(select(System).where(System.study_id == study.id).order_by(System.id))
    }
    for names in shape.unit_systems.values():
        for name in names:
            rows.setdefault(name, SystemProgress(name, False, has_profile=False))
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
        if status not in UNPOSTED_HITS:
            for name in shape.hit_systems.get(hit_id, ()):
                rows[name].hits_posted += 1
    assignments: Counter[str] = Counter()
    for hit_id, status, n in per_hit:
        assignments[status] += n
        if status in ACTIVE_STATUSES:
            for name in shape.hit_systems.get(hit_id, ()):
                setattr(rows[name], status, getattr(rows[name], status) + n)

    totals = study_counts(session, ctx)  # the console's and `hitkit status`'s figures
    return StudyProgress(
        name=study.name,
        task=study.task_type,
        provider=study.provider,
        status=study.status,
        currency=study.currency,
        budget=study.budget,
        spent=cents(Decimal(spent)),
        committed=cents(committed_spend(session, ctx)),
        hits_total=len(hit_status),
        hits=dict(Counter(hit_status.values())),
        assignments=dict(assignments),
        workers=workers,
        answers_done=totals.submitted,
        answers_needed=totals.needed,
        work_time_median_s=round(statistics.median(times), 1) if times else None,
        work_time_mean_s=round(statistics.fmean(times), 1) if times else None,
        qc=qc_summary(session, ctx, cache_key),
        systems=list(rows.values()),
        bots=bot_health(session, ctx),
        held=len(held_assignment_ids(session, study.id)),
        stopping=stopping.summary(session, ctx),
        platform=platform_state(session, ctx),
        counts=totals,
        leader=leader(session, study.id, last=True),
    )
