"""The simulated crowd chats as a browser does, through the pages' streaming endpoint: in a simulated arena
study with bots that stream, every reply's first text comes before the whole of it (a crowd that posted
whole messages got every reply in one piece, first text = whole reply in 76 of 80 turns)."""

from __future__ import annotations

from sqlalchemy import select

from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.db.models import Turn
from hitkit.db.session import session_scope
from tests.streaming_bot import Typist
from tests.studies import launch
from tests.test_arena_study import REAL, arena_study


def test_a_simulated_arena_studys_streamed_replies_show_text_before_the_whole_reply(tmp_path, one_database_url):
    backends = {n: Typist(n, step_s=0.02) for n in REAL}
    backends.update(build_backends(degraded=[DegradedSpec("qc")], seed=2))
    with BotServer(backends, port=0) as server:
        study = arena_study(tmp_path, one_database_url, server.url, hits=4)
        launch(study, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=300, analyse=False)
    with session_scope(one_database_url) as s:
        timed = s.execute(
            select(Turn.first_token_ms, Turn.reply_ms).where(Turn.speaker == "bot", Turn.reply_ms.is_not(None))
        ).all()
    assert len(timed) >= 20
    streamed = [first < whole for first, whole in timed if first is not None]
    assert len(streamed) >= 0.9 * len(timed) and sum(streamed) >= 0.9 * len(streamed), timed
