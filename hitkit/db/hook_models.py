"""The webhook tables (revision 0010): subscriptions hitkit made on a platform, and the deliveries that
passed the signature check, queued for the scheduler. Part of the data model in :mod:`hitkit.db.models`
(imported with the package, so the metadata always holds them)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Optional

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from hitkit.db.models import Base, utcnow


class HookSubscription(Base):
    """A webhook subscription hitkit made on a platform for a study (revision 0010).

    ``secret`` is the workspace's signing secret the deliveries are checked with; ``status`` is
    created, confirmed, deleted or failed (``error`` says why)."""

    __tablename__ = "hook_subscription"
    __table_args__ = (UniqueConstraint("study_id", "event_type", name="uq_hook_subscription_study_event"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    provider: Mapped[str] = mapped_column(String(32))
    event_type: Mapped[str] = mapped_column(String(64))
    remote_id: Mapped[Optional[str]] = mapped_column(String(128))
    target_url: Mapped[str] = mapped_column(String(512))
    secret: Mapped[Optional[str]] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[Optional[str]] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(default=utcnow)


class HookEvent(Base):
    """One webhook delivery that passed the signature check, queued for the scheduler (revision 0010).

    One row per platform event id: a second delivery of the same event finds its row and adds nothing.
    ``status`` is queued, done or failed; ``outcome`` says what draining it did (always after asking the
    platform for the current state: the event itself is only a hint)."""

    __tablename__ = "hook_event"
    __table_args__ = (
        UniqueConstraint("study_id", "provider", "event_id", name="uq_hook_event_once"),
        Index("ix_hook_event_study_status", "study_id", "status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("study.id"))
    provider: Mapped[str] = mapped_column(String(32))
    event_id: Mapped[str] = mapped_column(String(128))
    event_type: Mapped[str] = mapped_column(String(64))
    resource_id: Mapped[str] = mapped_column(String(128))
    sent_at: Mapped[Optional[str]] = mapped_column(String(64))
    body: Mapped[Optional[dict[str, Any]]] = mapped_column(JSON(none_as_null=True))
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    outcome: Mapped[Optional[str]] = mapped_column(Text)
    received_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
    done_at: Mapped[Optional[dt.datetime]]
