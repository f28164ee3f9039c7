"""A person rates a whole Direct Assessment HIT in a real browser: the preview shows no unit ids, every
slider saves when let go, Submit waits until each slider has been moved, a reload keeps the ratings."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Response
from hitkit.db.session import session_scope
from tests.browser import CHROMIUM_ARGS, artifact, chromium_path
from tests.studies import served
from tests.test_rating import rating_study

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser


@pytest.fixture
def live_rating(tmp_path, one_database_url):
    """The example rating study with its first wave posted, its pages served on loopback."""
    for url, config, _secret in served(rating_study(tmp_path, one_database_url), one_database_url):
        yield url, one_database_url, config


def test_a_worker_rates_every_response_in_chromium_and_submit_waits_for_every_slider(live_rating):
    base, url, config = live_rating
    criteria = len(config.rating.criteria)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        page.goto(f"{base}/s/{config.study}/hit/1?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1")
        assert page.get_by_text("Preview").is_visible()
        assert page.locator("input[type=range]").count() == 0 and "answer-" not in page.content()
        page.goto(f"{base}/s/{config.study}/hit/1?assignmentId=BROWSER-R1&hitId=h1&workerId=W-rater")
        page.get_by_role("button", name="I agree").click()
        units = page.locator("fieldset.unit")
        n = units.count()
        assert n == config.rating.items_per_hit + config.rating.degraded_per_hit
        assert page.locator("input[type=range]").count() == n * criteria
        # Submit before every slider has been moved: refused on the page, nothing handed in.
        first = units.nth(0).locator("input[type=range]")
        for i in range(criteria):
            first.nth(i).fill(str(20 + 10 * i))
        units.nth(0).locator(".saved", has_text="saved").wait_for()
        page.get_by_role("button", name="Submit").click()
        page.get_by_text("Please move every slider").wait_for()
        page.reload()  # what was saved survives
        assert [first.nth(i).input_value() for i in range(criteria)] == [str(20 + 10 * i) for i in range(criteria)]
        for u in range(1, n):
            sliders = units.nth(u).locator("input[type=range]")
            for i in range(criteria):
                sliders.nth(i).fill(str((u * 13 + i * 7) % 101))
            units.nth(u).locator(".saved", has_text="saved").wait_for()
        assert page.locator("#rated").inner_text() == str(n)
        page.screenshot(path=str(artifact("rating-task.png")), full_page=True)
        page.get_by_role("button", name="Submit").click()
        page.get_by_text("your work is submitted").wait_for()
        browser.close()
    with session_scope(url) as s:
        assert (
            s.scalar(select(Assignment.status).where(Assignment.provider_assignment_id == "BROWSER-R1")) == "submitted"
        )
        assert s.scalar(select(func.count()).select_from(Response)) == n * criteria
