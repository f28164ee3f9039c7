"""Webhook deliveries refused, counted by cause for the dashboard and ``hitkit status``.

A refused delivery writes no event row (a flood of forgeries must not grow the database): each cause has a
counter in the ``setting`` table, and the last refusal's time and cause one more row. A rotated secret then
reads "every delivery refused: bad signature" instead of "0 failures".
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, Text, cast, select, update

from hitkit.db import settings
from hitkit.db.models import Setting, utcnow
from hitkit.db.session import session_scope

REFUSED_KEY = "hook_refused:{study}:{cause}"
"""The ``setting`` row counting a study's refused deliveries of one cause."""
LAST_REFUSED_KEY = "hook_refused_last:{study}"
"""The ``setting`` row holding the last refusal's time (UTC, ISO) and cause."""


def count_refusal(database_url: str, study_id: int, cause: str) -> None:
    """Count one refused delivery of ``cause`` for the study, and when the last one came (one atomic
    statement each: concurrent refusals all count)."""
    with session_scope(database_url) as session:
        conn = session.connection()
        key = REFUSED_KEY.format(study=study_id, cause=cause)
        settings.read_or_create(conn, key, lambda: "0")
        conn.execute(
            update(Setting).where(Setting.key == key).values(value=cast(cast(Setting.value, Integer) + 1, Text))
        )
        last = LAST_REFUSED_KEY.format(study=study_id)
        stamp = f"{utcnow().strftime('%Y-%m-%dT%H:%M:%S')} {cause}"
        settings.read_or_create(conn, last, lambda: stamp)
        conn.execute(update(Setting).where(Setting.key == last).values(value=stamp))


def refused_counts(session, study_id: int) -> tuple[dict[str, int], str | None]:
    """The study's refused deliveries by cause (causes with none left out), and the last one's time and cause."""
    from hitkit.providers.prolific.webhooks import REFUSAL_CAUSES

    keys = {REFUSED_KEY.format(study=study_id, cause=c): c for c in REFUSAL_CAUSES}
    last_key = LAST_REFUSED_KEY.format(study=study_id)
    rows = dict(session.execute(select(Setting.key, Setting.value).where(Setting.key.in_([*keys, last_key]))).all())
    counts = {keys[k]: int(v) for k, v in rows.items() if k in keys and int(v) > 0}
    return {c: counts[c] for c in REFUSAL_CAUSES if c in counts}, rows.get(last_key)


def health_line(health: dict[str, Any]) -> str:
    """One line of webhook health (:func:`hitkit.running.hooks.health`) for a person: mode, last event,
    failures and refused deliveries by cause."""
    if health["mode"] == "polling only":
        errors = health["subscription_errors"]
        line = "polling only" + (f" (subscribing failed: {errors[0]})" if errors else "")
    else:
        last = health["last_event_at"]
        line = (
            f"{len(health['subscribed'])} subscribed; last event "
            f"{last[:19].replace('T', ' ') if last else 'none yet'}; {health['failures']} failure(s)"
        )
    if health["refused_total"]:
        causes = ", ".join(f"{n} {cause}" for cause, n in health["refused"].items())
        when = (health["last_refused"] or "").split(" ", 1)[0].replace("T", " ")
        line += f"; {health['refused_total']} delivery(ies) refused ({causes}; last at {when} UTC)"
    return line
