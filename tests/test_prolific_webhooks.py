"""Prolific's webhooks against the fake: subscribed as documented, verified over the raw body, queued once
per event id, acted on only after asking the API, and never needed (polling ends a study the same way).

Real HTTP both ways: the fake's sender posts signed deliveries to hitkit's server; hitkit's client calls
the fake. Every request and answer is validated against Prolific's OpenAPI document.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
import requests
from sqlalchemy import func, select

from hitkit.db.hook_models import HookEvent, HookSubscription
from hitkit.db.models import Assignment, Event, Payment, Study
from hitkit.db.session import session_scope
from hitkit.providers.prolific import client as prolific_api
from hitkit.running import hooks, provider_side
from hitkit.running.scheduler import tick
from hitkit.running.sync import sync_study
from tests.fakes.prolific import TOKEN, FakeProlificServer
from tests.fakes.prolific_hooks import sign
from tests.test_provider_prolific import code_of, launch_on, pid, take_and_submit

PUBLIC = "https://hooks.example.org"
"""The public https address the study file gives; the fake's sender reaches it at the test server."""


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)


@pytest.fixture
def fake():
    with FakeProlificServer() as server:
        yield server
        assert server.violations == []  # nothing hitkit sent or read broke Prolific's OpenAPI document


def hooked(tmp_path, database_url, fake, **changes):
    """The example study on the fake with webhooks at PUBLIC, routed to its local server: (web, config, secret)."""
    web, config, secret = launch_on(tmp_path, database_url, fake, prolific={"webhook_url": PUBLIC}, **changes)
    fake.route_hooks(lambda url: url.replace(PUBLIC, web.url))
    return web, config, secret


def take(base: str, name: str, participant: str, study_id: str, session_id: str) -> requests.Response:
    """Arrive at study ``name`` from Prolific, consent, answer everything, submit (the submit response)."""
    http = requests.Session()
    page = http.get(
        f"{base}/s/{name}/enter", params={"PROLIFIC_PID": participant, "STUDY_ID": study_id, "SESSION_ID": session_id}
    )
    assert page.status_code == 200, page.text
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    for unit in http.get(task + "state").json()["units"]:
        for q in unit["questions"]:
            assert (
                http.post(
                    task + "answer", json={"unit_id": unit["unit_id"], "question": q["name"], "value": "a"}
                ).status_code
                == 200
            )
    return http.post(task + "submit", allow_redirects=False)


def queued(url: str) -> list[HookEvent]:
    with session_scope(url) as s:
        return list(s.scalars(select(HookEvent).order_by(HookEvent.id)))


def test_a_study_with_a_public_address_subscribes_its_workspace_as_documented_and_ends_it(tmp_path, database_url, fake):
    web, config, secret = hooked(tmp_path, database_url, fake)
    try:
        [sid] = fake.studies
        subs = fake.hooks["subscriptions"]
        assert sorted(s["event_type"] for s in subs.values()) == [
            "study.has_high_return_rate",
            "study.status.change",
            "submission.status.change",
        ]
        assert all(s["confirmed"] and s["target_url"] == f"{PUBLIC}/hooks/prolific/ab-demo" for s in subs.values())
        # The secret was created once (creating another would replace the one other studies verify with).
        assert len(fake.calls("POST", "/hooks/secrets/")) == 1
        with session_scope(database_url) as s:
            rows = s.scalars(select(HookSubscription)).all()
            assert {r.status for r in rows} == {"confirmed"} and len(rows) == 3
            assert hooks.health(s, rows[0].study_id)["mode"] == "webhooks"
        tick(database_url, config.study, web.url)  # a later tick subscribes nothing more
        assert len(fake.calls("POST", "/hooks/subscriptions/")) == 3
        from hitkit.running.control import stop_study

        stop_study(database_url, config.study)
        tick(database_url, config.study, web.url)
        assert fake.hooks["subscriptions"] == {}  # ended when the study ended
        assert len(fake.calls("DELETE", r"/hooks/subscriptions/[0-9a-f]+/")) == 3
    finally:
        web.stop()


