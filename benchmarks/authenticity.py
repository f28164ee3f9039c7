"""How well the authenticity checks tell LLM pasters from honest typists, over real HTTP.

Runs a seeded live-chat study with the simulated crowd on the embedded stack (SQLite, the worker pages
served by waitress, scripted degraded bots served over the OpenAI protocol): ``--honest`` workers split
evenly over the honest profiles ``diligent``, ``slow_typist`` and ``phone``, and ``--pasters``
``llm_paster`` workers, each taking one HIT of six chats of ``--messages`` messages, posting the
signals a browser would with every message, topic and comment on the whole HIT (about a third of HITs end
with one). Then it reads the export's
``authenticity_workers.csv`` and prints, last::

    RESULT caught=… false_flags=…

``caught`` is the share of llm_pasters flagged for review, ``false_flags`` the share of honest workers
flagged (phone and slow typists included). The target is caught ≥ 0.90 at false_flags ≤ 0.02.

Usage: ``python benchmarks/authenticity.py [--honest 60] [--pasters 30] [--messages 3] [--seed 11]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HONEST = ("diligent", "slow_typist", "phone")
SYSTEMS = ("anna", "bert", "cleo", "dora", "emil", "qc")


def study_file(folder: Path, bot_url: str, honest: int, pasters: int, messages: int, seed: int) -> Path:
    """The benchmark's study: one HIT per worker, each worker one HIT."""
    workers = [
        {"profile": p, "count": honest // len(HONEST) + (i < honest % len(HONEST))} for i, p in enumerate(HONEST)
    ] + [{"profile": "llm_paster", "count": pasters}]
    data = {
        "study": "authenticity-bench",
        "task": "live_chat",
        "seed": seed,
        "budget": "1000.00",
        "out": str(folder / "runs"),
        "database": f"sqlite:///{folder / 'hitkit.db'}",
        "systems": [
            {"name": n, "url": bot_url, "model": n, "options": {"max_tokens": 20, "timeout_s": 10}} for n in SYSTEMS
        ],
        "live_chat": {"hits": honest + pasters, "min_inputs": messages},
        "hit": {"title": "Chat with six chatbots", "reward": "2.00"},
        "schedule": {
            "per_worker_cap": 1,
            "interval_s": 0.5,
            "wave_size": honest + pasters,
            "max_concurrent": honest + pasters,
        },
        "simulated": {"workers": [w for w in workers if w["count"]], "concurrency": 8},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--honest", type=int, default=60, help="honest workers, split over " + ", ".join(HONEST))
    parser.add_argument("--pasters", type=int, default=30, help="llm_paster workers")
    parser.add_argument("--messages", type=int, default=3, help="messages per chat (live_chat.min_inputs)")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args(argv)

    from hitkit.bots.server import BotServer, DegradedSpec, build_backends
    from hitkit.running.launch import launch
    from server.embedded import WebServer

    bots = BotServer(build_backends(degraded=[DegradedSpec(n) for n in SYSTEMS], seed=1), port=0).start()
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="hitkit-authenticity-") as tmp:
            folder = Path(tmp)
            path = study_file(folder, bots.url, args.honest, args.pasters, args.messages, args.seed)
            result = launch(
                path, web=WebServer.serve, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=1800
            )
            if result.crowd_errors:
                print(f"crowd errors: {result.crowd_errors[:3]}", file=sys.stderr)
            export = folder / "runs" / "authenticity-bench" / "export"
            workers = pd.read_csv(export / "authenticity_workers.csv", dtype={"worker_id": str})
            answers = pd.read_csv(export / "authenticity.csv", dtype={"worker_id": str})
    finally:
        bots.shutdown()
    profile = workers["worker_id"].str.extract(r"^sim-(.+)-\d+$")[0]
    pasters, honest = workers[profile == "llm_paster"], workers[profile.isin(HONEST)]
    for name in (*HONEST, "llm_paster"):
        group = workers[profile == name]
        print(
            f"{name:12s} workers={len(group):3d} flagged={int(group['flag'].sum()):3d} "
            f"mean share of answers flagged={group['share_flagged'].mean():.3f}"
        )
    print(
        f"answers scored={len(answers)} flagged={int(answers['flagged'].sum())} "
        f"seconds={time.monotonic() - started:.0f}"
    )
    if len(pasters) != args.pasters or len(honest) != args.honest:
        print(
            f"expected {args.pasters} pasters and {args.honest} honest workers in the export, found "
            f"{len(pasters)} and {len(honest)}",
            file=sys.stderr,
        )
        return 1
    caught = pasters["flag"].mean() if len(pasters) else float("nan")
    false_flags = honest["flag"].mean() if len(honest) else float("nan")
    print(f"RESULT caught={caught:.3f} false_flags={false_flags:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
