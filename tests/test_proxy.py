"""Behind the shipped reverse proxy (ops/nginx/hitkit.conf with ops/systemd/env.example), limits key on
the real client's address: one client cannot lock the coordinator out of the dashboard login nor
throttle every worker's arrival. Real HTTP through a forwarding proxy to the embedded server, clients
on distinct loopback addresses."""

from __future__ import annotations

import re

import pytest

from hitkit.db.models import Study
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from server.embedded import WebServer
from tests.proxy import Client, ForwardingProxy
from tests.studies import REPO, pairwise_study

USER, PASSWORD = "coordinator", "correct horse battery"


def shipped_env() -> dict[str, str]:
    lines = (REPO / "ops/systemd/env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def test_the_recipes_agree_on_one_proxy_hop():
    nginx = (REPO / "ops/nginx/hitkit.conf").read_text()
    assert shipped_env()["HITKIT_PROXY_HOPS"] == "1"
    assert len(re.findall(r"^\s*proxy_pass ", nginx, re.MULTILINE)) == 1  # one proxy between client and app
    assert re.search(r"proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;", nginx)
    assert "127.0.0.1:8000" in nginx  # gunicorn binds loopback only: no client reaches it around nginx


@pytest.fixture
def behind_proxy(tmp_path, database_url, monkeypatch, request):
    """The example study served by the embedded server behind the forwarding proxy; the proxy's port."""
    hops = getattr(request, "param", shipped_env()["HITKIT_PROXY_HOPS"])
    monkeypatch.setenv("HITKIT_PROXY_HOPS", hops)
    monkeypatch.setenv("HITKIT_ENTRY_RATE_LIMIT", "0.2/5")
    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", PASSWORD)
    monkeypatch.delenv("HITKIT_DASHBOARD_PASSWORD_HASH", raising=False)
    config = load_study(pairwise_study(tmp_path, database_url))
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, None, secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    tick(database_url, config.study, web.url)
    try:
        with ForwardingProxy(int(web.url.rsplit(":", 1)[1])) as proxy:
            yield proxy.port
    finally:
        web.stop()


def try_login(client: Client, password: str, headers: dict | None = None) -> int:
    _, _, page = client.request("GET", "/dashboard/login", headers=headers)
    csrf = re.search(r'name="csrf" value="([0-9a-f]{32})"', page).group(1)
    status, _, _ = client.request(
        "POST", "/dashboard/login", headers=headers, form={"username": USER, "password": password, "csrf": csrf}
    )
    return status


def test_a_password_guesser_behind_the_proxy_does_not_lock_the_coordinator_out(behind_proxy):
    guesser, coordinator = Client(behind_proxy, "127.0.0.2"), Client(behind_proxy, "127.0.0.3")
    guesses = [try_login(guesser, f"guess {i}") for i in range(8)]
    assert guesses[:5] == [401] * 5 and guesses[-1] == 429
    # Claiming the coordinator's address in its own header does not help: the proxy appends the real one.
    assert try_login(guesser, "guess 9", {"X-Forwarded-For": "127.0.0.3"}) == 429
    assert try_login(coordinator, PASSWORD) == 302
    status, _, page = coordinator.request("GET", "/dashboard/")
    assert status == 200 and "ab-demo" in page


def test_one_client_flooding_arrivals_behind_the_proxy_does_not_throttle_other_workers(behind_proxy):
    flooder = Client(behind_proxy, "127.0.0.4")
    codes = [flooder.request("GET", "/s/ab-demo/hit/1?hitId=h1")[0] for _ in range(8)]
    assert codes[:5] == [200] * 5 and codes[-1] == 429
    for i, ip in enumerate(("127.0.0.5", "127.0.0.6", "127.0.0.7")):
        status, headers, _ = Client(behind_proxy, ip).request(
            "GET", f"/s/ab-demo/hit/1?workerId=W-proxy-{i}&assignmentId=A-proxy-{i}&hitId=h1"
        )
        assert status == 302 and "/a/ab-demo/" in headers["location"], status


@pytest.mark.parametrize("behind_proxy", ["0"], indirect=True)
def test_without_the_proxy_hop_setting_every_client_shares_the_proxys_bucket(behind_proxy):
    """The control: what the shipped env.example now prevents (every client looks like the proxy)."""
    guesser, coordinator = Client(behind_proxy, "127.0.0.2"), Client(behind_proxy, "127.0.0.3")
    assert [try_login(guesser, f"guess {i}") for i in range(6)][-1] == 429
    assert try_login(coordinator, PASSWORD) == 429