def test_every_event_twice_and_out_of_order_pays_each_participant_once_and_frees_each_place_once(
    tmp_path, database_url, fake, monkeypatch
):
    monkeypatch.setattr(provider_side, "RETURNS_EVERY_S", 1e9)  # no polling: only the webhooks can free places
    web, config, secret = hooked(tmp_path, database_url, fake)
    try:
        [sid] = fake.studies
        finished, given_back = [], []
        for i in range(4):
            session_id = fake.start_session(pid(f"w-{i}"), sid)
            assert take_and_submit(web.url, pid(f"w-{i}"), sid, session_id).status_code == 302
            fake.complete(session_id, code_of(config, secret))
            finished.append(session_id)
        for i, end in enumerate((fake.return_session, fake.time_out)):
            session_id = fake.start_session(pid(f"gone-{i}"), sid)
            assert (
                requests.get(
                    f"{web.url}/s/ab-demo/enter",
                    params={"PROLIFIC_PID": pid(f"gone-{i}"), "STUDY_ID": sid, "SESSION_ID": session_id},
                ).status_code
                == 200
            )
            end(session_id)
            given_back.append(session_id)
        events_sent = len(fake.outbox)
        answers = fake.deliver(twice=True, shuffle=7)
        assert answers == [200] * (2 * events_sent)
        assert len(queued(database_url)) == events_sent  # one row per X-Event-ID
        for _ in range(2):
            tick(database_url, config.study, web.url)
        answers = fake.deliver(twice=True, shuffle=8)  # the approvals' events, twice and shuffled too
        tick(database_url, config.study, web.url)
        with session_scope(database_url) as s:
            status = {a.provider_assignment_id: a.status for a in s.scalars(select(Assignment))}
            returned = [
                e.data["provider_assignment_id"]
                for e in s.scalars(select(Event).where(Event.kind == "assignment_returned"))
            ]
            rewards = Counter(p.assignment_id for p in s.scalars(select(Payment).where(Payment.kind == "reward")))
            assert s.scalar(select(func.count()).select_from(HookEvent).where(HookEvent.status != "done")) == 0
        assert sorted(returned) == sorted(given_back)  # each freed once, by the webhook (polling is off)
        assert all(status[x] == "returned" for x in given_back)
        assert all(status[x] == "approved" for x in finished)
        assert len(rewards) == 4 and set(rewards.values()) == {1}
        for session_id in finished:
            assert fake.submissions[session_id]["status"] == "APPROVED"
            assert len(fake.calls("POST", f"/submissions/{session_id}/transition/")) <= 1
        assert sync_study(database_url, config.study).mismatches == []
    finally:
        web.stop()


def deliver_by_hand(
    url: str,
    body: bytes,
    secret: str | None,
    stamp: str | None = None,
    signed_body: bytes | None = None,
    event_id: str = "evt-1",
) -> requests.Response:
    stamp = stamp or str(int(time.time()))
    headers = {"Content-Type": "application/json", "X-Event-ID": event_id, "X-Prolific-Request-Timestamp": stamp}
    if secret is not None:
        headers["X-Prolific-Request-Signature"] = sign(secret, stamp, signed_body if signed_body is not None else body)
    return requests.post(url, data=body, headers=headers)


