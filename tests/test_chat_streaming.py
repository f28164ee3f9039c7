"""Live chat replies streamed to the page through hitkit's server, stored once and whole.

Real HTTP all the way: the chat page's ``/stream`` route on the embedded web server, hitkit's bot
client asking with ``stream: true``, hitkit's bot server relaying a backend that types one word at a
time (:mod:`tests.streaming_bot`). Assertions are on the stored turns.
"""

from __future__ import annotations

import json
import time

import pytest
import requests
from sqlalchemy import select

from hitkit.bots.server import BotServer
from hitkit.db.models import Turn, Unit
from hitkit.db.session import session_scope
from hitkit.study.stored import resolve_secret
from server.embedded import WebServer
from tests.streaming_bot import Typist
from tests.test_fault_tolerance import SYSTEMS, Process, bot_process, chat_study, free_port, start_study, wait_http

WORDS = 12


def events(response: requests.Response):
    """(kind, data) of each server-sent event, as they arrive."""
    kind = None
    for line in response.iter_lines():
        if line.startswith(b"event:"):
            kind = line[6:].strip().decode()
        elif line.startswith(b"data:"):
            yield kind, json.loads(line[5:])


def bot_turns(url: str) -> list[tuple[str, str]]:
    with session_scope(url) as s:
        return list(s.execute(select(Turn.speaker, Turn.text).order_by(Turn.conversation_id, Turn.index)).all())


def open_chat(http: requests.Session, web_url: str, study: str, database_url: str) -> str:
    """The first chat of the HIT with a real system: the control bot's reply is released on a drawn real
    stream's shape (hitkit.worker.pieces), not as its bot writes, so it is not the one these tests follow."""
    page = http.get(f"{web_url}/s/{study}/hit/1", params={"workerId": "W-s", "assignmentId": "W-s-1", "hitId": "h1"})
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    with session_scope(database_url) as s:
        system = {key: payload["system"] for key, payload in s.execute(select(Unit.public_key, Unit.payload))}
    uid = next(u["unit_id"] for u in http.get(task + "state").json()["units"] if system[u["unit_id"]] != "qc")
    for question, value in (("topic", "films"), ("topic_sentiment", "like")):
        assert http.post(task + "answer", json={"unit_id": uid, "question": question, "value": value}).ok
    return f"{task}chat/{uid}"


@pytest.fixture
def typing_bots():
    typists = {n: Typist(n, step_s=0.05) for n in SYSTEMS}
    with BotServer(typists, port=0) as server:
        server.jobs.grace_s = 0.3  # cancel an abandoned generation soon
        yield server, typists


@pytest.fixture
def web(database_url):
    server = WebServer(database_url, "127.0.0.1", 0, 8, resolve_secret(database_url)).start()
    yield server
    server.stop()


def test_a_streamed_reply_arrives_in_pieces_and_is_stored_once_whole_with_its_timing(
    tmp_path, database_url, typing_bots, web
):
    server, _ = typing_bots
    study = start_study(
        tmp_path,
        database_url,
        chat_study(
            tmp_path,
            database_url,
            server.url,
        ),
        web.url,
    )
    with requests.Session() as http:
        chat = open_chat(http, web.url, study, database_url)
        with http.post(chat + "/stream", json={"text": "hello"}, stream=True) as reply:
            assert reply.headers["Content-Type"].startswith("text/event-stream")
            seen = list(events(reply))
    texts = [d["text"] for k, d in seen if k == "text" and d["text"]]
    whole = " ".join(["reply1"] + [f"w{i}" for i in range(1, 20)])  # chat_study asks for 20 tokens
    assert len(texts) >= 5, texts  # partial text arrived before the reply was complete
    assert all(whole.startswith(t) for t in texts) and texts[0] != whole
    kind, state = seen[-1]
    assert kind == "state" and state["turns"][-1]["text"] == whole
    assert bot_turns(database_url) == [("worker", "hello"), ("bot", whole)]
    with session_scope(database_url) as s:
        first, total = s.execute(select(Turn.first_token_ms, Turn.reply_ms).where(Turn.speaker == "bot")).one()
    assert 0 <= first < total and total >= 19 * 50  # 20 words at 50 ms each; the first came early


def test_a_page_that_leaves_mid_stream_cancels_the_generation_and_the_retry_stores_the_reply_whole(
    tmp_path, database_url, typing_bots, web
):
    server, typists = typing_bots
    study = start_study(tmp_path, database_url, chat_study(tmp_path, database_url, server.url), web.url)
    with requests.Session() as http:
        chat = open_chat(http, web.url, study, database_url)
        reply = http.post(chat + "/stream", json={"text": "hello"}, stream=True)
        for kind, data in events(reply):
            if kind == "text" and data["text"].count(" ") >= 2:
                break  # three words shown: the page goes away
        reply.close()  # the browser tab closed: its connection ends with the reply unread
        deadline = time.monotonic() + 10
        while sum(t.cancelled for t in typists.values()) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sum(t.cancelled for t in typists.values()) == 1  # the abandoned generation stopped
        assert bot_turns(database_url) == [("worker", "hello")]  # no half turn; the message kept
        state = http.get(chat).json()
        assert state["bot_owes_reply"] is True
        with http.post(chat + "/stream", json={}, stream=True) as resumed:
            kind, final = list(events(resumed))[-1]
    whole = " ".join(["reply1"] + [f"w{i}" for i in range(1, 20)])
    assert kind == "state" and final["turns"][-1]["text"] == whole
    assert bot_turns(database_url) == [("worker", "hello"), ("bot", whole)]
    assert sum(t.started for t in typists.values()) == 2 and sum(t.finished for t in typists.values()) == 1


