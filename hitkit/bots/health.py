"""Bot health as the study sees it: slow, timed-out and unavailable bots, recorded as Event rows.

The web tier wraps each bot call in :func:`watch`. A reply slower than ``SLOW_S`` records a
``bot_slow`` event; a call that timed out records ``bot_timeout``; any other failure records
``bot_unavailable``. Each event carries the system, the latency and the reason. At most one event of
a kind is written per system every ``INTERVAL_S`` seconds; the ones held back in between are counted
in the next event's ``occurrences``, so the events stay few while the counts stay right.
:func:`summary` turns the recent events into the one dict the CLI and the dashboard show.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

SLOW_S = 10.0
"""A reply slower than this is worth telling the researcher about (a chat partner that long silent)."""
INTERVAL_S = 60.0
"""At most one event of a kind per system in this many seconds."""
KINDS = ("bot_slow", "bot_timeout", "bot_unavailable")

_lock = threading.Lock()
_last_written: dict[tuple[str, int | None, str, str], float] = {}
_held_back: dict[tuple[str, int | None, str, str], int] = {}


def classify(error: BaseException | None, latency_s: float, slow_s: float = SLOW_S) -> str | None:
    """The event kind for one bot call: None when it replied in time."""
    if error is None:
        return "bot_slow" if latency_s >= slow_s else None
    from hitkit.bots.client import BotUnavailable

    cause = error
    while not isinstance(cause, BotUnavailable) and cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, BotUnavailable) and cause.timed_out:
        return "bot_timeout"
    return "bot_unavailable"


def _reason(error: BaseException | None) -> str:
    if error is None:
        return ""
    cause = error.__cause__ if error.__cause__ is not None else error
    return str(getattr(cause, "reason", None) or cause)[:300]


def record(
    database_url: str,
    study_id: int | None,
    system: str,
    kind: str,
    latency_s: float,
    reason: str = "",
    interval_s: float = INTERVAL_S,
) -> bool:
    """Write one ``kind`` event for ``system`` unless one was written in the last ``interval_s``;
    return whether it was written. Never raises: health reporting must not break a chat."""
    key = (database_url, study_id, system, kind)
    now = time.monotonic()
    with _lock:
        last = _last_written.get(key)
        if last is not None and now - last < interval_s:
            _held_back[key] = _held_back.get(key, 0) + 1
            return False
        _last_written[key] = now
        occurrences = 1 + _held_back.pop(key, 0)
    try:
        from hitkit.db.session import session_scope
        from hitkit.events import add_event

        with session_scope(database_url) as session:
            add_event(
                session,
                study_id,
                kind,
                "server",
                {
                    "system": system,
                    "latency_s": round(latency_s, 3),
                    "reason": reason,
                    "occurrences": occurrences,
                },
            )
    except Exception:  # noqa: BLE001 - a failed health write is retried by the next event
        with _lock:
            _last_written.pop(key, None)
            _held_back[key] = _held_back.get(key, 0) + occurrences
        return False
    return True


@contextmanager
def watch(database_url: str, study_id: int | None, system: str, slow_s: float | None = None) -> Iterator[None]:
    """Time the bot call in the block and record a health event if it was slow or failed.

    The block's exception, if any, is re-raised unchanged. ``slow_s`` defaults to ``SLOW_S``.
    """
    slow_s = SLOW_S if slow_s is None else slow_s
    started = time.monotonic()
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, Exception):
            record(
                database_url,
                study_id,
                system,
                classify(exc, 0.0) or "bot_unavailable",
                time.monotonic() - started,
                _reason(exc),
            )
        raise
    latency = time.monotonic() - started
    if latency >= slow_s:
        record(database_url, study_id, system, "bot_slow", latency, f"replied after {latency:.1f} s")


def summary(session: Session, study_id: int, window_s: float = 600.0, now: dt.datetime | None = None) -> dict[str, Any]:
    """Recent bot health of a study, from its ``bot_*`` events of the last ``window_s`` seconds.

    Returns ``{"status": "ok"|"slow"|"failing", "window_s", "systems": {name: {"bot_slow": n,
    "bot_timeout": n, "bot_unavailable": n, "last_at": ISO time, "last_kind", "last_latency_s",
    "last_reason"}}, "message": one line for a progress bar or a dashboard}``; counts are occurrences.
    """
    from hitkit.db.models import Event

    now = now or dt.datetime.now(dt.timezone.utc)
    since = now - dt.timedelta(seconds=window_s)
    rows = session.scalars(
        select(Event).where(Event.study_id == study_id, Event.kind.in_(KINDS)).order_by(Event.id)
    ).all()
    systems: dict[str, dict[str, Any]] = {}
    for event in rows:
        created = event.created_at if event.created_at.tzinfo else event.created_at.replace(tzinfo=dt.timezone.utc)
        if created < since:
            continue
        data = event.data or {}
        name = str(data.get("system", "?"))
        entry = systems.setdefault(name, {kind: 0 for kind in KINDS})
        entry[event.kind] += int(data.get("occurrences", 1))
        entry.update(
            last_at=created.isoformat(),
            last_kind=event.kind,
            last_latency_s=data.get("latency_s"),
            last_reason=data.get("reason", ""),
        )
    failing = sorted(n for n, e in systems.items() if e["bot_timeout"] or e["bot_unavailable"])
    slow = sorted(n for n, e in systems.items() if e["bot_slow"] and n not in failing)
    if failing:
        status = "failing"
        worst = systems[failing[0]]
        message = (
            f"bots failing: {', '.join(failing)} ({worst['bot_timeout']} timeouts, "
            f"{worst['bot_unavailable']} unavailable for {failing[0]} in the last "
            f"{window_s / 60:g} min: {worst['last_reason']})"
        )
    elif slow:
        status = "slow"
        message = f"bots slow: {', '.join(slow)} (replies over {SLOW_S:g} s)"
    else:
        status, message = "ok", "bots ok"
    return {"status": status, "window_s": window_s, "systems": systems, "message": message}