def test_forged_unsigned_reserialised_and_stale_deliveries_are_refused_and_change_nothing(
    tmp_path, database_url, fake, monkeypatch
):
    monkeypatch.setattr(provider_side, "RETURNS_EVERY_S", 1e9)
    web, config, secret = hooked(tmp_path, database_url, fake)
    try:
        [sid] = fake.studies
        session_id = fake.start_session(pid("victim"), sid)
        requests.get(
            f"{web.url}/s/ab-demo/enter",
            params={"PROLIFIC_PID": pid("victim"), "STUDY_ID": sid, "SESSION_ID": session_id},
        )
        fake.outbox.clear()
        target = f"{web.url}/hooks/prolific/ab-demo"
        real = fake.hooks["secrets"][fake.workspace["id"]]["value"]
        event = {
            "resource_id": session_id,
            "event_type": "submission.status.change",
            "participant_id": pid("victim"),
            "status": "RETURNED",
        }
        body = json.dumps(event, separators=(",", ":")).encode()
        reserialised = json.dumps(json.loads(body), indent=2).encode()  # same JSON, other bytes
        cases = {
            "unsigned": deliver_by_hand(target, body, None),
            "forged": deliver_by_hand(target, body, "a-secret-hitkit-never-saw"),
            "re-serialised": deliver_by_hand(target, reserialised, real, signed_body=body),
            "stale": deliver_by_hand(target, body, real, stamp=str(int(time.time()) - 3600)),
            "future": deliver_by_hand(target, body, real, stamp=str(int(time.time()) + 3600)),
        }
        assert {k: r.status_code for k, r in cases.items()} == dict.fromkeys(cases, 401)
        assert queued(database_url) == []
        # A genuinely signed event that says RETURNED while Prolific shows the submission ACTIVE is only a hint:
        # hitkit asks the API, and the place stays taken.
        assert deliver_by_hand(target, body, real, event_id="evt-true").status_code == 200
        assert deliver_by_hand(target, body, real, event_id="evt-true").status_code == 200  # a replay: no new row
        tick(database_url, config.study, web.url)
        [row] = queued(database_url)
        assert row.status == "done" and row.outcome == "noted (ACTIVE)"
        with session_scope(database_url) as s:
            assert s.scalar(select(Assignment.status)) == "accepted"
            assert s.scalar(select(func.count()).select_from(Event).where(Event.kind == "assignment_returned")) == 0
    finally:
        web.stop()


def run_script(tmp_path, database_url, fake, name: str, lose: bool):
    """Three participants finish, one returns, one times out; the webhooks delivered twice or all lost."""
    (tmp_path / name).mkdir()
    web, config, secret = hooked(tmp_path / name, database_url, fake, study=name)
    try:
        sid = next(s for s, v in fake.studies.items() if v["internal_name"].startswith(f"hitkit:{name}:"))
        for i in range(3):
            session_id = fake.start_session(pid(f"{name}-{i}"), sid)
            assert take(web.url, name, pid(f"{name}-{i}"), sid, session_id).status_code == 302
            fake.complete(session_id, code_of(config, secret))
        for i, end in enumerate((fake.return_session, fake.time_out)):
            session_id = fake.start_session(pid(f"{name}-gone-{i}"), sid)
            requests.get(
                f"{web.url}/s/{name}/enter",
                params={"PROLIFIC_PID": pid(f"{name}-gone-{i}"), "STUDY_ID": sid, "SESSION_ID": session_id},
            )
            end(session_id)
        for _ in range(3):
            fake.deliver(twice=True, shuffle=3, lose=lose)
            tick(database_url, config.study, web.url)
        sync_study(database_url, config.study)
        with session_scope(database_url) as s:
            study_id = s.scalar(select(Study.id).where(Study.name == name))
            statuses = Counter(
                s.scalars(select(Assignment.status).join(Assignment.hit).where(Assignment.hit.has(study_id=study_id)))
            )
            paid = sorted(
                (p.kind, str(p.amount), p.status)
                for p in s.scalars(select(Payment).where(Payment.study_id == study_id))
            )
            health = hooks.health(s, study_id)
        return statuses, paid, health
    finally:
        web.stop()


def test_a_study_whose_webhooks_are_all_lost_ends_the_same_as_one_that_received_them(
    tmp_path, database_url, fake, monkeypatch
):
    monkeypatch.setattr(provider_side, "RETURNS_EVERY_S", 0)  # polling, the fallback, on every tick
    heard = run_script(tmp_path, database_url, fake, "heard", lose=False)
    lost = run_script(tmp_path, database_url, fake, "lost", lose=True)
    assert heard[0] == lost[0] == Counter({"approved": 3, "returned": 2})
    assert heard[1] == lost[1] and len(heard[1]) == 6  # three rewards and three fees, paid
    assert heard[2]["last_event_at"] is not None and lost[2]["last_event_at"] is None
    assert lost[2]["mode"] == "webhooks"  # subscribed, yet nothing came: polling carried the study


