"""The Quickstart's launch, run while two CPU-bound processes compete for the cores: it must finish.

Runs ``hitkit launch`` on ``examples/live_chat.yaml`` (the embedded default: SQLite, the simulated
crowd, SmolLM2 served by ``hitkit bots serve``) with its output in a temporary folder and its bot
server on a free port, while ``--hogs`` (default 2) processes spin on the CPU for the whole run.
During the run it polls the bot server's ``/health`` for its counters; at the end it reads the
study's ``bot_*`` events from the database. Prints::

    RESULT finished=0|1 minutes=… timeouts=… cancelled=… unavailable=… server_timeouts=…

``finished`` is 1 when the launch exited 0 and wrote its export; ``timeouts`` counts bot replies
that timed out on the client side (``bot_timeout`` event occurrences); ``cancelled`` counts
generations the bot server dropped because nobody waited for them any more; ``unavailable`` counts
``bot_unavailable`` occurrences; ``server_timeouts`` counts replies cut at the client's deadline.

Usage: ``python benchmarks/quickstart_under_load.py [--hogs 2] [--timeout-min 20] [--hits N]``.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests
import yaml

ROOT = Path(__file__).resolve().parents[1]
HOG = "while True:\n    pass\n"


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def study_file(folder: Path, hits: int | None) -> tuple[Path, Path, str]:
    """The example study, its output and bot port moved out of the way; (file, out dir, bot url)."""
    text = (ROOT / "examples" / "live_chat.yaml").read_text()
    port = free_port()
    text = re.sub(r"http://127\.0\.0\.1:8011", f"http://127.0.0.1:{port}", text)
    data = yaml.safe_load(text)
    data["out"] = str(folder / "runs")
    data["bots"]["serve"]["port"] = port
    if hits:
        data["live_chat"]["hits"] = hits
    path = folder / "live_chat.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, folder / "runs" / data["study"], f"http://127.0.0.1:{port}"


def poll_health(url: str, stop: threading.Event, last: dict) -> None:
    """Keep the bot server's latest /health counters in ``last`` until ``stop``."""
    while not stop.wait(2.0):
        try:
            last.update(requests.get(f"{url}/health", timeout=2).json())
        except (requests.RequestException, ValueError):
            pass


def bot_events(db: Path) -> dict[str, int]:
    """Occurrences of each bot_* event kind in the study's database."""
    from sqlalchemy import select

    from hitkit.bots.health import KINDS
    from hitkit.db.models import Event
    from hitkit.db.session import session_scope

    counts = dict.fromkeys(KINDS, 0)
    if not db.exists():
        return counts
    with session_scope(f"sqlite:///{db}") as s:
        for event in s.scalars(select(Event).where(Event.kind.in_(KINDS))):
            counts[event.kind] += int((event.data or {}).get("occurrences", 1))
    return counts


def main() -> None:
    """Run the launch under load and print the RESULT line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hogs", type=int, default=2, help="CPU-bound processes competing for the cores")
    parser.add_argument("--timeout-min", type=float, default=20.0, help="give up on the launch after this")
    parser.add_argument("--hits", type=int, default=None, help="HITs (default: the example's)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="hitkit-quickstart-load-"))
    path, out_dir, bot_url = study_file(folder, args.hits)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(args.hogs)]
    last: dict = {}
    stop = threading.Event()
    poller = threading.Thread(target=poll_health, args=(bot_url, stop, last), daemon=True)
    print(f"launching {path} with {args.hogs} CPU hogs; output in {out_dir}", flush=True)
    started = time.monotonic()
    poller.start()
    try:
        launch = subprocess.run(
            [
                sys.executable,
                "-m",
                "hitkit.cli",
                "launch",
                str(path),
                "--yes",
                "--no-progress",
                "--timeout",
                str(args.timeout_min * 60),
            ],
            cwd=ROOT,
            env=env,
            timeout=args.timeout_min * 60 + 120,
        )
        code = launch.returncode
    except subprocess.TimeoutExpired:
        code = -1
    finally:
        stop.set()
        for hog in hogs:
            hog.kill()
            hog.wait()
    minutes = (time.monotonic() - started) / 60
    exported = any((out_dir / "export").glob("*.csv")) if (out_dir / "export").is_dir() else False
    finished = int(code == 0 and exported)
    events = bot_events(out_dir / "hitkit.db")
    cancelled = last.get("cancelled_total", "n/a")
    print(f"launch exit status {code}; export written: {exported}; last bot server health: {last}")
    print(
        f"RESULT finished={finished} minutes={minutes:.1f} timeouts={events['bot_timeout']} "
        f"cancelled={cancelled} unavailable={events['bot_unavailable']} "
        f"server_timeouts={last.get('timeouts', 'n/a')}"
    )


if __name__ == "__main__":
    main()
