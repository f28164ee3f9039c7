"""BotClient against scripted HTTP servers (failures, slowness, refusals) and the real bot server."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import ValidationError

from hitkit.bots.client import (
    BotClient,
    BotConfig,
    BotRequestError,
    BotUnavailable,
    approx_tokens,
    truncate_history,
)
from hitkit.bots.corpus import Dialogue
from hitkit.bots.degraded import DegradedBackend, DegradedBot
from hitkit.bots.server import BotServer


class ScriptedBot(ThreadingHTTPServer):
    """Answers each POST with the next scripted action; records bodies and peak concurrency.

    Actions: ``("ok", text)``, ``("status", code)``, ``("status", code, retry_after)``,
    ``("sleep", seconds)`` (then ok), ``("garbage",)`` (200 without choices).
    """

    daemon_threads = True
    request_queue_size = 64  # the default backlog of 5 delays a sixth simultaneous connect by 1 s

    def __init__(self, script: list[tuple], default: tuple = ("ok", "fine thanks")) -> None:
        super().__init__(("127.0.0.1", 0), _ScriptedHandler)
        self.script = list(script)
        self.default = default
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0

    def next_action(self, body: dict) -> tuple:
        with self.lock:
            self.bodies.append(body)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return self.script.pop(0) if self.script else self.default

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _ScriptedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ScriptedBot

    def log_message(self, *args) -> None:
        pass

    def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        # The call leaves the count before its reply is sent: once the client has the reply it may send
        # the next call at once, which must not meet this one still counted (a false peak).
        self._leave()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802
        self._left = False
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        action = self.server.next_action(body)
        try:
            kind = action[0]
            if kind == "sleep":
                time.sleep(action[1])
                action = ("ok", "sorry, I was slow")
                kind = "ok"
            if kind == "ok":
                self._json(200, {"choices": [{"message": {"role": "assistant", "content": action[1]}}]})
            elif kind == "garbage":
                self._json(200, {"nothing": "here"})
            else:
                headers = {"Retry-After": str(action[2])} if len(action) > 2 else None
                self._json(action[1], {"error": {"message": f"scripted failure {action[1]}"}}, headers)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self._leave()

    def _leave(self) -> None:
        with self.server.lock:
            if not getattr(self, "_left", False):
                self._left = True
                self.server.in_flight -= 1


@pytest.fixture
def scripted(request) -> Iterator[ScriptedBot]:
    server = ScriptedBot(getattr(request, "param", []))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def config(url: str, **kw) -> BotConfig:
    base = {"name": "sys", "url": url, "model": "m", "retries": 2, "backoff_s": 0.01, "timeout_s": 5.0}
    return BotConfig(**{**base, **kw})


HISTORY = [{"role": "user", "content": "Hi there!"}]


@pytest.mark.parametrize("scripted", [[("status", 500), ("status", 503), ("ok", "hello")]], indirect=True)
def test_transient_failures_are_retried(scripted):
    with BotClient(config(scripted.url)) as client:
        assert client.reply(HISTORY) == "hello"
    assert len(scripted.bodies) == 3


@pytest.mark.parametrize("scripted", [[("status", 500)] * 5], indirect=True)
def test_bot_unavailable_after_bounded_retries(scripted):
    client = BotClient(config(scripted.url, retries=2))
    with pytest.raises(BotUnavailable) as info:
        client.reply(HISTORY)
    assert len(scripted.bodies) == 3  # first attempt + 2 retries, no more
    assert info.value.attempts == 3 and info.value.system == "sys"
    assert "HTTP 500" in str(info.value) and "scripted failure 500" in str(info.value)
    assert "wait" in str(info.value)


@pytest.mark.parametrize("scripted", [[("sleep", 1.5), ("sleep", 1.5)]], indirect=True)
def test_slow_bot_times_out_into_bot_unavailable(scripted):
    client = BotClient(config(scripted.url, timeout_s=0.3, retries=1))
    start = time.monotonic()
    with pytest.raises(BotUnavailable, match="no reply within 0.3 s"):
        client.reply(HISTORY)
    assert time.monotonic() - start < 1.4  # two 0.3 s attempts, not two 1.5 s waits
    assert len(scripted.bodies) == 2


@pytest.mark.parametrize("scripted", [[("status", 400)]], indirect=True)
def test_client_errors_are_not_retried(scripted):
    with pytest.raises(BotRequestError, match=r"HTTP 400\): scripted failure 400"):
        BotClient(config(scripted.url)).reply(HISTORY)
    assert len(scripted.bodies) == 1


@pytest.mark.parametrize("scripted", [[("status", 429, 1), ("ok", "after the pause")]], indirect=True)
def test_retry_after_is_honoured(scripted):
    start = time.monotonic()
    assert BotClient(config(scripted.url)).reply(HISTORY) == "after the pause"
    assert time.monotonic() - start >= 0.95


@pytest.mark.parametrize("scripted", [[("garbage",), ("garbage",), ("garbage",)]], indirect=True)
def test_malformed_replies_count_as_failures(scripted):
    with pytest.raises(BotUnavailable, match="without choices"):
        BotClient(config(scripted.url)).reply(HISTORY)


def test_unreachable_bot_is_unavailable():
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BotUnavailable, match="cannot connect"):
        BotClient(config(f"http://127.0.0.1:{port}", retries=1)).reply(HISTORY)


def test_concurrency_is_capped_per_system(scripted):
    scripted.default = ("sleep", 0.2)
    cfg = config(scripted.url, name="capped", max_concurrency=2)
    # Separate client objects for the same system share one cap.
    clients = [BotClient(cfg) for _ in range(6)]
    threads = [threading.Thread(target=c.reply, args=(HISTORY,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(scripted.bodies) == 6
    assert scripted.peak == 2


def test_busy_system_raises_instead_of_queueing_forever(scripted):
    scripted.default = ("sleep", 1.0)
    patient = config(scripted.url, name="busy", max_concurrency=1, timeout_s=3.0, retries=0)
    hurried = config(scripted.url, name="busy", max_concurrency=1, timeout_s=0.3, retries=0)
    replies: list[str] = []
    holder = threading.Thread(target=lambda: replies.append(BotClient(patient).reply(HISTORY)))
    holder.start()
    time.sleep(0.1)  # the patient call now holds the only slot for about a second
    with pytest.raises(BotUnavailable, match="stayed busy") as info:
        BotClient(hurried).reply(HISTORY)
    assert info.value.attempts == 0
    holder.join()
    assert replies == ["sorry, I was slow"]
    assert len(scripted.bodies) == 1


def test_payload_carries_the_config(scripted):
    cfg = config(
        scripted.url + "/v1/",
        persona="You are Ann, a nurse.",
        temperature=0.3,
        top_p=0.9,
        max_tokens=40,
        stop=["\nUser:"],
    )
    BotClient(cfg).reply(HISTORY)
    body = scripted.bodies[0]
    assert body["model"] == "m" and body["stream"] is False
    assert body["messages"][0] == {"role": "system", "content": "You are Ann, a nurse."}
    assert body["messages"][1:] == HISTORY
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["stop"]) == (0.3, 0.9, 40, ["\nUser:"])


def test_config_is_validated_at_the_edge():
    with pytest.raises(ValidationError, match="http"):
        BotConfig(name="a", url="localhost:8000", model="m")
    with pytest.raises(ValidationError, match="temprature"):
        BotConfig(name="a", url="http://x", model="m", temprature=0.5)
    with pytest.raises(ValidationError):
        BotConfig(name="a", url="http://x", model="m", retries=-1)
    assert BotConfig(name="a", url="http://x:1/v1/", model="m").url == "http://x:1"


def test_missing_api_key_env_is_reported(monkeypatch):
    monkeypatch.delenv("HITKIT_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(BotRequestError, match="HITKIT_TEST_NO_SUCH_KEY"):
        BotClient(config("http://127.0.0.1:9", api_key_env="HITKIT_TEST_NO_SUCH_KEY"))


def _turns(n: int, words: int = 20) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn{i} " + "word " * words} for i in range(n)]


def test_history_is_truncated_oldest_first_keeping_the_system_prompt():
    history = _turns(21)  # 21 turns: user first and last
    kept = truncate_history(history, "You are a friendly bot.", budget_tokens=150)
    assert kept[0].role == "system" and kept[0].content == "You are a friendly bot."
    assert kept[-1].content == history[-1]["content"]
    assert len(kept) - 1 < len(history)
    contents = [m.content for m in kept[1:]]
    assert contents == [t["content"] for t in history[-len(contents) :]]  # a suffix, in order
    assert kept[1].role == "user"  # never starts with a dangling assistant turn
    total = sum(approx_tokens(m.content) + 4 for m in kept)
    assert total <= 150


def test_history_that_fits_is_sent_whole():
    history = [{"role": "assistant", "content": "Hello! I am a bot."}, {"role": "user", "content": "Hi."}]
    kept = truncate_history(history, "", budget_tokens=1000)
    assert [m.model_dump() for m in kept] == history


def test_newest_turn_is_kept_even_when_too_long():
    history = _turns(3) + [{"role": "user", "content": "x" * 4000}]
    kept = truncate_history(history, "sys", budget_tokens=100)
    assert [m.role for m in kept] == ["system", "user"] and kept[-1].content == "x" * 4000


def test_client_against_the_real_server_hosting_the_qc_bot():
    corpus = [
        Dialogue("a", ("hi", "I like apples and pears very much")),
        Dialogue("b", ("hello", "my cat sleeps all day on sofas")),
    ]
    with BotServer({"qc": DegradedBackend("qc", DegradedBot(corpus, seed=0))}, port=0) as srv:
        client = BotClient(BotConfig(name="qc", url=srv.url, model="qc"))
        for _ in range(5):
            words = client.reply(HISTORY).split()
            assert len(words) == 7  # both responses have 7 words; distortion keeps the count
            assert (words[0], words[-1]) in {("I", "much"), ("my", "sofas")}
        with pytest.raises(BotRequestError, match="not served here"):
            BotClient(BotConfig(name="x", url=srv.url, model="nope")).reply(HISTORY)
