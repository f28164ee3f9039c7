"""A person does a whole A/B HIT in a real browser: consent, click, reload, comment (its typing watched), submit."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Response
from hitkit.db.session import session_scope
from tests.browser import CHROMIUM_ARGS, artifact, chromium_path
from tests.test_worker_flow import live_one  # noqa: F401 - the running pairwise study, on one store

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser


def test_a_worker_labels_a_whole_ab_hit_in_chromium_and_a_reload_keeps_answers(live_one):  # noqa: F811
    base, url, _ = live_one
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        # The preview a crowd site frames before the worker accepts.
        page.goto(f"{base}/s/ab-demo/hit/1?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1")
        assert page.get_by_text("Preview").is_visible()
        assert page.locator("input[type=radio]:enabled").count() == 0
        page.goto(f"{base}/s/ab-demo/hit/1?assignmentId=BROWSER-1&hitId=h1&workerId=W-browser")
        page.get_by_role("button", name="I agree").click()
        units = page.locator("fieldset.unit")
        n = units.count()
        assert n == 10
        choices = ["A is better", "Tie", "B is better"]
        for i in range(n // 2):
            units.nth(i).get_by_label(choices[i % 3]).check()
            units.nth(i).locator(".saved", has_text="saved").wait_for()
        given = page.locator("input[type=radio]:checked").count()
        assert given >= 1
        page.reload()  # answers given so far survive a reload
        assert page.locator("input[type=radio]:checked").count() == given
        for i in range(n):
            unit = units.nth(i)
            if unit.locator(".note").count() == 0 and unit.locator("input:checked").count() == 0:
                unit.get_by_label(choices[i % 3]).check()
                unit.locator(".saved", has_text="saved").wait_for()
        assert page.locator("#answered").inner_text() == str(n)
        page.screenshot(path=str(artifact("pairwise-task.png")), full_page=True)
        page.locator("#hit-feedback").press_sequentially("Clear instructions, thanks.", delay=20)
        page.get_by_role("button", name="Submit").click()
        page.get_by_text("your work is submitted").wait_for()
        browser.close()
    with session_scope(url) as s:
        assert s.scalar(select(Assignment.status)) == "submitted"
        assert s.scalar(select(Assignment.feedback)) == "Clear instructions, thanks."
        # The comment box is watched as live chat's fields are: typed key by key, nothing pasted.
        signals = s.scalar(select(Assignment.feedback_signals))
        assert signals["keys"] == signals["typed_chars"] == len("Clear instructions, thanks.")
        assert signals["pasted_chars"] == signals["pastes"] == 0 and signals["compose_ms"] > 0
        assert s.scalar(select(func.count()).select_from(Response)) == n
