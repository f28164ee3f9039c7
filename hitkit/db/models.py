"""The data model of ARCHITECTURE.md: every state change is a row, so any process sees the truth.

Money is ``Numeric`` (``Decimal`` in Python), time is timezone-aware UTC. Uniqueness constraints
carry the idempotency rules: one assignment per worker per HIT, one response per
assignment × unit × question, one payment per idempotency key.
"""

from __future__ import annotations

import datetime as dt
import secrets
from decimal import Decimal
from typing import Any, Optional

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.timezone.utc)


class UTCDateTime(TypeDecorator):
    """A timestamp that is always timezone-aware UTC in Python, whatever the backend stores."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given; hitkit stores UTC-aware times only")
        return value

    def process_result_value(self, value, dialect):
        if value is not None and value.tzinfo is None:  # SQLite drops the zone
            value = value.replace(tzinfo=dt.timezone.utc)
        return value


MoneyType = Numeric(12, 2, asdecimal=True)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, dt.datetime: UTCDateTime}


class Study(Base):
    __tablename__ = "study"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    task_type: Mapped[str] = mapped_column(String(32))
    provider: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default="draft")  # draft, running, completed, stopped
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    config_path: Mapped[Optional[str]] = mapped_column(Text)
    budget: Mapped[Decimal] = mapped_column(MoneyType)
    currency: Mapped[str] = mapped_column(String(8), default="USD")
    seed: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    completed_at: Mapped[Optional[dt.datetime]]
    uid: Mapped[Optional[str]] = mapped_column(String(32), default=lambda: secrets.token_hex(16))
    """A random id made with the study, unique to this database: what a provider's request tokens derive
    from, so several databases on one provider account never collide."""

    systems: Mapped[list["System"]] = relationship(back_populates="study", order_by="System.id")
    hits: Mapped[list["Hit"]] = relationship(back_populates="study", order_by="Hit.index")


class System(Base):
    __tablename__ = "system"
    __table_args__ = (UniqueConstraint("study_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    name: Mapped[str] = mapped_column(String(64))
    is_control: Mapped[bool] = mapped_column(Boolean, default=False)
    is_human: Mapped[bool] = mapped_column(Boolean, default=False)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    study: Mapped[Study] = relationship(back_populates="systems")


class Conversation(Base):
    __tablename__ = "conversation"
    __table_args__ = (UniqueConstraint("study_id", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    key: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))  # prompt, bot_bot, human_bot, human_human
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    reply_claim: Mapped[Optional[str]] = mapped_column(String(32))
    """Who is asking the bot for the reply this live chat owes (a random nonce), so that one owed
    reply is generated once however many retries arrive; cleared when the reply is stored."""
    reply_claimed_at: Mapped[Optional[dt.datetime]]
    """When :attr:`reply_claim` was taken; a claim older than the bot's timeout is abandoned."""

    turns: Mapped[list["Turn"]] = relationship(back_populates="conversation", order_by="Turn.index")


