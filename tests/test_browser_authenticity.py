"""Chromium captures how chat messages are entered: a pasted message is stored with its paste, a typed
one with its keystrokes and intervals, and with ``authenticity.block_paste`` a paste inserts nothing."""

from __future__ import annotations

import pytest
import yaml
from sqlalchemy import select

from hitkit.db.models import Response, Study, Turn
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from server.embedded import WebServer
from tests.browser import CHROMIUM_ARGS, chromium_path
from tests.test_live_chat_study import bot_server, live_chat_study  # noqa: F401 - fixture

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

PASTED = "That's a fascinating question! Many people find that exploring new hobbies is rewarding."
TYPED = "I like walking by the sea"


def _chat_page(p, url: str, worker: str):
    browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    context = browser.new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
    page = context.new_page()
    page.goto(f"{url}/s/chat-demo/hit/1?assignmentId={worker}-1&hitId=h1&workerId={worker}")
    page.get_by_role("button", name="I agree").click()
    # The topic step shows once the page has loaded its state (which fills the topic field): type after.
    page.locator("#step-topic").wait_for()
    page.locator("#topic-input").press_sequentially("the sea", delay=40)
    page.get_by_label("I like it").check()
    page.get_by_role("button", name="Start chatting").click()
    page.locator(".topic-bar", has_text="the sea").wait_for()
    page.locator("#message").wait_for()
    return browser, page


def _paste(page, text: str) -> None:
    """Put ``text`` on the clipboard and paste it into the chat input with the keyboard, as a person does."""
    page.evaluate("text => navigator.clipboard.writeText(text)", text)
    page.locator("#message").focus()
    page.keyboard.press("Control+V")


def _serve(tmp_path, one_database_url, bot_url, **authenticity):
    path = live_chat_study(tmp_path, one_database_url, bot_url, hits=1, min_inputs=2)
    if authenticity:
        data = yaml.safe_load(path.read_text())
        data["authenticity"] = authenticity
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_study(path)
    secret = resolve_secret(one_database_url)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, config, None, secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(one_database_url, "127.0.0.1", 0, 8, secret).start()
    tick(one_database_url, config.study, web.url)
    return web


def test_chromium_reports_a_paste_and_typing_with_the_message(tmp_path, one_database_url, bot_server):  # noqa: F811
    web = _serve(tmp_path, one_database_url, bot_server)
    try:
        with playwright.sync_playwright() as p:
            browser, page = _chat_page(p, web.url, "W-paste")
            assert page.locator("#own-words").is_visible()  # authenticity.show_instruction, on by default
            _paste(page, PASTED)
            assert page.locator("#message").input_value() == PASTED
            page.get_by_role("button", name="Send").click()
            page.locator("#messages li.bot").nth(0).wait_for()
            page.locator("#message").press_sequentially(TYPED, delay=60)
            page.get_by_role("button", name="Send").click()
            page.locator("#messages li.bot").nth(1).wait_for()
            browser.close()
    finally:
        web.stop()
    with session_scope(one_database_url) as s:
        pasted, typed = [
            t.signals for t in s.scalars(select(Turn).where(Turn.speaker == "worker").order_by(Turn.index))
        ]
        topic = s.scalar(select(Response.signals).where(Response.question == "topic"))
    assert pasted["pastes"] == 1 and pasted["pasted_chars"] == len(PASTED)
    assert pasted["typed_chars"] == 0 and pasted["keys"] == 0
    assert typed["pastes"] == 0 and typed["typed_chars"] == len(TYPED) and typed["keys"] == len(TYPED)
    assert typed["iki_median_ms"] >= 40 and typed["compose_ms"] >= 40 * (len(TYPED) - 1)
    assert topic["typed_chars"] == len("the sea")
    # Nothing but counts and timings is stored: no text of the keys beyond the message itself.
    assert set(pasted) <= {
        "keys",
        "typed_chars",
        "composed_chars",
        "pasted_chars",
        "pastes",
        "deletes",
        "iki_median_ms",
        "iki_iqr_ms",
        "compose_ms",
        "blurs",
    }


def test_with_block_paste_a_paste_inserts_nothing_but_is_counted(tmp_path, one_database_url, bot_server):  # noqa: F811
    web = _serve(tmp_path, one_database_url, bot_server, block_paste=True)
    try:
        with playwright.sync_playwright() as p:
            browser, page = _chat_page(p, web.url, "W-blocked")
            assert "pasting is turned off" in page.locator("#own-words").inner_text()
            _paste(page, PASTED)
            assert page.locator("#message").input_value() == ""
            page.locator("#message").press_sequentially(TYPED, delay=20)
            page.get_by_role("button", name="Send").click()
            page.locator("#messages li.bot").nth(0).wait_for()
            browser.close()
    finally:
        web.stop()
    with session_scope(one_database_url) as s:
        stored = s.scalar(select(Turn).where(Turn.speaker == "worker"))
        assert stored.text == TYPED
        assert stored.signals["pastes"] == 1 and stored.signals["pasted_chars"] == 0
