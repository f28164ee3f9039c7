"""A coordinator in chromium: logs in, watches a simulated study progress without reloading, opens a
conversation, and pays a worker a bonus; screenshots go to test-artifacts/dashboard-*.png."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from sqlalchemy import func, select

from hitkit.db.models import Event, Payment, Study
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.simulation.crowd import SimulatedCrowd
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from server.embedded import WebServer
from tests.browser import CHROMIUM_ARGS, artifact, chromium_path
from tests.studies import pairwise_study

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser
USER, PASSWORD = "coordinator", "a long test password"


def _schedule(one_database_url: str, study: str, base_url: str, stop: threading.Event) -> None:
    while not stop.is_set():
        tick(one_database_url, study, base_url)
        stop.wait(0.5)


def test_a_coordinator_watches_a_study_opens_a_conversation_and_pays_a_bonus(tmp_path, one_database_url, monkeypatch):
    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", PASSWORD)
    # Slow workers, so the coordinator sees the figures move.
    config = load_study(
        pairwise_study(tmp_path, one_database_url, simulated={"seconds_per_answer": 0.25, "concurrency": 4})
    )
    secret = resolve_secret(one_database_url)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, config, None, secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(one_database_url, "127.0.0.1", 0, 8, secret).start()
    stop = threading.Event()
    scheduler = threading.Thread(target=_schedule, args=(one_database_url, config.study, web.url, stop), daemon=True)
    crowd = None
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            # Script errors and CSP violations; refused logins and the missing favicon are expected.
            page.on(
                "console",
                lambda m: (
                    errors.append(m.text)
                    if m.type == "error" and not m.text.startswith("Failed to load resource")
                    else None
                ),
            )

            page.goto(f"{web.url}/dashboard/")
            page.get_by_label("User name").fill(USER)
            page.get_by_label("Password").fill("not the password")
            page.get_by_role("button", name="Log in").click()
            page.get_by_text("wrong user name or password").wait_for()
            page.get_by_label("User name").fill(USER)
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.get_by_role("heading", name="Studies").wait_for()

            # The study page, then the crowd starts: the counts rise while the page stays loaded.
            page.get_by_role("link", name=config.study).click()
            page.locator("#live-status", has_text="updated").wait_for()
            page.evaluate("window.__notReloaded = true")
            answers = page.locator('.figures [data-live="answers"]')
            assert answers.inner_text().startswith("saved 0/")
            scheduler.start()
            crowd = SimulatedCrowd(one_database_url, ctx, web.url).start()
            page.wait_for_function(
                "() => parseInt(document.querySelector('.figures [data-live=\"answers\"]').textContent.slice(6)) >= 40",
                timeout=60_000,
            )
            assert page.evaluate("window.__notReloaded === true")
            assert int(page.locator('[data-system="alpha"] [data-live="answers"]').inner_text()) > 0
            page.locator("tbody[data-live-events]", has_text="a worker submitted work").wait_for()
            page.screenshot(path=str(artifact("dashboard-study.png")), full_page=True)
            page.wait_for_function(
                "() => document.querySelector('[data-live=\"status\"]').textContent === 'completed'", timeout=90_000
            )
            assert page.evaluate("window.__notReloaded === true")
            assert (
                page.locator('.figures [data-live="answers"]').inner_text() == "saved 270/270 (270 in submitted work)"
            )
            page.screenshot(path=str(artifact("dashboard-study-completed.png")), full_page=True)

            page.get_by_role("link", name="Studies").click()
            page.screenshot(path=str(artifact("dashboard-overview.png")), full_page=True)

            # A conversation with its votes.
            page.get_by_role("link", name=config.study).click()
            page.get_by_role("link", name="Conversations").click()
            page.locator("table.grid tbody a").first.click()
            page.get_by_role("heading", name="Votes").wait_for()
            assert page.locator(".turn").count() == 4  # the prompt and three responses
            assert page.locator(".answers").count() >= 3
            page.screenshot(path=str(artifact("dashboard-conversation.png")), full_page=True)

            page.get_by_role("link", name="Side by side").click()
            page.locator(".compare-row").first.wait_for()
            page.screenshot(path=str(artifact("dashboard-compare.png")), full_page=False)
            page.goto(f"{web.url}/dashboard/study/{config.study}/systems/alpha")
            page.screenshot(path=str(artifact("dashboard-system.png")), full_page=True)

            # A bonus for one worker.
            page.get_by_role("link", name="Workers").click()
            row = page.locator('tr[data-worker="sim-diligent-000"]')
            row.get_by_label("Bonus amount (USD) for sim-diligent-000").fill("0.75")
            row.get_by_label("Bonus reason for sim-diligent-000").fill("careful votes")
            row.get_by_role("button", name="Bonus").click()
            page.get_by_text("bonus of 0.75 USD paid to sim-diligent-000").wait_for()
            assert "bonus 0.75" in page.locator('tr[data-worker="sim-diligent-000"]').inner_text()
            page.screenshot(path=str(artifact("dashboard-workers.png")), full_page=True)

            page.get_by_role("link", name="Event log").click()
            page.get_by_text("bonus paid", exact=True).first.wait_for()
            page.screenshot(path=str(artifact("dashboard-events.png")), full_page=False)
            assert errors == []
            browser.close()
    finally:
        stop.set()
        if crowd is not None:
            crowd.stop()
        if scheduler.is_alive():
            scheduler.join(5)
        web.stop()
    with session_scope(one_database_url) as s:
        bonus = s.scalars(select(Payment).where(Payment.kind == "bonus")).one()
        assert bonus.amount == Decimal("0.75") and bonus.status == "paid"
        assert (
            s.scalar(
                select(func.count()).select_from(Event).where(Event.kind == "bonus_paid", Event.actor == "dashboard")
            )
            == 1
        )
