"""A person does arena battles in chromium: both replies stream side by side, the vote waits for both,
the names show after it, and on a phone the two replies stack."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from hitkit.bots.server import BotServer
from hitkit.db.models import Response, Turn
from hitkit.db.session import session_scope
from hitkit.study.config import load_study
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
            else:
                page.wait_for_function("() => !document.querySelector('#arena-next').disabled")
                page.get_by_role("button", name="Next battle").click()
        page.get_by_role("button", name="Submit").click()
        page.get_by_text("your work is submitted").wait_for()
    with session_scope(one_database_url) as s:
        questions = sorted(s.scalars(select(Response.question)))
    assert questions.count("vote") + questions.count("vote_done") == 4
    assert questions.count("vote") and questions.count("vote_done")  # this seed draws both kinds
