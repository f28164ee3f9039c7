"""Fault tolerance with real processes over real HTTP (docs/THREAT_MODEL.md, "Availability"):

- the web server killed with ``kill -9`` while workers answer and chat: every answer and chat turn it
  acknowledged is stored exactly once, the workers carry on after a restart, the study completes;
- the scheduler killed with ``kill -9`` while it posts waves and approves: after a restart nothing is
  posted, approved or paid twice, and the study finishes;
- PostgreSQL restarted (a private cluster, never the shared one): the server answers a clean 503
  with Retry-After while the database is gone and recovers by itself once it is back;
- the bot server killed and restarted: the worker's turn is kept, the page is told to wait (502,
  ``waiting``), and ``/retry`` resumes the conversation with every turn intact.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlencode

import pytest
import requests
from sqlalchemy import func, select

from hitkit.db.models import (
    Assignment,
    Conversation,
    Event,
    Hit,
    Payment,
    Response,
    Study,
    Turn,
    Unit,
)
from hitkit.db.session import dispose_engines, session_scope
from hitkit.running.scheduler import make_scheduler, schedule_study, tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from server.embedded import WebServer
from tests.conftest import REQUIRE_PG, _state
from tests.studies import REPO, pairwise_study


def _pg_bin() -> Path:
    """Where initdb and pg_ctl are: HITKIT_PG_BIN, else Debian's newest, else on PATH."""
    if os.environ.get("HITKIT_PG_BIN"):
        return Path(os.environ["HITKIT_PG_BIN"])
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0
    )
    if debian:
        return debian[-1].parent
    found = shutil.which("initdb")
    return Path(found).parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()
SYSTEMS = ("anna", "bert", "cleo", "dora", "emil", "qc")
JSON = {"Accept": "application/json"}

