"""A person answers the screener in a real browser (Debian's chromium): passing leads to the instructions
and consent; failing ends on the screened-out page, with the place freed and the screen-out paid once."""

from __future__ import annotations

from decimal import Decimal

import pytest
from sqlalchemy import select

from hitkit.db.models import Assignment, Payment
from hitkit.db.session import session_scope
from tests.browser import CHROMIUM_ARGS, artifact, chromium_path
from tests.studies import pairwise_study, served
from tests.test_screener import SCREENER

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser


def test_the_screener_is_answered_in_chromium_before_consent_and_a_failure_ends_on_its_own_page(
    tmp_path, one_database_url
):
    study_file = pairwise_study(tmp_path, one_database_url, screener=SCREENER)
    for base, config, _secret in served(study_file, one_database_url):
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.goto(f"{base}/s/{config.study}/hit/1?assignmentId=B-PASS&hitId=h1&workerId=W-pass")
            assert page.get_by_text("Do you read English fluently?").is_visible()
            assert page.get_by_role("button", name="I agree").count() == 0  # no consent before the screener
            page.get_by_label("yes").check()
            page.get_by_label("computer").check()
            page.get_by_role("button", name="Continue").click()
            assert page.get_by_role("button", name="I agree").is_visible()

            page.goto(f"{base}/s/{config.study}/hit/1?assignmentId=B-OUT&hitId=h1&workerId=W-out")
            page.get_by_label("yes").check()
            page.get_by_label("phone").check()
            page.get_by_role("button", name="Continue").click()
            assert page.get_by_text("this study is not a match for you").is_visible()
            page.screenshot(path=str(artifact("screener-screened-out.png")))
            browser.close()
    with session_scope(one_database_url) as s:
        status = {a.worker.external_id: a.status for a in s.scalars(select(Assignment))}
        assert status == {"W-pass": "accepted", "W-out": "screened_out"}
        assert [(p.kind, p.amount) for p in s.scalars(select(Payment))] == [("screen_out", Decimal("0.15"))]
