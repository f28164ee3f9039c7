"""A person does a whole live-chat HIT in chromium: six bots, each topic → ten turns → sliders."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Conversation, Response, Turn
from hitkit.db.session import session_scope
from hitkit.study.loading import load_study
from tests.browser import artifact, chromium_on
from tests.test_live_chat_study import REAL, bot_server, live_chat_study  # noqa: F401 - fixture

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser


def test_a_worker_completes_a_live_chat_hit_in_chromium(tmp_path, one_database_url, bot_server):  # noqa: F811
    config = load_study(live_chat_study(tmp_path, one_database_url, bot_server, hits=1, min_inputs=10))
    with chromium_on(one_database_url, config) as (url, page):
        page.goto(f"{url}/s/chat-demo/hit/1?assignmentId=LC-1&hitId=h1&workerId=W-person")
        page.get_by_role("button", name="I agree").click()
        for bot in range(6):
            page.locator("#topic-input").fill(f"my favourite walks, part {bot + 1}")
            page.get_by_label("I like it").check()
            page.get_by_role("button", name="Start chatting").click()
            # The chosen topic stays on screen throughout the chat.
            page.locator(".topic-bar", has_text=f"my favourite walks, part {bot + 1}").wait_for()
            next_bot = page.get_by_role("button", name="Next chatbot")
            for turn in range(10):
                assert next_bot.is_disabled()
                page.locator("#message").fill(f"Message {turn + 1}: do you like walking by the sea?")
                page.get_by_role("button", name="Send").click()
                page.locator("#messages li.bot").nth(turn).wait_for()
                if bot == 0 and turn == 4:
                    page.get_by_role("button", name="Topic").click()
                    page.locator("#new-topic").fill("mountains")
                    page.get_by_role("button", name="The chatbot changed the topic").click()
                    page.reload()  # a reload resumes the same conversation
                    page.locator("#messages li.bot").nth(turn).wait_for()
            assert page.locator("#inputs").inner_text() == "10"
            if bot == 0:
                page.screenshot(path=str(artifact("live-chat-chat.png")), full_page=True)
            next_bot.click()
            sliders = page.locator("#sliders input[type=range]")
            assert sliders.count() == 7
            for i in range(7):
                sliders.nth(i).focus()
                for _ in range(bot + i % 3 + 1):
                    page.keyboard.press("ArrowRight")
            if bot == 0:
                page.locator("#feedback").fill("It kept changing the subject.")
                page.screenshot(path=str(artifact("live-chat-rating.png")), full_page=True)
            page.get_by_role("button", name="Save ratings and continue").click()
        page.get_by_role("button", name="Submit").click()
        page.get_by_text("your work is submitted").wait_for()
    with session_scope(one_database_url) as s:
        assert s.scalar(select(Assignment.status)) == "submitted"
        assert s.scalar(select(func.count()).select_from(Response).where(Response.question.like("score_%"))) == 42
        assert s.scalar(select(func.count()).select_from(Conversation)) == 6
        assert s.scalar(select(func.count()).select_from(Turn).where(Turn.speaker == "worker")) == 60
        assert s.scalar(select(func.count()).select_from(Turn).where(Turn.speaker == "bot")) == 60
        changes = [c.meta["topic_changes"] for c in s.scalars(select(Conversation)) if c.meta["topic_changes"]]
        assert changes and changes[0][0]["by"] == "bot" and changes[0][0]["topic"] == "mountains"
        assert changes[0][0]["at_turn"] == 10
        assert (
            s.scalar(select(Response.value).where(Response.question == "feedback")) == "It kept changing the subject."
        )


def test_with_a_judge_an_unrated_chat_ends_with_next_chatbot_alone_in_chromium(tmp_path, one_database_url, bot_server):  # noqa: F811
    import yaml

    from hitkit.db.models import Unit

    path = live_chat_study(tmp_path, one_database_url, bot_server, hits=10, min_inputs=2)
    data = yaml.safe_load(path.read_text())
    data["judge"] = {"url": bot_server, "model": "anna", "human_share": 0.5}
    path.write_text(yaml.safe_dump(data))
    with chromium_on(one_database_url, load_study(path)) as (url, page):
        page.goto(f"{url}/s/chat-demo/hit/1?assignmentId=LC-J&hitId=h1&workerId=W-judged")
        page.get_by_role("button", name="I agree").click()
        with session_scope(one_database_url) as s:
            order = s.scalar(select(Assignment.layout))["order"]
            units = {u.id: u.payload.get("rated", True) for u in s.scalars(select(Unit))}
        rated = [units[i] for i in order]
        assert False in rated and True in rated  # this HIT has both kinds of slot
        for bot, is_rated in enumerate(rated):
            page.locator("#topic-input").fill(f"topic {bot + 1}")
            page.get_by_label("I like it").check()
            page.get_by_role("button", name="Start chatting").click()
            for turn in range(2):
                page.locator("#message").fill(f"Message {turn + 1}")
                page.get_by_role("button", name="Send").click()
                page.locator("#messages li.bot").nth(turn).wait_for()
            page.get_by_role("button", name="Next chatbot").click()
            if is_rated:
                sliders = page.locator("#sliders input[type=range]")
                sliders.first.wait_for()
                for i in range(sliders.count()):
                    sliders.nth(i).focus()
                    page.keyboard.press("ArrowRight")
                page.get_by_role("button", name="Save ratings and continue").click()
            if bot + 1 < len(rated):  # an unrated chat goes straight to the next chatbot's topic
                page.locator("#step-topic").wait_for(state="visible")
                assert page.locator("#step-rate").is_hidden()
                if not is_rated and bot == rated.index(False):
                    page.reload()  # a reload resumes at the next chatbot: the unrated one is done
                    page.locator("#step-topic").wait_for(state="visible")
        page.get_by_role("button", name="Submit").click()
        page.get_by_text("your work is submitted").wait_for()
    with session_scope(one_database_url) as s:
        assert s.scalar(select(Assignment.status)) == "submitted"
        scores = s.scalar(select(func.count()).select_from(Response).where(Response.question.like("score_%")))
        assert scores == 7 * sum(rated)
        done = s.scalar(select(func.count()).select_from(Response).where(Response.question == "chat_done"))
        assert done == len(rated) - sum(rated)


def test_live_chat_shows_the_reply_as_it_streams_then_the_whole_stored_reply_in_chromium(tmp_path, one_database_url):
    """The chat page reads the reply as the bot writes it: partial text on screen before it is complete."""
    from hitkit.bots.server import BotServer
    from tests.streaming_bot import Typist

    with BotServer({n: Typist(n, step_s=0.1) for n in [*REAL, "qc"]}, port=0) as bots:
        config = load_study(live_chat_study(tmp_path, one_database_url, bots.url, hits=1, min_inputs=2))
        with chromium_on(one_database_url, config) as (url, page):
            page.goto(f"{url}/s/chat-demo/hit/1?assignmentId=LC-S&hitId=h1&workerId=W-stream")
            page.get_by_role("button", name="I agree").click()
            page.locator("#topic-input").fill("the sea")
            page.get_by_label("I like it").check()
            page.get_by_role("button", name="Start chatting").click()
            page.locator("#message").fill("Hello, do you like the sea?")
            page.get_by_role("button", name="Send").click()
            typing = page.locator("#messages li.bot-typing")
            typing.wait_for()
            page.wait_for_function(
                "() => (document.querySelector('#messages li.bot-typing') || {}).textContent?.split(' ').length >= 3"
            )
            partial = typing.inner_text()
            assert page.locator("#messages li.bot").count() == 0  # nothing stored yet: the reply is not complete
            page.locator("#messages li.bot").first.wait_for()
            whole = page.locator("#messages li.bot").first.inner_text()
    assert whole == " ".join(["reply1"] + [f"w{i}" for i in range(1, 20)])
    assert partial and len(partial) < len(whole) and whole.startswith(partial)
    with session_scope(one_database_url) as s:
        assert s.scalars(select(Turn.text).where(Turn.speaker == "bot")).all() == [whole]


def test_a_refused_message_is_kept_in_the_box_with_a_clear_sentence_in_chromium(
    tmp_path,
    one_database_url,
    bot_server,  # noqa: F811
    monkeypatch,
):
    """Over the bound on bot-waiting requests (hitkit.worker.streams) the server answers 429 before storing
    anything: the page says so in plain words and keeps the typed message, which goes once allowed."""
    import server.chat
    from hitkit.worker.streams import StreamLimits, TooManyStreams

    class Full(StreamLimits):
        def admit(self, assignment, worker):
            raise TooManyStreams()

    config = load_study(live_chat_study(tmp_path, one_database_url, bot_server, hits=1, min_inputs=2))
    with chromium_on(one_database_url, config) as (url, page):
        page.goto(f"{url}/s/chat-demo/hit/1?assignmentId=LC-9&hitId=h1&workerId=W-busy")
        page.get_by_role("button", name="I agree").click()
        page.locator("#topic-input").fill("boats")
        page.get_by_label("I like it").check()
        page.get_by_role("button", name="Start chatting").click()
        monkeypatch.setattr(server.chat, "LIMITS", Full())
        page.locator("#message").fill("Do you like boats?")
        page.get_by_role("button", name="Send").click()
        page.locator("#bot-status", has_text="Too many replies are being written at once").wait_for()
        assert page.locator("#message").input_value() == "Do you like boats?"
        assert page.locator("#messages li").count() == 0
        with session_scope(one_database_url) as s:
            assert s.scalar(select(func.count()).select_from(Turn)) == 0
        monkeypatch.setattr(server.chat, "LIMITS", StreamLimits())
        page.get_by_role("button", name="Send").click()
        page.locator("#messages li.bot").first.wait_for()
    with session_scope(one_database_url) as s:
        assert s.execute(select(Turn.speaker, Turn.text).where(Turn.speaker == "worker")).all() == [
            ("worker", "Do you like boats?")
        ]
