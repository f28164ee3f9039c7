"""Webhook deliveries known by what their signature covers, and refused deliveries counted by cause.

``X-Event-ID`` is not signed: whoever holds one genuine delivery can send it again, within the 5-minute
window, under any id. De-duplicating on that header let 300 replays of one delivery into the queue (and
the scheduler asked Prolific about each). Refused deliveries left no trace, so a rotated secret read
"0 failures" while every delivery was refused.
"""

from __future__ import annotations

import json
import time

import pytest
import requests
from click.testing import CliRunner
from sqlalchemy import select

from hitkit.cli import main
from hitkit.db.models import Setting, Study
from hitkit.db.session import session_scope
from hitkit.providers.prolific import client as prolific_api
from hitkit.running import hooks, provider_side
from hitkit.running.scheduler import tick
from hitkit.study.stored import StudyContext
from tests.fakes.prolific import TOKEN, FakeProlificServer
from tests.test_prolific_webhooks import deliver_by_hand, hooked, queued
from tests.test_provider_prolific import pid


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)


@pytest.fixture
def fake():
    with FakeProlificServer() as server:
        yield server
        assert server.violations == []


def enter(web_url: str, fake, name: str) -> str:
    [sid] = fake.studies
    session_id = fake.start_session(pid(name), sid)
    requests.get(
        f"{web_url}/s/ab-demo/enter", params={"PROLIFIC_PID": pid(name), "STUDY_ID": sid, "SESSION_ID": session_id}
    )
    return session_id


def event_body(session_id: str, name: str, status: str = "RETURNED") -> bytes:
    event = {
        "resource_id": session_id,
        "event_type": "submission.status.change",
        "participant_id": pid(name),
        "status": status,
    }
    return json.dumps(event, separators=(",", ":")).encode()


def test_300_replays_of_one_genuine_delivery_under_fresh_event_ids_queue_it_once(
    tmp_path, database_url, fake, monkeypatch
):
    monkeypatch.setattr(provider_side, "RETURNS_EVERY_S", 1e9)  # no polling: every GET below is a webhook's
    web, config, _ = hooked(tmp_path, database_url, fake)
    try:
        session_id = enter(web.url, fake, "w-1")
        fake.outbox.clear()
        target = f"{web.url}/hooks/prolific/ab-demo"
        real = fake.hooks["secrets"][fake.workspace["id"]]["value"]
        body, stamp = event_body(session_id, "w-1"), str(int(time.time()))
        answers = [
            deliver_by_hand(target, body, real, stamp=stamp, event_id=f"evt-{i}").status_code for i in range(301)
        ]
        assert answers == [200] * 301  # answered 2xx: a genuine retry must not be pushed into Prolific's backoff
        [row] = queued(database_url)
        assert row.event_id.startswith("sig:") and row.body["delivery"]["event_id"] == "evt-0"
        asked = len(fake.calls("GET", f"/submissions/{session_id}/"))
        tick(database_url, config.study, web.url)
        assert len(fake.calls("GET", f"/submissions/{session_id}/")) - asked == 1  # one event, one question

        # Prolific's own retry of that event, signed anew a second later, is still the same event...
        retry = deliver_by_hand(target, body, real, stamp=str(int(stamp) + 1), event_id="evt-0")
        assert retry.status_code == 200 and retry.json()["result"] == "already received"
        # ...while an id already seen cannot suppress a different genuine event (the id proves nothing).
        other = event_body(session_id, "w-1", status="TIMED-OUT")
        fresh = deliver_by_hand(target, other, real, stamp=stamp, event_id="evt-0")
        assert fresh.json()["result"] == "queued" and len(queued(database_url)) == 2
    finally:
        web.stop()


def health_of(database_url: str) -> dict:
    with session_scope(database_url) as s:
        return hooks.health(s, s.scalar(select(Study.id)))


def test_refused_deliveries_are_counted_by_cause_and_shown(tmp_path, database_url, fake, monkeypatch):
    monkeypatch.setattr(provider_side, "RETURNS_EVERY_S", 1e9)
    web, config, secret = hooked(tmp_path, database_url, fake)
    try:
        session_id = enter(web.url, fake, "w-2")
        fake.outbox.clear()
        target = f"{web.url}/hooks/prolific/ab-demo"
        real = fake.hooks["secrets"][fake.workspace["id"]]["value"]
        body, now = event_body(session_id, "w-2"), int(time.time())
        assert health_of(database_url)["refused"] == {} and health_of(database_url)["refused_total"] == 0
        sent = (
            [deliver_by_hand(target, body, None) for _ in range(2)]  # unsigned
            + [deliver_by_hand(target, body, "a-secret-hitkit-never-saw", event_id=f"f{i}") for i in range(3)]
            + [deliver_by_hand(target, body, real, stamp=str(now - 3600))]  # stale
            + [deliver_by_hand(target, body, real, stamp="yesterday")]  # bad timestamp
            + [deliver_by_hand(target, b'{"event_type": "nothing"}', real)]  # signed, not an event hitkit takes
        )
        assert [r.status_code for r in sent] == [401] * 7 + [400]
        assert queued(database_url) == []
        health = health_of(database_url)
        assert health["refused"] == {
            "unsigned": 2,
            "bad timestamp": 1,
            "stale": 1,
            "bad signature": 3,
            "malformed": 1,
        }
        assert health["refused_total"] == 8 and health["last_refused"].endswith(" malformed")
        with session_scope(database_url) as s:  # counters, not a row per refusal
            assert len(s.scalars(select(Setting.key).where(Setting.key.like("hook_refused%"))).all()) == 6

        # The workspace's secret is rotated on Prolific: every real delivery is now refused, and says so.
        fake.hooks["secrets"][fake.workspace["id"]]["value"] = "rotated-on-prolific"
        fake.return_session(session_id)
        assert set(fake.deliver()) == {401}
        health = health_of(database_url)
        assert health["refused"]["bad signature"] > 3 and health["failures"] == 0
        from hitkit.dashboard.platform import platform_state

        with session_scope(database_url) as s:
            text = platform_state(s, StudyContext.load(s, "ab-demo", secret))["webhooks_text"]
        assert "3 subscribed" in text and f"{health['refused_total']} delivery(ies) refused" in text
        assert f"{health['refused']['bad signature']} bad signature" in text and "last at " in text
        study_file = str(tmp_path / "study.yaml")
        run = CliRunner().invoke(main, ["status", study_file])
        assert run.exit_code == 0, run.output
        [line] = [x for x in run.output.splitlines() if x.strip().startswith("webhooks:")]
        assert "bad signature" in line and "refused" in line
        run = CliRunner().invoke(main, ["status", study_file, "--json"])
        assert json.loads(run.output)["webhooks"]["refused"] == health["refused"]
    finally:
        web.stop()


@pytest.mark.parametrize("cause", ["unsigned", "bad signature"])
def test_concurrent_refusals_all_count(tmp_path, database_url, fake, cause):
    """Refusals arriving together from many threads are each counted (one atomic UPDATE per refusal)."""
    from concurrent.futures import ThreadPoolExecutor

    web, _, _ = hooked(tmp_path, database_url, fake)
    try:
        target = f"{web.url}/hooks/prolific/ab-demo"
        key = None if cause == "unsigned" else "forged"
        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda i: deliver_by_hand(target, b"{}", key).status_code, range(40)))
        assert codes == [401] * 40
        assert health_of(database_url)["refused"] == {cause: 40}
    finally:
        web.stop()
