"""Live chat under load: simulated workers chatting through gunicorn + PostgreSQL with a stub bot.

Each of ``--workers`` threads is one worker: it arrives on its own HIT, consents (the form post
with its CSRF field), and goes through its chat slots as a person would — topic, sentiment, a
message every ``--min-gap``…``--max-gap`` seconds, the ratings after ``--turns-per-slot``
messages — until ``--duration`` seconds have passed. The bots are one stub OpenAI-compatible
server on loopback that answers after exactly ``--bot-latency`` seconds and records, per
message, how long it held the request; the *server overhead* of a chat turn is the worker's
round trip minus that time. Afterwards every turn the server acknowledged (HTTP 200 with the
turn in it) is looked up in the database: a missing one is a *lost turn*.

Everything runs on loopback and is bounded: worker threads stop at the deadline, every HTTP call
has a timeout, and the run is abandoned ``--grace`` seconds after the deadline. The PostgreSQL
database is created for the run from ``--postgres`` (default: the test server) and dropped after.

The last line is::

    RESULT workers=300 p99_overhead_ms=… errors=… lost_turns=…

Usage: ``python benchmarks/load.py`` (300 workers, 5 minutes); a smoke run:
``python benchmarks/load.py --workers 20 --duration 20 --min-gap 1 --max-gap 2``.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SYSTEMS = ["anna", "bert", "cleo", "dora", "emil", "qc"]
MARK = re.compile(r"\[(m-[0-9a-f]+)\]")


# The stub bot -------------------------------------------------------------------------------------
class StubBot(ThreadingHTTPServer):
    """An OpenAI-compatible /v1/chat/completions that answers after a fixed latency, on loopback."""

    daemon_threads = True

    def __init__(self, latency_s: float):
        self.latency_s = latency_s
        self.held: dict[str, float] = {}  # message marker -> seconds the stub held that request
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _StubHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _StubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        started = time.perf_counter()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        last = next((m["content"] for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
        time.sleep(self.server.latency_s)
        reply = json.dumps({
            "id": "stub", "object": "chat.completion", "created": int(time.time()), "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Tell me more about that."},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 5, "total_tokens": 6},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)
        mark = MARK.search(last)
        if mark:
            with self.server.lock:
                self.server.held[mark.group(1)] = time.perf_counter() - started

    def do_GET(self):  # /v1/models, for clients that probe
        reply = json.dumps({"object": "list", "data": [{"id": s, "object": "model"} for s in SYSTEMS]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


# The study, the database and gunicorn -------------------------------------------------------------
def fresh_database(admin_url: str) -> tuple[str, str]:
    """A new, migrated PostgreSQL database next to ``admin_url``: (its URL, its name)."""
    import psycopg
    from sqlalchemy.engine import make_url

    from hitkit.db.migrate import upgrade

    name = f"hitkit_load_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    upgrade(url)
    return url, name


def drop_database(admin_url: str, name: str) -> None:
    import psycopg

    from hitkit.db.session import dispose_engines

    dispose_engines()
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def write_study(folder: Path, database_url: str, bot_url: str, hits: int, turns: int) -> Path:
    data = {
        "study": "load", "task": "live_chat", "seed": 1, "budget": str(hits * 10), "out": str(folder / "runs"),
        "database": database_url,
        "systems": [{"name": s, "url": bot_url, "model": s,
                     "options": {"max_tokens": 8, "timeout_s": 30, "retries": 0, "max_concurrency": 64}}
                    for s in SYSTEMS],
        "live_chat": {"hits": hits, "min_inputs": turns},
        "hit": {"title": "Chat with six chatbots", "reward": "2.00"},
        "schedule": {"per_worker_cap": 1, "wave_size": hits, "max_concurrent": hits},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def start_study(study_file: Path, database_url: str, secret: str, base_url: str) -> None:
    from hitkit.config import load_study
    from hitkit.db.models import Study
    from hitkit.db.session import session_scope
    from hitkit.scheduler import tick
    from hitkit.study import create_study

    config = load_study(study_file)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, study_file, secret)
        s.get(Study, ctx.study_id).status = "running"
    tick(database_url, config.study, base_url)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(database_url: str, secret: str, port: int, web_workers: int, threads: int,
                   error_log: Path) -> subprocess.Popen:
    env = {**os.environ, "HITKIT_DATABASE_URL": database_url, "HITKIT_SECRET": secret,
           "HITKIT_BIND": f"127.0.0.1:{port}", "HITKIT_WEB_WORKERS": str(web_workers),
           "HITKIT_WEB_THREADS": str(threads), "HITKIT_ACCESS_LOG": os.devnull,
           # Every simulated worker arrives from loopback: one address, so the arrival limit is lifted.
           "HITKIT_ENTRY_RATE_LIMIT": "10000/10000"}
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", "ops/gunicorn.conf.py", "server.wsgi:app"],
                            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=error_log.open("w"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except requests.RequestException:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("gunicorn did not answer /health within 60 s")


# One simulated worker ------------------------------------------------------------------------------
@dataclass
class Tally:
    """What all workers saw, under one lock."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    turns: list[tuple[str, float]] = field(default_factory=list)  # (marker, round trip s) of acknowledged turns
    errors: list[str] = field(default_factory=list)
    requests: int = 0

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