# An OpenAI-compatible bot in its own process, so that it can be killed for real.
STUB_BOT = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Bot(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, payload):
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        asked = sum(m.get("role") == "user" for m in request.get("messages", []))
        self._send({"choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": f"reply {asked}"}}]})

    def do_GET(self):
        self._send({"object": "list", "data": []})

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Bot)
server.daemon_threads = True
server.serve_forever()
"""


# Processes -----------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen | None = None, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{proc.args[:4]} exited with {proc.returncode} before answering {url}")
        try:
            if requests.get(url, timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"nothing answered {url} within {timeout_s} s")


class Process:
    """A child process that can be started, killed with SIGKILL and started again on the same port."""

    def __init__(self, args: list[str], log: Path, health: str | None = None):
        self.args, self.log, self.health = args, log, health
        self.proc: subprocess.Popen | None = None

    def start(self) -> Process:
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                self.args, cwd=REPO, env=os.environ.copy(), stdout=out, stderr=subprocess.STDOUT
            )
        if self.health:
            try:
                wait_http(self.health, self.proc)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{self.log.read_text()[-3000:]}") from None
        return self

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()


def web_process(url: str, port: int, log: Path) -> Process:
    """``hitkit serve`` on ``port`` for the database at ``url``."""
    return Process(
        [
            sys.executable,
            "-m",
            "hitkit.cli",
            "serve",
            "--db",
            url,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--threads",
            "8",
        ],
        log,
        f"http://127.0.0.1:{port}/health",
    )


def bot_process(port: int, log: Path) -> Process:
    return Process([sys.executable, "-c", STUB_BOT, str(port)], log, f"http://127.0.0.1:{port}/v1/models")


def start_study(tmp_path: Path, url: str, study_file: Path, base_url: str) -> str:
    """Create the study in ``study_file``, mark it running and post its first wave; its name."""
    config = load_study(study_file)
    with session_scope(url) as s:
        ctx = create_study(s, config, study_file, resolve_secret(url))
        s.get(Study, ctx.study_id).status = "running"
    tick(url, config.study, base_url)
    return config.study


def chat_study(tmp_path: Path, url: str, bot_url: str, **live_chat) -> Path:
    import yaml

    data = {
        "study": "chat-demo",
        "task": "live_chat",
        "seed": 3,
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "database": url,
        "systems": [
            {"name": n, "url": bot_url, "model": n, "options": {"max_tokens": 20, "timeout_s": 3, "retries": 0}}
            for n in SYSTEMS
        ],
        "live_chat": {"hits": 5, "slots_per_hit": 2, "min_inputs": 2, **live_chat},
        "hit": {"title": "Chat with two chatbots", "reward": "1.00"},
        "schedule": {
            "per_worker_cap": 1,
            "interval_s": 0.5,
            "wave_size": 20,
            "max_concurrent": 20,
            "approve_after_s": 0,
        },
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# A worker who survives outages: retries what is safe to retry, re-reads state before what is not ----
class Acks:
    def __init__(self):
        self.lock = threading.Lock()
        self.answers: list[tuple[str, int, str, str]] = []  # (assignment, unit, question, value)
        self.turns: list[str] = []  # the worker's chat messages
        self.unanswered = 0  # requests that got no answer at all

    def add(self, kind: str, item) -> None:
        with self.lock:
            getattr(self, kind).append(item)


class PatientWorker(threading.Thread):
    """Takes one live-chat HIT through the real pages, acknowledging only what got a 200."""

    def __init__(self, base: str, study: str, name: str, hit_id: int, provider_hit_id: str, acks: Acks):
        super().__init__(name=name, daemon=True)
        self.base, self.study, self.worker = base, study, name
        self.hit_id, self.provider_hit_id, self.acks = hit_id, provider_hit_id, acks
        self.http = requests.Session()
        self.rng = random.Random(name)
        self.deadline = time.monotonic() + 120
        self.error: BaseException | None = None
        self.submitted = False

    def call(self, method: str, url: str, resend: bool = True, **kw) -> requests.Response | None:
        """The reply; on no reply (server gone) retry if ``resend``, else None; 503 always waits and retries."""
        while time.monotonic() < self.deadline:
            try:
                reply = self.http.request(method, url, timeout=15, **kw)
            except requests.RequestException:
                with self.acks.lock:
                    self.acks.unanswered += 1
                if not resend:
                    return None
                time.sleep(0.1)
                continue
            if reply.status_code == 503:
                assert reply.headers.get("Retry-After"), reply.text
                time.sleep(0.2)
                continue
            assert reply.status_code < 500 or reply.status_code == 502, (url, reply.status_code, reply.text[:500])
            return reply
        raise AssertionError(f"{self.worker}: no reply from {url} before the deadline")

    def run(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # noqa: BLE001 - the test thread reports it
            self.error = exc

    def _work(self) -> None:
        params = {"workerId": self.worker, "assignmentId": f"{self.worker}-a", "hitId": self.provider_hit_id}
        page = self.call("GET", f"{self.base}/s/{self.study}/hit/{self.hit_id}?{urlencode(params)}")
        assert page.status_code == 200, page.text[:300]
        task = page.url.split("?")[0]
        assert self.call("POST", task + "consent").status_code == 200
        state = self.call("GET", task + "state").json()
        assignment = state["assignment"]
        for unit in sorted(state["units"], key=lambda u: u["position"]):
            uid = unit["unit_id"]
            questions = [q["name"] for q in unit["questions"]]
            for question in ("topic", "topic_sentiment"):
                if question in questions:
                    self.answer(
                        task,
                        assignment,
                        uid,
                        question,
                        "like" if question == "topic_sentiment" else f"topic of {self.worker}",
                    )
            self.chat(task, uid)
            for question in questions:
                if question.startswith("score_"):
                    self.answer(task, assignment, uid, question, str(self.rng.randint(0, 100)))
        done = self.call("POST", task + "submit", headers=JSON)
        assert done.status_code == 200 and done.json()["submitted"], done.text
        self.submitted = True

    def answer(self, task: str, assignment: str, uid: int, question: str, value: str) -> None:
        # Answering again replaces the answer with the same value: always safe to resend.
        reply = self.call("POST", task + "answer", json={"unit_id": uid, "question": question, "value": value})
        assert reply.status_code == 200, reply.text
        self.acks.add("answers", (assignment, uid, question, value))

    def chat(self, task: str, uid: int) -> None:
        url = f"{task}chat/{uid}"
        while True:
            state = self.call("GET", url).json()
            if state["bot_owes_reply"]:
                reply = self.call("POST", url + "/retry", json={})
            elif state["inputs"] < state["min_inputs"]:
                # Not resent blindly: a message the dead server stored without answering would be
                # stored twice. Re-read the chat instead, as the page does after a failed send.
                text = f"{self.worker} unit {uid} message {state['inputs']}"
                reply = self.call("POST", url + "/message", resend=False, json={"text": text})
                if reply is not None and reply.status_code == 200:
                    self.acks.add("turns", text)
            else:
                return
            if reply is not None and reply.status_code == 502:
                assert reply.json()["waiting"] is True
                time.sleep(0.2)
            elif reply is not None:
                assert reply.status_code in (200, 409), reply.text


def assert_acknowledged_work_is_stored_once(url: str, acks: Acks) -> None:
    with session_scope(url) as s:
        # Workers (and so the acks) name units by their public key.
        rows = s.execute(
            select(Assignment.provider_assignment_id, Unit.public_key, Response.question, Response.value)
            .join(Assignment, Response.assignment_id == Assignment.id)
            .join(Unit, Response.unit_id == Unit.id)
        ).all()
        stored = Counter((a, u, q) for a, u, q, _ in rows)
        values = {(a, u, q): v for a, u, q, v in rows}
        for assignment, uid, question, value in acks.answers:
            assert stored[(assignment, uid, question)] == 1, (assignment, uid, question)
            assert values[(assignment, uid, question)] == value
        worker_turns = Counter(s.scalars(select(Turn.text).where(Turn.speaker == "worker")))
        for text in acks.turns:
            assert worker_turns[text] == 1, (text, worker_turns[text])
        assert max(worker_turns.values(), default=1) == 1  # nor was an unacknowledged one stored twice
        for conv in s.scalars(select(Conversation).where(Conversation.kind == "human_bot")):
            turns = list(s.scalars(select(Turn).where(Turn.conversation_id == conv.id).order_by(Turn.index)))
            assert [t.index for t in turns] == list(range(len(turns)))
            assert [t.speaker for t in turns] == ["worker", "bot"] * (len(turns) // 2)


def run_until_complete(url: str, study: str, base: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if tick(url, study, base).study_completed:
            return
        time.sleep(0.2)
    raise AssertionError(f"study {study} did not complete within {timeout_s} s")


# 1. The web server, kill -9 --------------------------------------------------------------------------
def test_killed_web_server_loses_no_acknowledged_answer_or_chat_turn(tmp_path, database_url):
    bot_port, web_port = free_port(), free_port()
    bot = bot_process(bot_port, tmp_path / "bot.log").start()
    base = f"http://127.0.0.1:{web_port}"
    web = web_process(database_url, web_port, tmp_path / "web.log")
    workers: list[PatientWorker] = []
    try:
        study = start_study(
            tmp_path, database_url, chat_study(tmp_path, database_url, f"http://127.0.0.1:{bot_port}"), base
        )
        web.start()
        acks = Acks()
        with session_scope(database_url) as s:
            hits = s.execute(select(Hit.id, Hit.provider_hit_id).order_by(Hit.index)).all()
        assert len(hits) == 5
        workers = [PatientWorker(base, study, f"W-{i}", hit_id, phid, acks) for i, (hit_id, phid) in enumerate(hits)]
        for w in workers:
            w.start()
        # Kill mid-way: after some answers and turns were acknowledged, well before the end
        # (5 workers x 2 chats x (9 answers + 2 turns) = 110 acknowledgements in all).
        deadline = time.monotonic() + 60
        while len(acks.answers) + len(acks.turns) < 40 and time.monotonic() < deadline:
            assert all(w.is_alive() for w in workers), [w.error for w in workers]
            time.sleep(0.02)
        web.kill9()
        acked_at_kill = (len(acks.answers), len(acks.turns))
        assert sum(acked_at_kill) < 100, "the workers finished before the kill; it proves nothing"
        time.sleep(1.0)  # the workers find no server for a while
        web.start()
        for w in workers:
            w.join(120)
        assert [w.error for w in workers] == [None] * len(workers)
        assert all(w.submitted for w in workers)
        assert acks.unanswered > 0  # the kill really cut requests off
        assert_acknowledged_work_is_stored_once(database_url, acks)
        with session_scope(database_url) as s:
            # 5 workers x 2 chats x min_inputs 2. Fewer may have been acknowledged: a message the
            # killed server stored without answering is found by the worker on re-reading the chat.
            stored = s.scalar(select(func.count()).select_from(Turn).where(Turn.speaker == "worker"))
        assert stored == 5 * 2 * 2 and 0 < len(acks.turns) <= stored
        run_until_complete(database_url, study, base)
        with session_scope(database_url) as s:
            assert set(s.scalars(select(Assignment.status))) == {"approved"}
            assert s.scalar(select(func.count()).select_from(Assignment)) == 5
    finally:
        web.stop()
        bot.stop()


# 2. The scheduler, kill -9 ---------------------------------------------------------------------------
def test_killed_scheduler_resumes_without_posting_approving_or_paying_twice(tmp_path, database_url):
    from hitkit.simulation.crowd import SimulatedCrowd

    study_file = pairwise_study(
        tmp_path,
        database_url,
        pairwise={"votes_per_prompt": 1, "prompts_per_hit": 5},
        schedule={"wave_size": 2, "max_concurrent": 3, "interval_s": 0.3, "per_worker_cap": 3, "approve_after_s": 0},
        simulated={"workers": [{"profile": "diligent", "count": 8}], "concurrency": 3, "seconds_per_answer": 0.01},
    )
    config = load_study(study_file)
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, study_file, secret)
        s.get(Study, ctx.study_id).status = "running"
        n_hits = s.scalar(select(func.count()).select_from(Hit))
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    # The study's tick job goes into the database, where `hitkit scheduler` finds it.
    jobs = make_scheduler(database_url)
    schedule_study(jobs, database_url, config.study, web.url, config.schedule.interval_s)
    jobs.start(paused=True)
    jobs.shutdown(wait=False)
    scheduler = Process(
        [sys.executable, "-m", "hitkit.cli", "scheduler", "--db", database_url], tmp_path / "scheduler.log"
    )
    crowd = None
    try:
        scheduler.start()
        crowd = SimulatedCrowd(database_url, ctx, web.url).start()

        def counts() -> tuple[int, int]:
            with session_scope(database_url) as s:
                return (
                    s.scalar(select(func.count()).select_from(Hit).where(Hit.status != "pending")),
                    s.scalar(select(func.count()).select_from(Assignment).where(Assignment.status == "approved")),
                )

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            posted, approved = counts()
            if approved >= 2 and posted < n_hits:
                break
            assert scheduler.proc.poll() is None, (tmp_path / "scheduler.log").read_text()[-3000:]
            time.sleep(0.05)
        scheduler.kill9()
        posted_at_kill, _ = counts()
        assert posted_at_kill < n_hits, "everything was posted before the kill; it proves nothing"
        time.sleep(1.0)  # no scheduler: workers go on submitting, nothing new is posted or approved
        assert counts()[0] == posted_at_kill
        scheduler.start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with session_scope(database_url) as s:
                if s.scalar(select(Study.status)) == "completed":
                    break
            assert scheduler.proc.poll() is None, (tmp_path / "scheduler.log").read_text()[-3000:]
            time.sleep(0.2)
        else:
            raise AssertionError("the study did not complete after the scheduler restarted")
        assert crowd.stats.errors == []
    finally:
        if crowd is not None:
            crowd.stop()
        scheduler.stop()
        web.stop()

    with session_scope(database_url) as s:
        assignments = s.scalars(select(Assignment)).all()
        assert assignments and {a.status for a in assignments} == {"approved"}
        hits = s.scalars(select(Hit)).all()
        assert {h.status for h in hits} == {"completed"} and len(hits) == n_hits
        # The provider's side of posting: one provider id per HIT, one hit_posted event per HIT.
        assert len({h.provider_hit_id for h in hits}) == n_hits and None not in {h.provider_hit_id for h in hits}
        posted = Counter(e.data["hit"] for e in s.scalars(select(Event).where(Event.kind == "hit_posted")))
        assert posted == Counter({h.id: 1 for h in hits})
        approved = Counter(
            e.data["assignment"] for e in s.scalars(select(Event).where(Event.kind == "assignment_approved"))
        )
        assert approved == Counter({a.id: 1 for a in assignments})
        # The ledger: exactly one reward and one fee per approved assignment, all paid.
        payments = s.scalars(select(Payment)).all()
        assert Counter((p.assignment_id, p.kind) for p in payments) == Counter(
            {(a.id, kind): 1 for a in assignments for kind in ("reward", "fee")}
        )
        assert {p.status for p in payments} == {"paid"}
        assert len({p.idempotency_key for p in payments}) == len(payments)


# 3. PostgreSQL restarted (a private cluster) -------------------------------------------------------
def _skip_or_fail(reason: str):
    if REQUIRE_PG:
        pytest.fail(f"HITKIT_REQUIRE_POSTGRES=1 but {reason}")
    pytest.skip(reason)


class PrivatePostgres:
    """A throw-away PostgreSQL cluster in a temporary folder, on a free port, for this test alone."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="hitkit-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_postgres: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            self.as_postgres = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.root, "postgres", "postgres")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        done = subprocess.run(self.as_postgres + list(args), check=False, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            log = (self.root / "server.log").read_text()[-2000:] if (self.root / "server.log").exists() else ""
            raise AssertionError(f"{args[0]} failed: {done.stdout}{done.stderr}{log}")

    def init(self) -> PrivatePostgres:
        self._run(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        return self.start()

    def pg_ctl(self, *args: str) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c synchronous_commit=off"
        )
        self._run(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "server.log"),
            "-w",
            "-t",
            "60",
            *args,
        )

    def start(self) -> PrivatePostgres:
        self.pg_ctl("start")
        return self

    def stop(self) -> None:
        self.pg_ctl("stop", "-m", "fast")

    def restart(self) -> None:
        self.pg_ctl("restart", "-m", "fast")

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                self.as_postgres + [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "stop", "-m", "immediate"],
                check=False,
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def private_postgres():
    if not (PG_BIN / "initdb").exists() or not (PG_BIN / "pg_ctl").exists():
        _skip_or_fail(f"PostgreSQL server binaries (initdb, pg_ctl) not found in {PG_BIN}; set HITKIT_PG_BIN")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        _skip_or_fail("running as root without runuser, so no PostgreSQL cluster can be started")
    cluster = PrivatePostgres()
    try:
        cluster.init()
        _state["pg_ran"] += 1
        yield cluster
    finally:
        dispose_engines()
        cluster.destroy()


