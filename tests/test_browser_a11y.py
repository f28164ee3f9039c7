"""Worker pages anyone can use: every page of every protocol's HIT passes axe-core's WCAG 2.2 AA audit
(no serious or critical violation), and each HIT is done from entry to the completion page with the
keyboard alone (Tab, Space, Enter, arrows, typing), the answers checked in the database."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from hitkit.db.models import Assignment, Response
from hitkit.db.session import session_scope
from tests.axe import assert_accessible, tab_to
from tests.browser import CHROMIUM_ARGS, chromium_path

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser


def open_page(p, width: int = 1000):
    browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    return browser, browser.new_page(viewport={"width": width, "height": 900})


def consent_by_keyboard(page, where: str) -> None:
    """The instructions page passes the audit, and Tab then Enter on "I agree" starts the task."""
    assert_accessible(page, f"{where} instructions and consent")
    tab_to(page, "#consent")
    page.keyboard.press("Enter")


def submit_by_keyboard(page, where: str, comment: str) -> None:
    """Type the optional comment, Tab to Submit, press Enter; the thank-you page passes the audit."""
    tab_to(page, "#hit-feedback")
    page.keyboard.type(comment)
    tab_to(page, "#submit")
    page.keyboard.press("Enter")
    page.get_by_text("your work is submitted").wait_for()
    assert_accessible(page, f"{where} thank-you page")


def stored(url: str, assignment: str) -> tuple[str, dict, str | None, list[int]]:
    """The assignment's status, its answers by (unit id, question), its comment and its units' order."""
    with session_scope(url) as s:
        a = s.scalar(select(Assignment).where(Assignment.provider_assignment_id == assignment))
        answers = {(r.unit_id, r.question): r.value for r in s.scalars(select(Response).where(
            Response.assignment_id == a.id, Response.source == "worker"))}
        return a.status, answers, a.feedback, (a.layout or {}).get("order", [])


# ---------------------------------------------------------------------------------------------- pairwise
from tests.test_worker_flow import live  # noqa: E402,F401 - the running pairwise study

# From an unanswered radio group: Space checks the focused first choice, ArrowRight the next, ArrowLeft wraps
# to the last.
PAIRWISE_KEYS = (("Space", "a"), ("ArrowRight", "tie"), ("ArrowLeft", "b"))


def test_a_pairwise_hit_is_done_by_keyboard_alone_and_every_page_passes_the_audit(live):  # noqa: F811
    base, url, _ = live
    expected = {}
    with playwright.sync_playwright() as p:
        browser, page = open_page(p)
        page.goto(f"{base}/s/ab-demo/hit/1?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1")
        assert_accessible(page, "pairwise preview")
        page.goto(f"{base}/s/ab-demo/hit/1?assignmentId=KEY-1&hitId=h1&workerId=W-keys")
        consent_by_keyboard(page, "pairwise")
        page.locator("fieldset.unit").first.wait_for()
        assert_accessible(page, "pairwise task")
        units = page.locator("fieldset.unit")
        for i in range(units.count()):
            unit = units.nth(i)
            if unit.locator("input[type=radio]").count() == 0:
                continue  # identical responses: recorded as a tie, nothing to answer
            token = unit.get_attribute("data-unit")
            key, value = PAIRWISE_KEYS[i % 3]
            tab_to(page, f'fieldset.unit[data-unit="{token}"] input[type=radio]')
            page.keyboard.press(key)
            unit.locator(".saved", has_text="saved").wait_for()
            assert unit.locator("input:checked").get_attribute("value") == value
            expected[i] = value
        assert_accessible(page, "pairwise task, every prompt answered")
        submit_by_keyboard(page, "pairwise", "All by keyboard.")
        # Another worker gives the HIT back with the keyboard: the page that says so passes too.
        page.goto(f"{base}/s/ab-demo/hit/1?assignmentId=KEY-2&hitId=h1&workerId=W-back")
        consent_by_keyboard(page, "pairwise (second worker)")
        page.locator("fieldset.unit").first.wait_for()
        tab_to(page, "#return")
        page.keyboard.press("Enter")
        page.get_by_text("You returned this HIT").wait_for()
        assert_accessible(page, "returned page")
        page.goto(f"{base}/s/ab-demo/hit/1?assignmentId=KEY-1&hitId=h1&workerId=W-someone-else")
        assert_accessible(page, f"the page {page.title()!r} a refused worker sees")
        browser.close()
    status, answers, feedback, _order = stored(url, "KEY-1")
    assert status == "submitted" and feedback == "All by keyboard."
    assert len(expected) >= 6 and set(expected.values()) == {"a", "tie", "b"}
    votes = [v for (_unit, question), v in answers.items() if question == "vote"]
    assert sorted(votes) == sorted(expected.values())  # one stored vote per key pressed, nothing else
    assert stored(url, "KEY-2")[0] == "returned"
