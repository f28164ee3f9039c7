"""One leader per study: the database lease every process takes before it acts on a platform or on money.

A ``study_lease`` row per study names its holder (host, pid and a token drawn once per process), since
when it holds, and until when (``expires_at``). It is taken by compare-and-set in one UPDATE, so it works
the same on SQLite and PostgreSQL: the row is taken over only when it is free or expired, and only by the
process that asked for it first (``wanted_by``) while that request is fresh. Every new holder adds one to
``epoch``; a money step checks, in the transaction that records it, that its process still holds the lease
(:func:`check`), so a process that stalled past its expiry records nothing.

The scheduler holds the lease as long as it runs, renewing it each tick (and between steps); a second
scheduler is a standby whose ticks do nothing but try to take over, which it does as soon as the lease
expires (``LEASE_TICKS`` ticks after the leader's last renewal). One-shot processes (``hitkit sync``,
``settle``, a bonus or decision from the dashboard) wait for the lease: they register as ``wanted_by``, and
the leading scheduler hands over at the end of its tick, then takes the lease back on a later tick.

Clocks: ``expires_at`` is written and compared with each host's own clock, so hosts sharing one database
need synchronised clocks (NTP); an offset shorter than a tick is harmless.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy import and_, case, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hitkit.db.models import StudyLease, utcnow
from hitkit.db.session import rowcount, session_scope
from hitkit.errors import HitkitError

log = logging.getLogger(__name__)

LEASE_TICKS = 1.5
"""The scheduler's lease lasts this many ticks past its last renewal: a standby takes over within two ticks."""
ONE_SHOT_TTL_S = 10.0
"""How long a one-shot command's lease lasts past its last renewal (it renews with every recorded step);
``HITKIT_LEASE_S`` in the environment overrides it (a killed command's study waits this long)."""


def one_shot_ttl() -> float:
    return float(os.environ.get("HITKIT_LEASE_S") or ONE_SHOT_TTL_S)


WAIT_S = 60.0
"""How long a one-shot command waits for the lease before it gives up with the holder's name."""
POLL_S = 0.1


class LeaseBusy(HitkitError):
    """Another live process leads the study; the message names it and says what to do."""


class LeaseLost(HitkitError):
    """This process no longer holds the study's lease (it expired and another took over): it must stop acting."""


@dataclass(frozen=True)
class Holder:
    """Who this process is, as the lease names it."""

    id: str
    host: str
    pid: int


_me: Holder | None = None
_me_lock = threading.Lock()
_depth: dict[tuple[str, int], int] = {}
"""How many nested :func:`held` blocks of this process are inside a lease it took, per (database, study)."""


def me() -> Holder:
    """This process as a lease holder (a fresh token after a fork, so a child never passes for its parent)."""
    global _me
    with _me_lock:
        if _me is None or _me.pid != os.getpid():
            host = socket.gethostname()[:64]
            _me = Holder(f"{host}:{os.getpid()}:{secrets.token_hex(4)}", host, os.getpid())
        return _me


def describe(row: StudyLease | None, now: dt.datetime | None = None) -> str:
    """The lease in words: who leads and since when, or that no process leads."""
    now = now or utcnow()
    if row is None or row.expires_at <= now:
        return "no process leads this study now"
    return (
        f"{row.role} on {row.host} (pid {row.pid}) leads this study since {row.since:%Y-%m-%d %H:%M:%S} UTC "
        f"(lease until {row.expires_at:%H:%M:%S})"
    )


def leader(session: Session, study_id: int, *, last: bool = False) -> dict | None:
    """The live leader as plain data (``hitkit status --json``, the dashboard), or None when none leads;
    with ``last``, the latest holder even when its lease has run out (``live`` says which)."""
    row = session.get(StudyLease, study_id)
    now = utcnow()
    if row is None or (row.expires_at <= now and not last):
        return None
    return {
        "live": row.expires_at > now,
        "role": row.role,
        "host": row.host,
        "pid": row.pid,
        "since": row.since.isoformat(),
        "expires_at": row.expires_at.isoformat(),
        "epoch": row.epoch,
    }


