"""The README's and the docs' two pictures are made by the test suite, so they show what hitkit does now:
the live-chat page as a worker sees it in chromium, and the ranking figure of a pairwise report."""

from __future__ import annotations

import shutil
from io import BytesIO
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from hitkit.bots.base import Backend, Completion
from hitkit.bots.server import BotServer
from hitkit.cli import main
from hitkit.db.models import Turn
from hitkit.db.session import session_scope
from hitkit.study.loading import load_study
from tests.browser import chromium_on
from tests.studies import REPO
from tests.test_live_chat_study import REAL, live_chat_study

IMG = REPO / "docs" / "img"


def keep_picture(png: bytes, path: Path) -> None:
    """Write ``png`` to ``path`` unless the picture there already shows the same pixels: a new screenshot
    or figure of an unchanged page differs only in its encoding, and must not leave a change to commit."""
    from PIL import Image, ImageChops

    new = Image.open(BytesIO(png)).convert("RGBA")
    if path.is_file():
        old = Image.open(path).convert("RGBA")
        if old.size == new.size and ImageChops.difference(old, new).getbbox() is None:
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)


REPLIES = [
    "Not lately, but I love a long walk in the hills on a Sunday. Do you hike often?",
    "The ridge path above the lake is lovely: two hours, gentle, and a café at the end.",
    "Yes, it is mostly flat, with benches along the way. Wear good shoes after rain!",
]


class FriendlyBot(Backend):
    """A scripted chatbot for the picture: its replies in turn, by how many messages the chat holds."""

    def __init__(self, name: str):
        self.name = name

    def complete(self, request):
        said = sum(1 for m in request.messages if m.role == "user")
        text = REPLIES[min(said, len(REPLIES)) - 1]
        return Completion(text=text, finish_reason="stop", prompt_tokens=1, completion_tokens=len(text.split()))

    def stats(self) -> dict:
        return {"kind": "scripted"}


@pytest.fixture
def friendly_bots():
    """Every system of the study a FriendlyBot, served by hitkit's own bot server over HTTP."""
    server = BotServer({n: FriendlyBot(n) for n in [*REAL, "qc"]}, port=0).start()
    yield server.url
    server.shutdown()


def test_the_report_picture_is_the_ranking_figure_of_a_real_pairwise_report(tmp_path):
    out = tmp_path / "report"
    export = tmp_path / "run" / "export"  # a copy: a report of an export folder writes beside it
    shutil.copytree(REPO / "tests" / "data" / "golden" / "pairwise" / "export", export)
    result = CliRunner().invoke(main, ["report", str(export), "--out", str(out)])
    assert result.exit_code == 0, result.output
    figure = out / "figures" / "ranking.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "figures/ranking.png" in (out / "report.md").read_text()
    ranking = pd.read_csv(REPO / "tests" / "data" / "golden" / "pairwise" / "analysis" / "ranking.csv")
    assert list(ranking.sort_values("rank")["system"]) == ["alpha", "beta", "gamma"]  # what the picture shows
    keep_picture(figure.read_bytes(), IMG / "report-ranking.png")


@pytest.mark.browser
def test_the_live_chat_picture_is_a_worker_chatting_in_chromium(tmp_path, one_database_url, friendly_bots):
    pytest.importorskip("playwright.sync_api")
    config = load_study(live_chat_study(tmp_path, one_database_url, friendly_bots, hits=1, min_inputs=3))
    with chromium_on(one_database_url, config, height=720) as (url, page):
        page.set_viewport_size({"width": 1000, "height": 720})
        page.goto(f"{url}/s/chat-demo/hit/1?assignmentId=PIC-1&hitId=h1&workerId=W-picture")
        page.get_by_role("button", name="I agree").click()
        page.locator("#topic-input").fill("weekend hiking trips")
        page.get_by_label("I like it").check()
        page.get_by_role("button", name="Start chatting").click()
        for turn, text in enumerate(
            ["Hi! Have you been hiking lately?", "Which trail would you recommend?", "Is it good for a beginner?"]
        ):
            page.locator("#message").fill(text)
            page.get_by_role("button", name="Send").click()
            page.locator("#messages li.bot").nth(turn).wait_for()
        keep_picture(page.screenshot(), IMG / "live-chat.png")
    with session_scope(one_database_url) as s:
        assert s.scalar(select(func.count()).select_from(Turn).where(Turn.speaker == "worker")) == 3
        assert s.scalar(select(func.count()).select_from(Turn).where(Turn.speaker == "bot")) == 3
        assert sorted(s.scalars(select(Turn.text).where(Turn.speaker == "bot"))) == sorted(REPLIES)
