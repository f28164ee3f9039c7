"""The dashboard's Prolific panel over real HTTP: webhook health ("polling only", last event, failures, a high
return rate), screen-out counts, and writing to participants, against the fake."""

from __future__ import annotations

import re

import pytest
import requests

from hitkit.providers.prolific import client as prolific_api
from hitkit.running.scheduler import tick
from tests.fakes.prolific import TOKEN, FakeProlificServer
from tests.test_prolific_webhooks import PUBLIC
from tests.test_provider_prolific import launch_on, pid

USER, PASSWORD = "coordinator", "correct horse battery"


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)
    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", PASSWORD)
    monkeypatch.delenv("HITKIT_DASHBOARD_PASSWORD_HASH", raising=False)


@pytest.fixture
def fake():
    with FakeProlificServer() as server:
        yield server
        assert server.violations == []


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]{32})"', html).group(1)


def coordinator(base: str) -> requests.Session:
    http = requests.Session()
    page = http.get(f"{base}/dashboard/login")
    assert (
        http.post(
            f"{base}/dashboard/login", data={"username": USER, "password": PASSWORD, "csrf": csrf_of(page.text)}
        ).status_code
        == 200
    )
    return http


def test_the_study_page_shows_polling_only_then_webhook_health_and_a_high_return_rate(tmp_path, database_url, fake):
    web, config, _ = launch_on(tmp_path, database_url, fake)
    try:
        page = coordinator(web.url).get(f"{web.url}/dashboard/study/ab-demo").text
        assert 'data-webhooks="polling only"' in page and "polling only" in page
    finally:
        web.stop()
    (tmp_path / "hooked").mkdir()
    web, config, _ = launch_on(
        tmp_path / "hooked", database_url, fake, study="hooked", prolific={"webhook_url": PUBLIC}
    )
    fake.route_hooks(lambda url: url.replace(PUBLIC, web.url))
    try:
        sid = next(s for s, v in fake.studies.items() if v["internal_name"].startswith("hitkit:hooked:"))
        fake.high_return_rate(sid)
        fake.deliver()
        tick(database_url, config.study, web.url)
        http = coordinator(web.url)
        page = http.get(f"{web.url}/dashboard/study/hooked").text
        assert 'data-webhooks="webhooks"' in page and "3 subscribed; last event 20" in page
        assert "0 failure(s)" in page and "Prolific reports a high return rate" in page
        live = http.get(f"{web.url}/dashboard/api/progress", params={"study": "hooked"}).json()["studies"][0]
        assert live["platform"]["webhooks"]["high_return_rate"] is True
        assert live["status"] == "running"  # on_high_return_rate: warn (the default) only warns
    finally:
        web.stop()


def test_screen_out_counts_show_and_the_coordinator_writes_from_the_dashboard(tmp_path, database_url, fake):
    from tests.test_screener import SCREENER

    web, config, _ = launch_on(tmp_path, database_url, fake, screener=SCREENER)
    try:
        [sid] = fake.studies
        session_id = fake.start_session(pid("out"), sid)
        worker = requests.Session()
        page = worker.get(
            f"{web.url}/s/ab-demo/enter", params={"PROLIFIC_PID": pid("out"), "STUDY_ID": sid, "SESSION_ID": session_id}
        )
        task = page.url.split("?")[0]
        assert worker.post(task + "screener", json={"answers": {"language": "no", "device": "computer"}}).json()[
            "screened_out"
        ]
        http = coordinator(web.url)
        page = http.get(f"{web.url}/dashboard/study/ab-demo").text
        assert 'data-screened-out="1"' in page and "1 of 5 slots (0.15 GBP)" in page
        assert re.search(r'data-live="workers">0<', page)  # a screened-out participant is not a worker
        workers = http.get(f"{web.url}/dashboard/study/ab-demo/workers").text
        sent = http.post(
            f"{web.url}/dashboard/study/ab-demo/message",
            data={"csrf": csrf_of(workers), "to": pid("out"), "text": "Sorry, and thank you!"},
        )
        assert sent.status_code == 200 and "message sent to 1 participant(s)" in sent.text
        assert fake.messages == [{"to": pid("out"), "body": "Sorry, and thank you!", "study_id": sid}]
        refused = http.post(f"{web.url}/dashboard/study/ab-demo/message", data={"text": "no csrf"})
        assert refused.status_code == 403 and len(fake.messages) == 1
    finally:
        web.stop()
