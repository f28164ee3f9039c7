"""Bot health recorded as Event rows by the live chat, and summarised for the CLI and dashboard."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import select

from hitkit.bots import health
from hitkit.bots.client import BotUnavailable
from hitkit.db.models import Event
from hitkit.db.session import session_scope
from hitkit.worker import chat
from tests.test_live_chat_task import start_chat, study, take  # noqa: F401 - the fixture is used below


def events(url, study_id):
    with session_scope(url) as s:
        return [
            (e.kind, dict(e.data))
            for e in s.scalars(
                select(Event).where(Event.study_id == study_id, Event.kind.in_(health.KINDS)).order_by(Event.id)
            )
        ]


def test_failing_and_slow_bots_become_events_at_most_once_per_interval(study, monkeypatch):  # noqa: F811
    url, ctx = study
    token, order = take(url, ctx, "W-health")
    start_chat(url, ctx, token, order[0])

    def timing_out(history):
        raise BotUnavailable("x", 3, "no reply within 30 s", timed_out=True, waited_s=90.0)

    with pytest.raises(chat.BotReplyError):
        chat.send(url, ctx, token, order[0], "hello?", timing_out)
    for _ in range(2):  # retries of the same turn, within the interval: counted, not written
        with pytest.raises(chat.BotReplyError):
            chat.bot_reply(url, ctx, token, order[0], timing_out)
    recorded = events(url, ctx.study_id)
    assert [k for k, _ in recorded] == ["bot_timeout"]
    kind, data = recorded[0]
    assert data["reason"] == "no reply within 30 s" and data["occurrences"] == 1 and data["latency_s"] >= 0
    assert data["system"] in {s.name for s in ctx.config.systems}

    def refused(history):
        raise ConnectionError("connection refused")

    with pytest.raises(chat.BotReplyError):
        chat.bot_reply(url, ctx, token, order[0], refused)
    # A slow reply (the threshold lowered so the test needs no wait) answers the turn and is recorded.
    monkeypatch.setattr(health, "SLOW_S", 0.0)
    state = chat.bot_reply(url, ctx, token, order[0], lambda history: "sorry, I was slow")
    assert state.turns[-1]["text"] == "sorry, I was slow"
    assert [k for k, _ in events(url, ctx.study_id)] == ["bot_timeout", "bot_unavailable", "bot_slow"]
    # The next timeout after the interval carries the two held back.
    monkeypatch.setattr(health, "INTERVAL_S", 0.0)
    health.record(
        url, ctx.study_id, recorded[0][1]["system"], "bot_timeout", 31.0, "no reply within 30 s", interval_s=0.0
    )
    assert events(url, ctx.study_id)[-1][1]["occurrences"] == 3

    with session_scope(url) as s:
        summary = health.summary(s, ctx.study_id)
    name = recorded[0][1]["system"]
    assert summary["status"] == "failing"
    assert summary["systems"][name]["bot_timeout"] == 4 and summary["systems"][name]["bot_unavailable"] == 1
    assert summary["systems"][name]["bot_slow"] == 1
    assert summary["message"].startswith(f"bots failing: {name} (4 timeouts")
    # Outside the window, nothing is recent: the bots count as ok again.
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
    with session_scope(url) as s:
        assert health.summary(s, ctx.study_id, now=later) == {
            "status": "ok",
            "window_s": 600.0,
            "systems": {},
            "message": "bots ok",
        }


def test_classify_tells_timeouts_from_other_failures():
    assert health.classify(None, 1.0) is None
    assert health.classify(None, 12.0) == "bot_slow"
    assert health.classify(BotUnavailable("b", 3, "no reply within 30 s", timed_out=True), 90) == "bot_timeout"
    assert health.classify(BotUnavailable("b", 3, "cannot connect"), 0.1) == "bot_unavailable"
    assert health.classify(ConnectionError("down"), 0.1) == "bot_unavailable"


def test_a_health_write_that_fails_never_breaks_the_chat(tmp_path):
    # No such database: the event cannot be written; record says so and raises nothing.
    url = f"sqlite:///{tmp_path}/missing/dir/x.db"
    assert health.record(url, 1, "bot", "bot_timeout", 1.0) is False