def test_a_study_without_a_public_address_polls_only_and_an_address_prolific_cannot_reach_is_refused(
    tmp_path, database_url, fake
):
    from hitkit.errors import ConfigError
    from hitkit.study.loading import load_study
    from tests.studies import pairwise_study

    web, config, secret = launch_on(tmp_path, database_url, fake)
    try:
        assert fake.calls("POST", "/hooks/subscriptions/") == []
        with session_scope(database_url) as s:
            assert hooks.health(s, s.scalar(select(Study.id)))["mode"] == "polling only"
    finally:
        web.stop()
    for bad, why in (
        ("http://hooks.example.org", "not an https:// address"),
        ("https://localhost:8443", "Prolific cannot reach"),
        ("https://10.0.0.7", "private address"),
    ):
        with pytest.raises(ConfigError, match=why):
            load_study(
                pairwise_study(
                    tmp_path,
                    database_url,
                    provider={
                        "kind": "prolific",
                        "currency": "GBP",
                        "prolific": {"api_url": fake.url, "estimated_minutes": 2, "webhook_url": bad},
                    },
                )
            )


def test_a_high_return_rate_pauses_posting_when_the_study_says_so(tmp_path, database_url, fake):
    web, config, secret = hooked(
        tmp_path,
        database_url,
        fake,
        provider={
            "prolific": {
                "webhook_url": PUBLIC,
                "on_high_return_rate": "pause",
                "api_url": fake.url,
                "estimated_minutes": 2,
            }
        },
    )
    try:
        [sid] = fake.studies
        fake.outbox.clear()
        fake.high_return_rate(sid)
        assert fake.deliver() == [200]
        tick(database_url, config.study, web.url)
        with session_scope(database_url) as s:
            assert s.scalar(select(Study.status)) == "paused"
            assert hooks.health(s, s.scalar(select(Study.id)))["high_return_rate"] is True
        assert fake.studies[sid]["status"] == "PAUSED"
    finally:
        web.stop()


def test_a_delivery_that_fails_is_retried_as_documented_and_queued_once(tmp_path, database_url, fake):
    web, config, secret = hooked(tmp_path, database_url, fake)
    try:
        [sid] = fake.studies
        fake.outbox.clear()
        attempts = []

        def flaky(url: str) -> str:  # the first two attempts find the server unreachable
            attempts.append(url)
            return "http://127.0.0.1:9/unreachable" if len(attempts) <= 2 else url.replace(PUBLIC, web.url)

        fake.route_hooks(flaky)
        fake.high_return_rate(sid)
        assert fake.deliver() == [200]
        assert [d["status"] for d in fake.hooks["sent"]] == [0, 0, 200]  # one event, three attempts
        assert len({d["event_id"] for d in fake.hooks["sent"]}) == 1
        assert len(queued(database_url)) == 1
    finally:
        web.stop()


def test_a_refused_subscription_leaves_the_study_polling_says_why_and_is_tried_again_later(
    tmp_path, database_url, fake, monkeypatch
):
    fake.fail_next(r"POST /hooks/subscriptions/", status=400)
    web, config, _ = hooked(tmp_path, database_url, fake)
    try:
        with session_scope(database_url) as s:
            health = hooks.health(s, s.scalar(select(Study.id)))
        assert health["failures"] == 1 and health["subscription_errors"][0].startswith("submission.status.change")
        tried = len(fake.calls("POST", "/hooks/subscriptions/"))
        tick(database_url, config.study, web.url)
        assert len(fake.calls("POST", "/hooks/subscriptions/")) == tried  # not on every tick
        monkeypatch.setattr(hooks, "RETRY_SUBSCRIBE_S", 0)
        tick(database_url, config.study, web.url)
        with session_scope(database_url) as s:
            assert {r.status for r in s.scalars(select(HookSubscription))} == {"confirmed"}
            assert hooks.health(s, s.scalar(select(Study.id)))["failures"] == 0
    finally:
        web.stop()
