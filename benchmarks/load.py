"""Live chat under load: simulated workers chatting through gunicorn + PostgreSQL with a stub bot.

Each of ``--workers`` coroutines (one asyncio loop, one keep-alive connection each) is one
worker: it arrives on its own HIT at a random moment of the first ``--ramp`` seconds, consents
(the form post with its CSRF field), and goes through its chat slots as a person would — topic
and sentiment, a message every ``--min-gap``…``--max-gap`` seconds, after ``--turns-per-slot``
messages the seven sliders one at a time (``--click-gap`` seconds before each click) — until
``--duration`` seconds have passed. The bots are one stub OpenAI-compatible server on loopback,
in its own process, that answers after exactly ``--bot-latency`` seconds and records, per
message, how long it held the request; the *server overhead* of a chat turn is the worker's
round trip minus that time (and minus the time a QC slot's reply is held on purpose to the real bots'
latency, ``pace`` in the Server-Timing header: hitkit.worker.pacing). Afterwards every turn the server acknowledged (HTTP 200 with the
turn in it) is looked up in the database: a missing one is a *lost turn*.

Everything runs on loopback and is bounded: workers stop at the deadline, every HTTP call
has a timeout, and the run is abandoned ``--grace`` seconds after the deadline. The PostgreSQL
database is created for the run from ``--postgres`` (default: the test server) and dropped after.

The last line is::

    RESULT workers=300 p99_overhead_ms=… errors=… lost_turns=…

``--hosts N`` runs N gunicorn instances on loopback, each its own web host sharing the one
PostgreSQL database (docs/DEPLOYMENT.md), with ``--web-workers`` split between them (so N hosts on
one machine use the same CPU as one) and the workers split across them (worker i on host i mod N).
The last line then names the hosts: ``RESULT workers=300 hosts=2 p99_overhead_ms=… errors=… lost_turns=…``.

``--streams-attack N`` adds one hostile worker (its own HIT) that keeps N chat streams open from the start
to the deadline, on a bot that never answers them (its messages carry ``[hang]``, which the stub holds for
minutes): every stream refused (HTTP 429, hitkit.worker.streams) or ended is opened again a second later.
The measured workers are the others; their p99 overhead and errors are also printed as
``streams_attack_p99_overhead_ms=… streams_attack_errors=…`` at the end of the RESULT line, with the
attacker's streams admitted and refused.

Usage: ``python benchmarks/load.py`` (300 workers, 5 minutes); a smoke run:
``python benchmarks/load.py --workers 20 --duration 20 --min-gap 1 --max-gap 2``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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
from urllib.parse import urlencode, urlsplit

import requests
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SYSTEMS = ["anna", "bert", "cleo", "dora", "emil", "qc"]
MARK = re.compile(r"\[(m-[0-9a-f]+)\]")
HANG, HANG_S = "[hang]", 600.0


# The stub bot -------------------------------------------------------------------------------------
class StubBot(ThreadingHTTPServer):
    """An OpenAI-compatible /v1/chat/completions that answers after a fixed latency, on loopback."""

    daemon_threads = True
    request_queue_size = 1024  # the default (5) drops bursts of new connections, and a dropped SYN costs 1 s

    def __init__(self, latency_s: float, port: int = 0):
        self.latency_s = latency_s
        self.held: dict[str, float] = {}  # message marker -> seconds the stub held that request
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _StubHandler)


class StubBotProcess:
    """The stub bot in its own process, so its threads take no time from the measuring client."""

    def __init__(self, latency_s: float):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve-stub-bot", str(latency_s), "--stub-port", str(self.port)], cwd=REPO
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                requests.get(f"{self.url}/v1/models", timeout=2)
                return
            except requests.RequestException:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the stub bot did not start within 30 s")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def held(self) -> dict[str, float]:
        return requests.get(f"{self.url}/held", timeout=30).json()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class _StubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Like any real bot server: no Nagle delay, and the reply in one write. (Headers and body in two
    # writes with Nagle on waited for the client's delayed ACK: 20-40 ms that are no one's overhead.)
    disable_nagle_algorithm = True

    def _reply(self, body: bytes) -> None:
        head = (
            f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Date: {self.date_time_string()}\r\n\r\n"
        ).encode()
        self.wfile.write(head + body)

    def do_POST(self):
        started = time.perf_counter()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        last = next((m["content"] for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
        if HANG in last:  # the attacker's (--streams-attack): a bot that hangs
            time.sleep(HANG_S)
        else:
            time.sleep(self.server.latency_s)
        reply = json.dumps(
            {
                "id": "stub",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "stub"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Tell me more about that."},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 5, "total_tokens": 6},
            }
        ).encode()
        self._reply(reply)
        mark = MARK.search(last)
        if mark:
            with self.server.lock:
                self.server.held[mark.group(1)] = time.perf_counter() - started

    def do_GET(self):  # /v1/models, for clients that probe; /held, for the benchmark
        if self.path == "/held":
            with self.server.lock:
                reply = json.dumps(self.server.held).encode()
        else:
            reply = json.dumps({"object": "list", "data": [{"id": s, "object": "model"} for s in SYSTEMS]}).encode()
        self._reply(reply)

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


def write_study(folder: Path, database_url: str, bot_url: str, hits: int, turns: int, bot_latency: float) -> Path:
    data = {
        "study": "load",
        "task": "live_chat",
        "seed": 1,
        "budget": str(hits * 10),
        "out": str(folder / "runs"),
        "database": database_url,
        "systems": [
            {
                "name": s,
                "url": bot_url,
                "model": s,
                "options": {"max_tokens": 8, "timeout_s": 30, "retries": 0, "max_concurrency": 64},
            }
            for s in SYSTEMS
        ],
        "live_chat": {"hits": hits, "min_inputs": turns},
        # The QC slot's replies are held to the real bots' observed latency (hitkit.worker.pacing); before
        # any is observed, to the latency an operator expects of them: here the stub's, known in advance.
        "bots": {"pacing": {"cold_start_s": bot_latency}},
        "hit": {"title": "Chat with six chatbots", "reward": "2.00"},
        "schedule": {"per_worker_cap": 1, "wave_size": hits, "max_concurrent": hits},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def start_study(study_file: Path, database_url: str, secret: str, base_url: str) -> None:
    from hitkit.db.models import Study
    from hitkit.db.session import session_scope
    from hitkit.running.scheduler import tick
    from hitkit.study.loading import load_study
    from hitkit.study.stored import create_study

    config = load_study(study_file)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, study_file, secret)
        s.get(Study, ctx.study_id).status = "running"
    tick(database_url, config.study, base_url)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(
    database_url: str, secret: str, port: int, web_workers: int, threads: int, error_log: Path
) -> subprocess.Popen:
    env = {
        **os.environ,
        "HITKIT_DATABASE_URL": database_url,
        "HITKIT_SECRET": secret,
        "HITKIT_BIND": f"127.0.0.1:{port}",
        "HITKIT_SERVER_TIMING": "1",
        "HITKIT_WEB_WORKERS": str(web_workers),
        "HITKIT_WEB_THREADS": str(threads),
        "HITKIT_ACCESS_LOG": os.devnull,
        # Every simulated worker arrives from loopback: one address, so the arrival limit is lifted.
        "HITKIT_ENTRY_RATE_LIMIT": "10000/10000",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "ops/gunicorn.conf.py", "server.wsgi:app"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=error_log.open("w"),
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except requests.RequestException:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("gunicorn did not answer /health within 60 s")


# A small HTTP/1.1 client -----------------------------------------------------------------------------
@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.body)


class Http:
    """One worker's browser connection: HTTP/1.1 keep-alive over asyncio streams, loopback only.

    It is all a worker page needs (GET, form and JSON POSTs, Content-Length or chunked replies,
    redirects) and costs far less CPU than a thread per worker, so the client does not steal the
    2 cores from the server it measures. Like a browser, it resends a request once on a fresh
    connection when a *reused* idle connection turns out to have been closed before any byte of
    the reply came back (the server never read it); those resends are counted.
    """

    def __init__(self, host: str, port: int, timeout: float, tally: Tally):
        self.host, self.port, self.timeout, self.tally = host, port, timeout, tally
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None

    async def request(self, method: str, path: str, *, json_body=None, form: dict | None = None) -> Reply:
        body, kind = b"", None
        if json_body is not None:
            body, kind = json.dumps(json_body).encode(), "application/json"
        elif form is not None:
            body, kind = urlencode(form).encode(), "application/x-www-form-urlencoded"
        head = [
            f"{method} {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Accept: */*",
            f"Content-Length: {len(body)}",
        ]
        if kind:
            head.append(f"Content-Type: {kind}")
        raw = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        self.tally.requests += 1
        reused = self.writer is not None
        try:
            return await asyncio.wait_for(self._exchange(raw), self.timeout)
        except _Stale:
            if not reused:
                raise ConnectionError("the server closed a new connection without replying") from None
            self.tally.resends += 1
            await self.close()
            return await asyncio.wait_for(self._exchange(raw), self.timeout)

    async def _exchange(self, raw: bytes) -> Reply:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        try:
            self.writer.write(raw)
            await self.writer.drain()
            status_line = await self.reader.readline()
        except (ConnectionResetError, BrokenPipeError):
            raise _Stale() from None
        if not status_line:
            raise _Stale()
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while size := int((await self.reader.readline()).split(b";")[0], 16):
                chunks.append(await self.reader.readexactly(size))
                await self.reader.readline()
            await self.reader.readline()
            data = b"".join(chunks)
        else:
            data = await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return Reply(status, headers, data)


def server_timing(value: str) -> dict[str, float]:
    """``store;dur=3.1, bot;dur=501.0`` -> ``{"store": 3.1, "bot": 501.0}`` (hitkit.timing's header)."""
    phases = {}
    for item in value.split(","):
        name, _, dur = item.strip().partition(";dur=")
        if name and dur:
            phases[name] = float(dur)
    return phases


def split_overhead(turns, held: dict[str, float], phases: dict[str, dict[str, float]]) -> dict[str, list[float]]:
    """Each turn's overhead in its parts (ms): the server's two transactions, the bot client's own time
    beyond the stub's hold, the QC reply's pacing, and *outside*: the round trip minus the application's whole time (waiting
    for a gunicorn thread, the network, this client)."""
    parts: dict[str, list[float]] = {
        "store": [],
        "reply": [],
        "bot_client": [],
        "pace": [],
        "outside": [],
        "other_app": [],
    }
    commits: list[float] = []
    for mark, took in turns:
        p = phases.get(mark)
        if mark not in held or not p or "app" not in p:
            continue
        parts["store"].append(p.get("store", 0.0))
        parts["reply"].append(p.get("reply", 0.0))
        parts["bot_client"].append(p.get("bot", 0.0) - held[mark] * 1000)
        parts["pace"].append(p.get("pace", 0.0))  # a QC reply held to the real bots' latency (hitkit.worker.pacing)
        parts["other_app"].append(
            p["app"] - p.get("store", 0.0) - p.get("reply", 0.0) - p.get("bot", 0.0) - p.get("pace", 0.0)
        )
        parts["outside"].append(took * 1000 - p["app"])
        commits.append(p.get("commit", 0.0))
    return parts, commits


class _Stale(Exception):
    """The connection was closed before the reply began."""


# One simulated worker ------------------------------------------------------------------------------
@dataclass
class Tally:
    """What all workers saw (one event loop, so no lock)."""

    turns: list[tuple[str, float]] = field(default_factory=list)  # (marker, round trip s) of acknowledged turns
    errors: list[str] = field(default_factory=list)
    requests: int = 0
    resends: int = 0
    sent_at: dict[str, float] = field(default_factory=dict)  # marker -> perf_counter when sent
    phases: dict[str, dict[str, float]] = field(default_factory=dict)  # marker -> Server-Timing phases (ms)


class Worker:
    def __init__(self, index: int, port: int, args, deadline: float, tally: Tally):
        self.index, self.args, self.deadline, self.tally = index, args, deadline, tally
        self.http = Http("127.0.0.1", port, args.request_timeout, tally)
        self.rng = random.Random(index)

    async def pause(self, seconds: float) -> bool:
        """Sleep, unless the deadline comes first; False once it has passed."""
        left = self.deadline - time.monotonic()
        await asyncio.sleep(max(0.0, min(seconds, left)))
        return time.monotonic() < self.deadline

    async def run(self) -> None:
        try:
            await self.work()
        except Exception as exc:  # noqa: BLE001 - a worker's failure is counted, never fatal to the run
            self.tally.errors.append(f"worker {self.index}: {type(exc).__name__}: {exc}")
        finally:
            await self.http.close()

    async def work(self) -> None:
        hit = self.index + 1
        if not await self.pause(self.rng.uniform(0, self.args.ramp)):  # people do not all arrive at once
            return
        page = await self.http.request("GET", f"/s/load/hit/{hit}?workerId=W{hit}&assignmentId=A{hit}&hitId=h{hit}")
        while page.status in (301, 302, 303) and "location" in page.headers:
            task = urlsplit(page.headers["location"]).path
            page = await self.http.request("GET", task)
        if page.status != 200:
            return self.tally.errors.append(f"arrival {hit}: {page.status}")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)
        consent = await self.http.request("POST", task + "consent", form={"csrf": csrf})
        if consent.status not in (200, 302, 303):
            return self.tally.errors.append(f"consent {hit}: {consent.status}")
        state = (await self.http.request("GET", task + "state")).json()
        for unit in sorted(state["units"], key=lambda u: u["position"]):
            if not await self.slot(task, unit):
                return

    async def answer(self, task: str, unit: dict, question: str, value: str) -> bool:
        reply = await self.http.request(
            "POST", task + "answer", json_body={"unit_id": unit["unit_id"], "question": question, "value": value}
        )
        if reply.status != 200:
            self.tally.errors.append(f"answer {question}: {reply.status} {reply.text[:100]}")
        return reply.status == 200

    async def slot(self, task: str, unit: dict) -> bool:
        """One chatbot: topic, the turns, the ratings; False when the deadline has come."""
        for question, value in (("topic", "travel"), ("topic_sentiment", "like")):
            if not (
                await self.pause(self.rng.uniform(*self.args.click_gap))
                and await self.answer(task, unit, question, value)
            ):
                return False
        uid = unit["unit_id"]
        for _ in range(self.args.turns_per_slot):
            if not await self.pause(self.rng.uniform(self.args.min_gap, self.args.max_gap)):
                return False
            mark = f"m-{secrets.token_hex(6)}"
            sent = time.perf_counter()
            try:
                reply = await self.http.request(
                    "POST",
                    f"{task}chat/{uid}/message",
                    json_body={"text": f"I went somewhere nice last summer [{mark}]"},
                )
            except (TimeoutError, OSError, ValueError) as exc:
                self.tally.errors.append(f"message: {type(exc).__name__}")
                return False
            took = time.perf_counter() - sent
            if reply.status != 200:
                self.tally.errors.append(f"message: {reply.status} {reply.text[:100]}")
                return False
            turns = reply.json()["turns"]
            if not any(mark in t["text"] for t in turns) or turns[-1]["speaker"] != "bot":
                self.tally.errors.append("message: acknowledged without the turn and its reply")
                return False
            self.tally.turns.append((mark, took))
            self.tally.sent_at[mark] = sent
            self.tally.phases[mark] = server_timing(reply.headers.get("server-timing", ""))
        for c in unit["criteria"]:  # one slider at a time, as a person moves them
            if not (
                await self.pause(self.rng.uniform(*self.args.click_gap))
                and await self.answer(task, unit, c["question"], str(self.rng.randint(0, 100)))
            ):
                return False
        return True