def test_a_bot_killed_mid_stream_stores_no_half_turn_and_the_retry_stores_it_whole(tmp_path, database_url, web):
    port = free_port()
    bot = Process(
        [__import__("sys").executable, "-m", "tests.streaming_bot", str(port), "0.1"],
        tmp_path / "bot.log",
        f"http://127.0.0.1:{port}/v1/models",
    ).start()
    try:
        study = start_study(
            tmp_path, database_url, chat_study(tmp_path, database_url, f"http://127.0.0.1:{port}"), web.url
        )
        with requests.Session() as http:
            chat = open_chat(http, web.url, study, database_url)
            with http.post(chat + "/stream", json={"text": "hello"}, stream=True) as reply:
                seen = []
                for kind, data in events(reply):
                    seen.append((kind, data))
                    if kind == "text" and data["text"].count(" ") >= 2 and bot.proc.poll() is None:
                        bot.kill9()
            assert seen[-1][0] == "error" and seen[-1][1]["waiting"] is True, seen[-1]
            assert "your message is saved" in seen[-1][1]["error"]
            assert bot_turns(database_url) == [("worker", "hello")]
            assert http.post(chat + "/message", json={"text": "again?"}).status_code == 409  # the reply is owed
            bot.start()
            with http.post(chat + "/stream", json={}, stream=True) as resumed:
                kind, final = list(events(resumed))[-1]
    finally:
        bot.stop()
    whole = " ".join(["reply1"] + [f"w{i}" for i in range(1, 20)])
    assert kind == "state" and final["turns"][-1]["text"] == whole
    assert bot_turns(database_url) == [("worker", "hello"), ("bot", whole)]


def test_a_bot_that_does_not_stream_gives_its_whole_reply_as_one_piece(tmp_path, database_url, web):
    port = free_port()
    bot = bot_process(port, tmp_path / "bot.log").start()  # answers JSON whatever it is asked
    try:
        wait_http(f"http://127.0.0.1:{port}/v1/models")
        study = start_study(
            tmp_path, database_url, chat_study(tmp_path, database_url, f"http://127.0.0.1:{port}"), web.url
        )
        with requests.Session() as http:
            chat = open_chat(http, web.url, study, database_url)
            with http.post(chat + "/stream", json={"text": "hello"}, stream=True) as reply:
                seen = list(events(reply))
    finally:
        bot.stop()
    assert [d["text"] for k, d in seen if k == "text"] == ["reply 1"]
    assert seen[-1][0] == "state" and seen[-1][1]["turns"][-1]["text"] == "reply 1"
    assert bot_turns(database_url) == [("worker", "hello"), ("bot", "reply 1")]
    with session_scope(database_url) as s:
        first, total = s.execute(select(Turn.first_token_ms, Turn.reply_ms).where(Turn.speaker == "bot")).one()
    assert first is not None and first <= total  # the whole reply was its one piece: shown as it arrived


def test_twenty_concurrent_streamed_retries_make_one_generation_for_one_owed_reply(
    tmp_path, database_url, typing_bots, web, monkeypatch
):
    from concurrent.futures import ThreadPoolExecutor

    import server.chat
    from hitkit.worker.streams import StreamLimits

    # The claim on an owed reply is what is tested here, not the bound on one worker's streams
    # (test_stream_bounds.py): twenty at once are admitted.
    monkeypatch.setattr(server.chat, "LIMITS", StreamLimits(per_assignment=30, per_worker=30))
    server, typists = typing_bots
    study = start_study(tmp_path, database_url, chat_study(tmp_path, database_url, server.url), web.url)
    with requests.Session() as http:
        chat = open_chat(http, web.url, study, database_url)
        left = http.post(chat + "/stream", json={"text": "hello"}, stream=True)
        next(events(left))  # the first piece arrives, then the page goes away
        left.close()
        deadline = time.monotonic() + 10
        while sum(t.cancelled for t in typists.values()) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        cookies = http.cookies.get_dict()

    def resume(_: int):
        with requests.Session() as own:
            own.cookies.update(cookies)
            with own.post(chat + "/stream", json={}, stream=True, timeout=60) as reply:
                return list(events(reply))[-1]

    with ThreadPoolExecutor(20) as pool:
        finals = list(pool.map(resume, range(20)))
    whole = " ".join(["reply1"] + [f"w{i}" for i in range(1, 20)])
    assert all(kind == "state" and data["turns"][-1]["text"] == whole for kind, data in finals), finals[:2]
    assert sum(t.started for t in typists.values()) == 2  # the abandoned one, then one for all twenty
    assert bot_turns(database_url) == [("worker", "hello"), ("bot", whole)]


def test_a_bot_that_refuses_to_stream_is_asked_for_its_whole_reply():
    """A server answering ``stream: true`` with HTTP 400 (as hitkit's own did before it could stream)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from hitkit.bots.client import BotClient, BotConfig

    asked: list[bool] = []

    class Refuses(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - stdlib naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append(bool(body.get("stream")))
            status, payload = (
                (400, {"error": {"message": "streaming is not supported; send stream=false"}})
                if body.get("stream")
                else (200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"}}]})
            )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refuses)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        client = BotClient(BotConfig(name="old", url=f"http://127.0.0.1:{server.server_address[1]}", model="old"))
        seen: list[str] = []
        assert client.reply([{"role": "user", "content": "hi"}], on_text=seen.append) == "whole"
    finally:
        server.shutdown()
        server.server_close()
    assert asked == [True, False] and seen == ["whole"]