@pytest.mark.postgres
def test_postgresql_restart_gives_clean_503s_then_recovers_without_losing_answers(tmp_path, private_postgres):
    from hitkit.db.migrate import upgrade

    url = private_postgres.url
    upgrade(url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = web_process(url, port, tmp_path / "web.log")
    try:
        study = start_study(tmp_path, url, pairwise_study(tmp_path, url), base)
        web.start()
        http = requests.Session()
        page = http.get(f"{base}/s/{study}/hit/1", params={"workerId": "W-pg", "assignmentId": "W-pg-1", "hitId": "h1"})
        task = page.url.split("?")[0]
        assert http.post(task + "consent").status_code == 200
        asked = [(u["unit_id"], q["name"]) for u in http.get(task + "state").json()["units"] for q in u["questions"]]
        assert len(asked) >= 6
        acked = []

        def answer(item: tuple[int, str]) -> requests.Response:
            reply = http.post(task + "answer", json={"unit_id": item[0], "question": item[1], "value": "a"})
            if reply.status_code == 200:
                acked.append(item)
            return reply

        for item in asked[:3]:
            assert answer(item).status_code == 200

        private_postgres.restart()  # every pooled connection in the server (and here) is now dead
        statuses = [answer(asked[3]).status_code for _ in range(3)]
        assert set(statuses) <= {200, 503} and statuses[-1] == 200, statuses
        assert tick(url, study, base).expired == 0  # this process's engine recovers too

        private_postgres.stop()  # the database is gone: a clean 503 the page can retry, never a 500
        for reply in (answer(asked[4]), http.get(task + "state"), http.post(task + "submit", headers=JSON)):
            assert reply.status_code == 503, reply.text[:500]
            assert reply.headers["Retry-After"] == "2"
            assert "database is briefly unavailable" in reply.json()["error"]
        page_reply = http.get(task)
        assert page_reply.status_code == 503 and "briefly unavailable" in page_reply.text
        private_postgres.start()
        deadline = time.monotonic() + 20
        while answer(asked[4]).status_code != 200:
            assert time.monotonic() < deadline, "the server did not recover after PostgreSQL came back"
            time.sleep(0.2)
        for item in asked[5:]:
            assert answer(item).status_code == 200
        done = http.post(task + "submit", headers=JSON)
        assert done.status_code == 200 and done.json()["submitted"]
    finally:
        web.stop()
    assert "Exception on" not in (tmp_path / "web.log").read_text()  # Flask's line for a 500
    with session_scope(url) as s:
        stored = Counter(
            (u, q)
            for u, q in s.execute(
                select(Unit.public_key, Response.question)
                .join(Unit, Response.unit_id == Unit.id)
                .where(Response.source == "worker")
            )
        )
        assert all(stored[item] == 1 for item in acked) and set(stored) == set(asked)
        assert s.scalar(select(Assignment.status)) == "submitted"


# 4. The bot server killed and restarted ------------------------------------------------------------
def test_a_dead_bot_server_leaves_the_worker_waiting_and_the_conversation_survives(tmp_path, database_url):
    bot_port = free_port()
    bot = bot_process(bot_port, tmp_path / "bot.log").start()
    secret = resolve_secret(database_url)
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    http = requests.Session()
    try:
        study = start_study(
            tmp_path, database_url, chat_study(tmp_path, database_url, f"http://127.0.0.1:{bot_port}"), web.url
        )
        page = http.get(
            f"{web.url}/s/{study}/hit/1", params={"workerId": "W-bot", "assignmentId": "W-bot-1", "hitId": "h1"}
        )
        task = page.url.split("?")[0]
        assert http.post(task + "consent").status_code == 200
        uid = http.get(task + "state").json()["units"][0]["unit_id"]
        for question, value in (("topic", "films"), ("topic_sentiment", "like")):
            assert http.post(task + "answer", json={"unit_id": uid, "question": question, "value": value}).ok
        chat = f"{task}chat/{uid}"
        first = http.post(chat + "/message", json={"text": "hello"})
        assert first.status_code == 200 and first.json()["turns"][-1]["text"] == "reply 1"

        bot.kill9()
        waiting = http.post(chat + "/message", json={"text": "are you there?"})
        assert waiting.status_code == 502 and waiting.json()["waiting"] is True
        assert "your message is saved" in waiting.json()["error"]
        state = http.get(chat).json()
        assert [t["text"] for t in state["turns"]] == ["hello", "reply 1", "are you there?"]
        assert state["bot_owes_reply"] is True
        refused = http.post(chat + "/message", json={"text": "hello??"})  # wait for the reply first
        assert refused.status_code == 409
        assert http.post(chat + "/retry", json={}).status_code == 502  # still down: still waiting

        bot.start()
        resumed = http.post(chat + "/retry", json={})
        assert resumed.status_code == 200, resumed.text
        assert [t["text"] for t in resumed.json()["turns"]] == ["hello", "reply 1", "are you there?", "reply 2"]
        assert http.post(chat + "/retry", json={}).json()["turns"] == resumed.json()["turns"]  # nothing owed
        after = http.post(chat + "/message", json={"text": "welcome back"})
        assert after.status_code == 200 and after.json()["can_rate"] is True
    finally:
        http.close()  # else the server's thread waits on the idle keep-alive connection
        web.stop()
        bot.stop()
    with session_scope(database_url) as s:
        turns = list(s.execute(select(Turn.index, Turn.speaker, Turn.text).order_by(Turn.index)).all())
        assert turns == [
            (0, "worker", "hello"),
            (1, "bot", "reply 1"),
            (2, "worker", "are you there?"),
            (3, "bot", "reply 2"),
            (4, "worker", "welcome back"),
            (5, "bot", "reply 3"),
        ]
