"""OpenAI's ``logprobs`` / ``top_logprobs`` on hitkit's bot server, checked against a direct forward pass
of the tiny random Llama the other bot-server tests use."""

from __future__ import annotations

import math

import numpy as np
import pytest
import requests

from hitkit.bots.corpus import Dialogue
from hitkit.bots.degraded import DegradedBackend, DegradedBot
from hitkit.bots.logprobs import row_logprobs
from hitkit.bots.server import BotServer
from tests.extras import require
from tests.test_bots_server import build_tiny_model

# torch and transformers are imported where they are used (tests/extras.py says why).
require("torch", "transformers", reason="the bot server tests need the bots extra (torch, transformers)")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from hitkit.bots.hf_model import load_model

    return load_model(build_tiny_model(tmp_path_factory.mktemp("tiny_logprobs"), seed=0), device="cpu")


@pytest.fixture(scope="module")
def server(tiny):
    from hitkit.bots.engine import HFBackend

    model, tokenizer = tiny
    qc = DegradedBackend(
        "qc",
        DegradedBot(
            [Dialogue("d1", ("hi there", "hello my friend")), Dialogue("d2", ("what is up", "nothing much"))], seed=3
        ),
    )
    with BotServer(
        {"tiny": HFBackend("tiny", model, tokenizer, max_batch=4, batch_window_ms=1), "qc": qc}, port=0
    ) as srv:
        yield srv


def post(url: str, **body) -> requests.Response:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hello , how are you ?"}], **body}
    return requests.post(f"{url}/v1/chat/completions", json=body, timeout=30)


def direct_logprobs(tiny, content: str, generated: list[int]) -> np.ndarray:
    """log softmax of the logits at each reply step, from one plain forward pass over prompt + reply."""
    import torch

    model, tokenizer = tiny
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    ids = torch.tensor([prompt + generated])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float()
    return torch.log_softmax(logits[len(prompt) - 1 : len(prompt) - 1 + len(generated)], dim=-1).numpy()


@pytest.mark.parametrize("temperature", [0.0, 1.3])
def test_logprobs_are_the_log_softmax_of_each_steps_logits(server, tiny, temperature):
    response = post(server.url, max_tokens=6, temperature=temperature, seed=7, logprobs=True, top_logprobs=5)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    entries = choice["logprobs"]["content"]
    assert 1 <= len(entries) <= 6
    tokenizer = tiny[1]
    generated = [tokenizer.convert_tokens_to_ids(e["token"]) for e in entries]
    direct = direct_logprobs(tiny, "hello , how are you ?", generated)
    for step, (entry, token) in enumerate(zip(entries, generated)):
        assert entry["logprob"] == pytest.approx(float(direct[step, token]), abs=1e-5)
        assert entry["bytes"] == list(entry["token"].encode("utf-8"))
        top = entry["top_logprobs"]
        assert len(top) == 5
        assert [t["logprob"] for t in top] == sorted((t["logprob"] for t in top), reverse=True)
        best = np.sort(direct[step])[::-1][:5]
        assert [t["logprob"] for t in top] == pytest.approx(best.tolist(), abs=1e-5)
        assert sum(math.exp(t["logprob"]) for t in top) <= 1 + 1e-9
        if temperature == 0:  # greedy: the chosen token is the most likely one
            assert top[0]["token"] == entry["token"]
    assert " ".join(e["token"] for e in entries).strip() == choice["message"]["content"]


def test_no_logprobs_unless_asked_and_zero_alternatives(server):
    plain = post(server.url, max_tokens=3, temperature=0).json()["choices"][0]
    assert plain["logprobs"] is None
    bare = post(server.url, max_tokens=3, temperature=0, logprobs=True).json()["choices"][0]
    assert bare["logprobs"]["content"] and all(e["top_logprobs"] == [] for e in bare["logprobs"]["content"])
    assert all(e["logprob"] <= 0 for e in bare["logprobs"]["content"])


@pytest.mark.parametrize(
    ("body", "param", "words"),
    [
        ({"logprobs": True, "top_logprobs": 21}, "top_logprobs", "less than or equal to 20"),
        ({"logprobs": True, "top_logprobs": -1}, "top_logprobs", "greater than or equal to 0"),
        ({"top_logprobs": 3}, "top_logprobs", "needs logprobs: true"),
        ({"logprobs": True, "stream": True}, "logprobs", "whole replies only"),
        ({"logprobs": "maybe"}, "logprobs", "boolean"),
        ({"model": "qc", "logprobs": True}, "logprobs", "not available with the degraded backend"),
    ],
)
def test_bad_logprobs_fields_are_a_400_naming_the_field(server, body, param, words):
    response = post(server.url, max_tokens=3, **body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert words in error["message"]


def test_row_logprobs_matches_a_direct_log_softmax():
    logits = np.array([2.0, -1.0, 0.5, 3.0, 3.0])
    step = row_logprobs(logits, chosen=2, k=3)
    lp = logits - np.log(np.exp(logits).sum())
    assert step.logprob == pytest.approx(lp[2])
    assert [i for i, _ in step.top] == [3, 4, 0]
    assert [v for _, v in step.top] == pytest.approx([lp[3], lp[4], lp[0]])
    assert row_logprobs(logits, chosen=0, k=0).top == ()
