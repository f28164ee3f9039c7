"""One definition of progress: the console's status line, ``hitkit status --json`` and the dashboard show the same
answers saved, answers in submitted work and chat messages, read at the same moments of a running study."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from hitkit.cli import main
from hitkit.db.models import Study
from hitkit.db.session import session_scope
from hitkit.running.monitor import snapshot
from hitkit.running.scheduler import tick
from hitkit.simulation.crowd import SimulatedCrowd
from hitkit.study.counts import Counts, study_counts
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext, create_study, resolve_secret
from server.embedded import WebServer
from tests.browser import CHROMIUM_ARGS, chromium_path
from tests.studies import pairwise_study

USER, PASSWORD = "coordinator", "a long test password"
ANSWERS = re.compile(r"saved (\d+)/(\d+) \((\d+) in submitted work\)")


def test_every_surface_writes_the_counts_the_same_way():
    counts = Counts(saved=12, submitted=10, needed=40, chat_messages=30, chat_messages_needed=80)
    assert counts.answers_text() == "saved 12/40 (10 in submitted work)"
    assert counts.chat_text() == "30/80"
    assert counts.as_json()["answers_saved"] == 12 and Counts(1, 0, 2).chat_text() == ""


def _read(text: str) -> tuple[int, int, int]:
    match = ANSWERS.search(text)
    assert match, text
    saved, needed, submitted = (int(g) for g in match.groups())
    return saved, submitted, needed


@pytest.mark.browser
@pytest.mark.slow
def test_console_status_and_dashboard_count_the_same_answers_while_a_study_runs(
    tmp_path, one_database_url, monkeypatch
):
    playwright = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", PASSWORD)
    # Two workers taking 5 s an answer leave the database still for a few seconds at a time: a moment needs
    # two equal readings around a status command and a page load (with three workers at 0.6 s an answer a
    # loaded CI run found 2 such moments in 240 s and failed).
    study_file = pairwise_study(tmp_path, one_database_url, simulated={"seconds_per_answer": 5.0, "concurrency": 2})
    config = load_study(study_file)
    secret = resolve_secret(one_database_url)
    monkeypatch.setenv("HITKIT_SECRET", secret)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, config, study_file, secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(one_database_url, "127.0.0.1", 0, 8, secret).start()
    stop = threading.Event()

    def schedule():
        while not stop.is_set():
            tick(one_database_url, config.study, web.url)
            stop.wait(0.5)

    scheduler = threading.Thread(target=schedule, daemon=True)
    crowd = None

    def now() -> Counts:
        with session_scope(one_database_url) as s:
            return study_counts(s, StudyContext.load(s, config.study, secret))

    agreed: list[Counts] = []
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{web.url}/dashboard/")
            page.get_by_label("User name").fill(USER)
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.get_by_role("heading", name="Studies").wait_for()
            scheduler.start()
            crowd = SimulatedCrowd(one_database_url, ctx, web.url).start()
            deadline = time.monotonic() + 240
            # A moment is bracketed by two equal readings of the database; inside it every surface is read.
            while len({(c.saved, c.submitted) for c in agreed}) < 3 and time.monotonic() < deadline:
                before = now()
                with session_scope(one_database_url) as s:
                    console = snapshot(s, StudyContext.load(s, config.study, secret)).line(10)
                status = json.loads(CliRunner().invoke(main, ["status", str(study_file), "--json"]).output)
                page.goto(f"{web.url}/dashboard/study/{config.study}")
                dashboard = page.locator('.figures [data-live="answers"]').inner_text()
                if now() != before or not 0 < before.saved < before.needed:
                    continue
                assert _read(console) == (before.saved, before.submitted, before.needed)
                assert _read(dashboard) == (before.saved, before.submitted, before.needed)
                assert (status["answers_saved"], status["answers_submitted"], status["answers_needed"]) == (
                    before.saved,
                    before.submitted,
                    before.needed,
                )
                assert status["answers"] == before.answers_text()
                agreed.append(before)
            browser.close()
    finally:
        stop.set()
        if crowd is not None:
            crowd.stop()
        if scheduler.is_alive():
            scheduler.join(5)
        web.stop()
    # Several different moments, answers saved ahead of submitted work among them (a HIT still open).
    assert len({(c.saved, c.submitted) for c in agreed}) >= 3, agreed
    assert any(c.saved > c.submitted for c in agreed), agreed
    with session_scope(one_database_url) as s:
        assert s.scalar(select(Study.status)) in ("running", "completed")
