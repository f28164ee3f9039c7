"""Streams cannot starve the server (issue 40): one worker opening 60 chat streams while the bots hang gets
two, the rest refused at once with 429 and a sentence; a bystander's page is answered at once; the two
streams end at their deadline (though the bot keeps the connection alive) with the neutral "still writing" words, and give their places back.
Real HTTP: the embedded web server (16 threads, as hitkit serves) and a bot that accepts and never answers.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from sqlalchemy import select

import server.chat
from hitkit.db.models import Turn
from hitkit.db.session import session_scope
from hitkit.study.stored import resolve_secret
from hitkit.worker.streams import BUSY, StreamLimits, TooManyStreams, refusal
from server.embedded import WebServer
from tests.test_chat_streaming import events, open_chat
from tests.test_fault_tolerance import chat_study, start_study


class HangingBots(ThreadingHTTPServer):
    """An OpenAI-style bot server that answers a stream's headers and then only keep-alive comments, every
    0.3 s, until released: no read ever times out, and no text ever comes."""

    daemon_threads = True

    def __init__(self) -> None:
        self.release = threading.Event()
        super().__init__(("127.0.0.1", 0), _Hang)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Hang(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - stdlib naming
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        try:
            while not self.server.release.wait(0.3):  # type: ignore[attr-defined]
                self.wfile.write(b": thinking\n\n")
                self.wfile.flush()
        except OSError:
            pass  # the client left

    def log_message(self, *args):
        pass


@pytest.fixture
def hanging():
    bots = HangingBots()
    threading.Thread(target=bots.serve_forever, daemon=True).start()
    yield bots
    bots.release.set()
    bots.shutdown()


@pytest.fixture
def web(database_url, monkeypatch):
    monkeypatch.setattr(server.chat, "LIMITS", StreamLimits())  # this test's own count
    web = WebServer(database_url, "127.0.0.1", 0, 16, resolve_secret(database_url)).start()
    yield web
    web.stop()


def test_sixty_streams_of_one_worker_on_hanging_bots_leave_the_server_to_everyone_else(
    tmp_path, database_url, hanging, web
):
    study = start_study(tmp_path, database_url, chat_study(tmp_path, database_url, hanging.url), web.url)
    attacker = requests.Session()
    chat = open_chat(attacker, web.url, study, database_url)
    bystander = requests.Session()
    page = bystander.get(f"{web.url}/s/{study}/hit/2", params={"workerId": "W-b", "assignmentId": "W-b-1"})
    assert page.status_code == 200
    bystander_task = page.url.split("?")[0]

    def one_stream(i: int) -> tuple[int, list, float]:
        began = time.monotonic()
        with requests.Session() as own:
            own.cookies.update(attacker.cookies.get_dict())
            body = {"text": "hello"} if i == 0 else {}
            with own.post(chat + "/stream", json=body, stream=True, timeout=60) as reply:
                if reply.headers.get("Content-Type", "").startswith("text/event-stream"):
                    return reply.status_code, list(events(reply)), time.monotonic() - began
                return reply.status_code, [("json", reply.json())], time.monotonic() - began

    with ThreadPoolExecutor(60) as pool:
        first = pool.submit(one_stream, 0)
        time.sleep(0.5)  # the message is stored and its bot call hangs
        rest = [pool.submit(one_stream, i) for i in range(1, 60)]
        time.sleep(1.0)  # every stream is open or refused by now
        asked = time.monotonic()
        state = bystander.get(bystander_task + "state", headers={"Accept": "application/json"}, timeout=10)
        bystander_s = time.monotonic() - asked
        results = [first.result(), *(f.result() for f in rest)]

    assert state.status_code == 200 and bystander_s < 2.0, bystander_s
    refused = [r for r in results if r[0] == 429]
    streamed = [r for r in results if r[0] == 200]
    assert len(streamed) == 2 and len(refused) == 58, [r[0] for r in results]
    assert all(r[1] == [("json", {"error": BUSY})] and r[2] < 2.0 for r in refused)
    # Each admitted stream ended at its deadline (the bot's whole budget: 3 s, one attempt), though the bot
    # kept its connection alive, telling the worker the reply is still owed, in words that name no bot.
    for _, got, took in streamed:
        kind, data = got[-1]
        assert kind == "error" and data["waiting"] and "qc" not in data["error"] and "http" not in data["error"]
        assert 2.5 < took < 8.0, took
    with session_scope(database_url) as s:
        assert s.execute(select(Turn.speaker, Turn.text)).all() == [("worker", "hello")]
    # Places are given back once the hung bot calls time out: the worker may ask again.
    deadline = time.monotonic() + 10
    while server.chat.LIMITS.held() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.chat.LIMITS.held() == 0


def test_the_bounds_per_assignment_and_per_worker():
    assert refusal(1, 1, 2, 4) is None
    assert refusal(2, 2, 2, 4) == "assignment holds 2 of 2"
    assert refusal(0, 4, 2, 4) == "worker holds 4 of 4"
    limits = StreamLimits(per_assignment=2, per_worker=3)
    held = [limits.admit("a1", "w"), limits.admit("a1", "w"), limits.admit("a2", "w")]
    with pytest.raises(TooManyStreams) as refused:
        limits.admit("a1", "w")
    assert refused.value.status == 429
    with pytest.raises(TooManyStreams):
        limits.admit("a3", "w")  # a third assignment of the same worker: over the worker's bound
    other = limits.admit("b1", "someone else")
    held[0].release()
    held[0].release()  # twice is once
    assert limits.held() == 3 and limits.refused == 2
    limits.admit("a1", "w")
    other.release()
    with pytest.raises(ValueError, match="at least 1"):
        StreamLimits(per_assignment=0)
    assert json.dumps(BUSY)  # a sentence the page shows as it is


def test_a_relayed_stream_ends_at_its_deadline_and_gives_its_place_back_once_the_exchange_ends_too():
    from hitkit.worker.chat_stream import STILL_WRITING, relay

    hung, ended = threading.Event(), []

    def exchange(on_text):
        on_text("a first piece")
        hung.wait(10)  # a bot that says nothing more
        on_text("too late")  # the page is gone by now: this raises, and nothing is stored

    began = time.monotonic()
    stream = relay(exchange, keepalive_s=0.1, deadline_s=0.5, on_end=lambda: ended.append(time.monotonic()))
    got = list(stream)
    took = time.monotonic() - began
    assert got[0].startswith(b"event: text") and b"keep-alive" in got[1]
    assert got[-1] == f"event: error\ndata: {json.dumps({'error': STILL_WRITING, 'waiting': True})}\n\n".encode()
    assert 0.5 <= took < 1.5, took
    stream.close()
    assert ended == []  # the exchange still holds its thread: the place is not given back yet
    hung.set()
    deadline = time.monotonic() + 5
    while not ended and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(ended) == 1
    unread = relay(lambda on_text: None, on_end=lambda: ended.append(0.0))
    unread.close()  # never read: no exchange ran, and the place is given back at once
    assert len(ended) == 2
