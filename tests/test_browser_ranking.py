"""A person ranks a whole ranking HIT in a real browser with the keyboard alone (Tab, arrow keys, Space,
Enter): each move is announced and saved, a reload keeps the order, and every page passes axe-core's
WCAG 2.2 AA audit (no serious or critical violation); the orders are checked in the database."""

from __future__ import annotations

import pytest

from hitkit.protocols.ranking.task import parse_order
from tests.axe import assert_accessible, tab_to
from tests.browser import artifact
from tests.studies import served
from tests.test_browser_a11y import consent_by_keyboard, open_page, stored, submit_by_keyboard
from tests.test_ranking import starter_study

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser


def test_a_ranking_hit_is_done_by_keyboard_alone_and_every_page_passes_the_audit(tmp_path, one_database_url):
    for base, config, _secret in served(starter_study(tmp_path, one_database_url), one_database_url):
        with playwright.sync_playwright() as p:
            browser, page = open_page(p)
            page.goto(f"{base}/s/{config.study}/hit/1?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1")
            assert_accessible(page, "ranking preview")
            assert "answer-" not in page.content() and page.locator("li.rank-item").count() == 0
            page.goto(f"{base}/s/{config.study}/hit/1?assignmentId=KEY-K&hitId=h1&workerId=W-keys")
            consent_by_keyboard(page, "ranking")
            units = page.locator("fieldset.unit")
            units.first.wait_for()
            assert_accessible(page, "ranking task")
            # Submit before any order is given: refused on the page.
            tab_to(page, "#submit", limit=150)
            page.keyboard.press("Enter")
            page.get_by_text("Please put every message's replies in order").wait_for()
            expected = {}
            for u in range(units.count()):
                unit = units.nth(u)
                items = unit.locator("li.rank-item")
                if u % 2:  # the last reply to the top by ArrowUp, announced
                    last = items.nth(items.count() - 1).get_attribute("data-label")
                    tab_to(page, f'fieldset[data-unit="{unit.get_attribute("data-unit")}"] li[data-label="{last}"]')
                    for _ in range(items.count() - 1):
                        page.keyboard.press("ArrowUp")
                    page.locator("#announce", has_text=f"Reply {last} moved to place 1").wait_for()
                else:  # the first reply down by its Move down button (Space), then level with the one above
                    first = items.nth(0).get_attribute("data-label")
                    tab_to(
                        page,
                        f'fieldset[data-unit="{unit.get_attribute("data-unit")}"] li[data-label="{first}"] button[data-step="1"]',
                    )
                    page.keyboard.press("Space")
                    tab_to(
                        page,
                        f'fieldset[data-unit="{unit.get_attribute("data-unit")}"] li[data-label="{first}"] input.tie',
                    )
                    page.keyboard.press("Space")
                unit.locator(".saved", has_text="saved").wait_for()
                labels = [items.nth(i).get_attribute("data-label") for i in range(items.count())]
                ties = [items.nth(i).locator("input.tie").is_checked() for i in range(items.count())]
                expected[unit.get_attribute("data-unit")] = "".join(
                    ("=" if tie else ">") + label if i else label for i, (label, tie) in enumerate(zip(labels, ties))
                )
            assert page.locator("#ranked").inner_text() == str(units.count())
            page.reload()  # what was saved survives
            first_unit = units.nth(0)
            first_unit.locator(".saved", has_text="saved").wait_for()
            assert_accessible(page, "ranking task, every order given")
            page.screenshot(path=str(artifact("ranking-task.png")), full_page=True)
            tab_to(page, "#hit-feedback", limit=150)  # past every reply's controls
            submit_by_keyboard(page, "ranking", "Ordered by keys.")
            browser.close()
    status, answers, feedback, _order = stored(one_database_url, "KEY-K")
    assert status == "submitted" and feedback == "Ordered by keys."
    given = sorted(v for (_unit, question), v in answers.items() if question == "order")
    assert given == sorted(expected.values()) and len(given) == 4
    assert any("=" in v for v in given) and all(parse_order(v, len(v.replace("=", ">").split(">"))) for v in given)
