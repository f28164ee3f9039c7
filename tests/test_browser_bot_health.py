"""A coordinator sees a failing bot on the dashboard: one system's endpoint is down, simulated workers
chat through the real pages, their messages to it stay unanswered, and the study page says which bot
fails and why. Screenshot: test-artifacts/dashboard-failing-bot.png."""

from __future__ import annotations

import socket
import threading
import time

import pytest
import yaml
from sqlalchemy import select

from hitkit import dashboard as dash
from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.db.models import Conversation, Study
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.simulation.crowd import SimulatedCrowd
from hitkit.study.config import load_study
from hitkit.study.stored import create_study, resolve_secret
from server.embedded import WebServer
from tests.browser import CHROMIUM_ARGS, artifact, chromium_path

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser
USER, PASSWORD = "coordinator", "a long test password"


def _dead_url() -> str:
    """An address nothing listens on (the port is bound, read and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _schedule(one_database_url: str, study: str, base_url: str, stop: threading.Event) -> None:
    while not stop.is_set():
        tick(one_database_url, study, base_url)
        stop.wait(0.5)


def test_the_dashboard_shows_which_bot_is_failing(tmp_path, one_database_url, monkeypatch):
    executable = chromium_path()  # skip (or fail under CI) before starting anything
    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", PASSWORD)
    # A test cannot wait the real 30 s; 5 s leaves a working bot room to answer on a loaded machine.
    monkeypatch.setattr(dash, "OWED_FAILING_S", 5.0)
    bots = BotServer(build_backends(degraded=[DegradedSpec("anna"), DegradedSpec("qc")], seed=1), port=0).start()
    dead = _dead_url()
    options = {"max_tokens": 12, "timeout_s": 2, "retries": 0}
    # the working bot gets time to answer on a loaded machine (in one CI run its 2 s ran out, and it was
    # rightly listed as failing); the dead one fails at once whatever its timeout
    working = {**options, "timeout_s": 30}
    data = {
        "study": "bot-health",
        "task": "live_chat",
        "seed": 3,
        "budget": "50.00",
        "out": str(tmp_path / "runs"),
        "database": one_database_url,
        "systems": [
            {"name": "anna", "url": bots.url, "model": "anna", "options": working},
            {"name": "bert", "url": dead, "model": "bert", "options": options},
            {"name": "qc", "url": bots.url, "model": "qc", "options": working},
        ],
        "live_chat": {"hits": 2, "min_inputs": 2, "slots_per_hit": 3},
        "schedule": {"per_worker_cap": 1, "interval_s": 0.5},
        "simulated": {"workers": [{"profile": "diligent", "count": 2}], "concurrency": 2},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_study(path)
    secret = resolve_secret(one_database_url)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, config, path, secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(one_database_url, "127.0.0.1", 0, 8, secret).start()
    stop = threading.Event()
    scheduler = threading.Thread(target=_schedule, args=(one_database_url, config.study, web.url, stop), daemon=True)
    scheduler.start()
    crowd = SimulatedCrowd(one_database_url, ctx, web.url, timeout_s=10).start()
    try:
        # Wait (in the database) until a worker's message to bert is stored and its reply owed.
        deadline = time.monotonic() + 120
        owed = None
        while time.monotonic() < deadline and owed is None:
            with session_scope(one_database_url) as s:
                for conv in s.scalars(select(Conversation).where(Conversation.study_id == ctx.study_id)):
                    if (conv.meta or {}).get("system") == "bert" and conv.turns and conv.turns[-1].speaker == "worker":
                        owed = conv.id
            time.sleep(0.5)
        assert owed is not None, "no message to the dead bot was stored"
        time.sleep(5.5)
        with session_scope(one_database_url) as s:
            health = dash.bot_health(s, ctx)
        assert "bert" in health["failing"] and "anna" not in health["failing"]
        assert "bert (" in health["summary"] and "owed" in health["summary"]

        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{web.url}/dashboard/study/{config.study}")
            page.get_by_label("User name").fill(USER)
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.get_by_role("heading", name="Bots").wait_for()
            row = page.locator('tr[data-bot="bert"]')
            assert row.locator("td").first.inner_text() == "failing"
            assert "owed" in row.inner_text()
            assert page.locator('tr[data-bot="anna"] td').first.inner_text() == "ok"
            assert "bots failing: bert" in page.locator('.figures [data-live="bots"]').inner_text()
            page.screenshot(path=str(artifact("dashboard-failing-bot.png")), full_page=True)
            # The unanswered chat is listed with its system, not a dash.
            page.goto(f"{web.url}/dashboard/study/{config.study}/conversations?system=bert")
            listing = page.locator("table").inner_text()
            assert "bert" in listing
            browser.close()
    finally:
        crowd.stop(join_timeout=2)
        stop.set()
        scheduler.join(5)
        web.stop()
        bots.shutdown()