class Worker(threading.Thread):
    def __init__(self, index: int, base: str, args, deadline: float, tally: Tally):
        super().__init__(name=f"worker-{index}", daemon=True)
        self.index, self.base, self.args, self.deadline, self.tally = index, base, args, deadline, tally
        self.http = requests.Session()
        self.rng = random.Random(index)

    def call(self, method: str, url: str, **kw) -> requests.Response:
        with self.tally.lock:
            self.tally.requests += 1
        return self.http.request(method, url, timeout=self.args.request_timeout, **kw)

    def pause(self, seconds: float) -> bool:
        """Sleep, unless the deadline comes first; False once it has passed."""
        left = self.deadline - time.monotonic()
        time.sleep(max(0.0, min(seconds, left)))
        return time.monotonic() < self.deadline

    def run(self) -> None:
        try:
            self.work()
        except Exception as exc:  # noqa: BLE001 - a worker's failure is counted, never fatal to the run
            self.tally.error(f"worker {self.index}: {type(exc).__name__}: {exc}")

    def work(self) -> None:
        hit = self.index + 1
        if not self.pause(self.rng.uniform(0, self.args.max_gap)):  # people do not all arrive at once
            return
        page = self.call("GET", f"{self.base}/s/load/hit/{hit}",
                         params={"workerId": f"W{hit}", "assignmentId": f"A{hit}", "hitId": f"h{hit}"})
        if page.status_code != 200:
            return self.tally.error(f"arrival {hit}: {page.status_code}")
        task = page.url.split("?")[0]
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)
        if self.call("POST", task + "consent", data={"csrf": csrf}).status_code != 200:
            return self.tally.error(f"consent {hit}")
        state = self.call("GET", task + "state").json()
        for unit in sorted(state["units"], key=lambda u: u["position"]):
            if not self.slot(task, unit):
                return

    def answer(self, task: str, unit: dict, question: str, value: str) -> bool:
        reply = self.call("POST", task + "answer", json={"unit_id": unit["unit_id"], "question": question,
                                                         "value": value})
        if reply.status_code != 200:
            self.tally.error(f"answer {question}: {reply.status_code} {reply.text[:100]}")
        return reply.status_code == 200

    def slot(self, task: str, unit: dict) -> bool:
        """One chatbot: topic, the turns, the ratings; False when the deadline has come."""
        if not (self.answer(task, unit, "topic", "travel") and self.answer(task, unit, "topic_sentiment", "like")):
            return False
        uid = unit["unit_id"]
        for _ in range(self.args.turns_per_slot):
            if not self.pause(self.rng.uniform(self.args.min_gap, self.args.max_gap)):
                return False
            mark = f"m-{secrets.token_hex(6)}"
            sent = time.perf_counter()
            try:
                reply = self.call("POST", f"{task}chat/{uid}/message",
                                  json={"text": f"I went somewhere nice last summer [{mark}]"})
            except requests.RequestException as exc:
                self.tally.error(f"message: {type(exc).__name__}")
                return False
            took = time.perf_counter() - sent
            if reply.status_code != 200:
                self.tally.error(f"message: {reply.status_code} {reply.text[:100]}")
                return False
            turns = reply.json()["turns"]
            if not any(mark in t["text"] for t in turns) or turns[-1]["speaker"] != "bot":
                self.tally.error("message: acknowledged without the turn and its reply")
                return False
            with self.tally.lock:
                self.tally.turns.append((mark, took))
        return all(self.answer(task, unit, c["question"], str(self.rng.randint(0, 100))) for c in unit["criteria"])


# The run ---------------------------------------------------------------------------------------------
def stored_worker_turns(database_url: str) -> set[str]:
    from sqlalchemy import select

    from hitkit.db.models import Turn
    from hitkit.db.session import session_scope

    with session_scope(database_url) as s:
        texts = s.scalars(select(Turn.text).where(Turn.speaker == "worker"))
        return {m.group(1) for t in texts if (m := MARK.search(t))}