@dataclass
class Attack:
    """What the hostile worker's streams got: admitted (a stream), refused (429), anything else."""

    admitted: int = 0
    refused: int = 0
    other: dict[str, int] = field(default_factory=dict)


class Attacker:
    """One worker holding ``streams`` chat streams open at once on a bot that hangs (``--streams-attack``)."""

    def __init__(self, hit: int, port: int, streams: int, args, deadline: float, attack: Attack):
        self.hit, self.port, self.streams, self.args = hit, port, streams, args
        self.deadline, self.attack = deadline, attack
        self.tally = Tally()  # its own: the attacker's requests are not the measured workers'

    async def run(self) -> None:
        http = Http("127.0.0.1", self.port, self.args.request_timeout, self.tally)
        try:
            page = await http.request("GET", f"/s/load/hit/{self.hit}?workerId=X{self.hit}&assignmentId=X{self.hit}")
            while page.status in (301, 302, 303) and "location" in page.headers:
                task = urlsplit(page.headers["location"]).path
                page = await http.request("GET", task)
            csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)
            await http.request("POST", task + "consent", form={"csrf": csrf})
            unit = (await http.request("GET", task + "state")).json()["units"][0]["unit_id"]
            for question, value in (("topic", "travel"), ("topic_sentiment", "like")):
                body = {"unit_id": unit, "question": question, "value": value}
                await http.request("POST", task + "answer", json_body=body)
        except Exception as exc:  # noqa: BLE001 - the attack failing to start is reported, not fatal
            self.attack.other[f"start: {type(exc).__name__}"] = 1
            return
        finally:
            await http.close()
        path = f"{task}chat/{unit}/stream"
        await asyncio.gather(
            *(self.stream(path, {"text": f"hello {HANG}"} if i == 0 else {}) for i in range(self.streams))
        )

    async def stream(self, path: str, first: dict) -> None:
        """Open a stream (the first with ``first``, a message; then asking the hanging bot for the owed reply)
        again and again until the deadline."""
        http = Http("127.0.0.1", self.port, self.args.request_timeout, self.tally)
        try:
            while time.monotonic() < self.deadline:
                try:
                    reply = await http.request("POST", path, json_body=first)
                    kind = reply.status
                    if kind in (200, 409):  # the message is stored (409: already, by an earlier try)
                        first = {}
                except (TimeoutError, OSError, ValueError) as exc:
                    kind = type(exc).__name__
                    await http.close()
                if kind == 200:
                    self.attack.admitted += 1
                elif kind == 429:
                    self.attack.refused += 1
                else:
                    self.attack.other[str(kind)] = self.attack.other.get(str(kind), 0) + 1
                await asyncio.sleep(min(1.0, max(0.0, self.deadline - time.monotonic())))
        finally:
            await http.close()


