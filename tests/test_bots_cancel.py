"""A reply nobody waits for stops costing compute: client killed, deadline passed, retries joined.

Real HTTP to hitkit's bot server hosting a tiny random Llama (built offline, as in
test_bots_server), slowed to ~20 ms a step so that a generation is still running when the client
goes away. Every assertion is on the server's own counters and state.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
import requests

from hitkit.bots.client import BotClient, BotConfig
from hitkit.bots.server import BotServer
from tests.extras import require
from tests.test_bots_server import build_tiny_model

# torch and transformers are imported where they are used (tests/extras.py says why).
require("torch", "transformers", reason="the bot server tests need the bots extra (torch, transformers)")

EOS = 3
LONG = 200  # tokens: ~4 s at 20 ms a step, far longer than any client below waits


class _Slow:
    """Wraps a model: every forward pass takes at least ``step_s`` and never proposes EOS, so a
    generation runs its whole budget unless it is cancelled."""

    def __init__(self, inner, step_s: float = 0.02, gate: threading.Event | None = None) -> None:
        self.inner = inner
        self.step_s = step_s
        self.gate = gate

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def __call__(self, **kwargs):
        if self.gate is not None:
            self.gate.wait(120)  # held until the test has seen what it waits for
        time.sleep(self.step_s)
        out = self.inner(**kwargs)
        out.logits[..., EOS] = float("-inf")
        return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from hitkit.bots.hf_model import load_model

    return load_model(build_tiny_model(tmp_path_factory.mktemp("tiny_cancel"), seed=0), device="cpu")


@pytest.fixture
def server(tiny):
    from hitkit.bots.engine import HFBackend

    model, tokenizer = tiny
    backend = HFBackend("tiny", _Slow(model), tokenizer, max_batch=8, batch_window_ms=1)
    with BotServer({"tiny": backend}, port=0) as srv:
        srv.jobs.grace_s = 0.5
        yield srv, backend


def body(max_tokens: int = LONG) -> dict:
    return {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hello , how are you ?"}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }


def wait_for(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_killing_the_client_mid_generation_stops_the_generation(server):
    srv, backend = server
    client = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import json, sys, requests\n"
                f"requests.post({srv.url + '/v1/chat/completions'!r}, json=json.loads(sys.argv[1]), timeout=60)\n"
            ),
            __import__("json").dumps(body()),
        ]
    )
    try:
        assert wait_for(lambda: backend.stats()["running"] == 1 and backend.stats()["decode_steps"] >= 5)
        client.kill()
        client.wait(5)
        assert wait_for(lambda: backend.stats()["running"] == 0, timeout_s=3.0)
    finally:
        client.kill()
    stats = backend.stats()
    assert stats["cancelled"] == 1 and stats["requests"] == 0
    assert 5 <= stats["cancelled_tokens"] < LONG  # it was decoding, and it stopped well short of its budget
    steps = stats["decode_steps"]
    time.sleep(0.3)
    assert backend.stats()["decode_steps"] == steps  # nothing decodes for a client that is gone
    health = requests.get(f"{srv.url}/health", timeout=5).json()
    assert health["cancelled"]["disconnected"] == 1 and health["in_flight"] == 0 and health["running"] == 0


def test_a_passed_deadline_cancels_the_generation_and_answers_504(server):
    srv, backend = server
    started = time.monotonic()
    r = requests.post(f"{srv.url}/v1/chat/completions", json=body(), headers={"X-Hitkit-Deadline-S": "0.4"}, timeout=10)
    assert r.status_code == 504 and "deadline" in r.json()["error"]["message"]
    assert time.monotonic() - started < 2.0
    assert wait_for(lambda: backend.stats()["cancelled"] == 1 and backend.stats()["running"] == 0)
    health = requests.get(f"{srv.url}/v1/hitkit/stats", timeout=5).json()
    assert health["cancelled"]["deadline"] == 1 and health["timeouts"] == 1
    assert health["models"]["tiny"]["cancelled"] == 1


def test_a_retry_with_the_same_key_joins_the_running_generation(server):
    srv, backend = server
    key = {"Idempotency-Key": "reply-42"}
    url = f"{srv.url}/v1/chat/completions"
    # The first attempt gives up after 0.3 s, as a client timeout does; the generation goes on.
    with pytest.raises(requests.Timeout):
        requests.post(url, json=body(40), headers=key, timeout=0.3)
    retry = requests.post(url, json=body(40), headers=key, timeout=10)
    assert retry.status_code == 200 and retry.json()["usage"]["completion_tokens"] == 40
    stats = backend.stats()
    assert stats["prefills"] == 1 and stats["requests"] == 1 and stats["cancelled"] == 0
    # A retry arriving after the reply finished gets the same reply, with no new generation.
    again = requests.post(url, json=body(40), headers=key, timeout=10)
    assert again.json()["choices"][0]["message"]["content"] == retry.json()["choices"][0]["message"]["content"]
    assert backend.stats()["prefills"] == 1
    assert requests.get(f"{srv.url}/health", timeout=5).json()["deduplicated"] == 2


def test_an_abandoned_keyed_generation_is_cancelled_after_the_grace_period(server):
    srv, backend = server
    with pytest.raises(requests.Timeout):
        requests.post(f"{srv.url}/v1/chat/completions", json=body(), headers={"Idempotency-Key": "gone"}, timeout=0.3)
    assert wait_for(lambda: backend.stats()["cancelled"] == 1, timeout_s=3.0)
    assert backend.stats()["running"] == 0


def test_bot_client_retries_never_stack_generations(tiny):
    from hitkit.bots.engine import HFBackend

    # The generation is held until a retry has joined it (the server counts it as deduplicated), so the
    # first attempt always times out and the test waits on that event, not on the machine's speed.
    model, tokenizer = tiny
    gate = threading.Event()
    backend = HFBackend("tiny", _Slow(model, gate=gate), tokenizer, max_batch=8, batch_window_ms=1)
    with BotServer({"tiny": backend}, port=0) as srv:
        srv.jobs.grace_s = 0.5

        def open_once_joined() -> None:
            wait_for(lambda: requests.get(f"{srv.url}/health", timeout=5).json()["deduplicated"] >= 1, 60)
            gate.set()

        opener = threading.Thread(target=open_once_joined, daemon=True)
        opener.start()
        client = BotClient(
            BotConfig(
                name="slow",
                url=srv.url,
                model="tiny",
                max_tokens=5,
                temperature=0,
                timeout_s=0.5,
                retries=10,
                backoff_s=0.05,
            )
        )
        text = client.reply([{"role": "user", "content": "hello"}])
        opener.join(5)
        assert text and gate.is_set()
        stats = backend.stats()
        assert requests.get(f"{srv.url}/health", timeout=5).json()["deduplicated"] >= 1  # it did retry
        assert stats["prefills"] == 1 and stats["requests"] == 1 and stats["cancelled"] == 0
        _concurrent_replies_are_separate_generations(client, backend)


def _concurrent_replies_are_separate_generations(client, backend):
    # Concurrent replies are separate generations, decoded together.
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(client.reply([{"role": "user", "content": "hi"}])))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and backend.stats()["requests"] == 4


def test_a_streamed_reply_comes_in_pieces_that_add_up_to_the_whole_reply(server):
    """``stream: true`` on the transformers engine: the reply so far is sent as it decodes, and the
    pieces joined are exactly the reply the same request gets unstreamed (temperature 0)."""
    srv, _ = server
    whole = requests.post(srv.url + "/v1/chat/completions", json=body(40), timeout=30).json()
    text = whole["choices"][0]["message"]["content"]
    client = BotClient(BotConfig(name="tiny", url=srv.url, model="tiny", max_tokens=40, temperature=0.0))
    seen: list[str] = []
    streamed = client.reply([{"role": "user", "content": "hello , how are you ?"}], on_text=seen.append)
    assert streamed == text and text
    growing = [t for t in seen if t]
    assert len(growing) >= 3 and growing[-1] == text  # ~0.8 s of decoding, read every 50 ms
    assert all(text.startswith(t) for t in growing) and growing == sorted(growing, key=len)
    raw = requests.post(srv.url + "/v1/chat/completions", json={**body(40), "stream": True}, timeout=30)
    assert raw.headers["Content-Type"] == "text/event-stream"
    lines = [line for line in raw.text.split("\n") if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    last = json.loads(lines[-2][6:])
    assert last["object"] == "chat.completion.chunk" and last["choices"][0]["finish_reason"] == "length"
    assert last["usage"]["completion_tokens"] == 40