def bot_replies(database_url: str) -> int:
    from sqlalchemy import func, select

    from hitkit.db.models import Turn
    from hitkit.db.session import session_scope

    with session_scope(database_url) as s:
        return s.scalar(select(func.count()).select_from(Turn).where(Turn.speaker == "bot"))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=300, help="simulated workers, one HIT each")
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of chatting (at least 300 for the "
                                                                        "real measurement)")
    parser.add_argument("--min-gap", type=float, default=3.0, help="shortest pause between a worker's turns (s)")
    parser.add_argument("--max-gap", type=float, default=8.0, help="longest pause between a worker's turns (s)")
    parser.add_argument("--turns-per-slot", type=int, default=10, help="messages per chatbot before rating it")
    parser.add_argument("--bot-latency", type=float, default=0.5, help="the stub bot's fixed reply time (s)")
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn worker processes")
    # Each request thread may hold a PostgreSQL connection: web workers x threads must stay well under the
    # server's max_connections (100 by default), shared with whatever else uses that server.
    parser.add_argument("--threads", type=int, default=8, help="threads per gunicorn worker")
    parser.add_argument("--request-timeout", type=float, default=60.0, help="client timeout of one request (s)")
    parser.add_argument("--grace", type=float, default=90.0, help="seconds after the deadline before giving up")
    parser.add_argument("--postgres", default=os.environ.get("HITKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
                        help="a PostgreSQL server URL; the run's own database is created and dropped there")
    args = parser.parse_args(argv)

    secret = secrets.token_hex(16)
    os.environ["HITKIT_SECRET"] = secret
    bot = StubBot(args.bot_latency)
    database_url, dbname = fresh_database(args.postgres)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = None
    try:
        with tempfile.TemporaryDirectory() as folder:
            study_file = write_study(Path(folder), database_url, bot.url, args.workers, args.turns_per_slot)
            start_study(study_file, database_url, secret, base)
            error_log = Path(folder) / "gunicorn.err"
            proc = start_gunicorn(database_url, secret, port, args.web_workers, args.threads, error_log)
            print(f"{args.workers} workers, {args.duration:.0f} s, a turn every {args.min_gap}-{args.max_gap} s, "
                  f"bot latency {args.bot_latency * 1000:.0f} ms, gunicorn {args.web_workers}x{args.threads} "
                  f"on PostgreSQL", flush=True)
            tally = Tally()
            started = time.monotonic()
            deadline = started + args.duration
            workers = [Worker(i, base, args, deadline, tally) for i in range(args.workers)]
            for w in workers:
                w.start()
            for w in workers:
                w.join(max(0.0, deadline + args.grace - time.monotonic()))
            elapsed = time.monotonic() - started
            hung = sum(w.is_alive() for w in workers)
            for _ in range(hung):
                tally.error("worker still running after the grace period")
            with tally.lock:
                turns = list(tally.turns)
                errors = list(tally.errors)
                total_requests = tally.requests
            stored = stored_worker_turns(database_url)
            lost = [mark for mark, _ in turns if mark not in stored]
            with bot.lock:
                held = dict(bot.held)
            overhead_ms = [(took - held[mark]) * 1000 for mark, took in turns if mark in held]
            missing_hold = sum(mark not in held for mark, _ in turns)
            print(f"elapsed {elapsed:.1f} s; requests {total_requests} ({total_requests / elapsed:.1f}/s); "
                  f"chat turns acknowledged {len(turns)} ({len(turns) / elapsed:.2f}/s); "
                  f"bot replies stored {bot_replies(database_url)}")
            if overhead_ms:
                print(f"server overhead per chat turn (round trip minus the bot's {args.bot_latency * 1000:.0f} ms): "
                      f"p50 {percentile(overhead_ms, 50):.1f} ms, p99 {percentile(overhead_ms, 99):.1f} ms, "
                      f"max {max(overhead_ms):.1f} ms, mean {statistics.fmean(overhead_ms):.1f} ms")
            if missing_hold:
                errors.append(f"{missing_hold} acknowledged turns never reached the bot")
            print(f"errors {len(errors)}; lost turns {len(lost)}")
            for line in sorted({e.splitlines()[0] for e in errors})[:10]:
                print(f"  error: {line}")
            if errors:  # the server's side of them: its distinct exception lines
                causes = {ln.strip() for ln in error_log.read_text().splitlines() if re.match(r"^\w+(\.\w+)*(Error|Exception|Timeout)\b", ln.strip())}
                for line in sorted(causes)[:10]:
                    print(f"  server: {line[:200]}")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        bot.shutdown()
        drop_database(args.postgres, dbname)
    p99 = percentile(overhead_ms, 99) if overhead_ms else float("nan")
    print(f"RESULT workers={args.workers} p99_overhead_ms={p99:.1f} errors={len(errors)} lost_turns={len(lost)}")
    return 0 if not errors and not lost else 1


if __name__ == "__main__":
    sys.exit(main())