def try_take(database_url: str, study_id: int, role: str, ttl_s: float, want: bool = False) -> bool:
    """Take or renew the study's lease for ``ttl_s`` seconds; False when another live process holds it.

    ``want`` registers this process as the next holder when no fresher request is waiting, so a
    leader hands over to it at the end of its tick and standbys let it go first.
    """
    holder, now = me(), utcnow()
    until = now + dt.timedelta(seconds=ttl_s)
    with session_scope(database_url) as session:
        mine = StudyLease.holder == holder.id
        free = and_(
            StudyLease.expires_at <= now,
            or_(StudyLease.wanted_by.is_(None), StudyLease.wanted_by == holder.id, StudyLease.wanted_until <= now),
        )
        taken = rowcount(
            session.execute(
                update(StudyLease)
                .where(StudyLease.study_id == study_id, or_(mine, free))
                .values(
                    since=case((and_(mine, StudyLease.expires_at > now), StudyLease.since), else_=now),
                    epoch=case((and_(mine, StudyLease.expires_at > now), StudyLease.epoch), else_=StudyLease.epoch + 1),
                    wanted_by=case((StudyLease.wanted_by == holder.id, None), else_=StudyLease.wanted_by),
                    holder=holder.id,
                    role=role,
                    host=holder.host,
                    pid=holder.pid,
                    expires_at=until,
                    ttl_s=ttl_s,
                )
                .execution_options(synchronize_session=False)
            )
        )
        if taken:
            return True
        row = session.get(StudyLease, study_id)
        if row is None:
            session.add(
                StudyLease(
                    study_id=study_id,
                    holder=holder.id,
                    role=role,
                    host=holder.host,
                    pid=holder.pid,
                    since=now,
                    expires_at=until,
                    epoch=1,
                    ttl_s=ttl_s,
                )
            )
            try:
                session.flush()
            except IntegrityError:  # another process inserted it first: it holds the lease
                session.rollback()
                return False
            return True
        if want and (row.wanted_by in (None, holder.id) or row.wanted_until is None or row.wanted_until <= now):
            session.execute(
                update(StudyLease)
                .where(
                    StudyLease.study_id == study_id,
                    or_(
                        StudyLease.wanted_by.is_(None),
                        StudyLease.wanted_by == holder.id,
                        StudyLease.wanted_until <= now,
                    ),
                )
                .values(wanted_by=holder.id, wanted_until=now + dt.timedelta(seconds=ttl_s + 2 * POLL_S))
                .execution_options(synchronize_session=False)
            )
    return False


def release(database_url: str, study_id: int) -> None:
    """Give the lease up now (its row keeps the last holder's name for ``hitkit status``)."""
    with session_scope(database_url) as session:
        session.execute(
            update(StudyLease)
            .where(StudyLease.study_id == study_id, StudyLease.holder == me().id)
            .values(expires_at=utcnow())
            .execution_options(synchronize_session=False)
        )


def wanted_by_other(database_url: str, study_id: int) -> bool:
    """Whether another process waits for the lease this process holds (the leader then hands over)."""
    with session_scope(database_url) as session:
        row = session.get(StudyLease, study_id)
        return (
            row is not None
            and row.holder == me().id
            and row.wanted_by not in (None, me().id)
            and row.wanted_until is not None
            and row.wanted_until > utcnow()
        )


def expires_in(database_url: str, study_id: int) -> float | None:
    """Seconds until the current holder's lease expires (None when there is no lease row)."""
    with session_scope(database_url) as session:
        row = session.get(StudyLease, study_id)
        return None if row is None else (row.expires_at - utcnow()).total_seconds()


def holds(database_url: str, study_id: int) -> bool:
    """Whether this process holds the study's live lease."""
    with session_scope(database_url) as session:
        row = session.get(StudyLease, study_id)
        return row is not None and row.holder == me().id and row.expires_at > utcnow()


