"""A person does arena battles in chromium: both replies stream side by side, the vote waits for both,
the names show after it, and on a phone the two replies stack."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from hitkit.bots.server import BotServer
from hitkit.db.models import Response, Study, Turn
from hitkit.db.session import session_scope
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext
from hitkit.tables.authenticity import answers_table
from tests.browser import artifact, chromium_on
from tests.streaming_bot import Typist
from tests.test_arena_study import REAL, arena_study

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

WHOLE = " ".join(["reply1"] + [f"w{i}" for i in range(1, 30)])  # the study asks for 30 tokens


@pytest.fixture
def typing_bots():
    with BotServer({n: Typist(n, step_s=0.08) for n in [*REAL, "qc"]}, port=0) as server:
        yield server.url


def words_on_both_sides(page, n: int) -> None:
    page.wait_for_function(
        "n => ['a', 'b'].every(s => { const li = document.querySelector("
        "`.arena-side[data-side=\"${s}\"] li.bot-typing`); return li && li.textContent.split(' ').length >= n; })",
        arg=n,
    )


def test_both_replies_stream_side_by_side_and_the_vote_waits_for_both_in_chromium(
    tmp_path, one_database_url, typing_bots
):
    # Two real systems a battle: the control bot's reply is released on a drawn real stream's shape
    # (hitkit.worker.pieces), not word by word as these typists write, so the word counts below hold for real bots.
    config = load_study(
        arena_study(tmp_path, one_database_url, typing_bots, hits=1, battles_per_hit=2, control_share=0.0, reveal=True)
    )
    with chromium_on(one_database_url, config) as (url, page):
        page.goto(f"{url}/s/arena-demo/hit/1?assignmentId=AR-1&hitId=h1&workerId=W-person")
        page.get_by_role("button", name="I agree").click()
        votes = page.locator("button.vote")
        for battle in range(2):
            page.locator(".battle-label", has_text=f"Battle {battle + 1}").wait_for()
            # The battle's prompt, drawn for the worker, is ready to send.
            page.wait_for_function("() => document.querySelector('#arena-message').value.length > 0")
            assert all(votes.nth(i).is_disabled() for i in range(4))
            page.get_by_role("button", name="Send to both").click()
            words_on_both_sides(page, 4)  # both sides are being written at once
            assert all(votes.nth(i).is_disabled() for i in range(4))  # not before both replies are complete
            if battle == 0:
                page.screenshot(path=str(artifact("arena-streaming.png")), full_page=True)
            for side in ("a", "b"):
                page.locator(f'.arena-side[data-side="{side}"] li.bot').wait_for()
            page.wait_for_function("() => !document.querySelector('button.vote').disabled")
            assert page.locator('.arena-side[data-side="a"] li.bot').inner_text() == WHOLE
            if battle == 0:
                page.locator("#arena-reason").fill("A was clearer.")
            page.get_by_role("button", name="A is better" if battle == 0 else "Tie").click()
            record = page.locator("#arena-voted")
            record.wait_for()  # the vote cast stays on screen, in words, with the reason sent
            if battle == 0:
                assert record.inner_text() == "Your vote is recorded: A is better. Your reason: “A was clearer.”"
            page.locator(".identity:not([hidden])").first.wait_for()  # names only after the vote
            names = [page.locator(".identity").nth(i).inner_text() for i in range(2)]
            assert all(n.removeprefix("— ") in {*REAL, "qc"} for n in names)
            if battle == 0:
                page.screenshot(path=str(artifact("arena-voted.png")), full_page=True)
            page.get_by_role("button", name="Next battle").click()
        page.get_by_role("button", name="Submit").click()
        page.get_by_text("your work is submitted").wait_for()
    with session_scope(one_database_url) as s:
        assert sorted(s.scalars(select(Response.value).where(Response.question == "vote"))) == ["a", "tie"]
        assert s.scalar(select(Response.value).where(Response.question == "reason")) == "A was clearer."
        assert sorted(set(s.scalars(select(Turn.text).where(Turn.speaker == "bot")))) == [WHOLE]


def test_on_a_phone_the_two_replies_stack_in_chromium(tmp_path, one_database_url, typing_bots):
    config = load_study(
        arena_study(tmp_path, one_database_url, typing_bots, hits=1, battles_per_hit=1, control_share=0)
    )
    with chromium_on(one_database_url, config) as (url, page):
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{url}/s/arena-demo/hit/1?assignmentId=AR-2&hitId=h1&workerId=W-phone")
        page.get_by_role("button", name="I agree").click()
        # The drawn prompt fills the box once the battle has loaded: sending before that sends nothing.
        page.wait_for_function("() => document.querySelector('#arena-message').value.length > 0")
        page.get_by_role("button", name="Send to both").click()
        for side in ("a", "b"):
            page.locator(f'.arena-side[data-side="{side}"] li.bot').wait_for()
        a = page.locator('.arena-side[data-side="a"]').bounding_box()
        b = page.locator('.arena-side[data-side="b"]').bounding_box()
        page.screenshot(path=str(artifact("arena-phone.png")), full_page=True)
    assert b["y"] >= a["y"] + a["height"] - 1  # B below A, not beside it
    assert abs(a["x"] - b["x"]) < 2 and a["width"] > 300 and a["x"] + a["width"] <= 390 + 1


def test_with_a_judge_a_battle_not_drawn_for_a_vote_ends_with_next_battle_alone_in_chromium(
    tmp_path, one_database_url, typing_bots
):
    import yaml

    path = arena_study(tmp_path, one_database_url, typing_bots, hits=1, battles_per_hit=4, control_share=0)
    data = yaml.safe_load(path.read_text())
    data["judge"] = {"url": typing_bots, "model": "anna", "human_share": 0.5}
    path.write_text(yaml.safe_dump(data))
    with chromium_on(one_database_url, load_study(path)) as (url, page):
        page.goto(f"{url}/s/arena-demo/hit/1?assignmentId=AR-3&hitId=h1&workerId=W-judged")
        page.get_by_role("button", name="I agree").click()
        for battle in range(4):
            page.locator(".battle-label", has_text=f"Battle {battle + 1}").wait_for()
            page.wait_for_function("() => document.querySelector('#arena-message').value.length > 0")
            page.get_by_role("button", name="Send to both").click()
            for side in ("a", "b"):
                page.locator(f'.arena-side[data-side="{side}"] li.bot').wait_for()
            if page.locator("#arena-vote").is_visible():
                page.wait_for_function("() => !document.querySelector('button.vote').disabled")
                page.get_by_role("button", name="Tie").click()
                page.locator("#arena-voted").wait_for()
            else:
                page.wait_for_function("() => !document.querySelector('#arena-next').disabled")
            page.get_by_role("button", name="Next battle").click()
        page.get_by_role("button", name="Submit").click()
        page.get_by_text("your work is submitted").wait_for()
    with session_scope(one_database_url) as s:
        questions = sorted(s.scalars(select(Response.question)))
    assert questions.count("vote") + questions.count("vote_done") == 4
    assert questions.count("vote") and questions.count("vote_done")  # this seed draws both kinds


# Records the length of side A's reply as shown, every time it changes (each text the page inserts).
WATCH_SIDE_A = """() => {
  window.shownLengths = [];
  const box = document.querySelector('.arena-side[data-side="a"] .arena-messages');
  new MutationObserver((records) => {
    for (const r of records) {
      for (const node of r.addedNodes) {
        // A text node keeps the text it was inserted with (a replaced one has no parent any more, so its
        // record's target says where it was); a whole reply's item comes with its text already in it.
        const text = node.nodeType === 3 && r.target.matches('li.bot, li.bot-typing');
        const whole = node.nodeType === 1 && node.matches('li.bot');
        if (text || whole) window.shownLengths.push(node.textContent.length);
      }
    }
  }).observe(box, {childList: true, subtree: true});
}"""


def sse(*texts: str) -> str:
    return "".join(f"event: text\ndata: {json.dumps({'text': t})}\n\n" for t in texts)


@pytest.mark.parametrize("width", [1280, 390], ids=["desktop", "phone"])
def test_the_vote_page_streams_forward_only_records_the_vote_and_names_no_internal_system_in_chromium(
    tmp_path, one_database_url, typing_bots, width
):
    from tests.axe import assert_accessible

    config = load_study(
        arena_study(tmp_path, one_database_url, typing_bots, hits=1, battles_per_hit=2, control_share=0.5, reveal=True)
    )
    with chromium_on(one_database_url, config) as (url, page):
        page.set_viewport_size({"width": width, "height": 900})
        # Side A's first reply arrives as a phone saw it: a bot stream retried after 85 characters starts
        # again (47) and passes them (101); then the retried stream's own words, from the start.
        calls = []

        def retried(route):
            calls.append(route.request.url)
            if len(calls) > 1:
                return route.continue_()
            real = route.fetch(timeout=60_000)
            body = sse("x" * 85, "x" * 47, "x" * 101) + real.text()
            route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=body)

        page.route("**/chat/*-a/stream", retried)
        page.goto(f"{url}/s/arena-demo/hit/1?assignmentId=AR-9&hitId=h1&workerId=W-{width}")
        page.get_by_role("button", name="I agree").click()
        for battle in range(2):
            page.locator(".battle-label", has_text=f"Battle {battle + 1}").wait_for()
            page.wait_for_function("() => document.querySelector('#arena-message').value.length > 0")
            if battle == 0:
                page.evaluate(WATCH_SIDE_A)
                assert_accessible(page, f"arena vote page ({width} px), before sending")
            page.get_by_role("button", name="Send to both").click()  # the suggested prompt, as offered
            page.wait_for_function("() => !document.querySelector('button.vote').disabled")
            if battle == 0:
                shown = page.evaluate("window.shownLengths")
                assert 85 in shown and 101 in shown and 47 not in shown, shown
                assert shown == sorted(shown), f"the reply went backwards: {shown}"
                assert page.locator('.arena-side[data-side="a"] li.bot').inner_text() == WHOLE
            page.locator("#arena-reason").fill("Clearer answer.")  # the box comes before the final vote
            page.get_by_role("button", name="B is better").click()
            page.locator("#arena-voted").wait_for()
            assert page.locator('button.vote[aria-pressed="true"]').inner_text() == "B is better"
            assert all(page.locator("button.vote").nth(i).is_disabled() for i in range(4))
            assert page.locator("#reason-box").is_hidden()  # the reason sent shows in the record instead
            page.locator("#arena-next").wait_for()
            # No internal name: a QC battle shows no names at all, a real one the systems' own.
            body = page.locator("body").inner_text()
            assert not re.search(r"\bqc\b", body, re.IGNORECASE), body
            if battle == 0:
                page.screenshot(path=str(artifact(f"arena-voted-{width}.png")), full_page=True)
                assert_accessible(page, f"arena vote page ({width} px), voted")
            if width == 390:  # on a phone nothing is wider than the screen
                assert page.evaluate("document.documentElement.scrollWidth") <= 390
            page.get_by_role("button", name="Next battle").click()
        page.get_by_role("button", name="Submit").click()
        page.get_by_text("your work is submitted").wait_for()
    with session_scope(one_database_url) as s:
        assert sorted(s.scalars(select(Response.value).where(Response.question == "reason"))) == ["Clearer answer."] * 2
        messages = answers_table(s, StudyContext.of(s.scalar(select(Study)), "test-secret"))
    sent = messages[messages["kind"] == "message"]
    assert len(sent) == 2 and not sent["flagged"].any() and set(sent["reason"]) <= {"sent as offered", "typed"}
