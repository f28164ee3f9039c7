"""The coordinator's pages on a 390 × 844 phone in chromium: no page scrolls sideways (a wide table scrolls
inside its card), the bonus amount is labelled, and `/` says what the server is and links to the dashboard."""

from __future__ import annotations

import pytest
import requests
from sqlalchemy import select

from hitkit.db.models import Conversation, Study
from hitkit.db.session import session_scope
from hitkit.study.stored import resolve_secret
from server.embedded import WebServer
from tests.browser import CHROMIUM_ARGS, artifact, chromium_path
from tests.studies import launch, pairwise_study
from tests.test_live_chat_study import bot_server, live_chat_study  # noqa: F401 - fixture

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser
USER, PASSWORD = "coordinator", "a long test password"

OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


def test_every_dashboard_page_fits_a_phone_and_the_bonus_amount_is_labelled(tmp_path, one_database_url, monkeypatch):
    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", PASSWORD)
    study_file = pairwise_study(tmp_path, one_database_url, pairwise={"votes_per_prompt": 1})
    launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=300)
    with session_scope(one_database_url) as s:
        name = s.scalar(select(Study.name))
        conversation = s.scalar(select(Conversation.id).limit(1))
    web = WebServer(one_database_url, "127.0.0.1", 0, 8, resolve_secret(one_database_url)).start()
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
            page.goto(f"{web.url}/dashboard/login")
            page.get_by_label("User name").fill(USER)
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.get_by_role("heading", name="Studies").wait_for()
            paths = [
                "/dashboard/",
                f"/dashboard/study/{name}",
                f"/dashboard/study/{name}/workers",
                f"/dashboard/study/{name}/conversations",
                f"/dashboard/study/{name}/systems/alpha",
                f"/dashboard/study/{name}/compare",
                "/dashboard/events",
                "/",
            ]
            if conversation is not None:
                paths.append(f"/dashboard/study/{name}/conversations/{conversation}")
            wide = {}
            for path in paths:
                response = page.goto(web.url + path)
                assert response.status == 200, path
                page.wait_for_load_state("networkidle")
                over = page.evaluate(OVERFLOW)
                if over > 0:
                    wide[path] = over
                    page.screenshot(path=str(artifact(f"phone-overflow-{len(wide)}.png")), full_page=True)
            assert wide == {}, f"pages wider than the phone (px too wide): {wide}"
            page.goto(f"{web.url}/dashboard/study/{name}/workers")
            page.screenshot(path=str(artifact("phone-workers.png")), full_page=True)
            amount = page.get_by_label("Bonus amount (USD)").first
            assert (
                amount.is_visible() and amount.input_value() == "" and amount.get_attribute("placeholder") in (None, "")
            )
            browser.close()
    finally:
        web.stop()


def test_the_root_page_says_what_the_server_is_and_links_to_the_dashboard(tmp_path, one_database_url):
    launch(
        pairwise_study(tmp_path, one_database_url, pairwise={"votes_per_prompt": 1}),
        yes=True,
        show_progress=False,
        echo=lambda _m: None,
        timeout_s=300,
        analyse=False,
    )
    web = WebServer(one_database_url, "127.0.0.1", 0, 8, resolve_secret(one_database_url)).start()
    try:
        root = requests.get(web.url + "/", timeout=10)
    finally:
        web.stop()
    assert root.status_code == 200 and 'href="/dashboard/"' in root.text
    assert "hitkit" in root.text and "worker pages" in root.text


def test_on_a_phone_the_chat_page_fits_and_next_chatbot_looks_disabled_until_it_works(
    tmp_path,
    one_database_url,
    bot_server,  # noqa: F811 - the fixture imported above
):
    from hitkit.study.loading import load_study
    from tests.browser import chromium_on

    config = load_study(live_chat_study(tmp_path, one_database_url, bot_server, hits=1, min_inputs=2))
    with chromium_on(one_database_url, config, height=844) as (url, page):
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{url}/s/chat-demo/hit/1?assignmentId=PH-1&hitId=h1&workerId=W-phone")
        page.get_by_role("button", name="I agree").click()
        page.locator("#topic-input").fill("cooking at home")
        page.get_by_label("I like it").check()
        page.get_by_role("button", name="Start chatting").click()
        next_bot = page.get_by_role("button", name="Next chatbot")
        looks = "b => [getComputedStyle(b).backgroundColor, getComputedStyle(b).cursor]"
        disabled_look = next_bot.evaluate(looks)
        for turn in range(2):
            page.locator("#message").fill(f"What do you like to cook, part {turn + 1}?")
            page.get_by_role("button", name="Send").click()
            page.locator("#messages li.bot").nth(turn).wait_for()
        assert next_bot.is_enabled()
        enabled_look = next_bot.evaluate(looks)
        assert disabled_look != enabled_look and disabled_look[1] == "not-allowed"
        assert page.evaluate(OVERFLOW) <= 0
        page.screenshot(path=str(artifact("phone-live-chat.png")), full_page=True)