class Turn(Base):
    __tablename__ = "turn"
    __table_args__ = (UniqueConstraint("conversation_id", "index"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    conversation_id: Mapped[int] = mapped_column(ForeignKey("conversation.id"))
    index: Mapped[int] = mapped_column(Integer)
    speaker: Mapped[str] = mapped_column(String(64))
    system_id: Mapped[Optional[int]] = mapped_column(ForeignKey("system.id"))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    signals: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON(none_as_null=True))
    """How the worker entered the message: counts and timings (:mod:`hitkit.worker.authenticity`); None for a bot's."""
    first_token_ms: Mapped[Optional[int]] = mapped_column(Integer)
    """A live bot reply: milliseconds from asking the bot to its first text (about the whole reply's, unstreamed)."""
    reply_ms: Mapped[Optional[int]] = mapped_column(Integer)
    """A live bot reply: milliseconds from asking the bot to its whole reply."""

    conversation: Mapped[Conversation] = relationship(back_populates="turns")


def new_public_key() -> str:
    """A fresh unit key for workers to see: 16 hex characters from the OS's random source.

    Not seeded on purpose: it must not be predictable from the study file, and nothing measured
    depends on it. Hex, so it fits a URL path and the ``answer-KEY-question`` form fields.
    """
    return secrets.token_hex(8)


class Unit(Base):
    """The smallest piece of work: one pair to compare, one chat slot, one segment to label."""

    __tablename__ = "unit"
    __table_args__ = (UniqueConstraint("study_id", "key"), UniqueConstraint("public_key", name="uq_unit_public_key"))

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    key: Mapped[str] = mapped_column(String(200))
    public_key: Mapped[str] = mapped_column(String(32), default=lambda: new_public_key())
    """What a worker sees instead of ``id``: random, so it carries no order (ids are made in creation
    order, and the QC slot and human–human material are created last)."""
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    conversation_id: Mapped[Optional[int]] = mapped_column(ForeignKey("conversation.id"))
    required_answers: Mapped[int] = mapped_column(Integer)


class JudgeLabel(Base):
    """One label an LLM judge gave to one unit of the study's material, asked one way (``variant``: for
    pairwise, the display order ``ab`` or ``ba``). Keyed by the material's unit key, not a unit row:
    the judge labels every item, and only the crowd's share of them become units. A failed attempt
    is a row too (``status`` failed, ``error``), retried by the next run; a done one is never asked again."""

    __tablename__ = "judge_label"
    __table_args__ = (UniqueConstraint("study_id", "unit_key", "variant"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    unit_key: Mapped[str] = mapped_column(String(200))
    variant: Mapped[str] = mapped_column(String(16))
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    model: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))  # done, failed
    label: Mapped[Optional[str]] = mapped_column(String(32))
    parsed: Mapped[bool] = mapped_column(Boolean, default=True)
    """False when the reply named no label and ``label`` is the protocol's neutral one."""
    source: Mapped[str] = mapped_column(String(16), default="judge")  # judge, auto (no call needed)
    reply: Mapped[Optional[str]] = mapped_column(Text)
    error: Mapped[Optional[str]] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Hit(Base):
    """A package of units posted once to a provider."""

    __tablename__ = "hit"
    __table_args__ = (UniqueConstraint("study_id", "index"), Index("ix_hit_study_status", "study_id", "status"))

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    index: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending, posted, completed, expired,
    # and when the stopping rule fires: withdrawn (never posted) or closed (posted, no newcomers)
    provider_hit_id: Mapped[Optional[str]] = mapped_column(String(128))
    max_assignments: Mapped[int] = mapped_column(Integer)
    reward: Mapped[Decimal] = mapped_column(MoneyType)
    lifetime_s: Mapped[float] = mapped_column(Float)
    posted_at: Mapped[Optional[dt.datetime]]
    expires_at: Mapped[Optional[dt.datetime]]

    study: Mapped[Study] = relationship(back_populates="hits")
    units: Mapped[list["HitUnit"]] = relationship(order_by="HitUnit.position", cascade="all, delete-orphan")
    assignments: Mapped[list["Assignment"]] = relationship(back_populates="hit")


class HitUnit(Base):
    __tablename__ = "hit_unit"

    hit_id: Mapped[int] = mapped_column(ForeignKey("hit.id"), primary_key=True)
    unit_id: Mapped[int] = mapped_column(ForeignKey("unit.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)

    unit: Mapped[Unit] = relationship()


class Worker(Base):
    __tablename__ = "worker"
    __table_args__ = (UniqueConstraint("provider", "external_id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    provider: Mapped[str] = mapped_column(String(32))
    external_id: Mapped[str] = mapped_column(String(128))
    blocked: Mapped[bool] = mapped_column(Boolean, default=False)
    qc_passed: Mapped[Optional[bool]]
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Assignment(Base):
    """One worker taking one HIT."""

    __tablename__ = "assignment"
    __table_args__ = (UniqueConstraint("hit_id", "worker_id"), Index("ix_assignment_status", "status"))

    id: Mapped[int] = mapped_column(primary_key=True)
    hit_id: Mapped[int] = mapped_column(ForeignKey("hit.id"))
    worker_id: Mapped[int] = mapped_column(ForeignKey("worker.id"))
    provider_assignment_id: Mapped[Optional[str]] = mapped_column(String(128))
    # accepted, submitted, approved, rejected, returned, expired, screened_out
    status: Mapped[str] = mapped_column(String(16), default="accepted")
    token_nonce: Mapped[str] = mapped_column(String(32))
    layout: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    accepted_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    consented_at: Mapped[Optional[dt.datetime]]
    submitted_at: Mapped[Optional[dt.datetime]]
    decided_at: Mapped[Optional[dt.datetime]]
    work_time_s: Mapped[Optional[float]]
    feedback: Mapped[Optional[str]] = mapped_column(Text)
    """The worker's optional comment on the whole HIT, given with the submission."""
    feedback_signals: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON(none_as_null=True))
    """How the comment was entered (:mod:`hitkit.worker.authenticity`); None without a comment or signals."""
    confirmed_at: Mapped[Optional[dt.datetime]]
    """When a platform (or the coordinator, for a panel) confirmed that this worker did this work.

    Set at arrival by providers that verify who arrives (simulated, local, Prolific), by the
    scheduler when MTurk shows the assignment as the worker's, and by ``hitkit confirm`` for a
    panel. Submitted work without it is never exported or analysed as valid (docs/COLUMNS.md)."""

    hit: Mapped[Hit] = relationship(back_populates="assignments")
    worker: Mapped[Worker] = relationship()
    responses: Mapped[list["Response"]] = relationship(back_populates="assignment")


class Response(Base):
    """One answer: one unit × one question of one assignment."""

    __tablename__ = "response"
    __table_args__ = (UniqueConstraint("assignment_id", "unit_id", "question"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignment.id"))
    unit_id: Mapped[int] = mapped_column(ForeignKey("unit.id"))
    question: Mapped[str] = mapped_column(String(64))
    value: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(16), default="worker")  # worker, auto
    elapsed_s: Mapped[Optional[float]]
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    signals: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON(none_as_null=True))
    """How a free-text answer was entered (:mod:`hitkit.worker.authenticity`); None where no page watched it."""

    assignment: Mapped[Assignment] = relationship(back_populates="responses")


class Payment(Base):
    """Ledger of rewards, bonuses and fees; the idempotency key makes paying twice impossible."""

    __tablename__ = "payment"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    assignment_id: Mapped[Optional[int]] = mapped_column(ForeignKey("assignment.id"))
    worker_id: Mapped[Optional[int]] = mapped_column(ForeignKey("worker.id"))
    kind: Mapped[str] = mapped_column(String(16))  # reward, bonus, fee, screen_out
    amount: Mapped[Decimal] = mapped_column(MoneyType)
    currency: Mapped[str] = mapped_column(String(8))
    idempotency_key: Mapped[str] = mapped_column(String(128), unique=True)
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending, paid, failed
    provider_ref: Mapped[Optional[str]] = mapped_column(String(128))
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    state: Mapped[Optional[str]] = mapped_column(String(16))
    """Where the payment stands on the platform (hitkit.money.payments.STATES): planned, created (the platform's
    id in ``provider_ref``), sending (the pay call may have gone out), paid, confirmed; failed."""
    state_at: Mapped[Optional[dt.datetime]]
    """When ``state`` last changed (a ``sending`` bonus is settled from the platform after a while)."""


class StudyLease(Base):
    """The one process that may act on the platform or on money for a study (hitkit.study.lease).

    Taken by compare-and-set when free or expired, renewed by its holder, handed over at the end of
    a tick to a process that asked for it (``wanted_by``); ``epoch`` grows with every new holder.
    """

    __tablename__ = "study_lease"

    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"), primary_key=True)
    holder: Mapped[str] = mapped_column(String(128))
    role: Mapped[str] = mapped_column(String(16))
    host: Mapped[str] = mapped_column(String(128))
    pid: Mapped[int] = mapped_column(Integer)
    since: Mapped[dt.datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    epoch: Mapped[int] = mapped_column(Integer, default=1)
    ttl_s: Mapped[float] = mapped_column(Float, default=30.0)
    wanted_by: Mapped[Optional[str]] = mapped_column(String(128))
    wanted_until: Mapped[Optional[dt.datetime]]


class Event(Base):
    """Append-only audit log of every provider call and state change."""

    __tablename__ = "event"

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[Optional[int]] = mapped_column(ForeignKey("study.id"))
    kind: Mapped[str] = mapped_column(String(64))
    actor: Mapped[str] = mapped_column(String(32))  # server, scheduler, cli, provider
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class Setting(Base):
    """A deployment-wide value every process and host must agree on, written once and then read.

    Holds the embedded default's signing secret (``secret``, created by the first process to start,
    see :mod:`hitkit.secret`) and the dashboard's session generation (bumped by logout).
    """

    __tablename__ = "setting"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