def check(session: Session, study_id: int) -> None:
    """Renew this process's lease in the transaction that records a step; LeaseLost when another took it.

    The lease row is locked for the transaction (``FOR UPDATE`` on PostgreSQL, SQLite's writer lock), so a
    rival's take-over waits for it. A lease that lapsed while this process was busy but that nobody took
    since (it still names this process) is still this process's: no one else can have acted meanwhile.
    """
    row = session.scalar(select(StudyLease).where(StudyLease.study_id == study_id).with_for_update())
    if row is None or row.holder != me().id:
        raise LeaseLost(
            f"this process ({me().host}, pid {me().pid}) no longer leads study {study_id}: "
            f"{describe(row)}; it records nothing more and leaves the work to the leader"
        )
    row.expires_at = max(row.expires_at, utcnow() + dt.timedelta(seconds=row.ttl_s))


@contextmanager
def held(
    database_url: str, study_id: int, role: str, wait_s: float = WAIT_S, ttl_s: float | None = None
) -> Iterator[None]:
    """Hold the study's lease for the block: at once when this process already holds it, else wait for it.

    A process that holds it already (the scheduler's tick calling the ledger) just renews it; one that
    took it here gives it up at the end. LeaseBusy, naming the leader, when it does not come in ``wait_s``.
    """
    slot = (database_url, study_id)
    if _depth.get(slot, 0) > 0 or holds(database_url, study_id):
        _depth[slot] = _depth.get(slot, 0) + 1
        try:
            yield
        finally:
            _depth[slot] -= 1
        return
    deadline, ttl_s = time.monotonic() + wait_s, ttl_s or one_shot_ttl()
    while not try_take(database_url, study_id, role, ttl_s, want=True):
        if time.monotonic() >= deadline:
            with session_scope(database_url) as session:
                who = describe(session.get(StudyLease, study_id))
            raise LeaseBusy(
                f"{who}; only one process acts on the platform and the money of a study at a time. "
                f"It did not hand over within {wait_s:.0f} s; try again, or stop it first"
            )
        time.sleep(POLL_S)
    _depth[slot] = 1
    done = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(database_url, study_id, role, ttl_s, done), daemon=True)
    beat.start()
    try:
        yield
    finally:
        done.set()
        beat.join(ttl_s)
        _depth[slot] = 0
        release(database_url, study_id)


def _heartbeat(database_url: str, study_id: int, role: str, ttl_s: float, done: threading.Event) -> None:
    """Renew a one-shot command's lease every third of its life while the command runs (a killed process
    renews nothing, so its lease runs out ``ttl_s`` after its last beat)."""
    while not done.wait(ttl_s / 3):
        try:
            if not try_take(database_url, study_id, role, ttl_s):
                return  # taken over: the command's next recorded step raises LeaseLost
        except Exception as exc:  # noqa: BLE001 - a missed beat is retried; the lease itself stays the judge
            log.warning("renewing the lease of study %s failed (retried): %s", study_id, exc)


# -- the scheduler's side ----------------------------------------------------------------------------


def scheduler_ttl(interval_s: float) -> float:
    """How long the scheduler's lease lasts past a renewal: :data:`LEASE_TICKS` ticks."""
    return LEASE_TICKS * interval_s


def lead(database_url: str, study_id: int, interval_s: float) -> bool:
    """Take or renew the lease at the start of a tick; a standby whose leader's lease runs out within
    this tick waits for that moment and takes over then (so a dead leader is replaced within two ticks)."""
    if try_take(database_url, study_id, "scheduler", scheduler_ttl(interval_s)):
        return True
    left = expires_in(database_url, study_id)
    if left is None or left > interval_s:
        return False
    time.sleep(max(0.0, left) + POLL_S)
    return try_take(database_url, study_id, "scheduler", scheduler_ttl(interval_s))


def renew(database_url: str, study_id: int, interval_s: float) -> None:
    """Renew the scheduler's lease between steps of a tick; LeaseLost when another process took it."""
    if not try_take(database_url, study_id, "scheduler", scheduler_ttl(interval_s)):
        raise LeaseLost(
            f"the scheduler ({me().host}, pid {me().pid}) lost the lease of study {study_id} mid-tick; it stops acting"
        )


def end_tick(database_url: str, study_id: int, interval_s: float) -> None:
    """Hand the lease over to a one-shot command that waits for it, else renew it for the next tick."""
    if wanted_by_other(database_url, study_id):
        release(database_url, study_id)
    else:
        try_take(database_url, study_id, "scheduler", scheduler_ttl(interval_s))
