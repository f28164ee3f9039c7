"""hitkit's bot server over real HTTP, with tiny random Llama models built offline in tmp dirs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import requests

from hitkit.bots.client import BotClient, BotConfig
from hitkit.bots.corpus import Dialogue
from hitkit.bots.degraded import DegradedBackend, DegradedBot
from hitkit.bots.server import BotServer
from tests.extras import require

# torch and transformers are imported where they are used (tests/extras.py says why).
require("torch", "transformers", reason="the bot server tests need the bots extra (torch, transformers)")

SPECIALS = ["<pad>", "<s>", "<|im_start|>", "<|im_end|>", "<unk>"]
WORDS = (
    "system user assistant hello hi how are you i am fine good thanks what is your name the "
    "a cat dog likes to eat fish red blue green sky sea tree house car book . , ? !"
).split()
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|>"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant {% endif %}"
)
PROMPTS = [
    "hi",
    "how are you ?",
    "what is your name ? i am a cat and the dog likes to eat fish",
    "red blue green",
    "sky",
    "the sea is blue and the tree is green , the car is red",
    "good",
    "hello , what is the book ?",
]


def build_tiny_model(directory: Path, seed: int, words: list[str] = WORDS) -> Path:
    """Save a 2-layer, 32-wide random Llama and a word-level ChatML tokenizer (``words``) to ``directory``."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIALS + words)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHATML
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=3,
        pad_token_id=0,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny models with different random weights."""
    return (
        build_tiny_model(tmp_path_factory.mktemp("tiny_a"), seed=0),
        build_tiny_model(tmp_path_factory.mktemp("tiny_b"), seed=1),
    )


@pytest.fixture(scope="module")
def loaded(tiny_dirs):
    """The two tiny models, loaded once on CPU (backends share them; weights are read-only)."""
    from hitkit.bots.hf_model import load_model

    return [load_model(d, device="cpu") for d in tiny_dirs]


@pytest.fixture(scope="module")
def server(loaded):
    """One server hosting two tiny models and a degraded QC bot."""
    from hitkit.bots.engine import HFBackend

    (model_a, tok_a), (model_b, tok_b) = loaded
    corpus = [
        Dialogue("d1", ("hi there", "hello my friend how are you today")),
        Dialogue("d2", ("what is up", "nothing much just reading a long book tonight")),
    ]
    backends = {
        "tiny": HFBackend("tiny", model_a, tok_a, max_batch=8, batch_window_ms=1),
        "tiny-b": HFBackend("tiny-b", model_b, tok_b, max_batch=8, batch_window_ms=1),
        "qc": DegradedBackend("qc", DegradedBot(corpus, seed=3)),
    }
    with BotServer(backends, port=0) as srv:
        yield srv


def chat(url: str, model: str, content: str, **params) -> requests.Response:
    body = {"model": model, "messages": [{"role": "user", "content": content}], "temperature": 0, **params}
    return requests.post(f"{url}/v1/chat/completions", json=body, timeout=30)


def test_chat_completion_over_http_has_openai_shape(server):
    response = chat(server.url, "tiny", "hello , how are you ?", max_tokens=5)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "chat.completion" and body["model"] == "tiny"
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str) and choice["message"]["content"]
    usage = body["usage"]
    assert usage["prompt_tokens"] > 5
    assert 1 <= usage["completion_tokens"] <= 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    if usage["completion_tokens"] == 5:
        assert choice["finish_reason"] == "length"


def test_health_models_and_metrics(server):
    health = requests.get(f"{server.url}/health", timeout=5)
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "ok" and body["models"] == ["qc", "tiny", "tiny-b"]
    for counter in ("queue_depth", "in_flight", "running", "cancelled_total", "timeouts", "latency_s"):
        assert counter in body
    listed = requests.get(f"{server.url}/v1/models", timeout=5).json()
    assert [m["id"] for m in listed["data"]] == ["qc", "tiny", "tiny-b"]
    metrics = requests.get(f"{server.url}/metrics", timeout=5).json()
    assert metrics["tiny"]["kind"] == "transformers" and metrics["tiny"]["device"] == "cpu"
    assert metrics["qc"]["kind"] == "degraded"


def test_several_models_answer_independently(server):
    before = requests.get(f"{server.url}/metrics", timeout=5).json()
    a = chat(server.url, "tiny", "what is your name ?", max_tokens=12).json()
    b = chat(server.url, "tiny-b", "what is your name ?", max_tokens=12).json()
    qc = chat(server.url, "qc", "what is your name ?", max_tokens=50).json()
    after = requests.get(f"{server.url}/metrics", timeout=5).json()
    # Different random weights, same greedy prompt: different replies from different models.
    assert a["choices"][0]["message"]["content"] != b["choices"][0]["message"]["content"]
    assert len(qc["choices"][0]["message"]["content"].split()) >= 2
    for name in ("tiny", "tiny-b", "qc"):
        assert after[name]["requests"] == before[name]["requests"] + 1


def test_greedy_reply_matches_transformers_generate(server, loaded):
    model, tokenizer = loaded[0]
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPTS[2]}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    out = model.generate(**ids, max_new_tokens=10, do_sample=False, eos_token_id=3, pad_token_id=0)
    expected = tokenizer.decode(out[0][ids["input_ids"].shape[1] :], skip_special_tokens=True).strip()
    got = chat(server.url, "tiny", PROMPTS[2], max_tokens=10).json()
    assert got["choices"][0]["message"]["content"] == expected


def _fire_together(url: str, model: str, prompts: list[str], max_tokens: int, stagger_s: float = 0.0) -> list[str]:
    replies: list[str | None] = [None] * len(prompts)
    barrier = threading.Barrier(len(prompts))

    def one(i: int) -> None:
        barrier.wait()
        time.sleep(stagger_s * i)
        body = chat(url, model, prompts[i], max_tokens=max_tokens).json()
        replies[i] = body["choices"][0]["message"]["content"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return replies  # type: ignore[return-value]


def test_concurrent_requests_are_decoded_in_one_batch(loaded):
    from hitkit.bots.engine import HFBackend

    model, tokenizer = loaded[0]
    # A generous window so that all eight chats, released together, share the first prefill.
    backend = HFBackend("tiny", model, tokenizer, max_batch=8, batch_window_ms=500)
    with BotServer({"tiny": backend}, port=0) as srv:
        _fire_together(srv.url, "tiny", PROMPTS, max_tokens=20)
        metrics = requests.get(f"{srv.url}/metrics", timeout=5).json()["tiny"]
    assert metrics["requests"] == 8
    # All eight were admitted by one prefill; a chat whose first token is EOS leaves before the
    # first decode step, so the decode batch may be a little smaller than eight.
    assert metrics["prefill_sizes"] == {"8": 1}
    assert metrics["max_batch_size"] >= 4
    # Eight replies of up to 20 tokens took at most ~20 decode steps, not ~160.
    assert metrics["decode_steps"] <= 20


def test_batching_and_mid_flight_joins_do_not_change_greedy_replies(loaded):
    from hitkit.bots.engine import HFBackend

    model, tokenizer = loaded[0]
    one_at_a_time = HFBackend("tiny", model, tokenizer, max_batch=1)
    with BotServer({"tiny": one_at_a_time}, port=0) as srv:
        expected = [chat(srv.url, "tiny", p, max_tokens=40).json()["choices"][0]["message"]["content"] for p in PROMPTS]
        assert one_at_a_time.stats()["max_batch_size"] == 1
    batched = HFBackend("tiny", model, tokenizer, max_batch=8, batch_window_ms=0)
    with BotServer({"tiny": batched}, port=0) as srv:
        # Staggered arrivals: later chats join a batch that is already decoding.
        got = _fire_together(srv.url, "tiny", PROMPTS, max_tokens=40, stagger_s=0.01)
        stats = batched.stats()
    assert got == expected
    assert stats["prefills"] >= 2 and stats["max_batch_size"] >= 2


def test_stop_sequences_cut_the_reply(server):
    full = chat(server.url, "tiny", "how are you ?", max_tokens=30).json()
    text = full["choices"][0]["message"]["content"]
    words = text.split()
    assert len(words) >= 5, "the tiny model should not stop this early"
    stop = " ".join(words[2:4])
    # A stop sequence is a substring: the reply ends where it first appears, stop excluded.
    expected = text[: text.find(stop)].strip()
    cut = chat(server.url, "tiny", "how are you ?", max_tokens=30, stop=[stop, "zzz"]).json()
    assert cut["choices"][0]["message"]["content"] == expected
    assert cut["choices"][0]["finish_reason"] == "stop"
    assert cut["usage"]["completion_tokens"] < full["usage"]["completion_tokens"]
    as_string = chat(server.url, "tiny", "how are you ?", max_tokens=30, stop=stop).json()
    assert as_string["choices"][0]["message"]["content"] == expected


@pytest.mark.parametrize(
    "body, status, phrase",
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (b'{"model": "tiny"}', 400, "messages"),
        (b'{"model": "tiny", "messages": [{"role": "robot", "content": "x"}]}', 400, "messages.0.role"),
        (b'{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "temperature": 5}', 400, "temperature"),
        (b'{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "stream": [1]}', 400, "stream"),
        (b'{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', 400, "max_tokens"),
        (b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}', 404, "available: qc, tiny, tiny-b"),
    ],
)
def test_bad_requests_get_a_clear_error(server, body, status, phrase):
    response = requests.post(
        f"{server.url}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}, timeout=10
    )
    assert response.status_code == status
    assert phrase in response.json()["error"]["message"]


def test_wrong_method_and_route(server):
    assert requests.get(f"{server.url}/v1/chat/completions", timeout=5).status_code == 405
    missing = requests.get(f"{server.url}/v2/things", timeout=5)
    assert missing.status_code == 404 and "/v1/chat/completions" in missing.json()["error"]["message"]


def test_prompt_longer_than_the_context_is_refused(server):
    response = chat(server.url, "tiny", " ".join(["cat"] * 300), max_tokens=5)
    assert response.status_code == 400
    assert "holds at most 256" in response.json()["error"]["message"]


def test_bot_client_talks_to_the_server(server):
    config = BotConfig(
        name="tiny", url=server.url + "/v1", model="tiny", temperature=0, max_tokens=6, system_prompt="you are a cat"
    )
    with BotClient(config) as client:
        first = client.reply([{"role": "user", "content": "hi"}])
        second = client.reply(
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": first},
                {"role": "user", "content": "what is your name ?"},
            ]
        )
    assert first and second and len(first.split()) <= 6


def test_sampling_honours_temperature_and_top_p():
    import torch

    from hitkit.bots.sampling import sample_next

    logits = torch.tensor([[0.0, 3.0, 2.9, -1.0]] * 4)
    gen = torch.Generator().manual_seed(0)
    temperature = torch.tensor([0.0, 1.0, 1.0, 2.0])
    # top_p tiny: nucleus sampling keeps only the most likely token.
    top_p = torch.tensor([1.0, 1e-3, 1.0, 1e-3])
    draws = torch.stack([sample_next(logits, temperature, top_p, gen) for _ in range(200)])
    assert (draws[:, 0] == 1).all()  # greedy row
    assert (draws[:, 1] == 1).all() and (draws[:, 3] == 1).all()  # nucleus of one token
    assert set(draws[:, 2].tolist()) >= {1, 2}  # full sampling reaches the runner-up


def test_shutdown_fails_waiting_requests_and_stops_listening(loaded):
    from hitkit.bots.engine import HFBackend

    model, tokenizer = loaded[0]
    backend = HFBackend("tiny", model, tokenizer, max_batch=2)
    srv = BotServer({"tiny": backend}, port=0).start()
    url = srv.url
    assert chat(url, "tiny", "hi", max_tokens=2).status_code == 200
    srv.shutdown()
    assert not backend._thread.is_alive()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{url}/health", timeout=2)


class _FailsOnce:
    """Wraps a model so that its first forward pass raises, as a CUDA OOM or a bad kernel would."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.failures_left = 1

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def __call__(self, **kwargs):
        if self.failures_left:
            self.failures_left -= 1
            raise RuntimeError("boom in forward")
        return self.inner(**kwargs)


def test_a_failed_generation_is_a_500_and_the_model_keeps_serving(loaded):
    from hitkit.bots.engine import HFBackend

    model, tokenizer = loaded[0]
    backend = HFBackend("tiny", _FailsOnce(model), tokenizer, max_batch=4)
    with BotServer({"tiny": backend}, port=0) as srv:
        failed = chat(srv.url, "tiny", "hi", max_tokens=3)
        assert failed.status_code == 500
        assert "boom in forward" in failed.json()["error"]["message"]
        assert chat(srv.url, "tiny", "hi", max_tokens=3).status_code == 200
        stats = backend.stats()
    assert stats["errors"] == 1 and stats["requests"] == 1