async def crowd(
    workers: list[Worker], deadline: float, grace: float, lag_ms: list[float], attacker: Attacker | None = None
) -> int:
    """Run every worker; those still running ``grace`` seconds after the deadline are cancelled and counted.

    Meanwhile ``lag_ms`` collects how late a 10 ms timer fires, every 10 ms: the client's own delay,
    which the round trips it measures would wrongly include.
    """
    tasks = [asyncio.ensure_future(w.run()) for w in workers]
    watch = asyncio.ensure_future(_loop_lag(deadline, lag_ms))
    hostile = [asyncio.ensure_future(attacker.run())] if attacker is not None else []
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline + grace - time.monotonic()))
    for t in [*pending, watch, *hostile]:
        t.cancel()
    return len(pending)


async def _loop_lag(deadline: float, lag_ms: list[float]) -> None:
    while time.monotonic() < deadline:
        before = time.perf_counter()
        await asyncio.sleep(0.01)
        lag_ms.append((time.perf_counter() - before - 0.01) * 1000)


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` and its live children (Linux /proc), 0 if unknown."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0
    total = 0.0
    for p in [str(pid), *children]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def postgres_cpu_seconds() -> float:
    """CPU seconds of every PostgreSQL server process on this machine (Linux /proc), for the cores' budget."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if "(postgres)" in text:
            fields = text.rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


# The host ----------------------------------------------------------------------------------------------
_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_ticks() -> dict[str, int]:
    """The host's CPU time so far, in clock ticks, by kind (the first line of /proc/stat); empty off Linux."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()[1 : 1 + len(_STAT_FIELDS)]
    except OSError:
        return {}
    return dict(zip(_STAT_FIELDS, map(int, fields)))


def host_share(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """Per cent of the host's CPU time between two :func:`cpu_ticks` readings: busy, iowait and steal.

    Steal is time the hypervisor gave this machine's virtual CPUs to someone else: a turn that
    waited for it is a slow turn no code here caused.
    """
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in _STAT_FIELDS}
    total = sum(delta.values()) or 1
    idle = delta["idle"] + delta["iowait"]
    return {
        "busy": 100 * (total - idle - delta["steal"]) / total,
        "iowait": 100 * delta["iowait"] / total,
        "steal": 100 * delta["steal"] / total,
    }


class PgWaits:
    """Samples what the run's PostgreSQL sessions are doing every ``every_s`` (pg_stat_activity).

    A session in a transaction is either running a statement (``active``: on the CPU, or waiting on
    a lock, the WAL fsync of a commit, a data file) or waiting for the web process to send the next
    one (``idle in transaction``, ClientRead: the time went in Python). The tally says which.
    """

    def __init__(self, admin_url: str, dbname: str, every_s: float = 0.05):
        self.admin_url, self.dbname, self.every_s = admin_url, dbname, every_s
        self.counts: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-waits", daemon=True)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn:
            while not self._stop.wait(self.every_s):
                rows = conn.execute(
                    "SELECT state, coalesce(wait_event_type, 'CPU'), coalesce(wait_event, '') FROM pg_stat_activity "
                    "WHERE datname = %s AND state IN ('active', 'idle in transaction') AND pid <> pg_backend_pid()",
                    (self.dbname,),
                ).fetchall()
                self.samples += 1
                for state, kind, event in rows:
                    key = f"{state}: {kind}/{event}" if event else f"{state}: {kind}"
                    self.counts[key] = self.counts.get(key, 0) + 1

    def start(self) -> PgWaits:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def summary(self) -> str:
        """Mean sessions per sample in each state, busiest first."""
        n = max(1, self.samples)
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:8]
        return ", ".join(f"{key} {count / n:.3f}" for key, count in top) or "none"


class HostMonitor:
    """Samples the host's load average and /proc/stat every few seconds while the benchmark runs.

    Printed beside the figures, so that a run on a noisy host (other work, CPU steal) shows as one.
    """

    def __init__(self, every_s: float = 5.0):
        self.every_s = every_s
        self.samples: list[tuple[float, tuple[float, float, float], dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="host-monitor", daemon=True)

    def _sample(self) -> None:
        self.samples.append((time.monotonic(), os.getloadavg(), cpu_ticks()))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def start(self) -> HostMonitor:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.every_s + 1)
        self._sample()

    def summary(self) -> dict[str, float]:
        """Load average (1 min) at the start, its peak and end, and the CPU shares over the whole run."""
        first, last = self.samples[0], self.samples[-1]
        share = host_share(first[2], last[2])
        return {
            "load_start": first[1][0],
            "load_max": max(s[1][0] for s in self.samples),
            "load_end": last[1][0],
            "cores": float(os.cpu_count() or 1),
            **share,
        }

    def windows(self, start: float, width_s: float = 30.0) -> dict[int, dict[str, float]]:
        """CPU shares and the peak load average per ``width_s`` window after ``start`` (monotonic time)."""
        out: dict[int, dict[str, float]] = {}
        by_window: dict[int, list] = {}
        for sample in self.samples:
            by_window.setdefault(int(max(0.0, sample[0] - start) // width_s), []).append(sample)
        previous = self.samples[0]
        for window in sorted(by_window):
            group = by_window[window]
            out[window] = {**host_share(previous[2], group[-1][2]), "load": max(s[1][0] for s in group)}
            previous = group[-1]
        return out


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=300, help="simulated workers, one HIT each")
    parser.add_argument(
        "--duration", type=float, default=300.0, help="seconds of chatting (at least 300 for the real measurement)"
    )
    parser.add_argument("--min-gap", type=float, default=3.0, help="shortest pause between a worker's turns (s)")
    parser.add_argument("--max-gap", type=float, default=8.0, help="longest pause between a worker's turns (s)")
    parser.add_argument("--turns-per-slot", type=int, default=10, help="messages per chatbot before rating it")
    parser.add_argument(
        "--click-gap",
        type=float,
        nargs=2,
        default=(1.0, 3.0),
        metavar=("MIN", "MAX"),
        help="pause before each topic choice and each slider (s): a person reads, then clicks",
    )
    parser.add_argument(
        "--ramp", type=float, default=30.0, help="workers arrive at random times over this many seconds at the start"
    )
    parser.add_argument("--bot-latency", type=float, default=0.5, help="the stub bot's fixed reply time (s)")
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn worker processes, all hosts together")
    parser.add_argument("--hosts", type=int, default=1, help="gunicorn instances (web hosts) sharing the database")
    # A chat turn holds its thread for the bot's latency but a database connection only for its two short
    # transactions, so threads may well outnumber each process's pool (HITKIT_DB_POOL_SIZE, 5 + 10 overflow).
    parser.add_argument("--threads", type=int, default=24, help="threads per gunicorn worker")
    parser.add_argument("--request-timeout", type=float, default=60.0, help="client timeout of one request (s)")
    parser.add_argument("--grace", type=float, default=90.0, help="seconds after the deadline before giving up")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("HITKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
        help="a PostgreSQL server URL; the run's own database is created and dropped there",
    )
    parser.add_argument(
        "--streams-attack",
        type=int,
        default=0,
        metavar="N",
        help="one more worker keeping N chat streams open on a bot that hangs, beside the measured ones",
    )
    parser.add_argument("--serve-stub-bot", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--stub-port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_stub_bot is not None:  # the stub bot's own process (see StubBotProcess)
        StubBot(args.serve_stub_bot, args.stub_port).serve_forever()
        return 0

    secret = secrets.token_hex(16)
    os.environ["HITKIT_SECRET"] = secret
    bot = StubBotProcess(args.bot_latency)
    database_url, dbname = fresh_database(args.postgres)
    ports = [free_port() for _ in range(args.hosts)]
    base = f"http://127.0.0.1:{ports[0]}"
    procs: list[subprocess.Popen] = []
    per_host = max(1, args.web_workers // args.hosts)
    try:
        with tempfile.TemporaryDirectory() as folder:
            study_file = write_study(
                Path(folder),
                database_url,
                bot.url,
                args.workers + (1 if args.streams_attack else 0),
                args.turns_per_slot,
                args.bot_latency,
            )
            start_study(study_file, database_url, secret, base)
            error_logs = [Path(folder) / f"gunicorn-{n}.err" for n in range(args.hosts)]
            for port, error_log in zip(ports, error_logs):
                procs.append(start_gunicorn(database_url, secret, port, per_host, args.threads, error_log))
            print(
                f"{args.workers} workers, {args.duration:.0f} s, a turn every {args.min_gap}-{args.max_gap} s, "
                f"bot latency {args.bot_latency * 1000:.0f} ms, {args.hosts} host(s) of gunicorn "
                f"{per_host}x{args.threads} on one PostgreSQL",
                flush=True,
            )
            tally = Tally()
            host = HostMonitor().start()
            pg_waits = PgWaits(args.postgres, dbname).start()
            cpu_before = sum(cpu_seconds(p.pid) for p in procs)
            pg_before, client_before, stub_before = (
                postgres_cpu_seconds(),
                sum(os.times()[:2]),
                cpu_seconds(bot.proc.pid),
            )
            started = time.monotonic()
            deadline = started + args.duration
            workers = [Worker(i, ports[i % args.hosts], args, deadline, tally) for i in range(args.workers)]
            # The client is the measuring instrument: a full collection of its heap paused every
            # coroutine for 0.1 s and was counted as server overhead. Its garbage waits until the end.
            gc.collect()
            gc.freeze()
            gc.disable()
            lag_ms: list[float] = []
            attack = Attack()
            attacker = (
                Attacker(args.workers + 1, ports[0], args.streams_attack, args, deadline, attack)
                if args.streams_attack
                else None
            )
            try:
                hung = asyncio.run(crowd(workers, deadline, args.grace, lag_ms, attacker))
            finally:
                gc.enable()
            elapsed = time.monotonic() - started
            host.stop()
            pg_waits.stop()
            server_cpu = sum(cpu_seconds(p.pid) for p in procs) - cpu_before
            pg_cpu, client_cpu = postgres_cpu_seconds() - pg_before, sum(os.times()[:2]) - client_before
            stub_cpu = cpu_seconds(bot.proc.pid) - stub_before
            for _ in range(hung):
                tally.errors.append("worker still running after the grace period")
            turns, errors, total_requests = list(tally.turns), list(tally.errors), tally.requests
            stored = stored_worker_turns(database_url)
            lost = [mark for mark, _ in turns if mark not in stored]
            held = bot.held()
            # A QC reply held to the real bots' latency (hitkit.worker.pacing) waits on purpose: not overhead.
            overhead_ms = [
                (took - held[mark]) * 1000 - tally.phases.get(mark, {}).get("pace", 0.0)
                for mark, took in turns
                if mark in held
            ]
            missing_hold = sum(mark not in held for mark, _ in turns)
            print(
                f"elapsed {elapsed:.1f} s; requests {total_requests} ({total_requests / elapsed:.1f}/s), "
                f"{tally.resends} resent on a fresh connection; "
                f"chat turns acknowledged {len(turns)} ({len(turns) / elapsed:.2f}/s); "
                f"bot replies stored {bot_replies(database_url)}; gunicorn CPU {server_cpu:.1f} s "
                f"({server_cpu / max(1, total_requests) * 1000:.1f} ms a request, "
                f"{server_cpu / elapsed:.2f} cores)"
            )
            machine = host.summary()
            print(
                f"host: {machine['cores']:.0f} cores; load average {machine['load_start']:.1f} at the start, "
                f"{machine['load_max']:.1f} at most, {machine['load_end']:.1f} at the end; CPU busy "
                f"{machine['busy']:.0f}%, iowait {machine['iowait']:.1f}%, steal {machine['steal']:.1f}% "
                f"(/proc/stat){' — a noisy host: figures are not comparable' if machine['steal'] > 2 or machine['load_start'] > 1 else ''}"
            )
            print(
                f"cores used: gunicorn {server_cpu / elapsed:.2f}, PostgreSQL (all sessions) {pg_cpu / elapsed:.2f}, "
                f"this client {client_cpu / elapsed:.2f}, stub bot {stub_cpu / elapsed:.2f}"
            )
            if overhead_ms:
                print(
                    f"server overhead per chat turn (round trip minus the bot's {args.bot_latency * 1000:.0f} ms "
                    f"and a QC reply's pacing): "
                    f"p50 {percentile(overhead_ms, 50):.1f} ms, p99 {percentile(overhead_ms, 99):.1f} ms, "
                    f"max {max(overhead_ms):.1f} ms, mean {statistics.fmean(overhead_ms):.1f} ms"
                )
            parts, commits = split_overhead(turns, held, tally.phases)
            if parts["outside"]:
                total = [sum(v) for v in zip(*parts.values())]
                slow = [i for i, t in enumerate(total) if t > 50]
                print(
                    f"where the overhead went, ms (p50 / p99 / mean over the {len(slow)} turns over 50 ms): "
                    + "; ".join(
                        f"{name} {percentile(v, 50):.1f} / {percentile(v, 99):.1f} / "
                        f"{statistics.fmean([v[i] for i in slow]) if slow else 0:.1f}"
                        for name, v in parts.items()
                    )
                )
                print(
                    f"of which the two commits: {percentile(commits, 50):.1f} / {percentile(commits, 99):.1f} / "
                    f"{statistics.fmean([commits[i] for i in slow]) if slow else 0:.1f}"
                )
            print(f"PostgreSQL sessions of the run, mean number in each state: {pg_waits.summary()}")
            if lag_ms:
                print(
                    f"this client's own event-loop lag: p99 {percentile(lag_ms, 99):.1f} ms, max {max(lag_ms):.1f} ms"
                )
            if overhead_ms:  # when the slow turns happened: spread out, or in bursts (a stall somewhere)
                first = min(tally.sent_at.values())
                slow = sorted(
                    int((tally.sent_at[mark] - first) // 30)
                    for mark, took in turns
                    if mark in held and (took - held[mark]) * 1000 - tally.phases.get(mark, {}).get("pace", 0.0) > 50
                )
                windows = {w: slow.count(w) for w in sorted(set(slow))}
                print(
                    "turns over 50 ms overhead per 30 s window: "
                    + (", ".join(f"{w * 30}-{w * 30 + 30}s: {n}" for w, n in windows.items()) or "none")
                )
                print(
                    "host per 30 s window (peak load, steal %): "
                    + ", ".join(
                        f"{w * 30}-{w * 30 + 30}s: {h['load']:.1f}, {h['steal']:.1f}%"
                        for w, h in host.windows(started).items()
                    )
                )
            if missing_hold:
                errors.append(f"{missing_hold} acknowledged turns never reached the bot")
            if attacker is not None:
                print(
                    f"streams attack: {args.streams_attack} streams held open by one worker on a hanging bot: "
                    f"{attack.admitted} admitted, {attack.refused} refused (429), other {attack.other or 'none'}"
                )
            print(f"errors {len(errors)}; lost turns {len(lost)}")
            for line in sorted({e.splitlines()[0] for e in errors})[:10]:
                print(f"  error: {line}")
            if errors:  # the server's side of them: its distinct exception lines
                causes = {
                    ln.strip()
                    for log in error_logs
                    for ln in log.read_text().splitlines()
                    if re.match(r"^\w+(\.\w+)*(Error|Exception|Timeout)\b", ln.strip())
                }
                for line in sorted(causes)[:10]:
                    print(f"  server: {line[:200]}")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        bot.stop()
        drop_database(args.postgres, dbname)
    p99 = percentile(overhead_ms, 99) if overhead_ms else float("nan")
    hosts = f" hosts={args.hosts}" if args.hosts > 1 else ""
    streams = (
        f" streams_attack={args.streams_attack} streams_attack_p99_overhead_ms={p99:.1f} "
        f"streams_attack_errors={len(errors)} streams_attack_admitted={attack.admitted} "
        f"streams_attack_refused={attack.refused}"
        if args.streams_attack
        else ""
    )
    print(
        f"RESULT workers={args.workers}{hosts} p99_overhead_ms={p99:.1f} errors={len(errors)} lost_turns={len(lost)} "
        f"load_start={machine['load_start']:.2f} load_max={machine['load_max']:.2f} steal_pct={machine['steal']:.1f}"
        f"{streams}"
    )
    return 0 if not errors and not lost else 1


if __name__ == "__main__":
    sys.exit(main())
