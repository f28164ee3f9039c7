"""Worker pages anyone can use: every page of every protocol's HIT passes axe-core's WCAG 2.2 AA audit
(no serious or critical violation), and each HIT is done from entry to the completion page with the
keyboard alone (Tab, Space, Enter, arrows, typing), the answers checked in the database."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.db.models import Assignment, Response, Turn
from hitkit.db.session import session_scope
from hitkit.study.loading import load_study
from tests.axe import assert_accessible, tab_to, violations
from tests.browser import CHROMIUM_ARGS, chromium_on, chromium_path
from tests.studies import served
from tests.test_arena_study import REAL as ARENA_BOTS
from tests.test_arena_study import arena_study
from tests.test_live_chat_study import REAL as CHAT_BOTS
from tests.test_live_chat_study import live_chat_study
from tests.test_rating import rating_study
from tests.test_spot_the_bot_study import stb_study
from tests.test_worker_flow import live_one  # noqa: F401 - the running pairwise study, on one store

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
        answers = {
            (r.unit_id, r.question): r.value
            for r in s.scalars(select(Response).where(Response.assignment_id == a.id, Response.source == "worker"))
        }
        return a.status, answers, a.feedback, (a.layout or {}).get("order", [])


# ---------------------------------------------------------------------------------------------- pairwise

# From an unanswered radio group: Space checks the focused first choice, ArrowRight the next, ArrowLeft wraps
# to the last.
PAIRWISE_KEYS = (("Space", "a"), ("ArrowRight", "tie"), ("ArrowLeft", "b"))


def test_a_pairwise_hit_is_done_by_keyboard_alone_and_every_page_passes_the_audit(live_one):  # noqa: F811
    base, url, _ = live_one
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


def test_the_audit_fails_on_an_unnamed_slider_and_low_contrast_text():
    """The audit itself can fail: a slider without a name and grey-on-white text are both reported."""
    with playwright.sync_playwright() as p:
        browser, page = open_page(p)
        page.set_content(
            '<html lang="en"><title>t</title><main><input type="range">'
            '<p style="color:#bbb;background:#fff">faint</p></main></html>'
        )
        found = {v["id"] for v in violations(page)}
        browser.close()
    assert "color-contrast" in found and "label" in found, found


# ---------------------------------------------------------------------------------------------- rating


def test_a_rating_hit_is_done_by_keyboard_alone_and_every_page_passes_the_audit(tmp_path, one_database_url):
    expected = {}
    for base, config, _secret in served(rating_study(tmp_path, one_database_url), one_database_url):
        with playwright.sync_playwright() as p:
            browser, page = open_page(p)
            page.goto(f"{base}/s/{config.study}/hit/1?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1")
            assert_accessible(page, "rating preview")
            page.goto(f"{base}/s/{config.study}/hit/1?assignmentId=KEY-R&hitId=h1&workerId=W-keys")
            consent_by_keyboard(page, "rating")
            units = page.locator("fieldset.unit")
            units.first.wait_for()
            assert_accessible(page, "rating task")
            for u in range(units.count()):
                sliders = units.nth(u).locator("input[type=range]")
                for i in range(sliders.count()):
                    name = sliders.nth(i).get_attribute("name")
                    tab_to(page, f'input[name="{name}"]')
                    presses = 1 + (u + i) % 4
                    for _ in range(presses):
                        page.keyboard.press("ArrowRight" if (u + i) % 2 else "ArrowLeft")
                    expected[name] = 50 + presses if (u + i) % 2 else 50 - presses
                units.nth(u).locator(".saved", has_text="saved").wait_for()
            assert_accessible(page, "rating task, every slider moved")
            submit_by_keyboard(page, "rating", "Sliders by arrows.")
            browser.close()
    status, answers, feedback, _order = stored(one_database_url, "KEY-R")
    assert status == "submitted" and feedback == "Sliders by arrows."
    assert len(answers) == len(expected) >= 12
    assert sorted(float(v) for v in answers.values()) == sorted(float(v) for v in expected.values())


# ---------------------------------------------------------------------------------------------- Spot The Bot

STB_KEYS = {"human": "1", "bot": "2", "unsure": "3", "0": "1", "1": "2", "neither": "3"}
STB_FEATURES = ("fluency", "sensibleness", "specificity")


def test_a_spot_the_bot_hit_is_done_by_keyboard_alone_and_every_page_passes_the_audit(tmp_path, one_database_url):
    config = load_study(stb_study(tmp_path, one_database_url))
    given = []
    with chromium_on(one_database_url, config, height=900) as (base, page):
        page.goto(f"{base}/s/stb-demo/hit/1?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1")
        assert_accessible(page, "Spot The Bot preview")
        page.goto(f"{base}/s/stb-demo/hit/1?assignmentId=KEY-S&hitId=h1&workerId=W-keys")
        consent_by_keyboard(page, "Spot The Bot")
        total = int(page.locator("#stb-total").inner_text())
        for i in range(total):
            page.locator("#stb-number", has_text=str(i + 1)).wait_for()
            page.locator("#stb-step-labels").wait_for(state="visible")
            if i == 0:
                assert_accessible(page, "Spot The Bot step 1 (labels)")
                # Tab to each radio group: Space checks its first choice, ArrowRight the second.
                tab_to(page, "input[name=label_0]")
                page.keyboard.press("Space")
                tab_to(page, "input[name=label_1]")
                page.keyboard.press("ArrowRight")
                answers = {"label_0": "human", "label_1": "bot"}
                tab_to(page, "#stb-continue")
                page.keyboard.press("Enter")
            else:  # the number keys answer the highlighted question; Enter goes on
                answers = {"label_0": ("bot", "unsure", "human")[i % 3], "label_1": ("human", "unsure")[i % 2]}
                page.keyboard.press(STB_KEYS[answers["label_0"]])
                page.keyboard.press(STB_KEYS[answers["label_1"]])
                page.keyboard.press("Enter")
            page.locator("#stb-step-preferences").wait_for(state="visible")
            if i == 0:
                assert_accessible(page, "Spot The Bot step 2 (preferences)")
                for feature in STB_FEATURES:
                    tab_to(page, f"input[name={feature}]")
                    page.keyboard.press("Space")
                    answers[feature] = "0"
                tab_to(page, "#stb-next")
                page.keyboard.press("Enter")
            else:
                for n, feature in enumerate(STB_FEATURES):
                    answers[feature] = ("0", "1", "neither")[(i + n) % 3]
                    page.keyboard.press(STB_KEYS[answers[feature]])
                page.keyboard.press("Enter")
            given.append(answers)
            if i < total - 1:
                page.locator("#stb-done", has_text=str(i + 1)).wait_for()
        page.locator("#stb-finished").wait_for(state="visible")
        assert_accessible(page, "Spot The Bot, every conversation labelled")
        submit_by_keyboard(page, "Spot The Bot", "Numbers and Enter.")
    status, stored_answers, feedback, order = stored(one_database_url, "KEY-S")
    assert status == "submitted" and feedback == "Numbers and Enter." and len(order) == total >= 3
    assert {
        (unit, q): v for unit, answers in zip(order, given, strict=True) for q, v in answers.items()
    } == stored_answers


# ---------------------------------------------------------------------------------------------- live chat


@pytest.fixture(scope="module")
def degraded_bots():
    names = sorted({*CHAT_BOTS, *ARENA_BOTS, "qc"})
    server = BotServer(build_backends(degraded=[DegradedSpec(n) for n in names], seed=1), port=0).start()
    yield server.url
    server.shutdown()


def test_a_live_chat_hit_is_done_by_keyboard_alone_and_every_page_passes_the_audit(
    tmp_path, one_database_url, degraded_bots
):
    config = load_study(live_chat_study(tmp_path, one_database_url, degraded_bots, hits=1, min_inputs=2))
    slots = 0
    with chromium_on(one_database_url, config, height=900) as (base, page):
        page.goto(f"{base}/s/chat-demo/hit/1?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1")
        assert_accessible(page, "live chat preview")
        page.goto(f"{base}/s/chat-demo/hit/1?assignmentId=KEY-C&hitId=h1&workerId=W-keys")
        consent_by_keyboard(page, "live chat")
        while page.locator("#step-submit").is_hidden():
            page.locator("#step-topic").wait_for(state="visible")
            if slots == 0:
                assert_accessible(page, "live chat topic step")
            tab_to(page, "#topic-input")
            page.keyboard.type(f"walks by the sea {slots + 1}")
            tab_to(page, "input[name=sentiment]")
            page.keyboard.press("Space")
            tab_to(page, "#start-chat")
            page.keyboard.press("Enter")
            page.locator("#step-chat").wait_for(state="visible")
            for turn in range(2):
                tab_to(page, "#message")
                page.keyboard.type(f"Message {turn + 1}: do you like the sea?")
                page.keyboard.press("Enter")  # Enter sends; Shift+Enter would start a new line
                page.locator("#messages li.bot").nth(turn).wait_for()
            if slots == 0:
                tab_to(page, "#topic-button")
                page.keyboard.press("Enter")
                page.locator("#topic-dialog").wait_for(state="visible")
                assert_accessible(page, "live chat conversation, topic dialog open")
            page.wait_for_function("() => !document.querySelector('#next-bot').disabled")
            tab_to(page, "#next-bot")
            page.keyboard.press("Enter")
            page.locator("#step-rate").wait_for(state="visible")
            if slots == 0:
                assert_accessible(page, "live chat rating step")
            for k in range(page.locator("#sliders input[type=range]").count()):
                tab_to(page, f"#sliders .slider:nth-child({k + 1}) input")
                page.keyboard.press("ArrowRight")
            tab_to(page, "#save-ratings")
            page.keyboard.press("Enter")
            page.wait_for_function("() => document.querySelector('#step-rate').hidden")
            slots += 1
        assert_accessible(page, "live chat, every conversation done")
        submit_by_keyboard(page, "live chat", "Chatted by keyboard.")
    status, answers, feedback, _order = stored(one_database_url, "KEY-C")
    assert status == "submitted" and feedback == "Chatted by keyboard." and slots == 6
    scores = [v for (_u, q), v in answers.items() if q.startswith("score_")]
    assert len(scores) == 7 * slots and set(scores) == {"51"}
    with session_scope(one_database_url) as s:
        typed = s.scalars(select(Turn.text).where(Turn.speaker == "worker")).all()
    assert sorted(typed) == sorted(f"Message {t + 1}: do you like the sea?" for t in range(2) for _ in range(slots))


# ---------------------------------------------------------------------------------------------- arena
def test_an_arena_hit_is_done_by_keyboard_alone_and_every_page_passes_the_audit(
    tmp_path, one_database_url, degraded_bots
):
    config = load_study(
        arena_study(tmp_path, one_database_url, degraded_bots, hits=1, battles_per_hit=2, control_share=0, reveal=True)
    )
    votes = ("a", "tie")
    with chromium_on(one_database_url, config, height=900) as (base, page):
        page.goto(f"{base}/s/arena-demo/hit/1?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1")
        assert_accessible(page, "arena preview")
        page.goto(f"{base}/s/arena-demo/hit/1?assignmentId=KEY-A&hitId=h1&workerId=W-keys")
        consent_by_keyboard(page, "arena")
        for battle, vote in enumerate(votes):
            page.locator(".battle-label", has_text=f"Battle {battle + 1}").wait_for()
            page.wait_for_function("() => document.querySelector('#arena-message').value.length > 0")
            if battle == 0:
                assert_accessible(page, "arena battle, before sending")
            tab_to(page, "#arena-message")
            page.keyboard.press("Enter")  # the drawn prompt goes to both assistants
            page.wait_for_function("() => !document.querySelector('button.vote').disabled")
            if battle == 0:
                assert_accessible(page, "arena battle, both replies in")
            if battle == 0:  # the optional reason, typed before the vote (the buttons come after it)
                tab_to(page, "#arena-reason")
                page.keyboard.type("Clearer.")
                tab_to(page, f'button.vote[data-vote="{vote}"]')
            else:
                tab_to(page, f'button.vote[data-vote="{vote}"]')
            page.keyboard.press("Enter")
            page.locator(".identity:not([hidden])").first.wait_for()
            if battle == 0:
                assert_accessible(page, "arena battle, voted and names shown")
            tab_to(page, "#arena-next")
            page.keyboard.press("Enter")
        page.locator("#step-submit").wait_for(state="visible")
        assert_accessible(page, "arena, every battle done")
        submit_by_keyboard(page, "arena", "Voted by keyboard.")
    status, answers, feedback, _order = stored(one_database_url, "KEY-A")
    assert status == "submitted" and feedback == "Voted by keyboard."
    assert sorted(v for (_u, q), v in answers.items() if q == "vote") == sorted(votes)
    assert [v for (_u, q), v in answers.items() if q == "reason"] == ["Clearer."]
