"""A person labels a whole Spot The Bot HIT in chromium: keyboard and mouse, a reload mid-way, submit."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from hitkit.db.models import Assignment, Response, Study
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from server.embedded import WebServer
from tests.browser import CHROMIUM_ARGS, artifact, chromium_path
from tests.test_spot_the_bot_study import stb_study

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

LABEL_KEYS = {"human": "1", "bot": "2", "unsure": "3"}
LABEL_TEXT = {"human": "a human", "bot": "a bot", "unsure": "unsure"}
PREFERENCE_KEYS = {"0": "1", "1": "2", "neither": "3"}
PREFERENCE_TEXT = {"0": "Speaker A", "1": "Speaker B", "neither": "Neither"}
FEATURES = ("fluency", "sensibleness", "specificity")


def test_a_worker_labels_a_whole_spot_the_bot_hit_in_chromium(tmp_path, one_database_url):
    config = load_study(stb_study(tmp_path, one_database_url, segments_per_hit=20))
    secret = resolve_secret(one_database_url)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, config, None, secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(one_database_url, "127.0.0.1", 0, 8, secret).start()
    given: list[dict] = []
    first_lines: list[str] = []
    try:
        tick(one_database_url, config.study, web.url)
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1000, "height": 1200})
            page.goto(f"{web.url}/s/stb-demo/hit/1?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h1")
            assert page.get_by_text("Preview").is_visible()
            assert page.locator("input[type=radio]").count() == 0
            page.goto(f"{web.url}/s/stb-demo/hit/1?assignmentId=STB-1&hitId=h1&workerId=W-person")
            page.get_by_role("button", name="I agree").click()
            total = int(page.locator("#stb-total").inner_text())
            assert total == 15
            for i in range(total):
                page.locator("#stb-number", has_text=str(i + 1)).wait_for()
                turns = page.locator("#stb-turns li")
                assert page.locator("#stb-turns b").count() == 0  # text, never markup
                first_lines.append(turns.first.inner_text())
                answers = {
                    "label_0": ("human", "bot", "unsure")[i % 3],
                    "label_1": ("bot", "human")[i % 2],
                    "fluency": ("0", "1", "neither")[i % 3],
                    "sensibleness": ("1", "0")[i % 2],
                    "specificity": ("neither", "0", "1")[i % 3],
                }
                given.append(answers)
                by_keyboard = i % 2 == 0
                # Step 1: both speakers.
                if by_keyboard:
                    page.keyboard.press(LABEL_KEYS[answers["label_0"]])
                    page.keyboard.press(LABEL_KEYS[answers["label_1"]])
                    page.keyboard.press("Enter")
                else:
                    for entity, name in ((0, "A"), (1, "B")):
                        page.get_by_label(f"Speaker {name}: {LABEL_TEXT[answers[f'label_{entity}']]}").check()
                    page.get_by_role("button", name="Continue").click()
                page.locator("#stb-step-preferences").wait_for(state="visible")
                if i == 2:
                    # A reload keeps the labels and comes back at step 2 of the same conversation.
                    page.reload()
                    page.locator("#stb-step-preferences").wait_for(state="visible")
                    assert page.locator("#stb-number").inner_text() == "3"
                    assert page.locator("#stb-done").inner_text() == "2"
                if i == 0:
                    page.screenshot(path=str(artifact("spot-the-bot-preferences.png")), full_page=True)
                # Step 2: the three preferences, with their definitions on screen.
                assert page.get_by_text("could follow almost anything").is_visible()
                if by_keyboard:
                    for feature in FEATURES:
                        page.keyboard.press(PREFERENCE_KEYS[answers[feature]])
                    page.keyboard.press("Enter")
                else:
                    for feature in FEATURES:
                        page.get_by_label(f"{feature.capitalize()}: {PREFERENCE_TEXT[answers[feature]]}").check()
                    page.get_by_role("button", name="Save and go on").click()
                if i == total - 1:
                    page.locator("#stb-finished").wait_for(state="visible")
                else:
                    page.locator("#stb-done", has_text=str(i + 1)).wait_for()
                    if i == 0:
                        page.screenshot(path=str(artifact("spot-the-bot-labels.png")), full_page=True)
            assert page.locator("#stb-progress").get_attribute("value") == str(total)
            page.get_by_role("button", name="Submit").click()
            page.get_by_text("your work is submitted").wait_for()
            browser.close()
    finally:
        web.stop()

    with session_scope(one_database_url) as s:
        assignment = s.scalar(select(Assignment))
        assert assignment.status == "submitted"
        units = {hu.unit.id: hu.unit for hu in assignment.hit.units}
        order = assignment.layout["order"]
        # The page showed the segments in the assignment's recorded order, each with its own text.
        assert first_lines == [f"Speaker A\n{units[u].payload['turns'][0]['text']}" for u in order]
        assert order != sorted(order)  # shuffled for this assignment
        stored = {(r.unit_id, r.question): r for r in s.scalars(select(Response))}
        assert len(stored) == total * 5
        for unit_id, answers in zip(order, given, strict=True):
            for question, value in answers.items():
                assert stored[(unit_id, question)].value == value
                assert stored[(unit_id, question)].elapsed_s is not None
                assert stored[(unit_id, question)].elapsed_s >= 0
