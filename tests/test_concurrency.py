"""A launch-day crowd on the production stack: simultaneous arrivals, repeated submits and answers,
a slow platform, retries of one chat reply, and the scheduler's expiry racing a submit.

The HTTP tests run the way hitkit is deployed: on PostgreSQL behind gunicorn with the shipped
``ops/gunicorn.conf.py`` (real processes), and on SQLite behind the embedded waitress server.
Every assertion is on the database: what was stored, how often, and which events were written.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest
import requests
from sqlalchemy import func, select, update

from hitkit.db.models import Assignment, Event, Hit, Response, Study
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from hitkit.worker import security
from server.embedded import WebServer
from tests.studies import REPO, pairwise_study

JSON = {"Accept": "application/json"}


# The stack ----------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(database_url: str, secret: str, log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """The worker pages on the production stack for ``database_url``: gunicorn for PostgreSQL, waitress for SQLite."""
    if database_url.startswith("sqlite"):
        web = WebServer(database_url, "127.0.0.1", 0, 16, secret).start()
        try:
            yield web.url
        finally:
            web.stop()
        return
    port = free_port()
    full = {
        **os.environ,
        **(env or {}),
        "HITKIT_DATABASE_URL": database_url,
        "HITKIT_SECRET": secret,
        "HITKIT_BIND": f"127.0.0.1:{port}",
        "HITKIT_WEB_WORKERS": "2",
        "HITKIT_WEB_THREADS": "16",
        "HITKIT_ACCESS_LOG": str(log.with_suffix(".access")),
    }
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "ops/gunicorn.conf.py", "server.wsgi:app"],
            cwd=REPO,
            env=full,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gunicorn did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(20)


def running_study(tmp_path: Path, database_url: str, base_url: str, **changes):
    """The example A/B study with ``changes``, running, its first wave posted with links to ``base_url``."""
    config = load_study(pairwise_study(tmp_path, database_url, **changes))
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    tick(database_url, config.study, base_url)
    return config, secret


def all_at_once(n: int, call: Callable[[int], requests.Response]) -> list[requests.Response]:
    """``call(i)`` for i in range(n), each in its own thread, released together by a barrier."""
    barrier = threading.Barrier(n)
    out: list[requests.Response | BaseException | None] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            out[i] = call(i)
        except BaseException as exc:  # noqa: BLE001 - reported below, with the others
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    errors = [o for o in out if not isinstance(o, requests.Response)]
    assert not errors, errors[:3]
    return out  # type: ignore[return-value]


def arrive(base: str, worker: str, hit: int | None = None) -> tuple[requests.Session, str]:
    http = requests.Session()
    path = f"/s/ab-demo/hit/{hit}" if hit else "/s/ab-demo/enter"
    page = http.get(base + path, params={"workerId": worker, "assignmentId": f"{worker}-A", "hitId": "h"})
    assert page.status_code == 200, page.text[:300]
    return http, page.url.split("?")[0]


def events(url: str, kind: str) -> int:
    with session_scope(url) as s:
        return s.scalar(select(func.count()).select_from(Event).where(Event.kind == kind))


# 30 simultaneous arrivals ---------------------------------------------------------------------------
def test_thirty_simultaneous_fresh_arrivals_are_all_placed_while_places_are_free(tmp_path, database_url):
    # 30 HITs of 3 prompts × 3 places: 90 places, the 30 arrivals need a third of them.
    with serving(database_url, resolve_secret(database_url), tmp_path / "web.log") as base:
        running_study(
            tmp_path,
            database_url,
            base,
            budget="500.00",
            pairwise={"prompts_per_hit": 3},
            schedule={"wave_size": 30, "max_concurrent": 30},
        )
        with session_scope(database_url) as s:
            posted = s.scalar(select(func.count()).select_from(Hit).where(Hit.status == "posted"))
        assert posted == 30
        replies = all_at_once(
            30,
            lambda i: requests.get(
                f"{base}/s/ab-demo/enter",
                params={"workerId": f"W{i:02d}", "assignmentId": f"A{i:02d}", "hitId": "h"},
                timeout=60,
            ),
        )
    assert [r.status_code for r in replies] == [200] * 30, {r.status_code: r.text[:200] for r in replies}
    with session_scope(database_url) as s:
        per_hit = dict(s.execute(select(Assignment.hit_id, func.count()).group_by(Assignment.hit_id)).all())
        places = dict(s.execute(select(Hit.id, Hit.max_assignments)).all())
        assert sum(per_hit.values()) == 30
        assert all(n <= places[h] for h, n in per_hit.items()), per_hit
        assert s.scalar(select(func.count(func.distinct(Assignment.worker_id)))) == 30
    assert events(database_url, "assignment_accepted") == 30


# Repeated submits and answers -----------------------------------------------------------------------
def test_parallel_identical_answers_and_submits_store_once_with_no_server_error(tmp_path, database_url):
    secret = resolve_secret(database_url)
    with serving(database_url, secret, tmp_path / "web.log") as base:
        running_study(tmp_path, database_url, base)
        http, task = arrive(base, "W-answers", hit=1)
        assert http.post(task + "consent").status_code == 200
        state = http.get(task + "state").json()
        unit = state["units"][0]["unit_id"]
        values = ("a", "b", "tie")
        # 20 answers to one question at once, with different values: one row, the last one wins.
        answers = all_at_once(
            20,
            lambda i: http.post(
                task + "answer", json={"unit_id": unit, "question": "vote", "value": values[i % 3]}, timeout=60
            ),
        )
        assert {r.status_code for r in answers} == {200}, [r.text[:200] for r in answers if r.status_code != 200]
        for view in state["units"][1:]:
            assert (
                http.post(
                    task + "answer", json={"unit_id": view["unit_id"], "question": "vote", "value": "a"}
                ).status_code
                == 200
            )
        # 20 identical JSON submits at once: every one says submitted, one is stored.
        submits = all_at_once(20, lambda i: http.post(task + "submit", headers=JSON, timeout=60))
        assert {r.status_code for r in submits} == {200}, [r.text[:200] for r in submits if r.status_code != 200]
        assert len({r.text for r in submits}) == 1

        # 20 form submits at once, each carrying every answer (the page's no-JavaScript path).
        form_http, form_task = arrive(base, "W-form", hit=1)
        assert form_http.post(form_task + "consent").status_code == 200
        token = form_task.rstrip("/").rsplit("/", 1)[1]
        views = form_http.get(form_task + "state").json()["units"]
        form = {f"answer-{v['unit_id']}-vote": "b" for v in views}
        form[security.CSRF_FIELD] = security.csrf_value(secret, token)
        forms = all_at_once(20, lambda i: form_http.post(form_task + "submit", data=form, timeout=60))
        assert all(r.status_code < 500 for r in forms), [r.status_code for r in forms]
        assert {r.status_code for r in forms} == {200}, [r.text[:200] for r in forms if r.status_code != 200]
    with session_scope(database_url) as s:
        rows = s.execute(
            select(Assignment.provider_assignment_id, Assignment.status, func.count(Response.id))
            .join(Response, Response.assignment_id == Assignment.id)
            .group_by(Assignment.provider_assignment_id, Assignment.status)
        ).all()
        assert {r[0]: (r[1], r[2]) for r in rows} == {
            "W-answers-A": ("submitted", len(views)),
            "W-form-A": ("submitted", len(views)),
        }
        duplicates = s.execute(
            select(Response.assignment_id, Response.unit_id, Response.question, func.count())
            .group_by(Response.assignment_id, Response.unit_id, Response.question)
            .having(func.count() > 1)
        ).all()
        assert duplicates == []
    assert events(database_url, "assignment_submitted") == 2


# A slow platform --------------------------------------------------------------------------------------
def _answer_latencies(http: requests.Session, task: str, unit: str, n: int) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        reply = http.post(task + "answer", json={"unit_id": unit, "question": "vote", "value": "ab"[i % 2]}, timeout=60)
        out.append(time.perf_counter() - started)
        assert reply.status_code == 200, reply.text
    return sorted(out)


def test_a_platform_answering_arrival_checks_in_10_s_does_not_delay_other_workers(tmp_path, database_url, monkeypatch):
    from hitkit.providers.prolific import client as prolific_module
    from hitkit.providers.prolific.provider import ProlificProvider
    from tests.fakes.prolific import TOKEN, FakeProlificServer

    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    monkeypatch.setattr(prolific_module.time, "sleep", lambda s: None)
    secret = resolve_secret(database_url)
    with FakeProlificServer() as fake, serving(database_url, secret, tmp_path / "web.log") as base:
        config, _ = running_study(
            tmp_path,
            database_url,
            base,
            provider={
                "kind": "prolific",
                "currency": "GBP",
                "fee_rate": "0.333",
                "prolific": {"api_url": fake.url, "project": "proj42", "estimated_minutes": 2},
            },
        )
        sid = ProlificProvider(config, secret).prolific_study_id()

        def enter(pid: str) -> tuple[requests.Session, requests.Response]:
            session_id = fake.start_session(pid, sid)
            http = requests.Session()
            return http, http.get(
                f"{base}/s/ab-demo/enter",
                timeout=60,
                params={"PROLIFIC_PID": pid, "STUDY_ID": sid, "SESSION_ID": session_id},
            )

        http, page = enter(hashlib.sha1(b"worker1").hexdigest()[:24])  # Prolific ids: 24 hex characters
        assert page.status_code == 200, page.text[:300]
        task = page.url.split("?")[0]
        assert http.post(task + "consent").status_code == 200
        unit = http.get(task + "state").json()["units"][0]["unit_id"]
        calm = _answer_latencies(http, task, unit, 40)

        # Prolific now takes 10 s to answer the next arrival check; another participant arrives.
        fake.hold_next(r"GET /submissions/", 10.0)
        slow: dict[str, requests.Response] = {}
        arriving = threading.Thread(
            target=lambda: slow.update(page=enter(hashlib.sha1(b"worker2").hexdigest()[:24])[1])
        )
        started = time.monotonic()
        arriving.start()
        time.sleep(0.5)  # the slow check is in flight
        busy = _answer_latencies(http, task, unit, 40)
        during = time.monotonic() - started
        arriving.join(60)
    assert during < 10, f"the answers took {during:.1f} s: they waited for the slow platform"
    p99_calm, p99_busy = calm[int(0.99 * (len(calm) - 1))], busy[int(0.99 * (len(busy) - 1))]
    # Unchanged within the noise of a shared machine; an answer that waited for the check would take 10 s.
    assert p99_busy < max(3 * p99_calm, p99_calm + 1.0), (p99_calm, p99_busy)
    assert slow["page"].status_code == 200, slow["page"].text[:300]  # the slow arrival itself got its place
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Assignment)) == 2


# One bot generation per owed reply ---------------------------------------------------------------------
def test_twenty_concurrent_retries_make_one_bot_generation_for_one_owed_reply(tmp_path, database_url):
    from hitkit.db.models import Turn
    from hitkit.worker import chat, chat_turns
    from tests.test_live_chat_task import config, start_chat, take

    with session_scope(database_url) as s:
        ctx = create_study(s, config(database_url), None, resolve_secret(database_url))
        s.get(Study, ctx.study_id).status = "running"
        s.execute(update(Hit).where(Hit.study_id == ctx.study_id).values(status="posted"))
    token, order = take(database_url, ctx, "W-retry")
    unit_id = order[0]
    start_chat(database_url, ctx, token, unit_id)
    calls: list[int] = []
    lock = threading.Lock()

    def slow_bot(history):
        with lock:
            calls.append(len(history))
        time.sleep(0.5)
        return "hello from the bot"

    def failing_bot(history):
        raise RuntimeError("the bot server is down")

    with pytest.raises(chat.BotReplyError):
        chat.send(database_url, ctx, token, unit_id, "hi there", failing_bot)
    barrier = threading.Barrier(20)
    outcomes: list = [None] * 20

    def retry(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = chat.bot_reply(database_url, ctx, token, unit_id, slow_bot)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            outcomes[i] = exc

    threads = [threading.Thread(target=retry, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(calls) == 1, f"{len(calls)} generations for one owed reply"
    assert all(isinstance(o, chat_turns.ChatState) and not o.bot_owes_reply for o in outcomes), outcomes
    with session_scope(database_url) as s:
        speakers = list(s.scalars(select(Turn.speaker).order_by(Turn.index)))
    assert speakers == ["worker", "bot"]


# The scheduler's expiry and an in-flight submit -----------------------------------------------------------
def test_an_in_flight_submit_is_never_overwritten_by_the_scheduler_expiry(tmp_path, database_url):
    from hitkit.running.scheduler import expire_stale_assignments
    from hitkit.study.stored import StudyContext
    from hitkit.worker import admission, flow

    config, secret = running_study(tmp_path, database_url, "http://127.0.0.1:9")
    with session_scope(database_url) as s:
        ctx = StudyContext.load(s, config.study, secret)
        entry = admission.enter(s, ctx, 1, {"workerId": "W-race", "assignmentId": "A-race", "hitId": "h"})
        flow.consent(s, ctx, entry.token)
        for view in flow.state(s, ctx, entry.assignment)["units"]:
            flow.save_answer(s, ctx, entry.token, view["unit_id"], "vote", "a")
    submitted_inside = threading.Event()
    expiry_done = threading.Event()
    expired: list[int] = []

    def expire() -> None:
        submitted_inside.wait(10)
        with session_scope(database_url) as s:
            # "now" an hour on: the assignment is past its 10 minutes, as far as the scheduler can tell.
            expired.append(expire_stale_assignments(s, ctx, dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)))
        expiry_done.set()

    scheduler = threading.Thread(target=expire)
    scheduler.start()
    with session_scope(database_url) as s:
        flow.submit(s, ctx, entry.token)
        submitted_inside.set()
        # The scheduler's update must wait for this transaction, not overwrite it after.
        assert not expiry_done.wait(1.0)
    scheduler.join(30)
    assert expired == [0]
    with session_scope(database_url) as s:
        assert s.scalar(select(Assignment.status)) == "submitted"
    assert events(database_url, "assignment_expired") == 0
    assert events(database_url, "assignment_submitted") == 1


# Consent and the time limit, at the request --------------------------------------------------------------
def test_consent_and_the_time_limit_are_enforced_at_the_request(tmp_path, database_url):
    with serving(database_url, resolve_secret(database_url), tmp_path / "web.log") as base:
        running_study(tmp_path, database_url, base)
        http = requests.Session()
        page = http.get(
            f"{base}/s/ab-demo/hit/1", params={"workerId": "W-late", "assignmentId": "A-late", "hitId": "h"}
        )
        task = page.url.split("?")[0]
        units = http.get(task + "state").json()["units"]
        before = http.post(task + "answer", json={"unit_id": units[0]["unit_id"], "question": "vote", "value": "a"})
        assert before.status_code == 409 and "agree" in before.json()["error"]
        assert http.post(task + "consent").status_code == 200
        for view in units:
            assert (
                http.post(
                    task + "answer", json={"unit_id": view["unit_id"], "question": "vote", "value": "a"}
                ).status_code
                == 200
            )
        # Three hours pass with the scheduler paused (nothing expires the assignment).
        with session_scope(database_url) as s:
            late = s.scalar(select(Assignment))
            late.accepted_at -= dt.timedelta(hours=3)
        late_submit = http.post(task + "submit", headers=JSON)
        late_answer = http.post(
            task + "answer", json={"unit_id": units[0]["unit_id"], "question": "vote", "value": "b"}
        )
    assert late_submit.status_code == 410 and "time limit" in late_submit.json()["error"]
    assert late_answer.status_code == 410
    with session_scope(database_url) as s:
        assert s.scalar(select(Assignment.status)) == "accepted"
        assert set(s.scalars(select(Response.value))) == {"a"}
    assert events(database_url, "assignment_submitted") == 0


def test_refused_arrivals_stop_reaching_the_platform_and_a_path_in_an_id_never_does(
    tmp_path, database_url, monkeypatch
):
    import uuid

    from hitkit.providers.prolific.provider import ProlificProvider
    from hitkit.worker.arrivals import FAILURE_BURST
    from tests.fakes.prolific import TOKEN, FakeProlificServer

    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    secret = resolve_secret(database_url)
    processes = 1 if database_url.startswith("sqlite") else 2
    with FakeProlificServer() as fake, serving(database_url, secret, tmp_path / "web.log") as base:
        config, _ = running_study(
            tmp_path,
            database_url,
            base,
            provider={
                "kind": "prolific",
                "currency": "GBP",
                "fee_rate": "0.333",
                "prolific": {"api_url": fake.url, "project": "proj42", "estimated_minutes": 2},
            },
        )
        sid = ProlificProvider(config, secret).prolific_study_id()

        def checks() -> int:
            return sum(r.method == "GET" and "/submissions/" in r.path for r in fake.requests)

        logged_before = events(database_url, "prolific_call")

        def bogus(i: int, session_id: str | None = None) -> requests.Response:
            return requests.get(
                f"{base}/s/ab-demo/enter",
                timeout=60,
                params={
                    "PROLIFIC_PID": uuid.uuid4().hex[:24],
                    "STUDY_ID": sid,
                    "SESSION_ID": session_id or uuid.uuid4().hex[:24],
                },
            )

        # The same made-up link, 10 times at once: one question to Prolific.
        same = uuid.uuid4().hex[:24]
        pid = uuid.uuid4().hex[:24]
        repeated = all_at_once(
            10,
            lambda i: requests.get(
                f"{base}/s/ab-demo/enter", timeout=60, params={"PROLIFIC_PID": pid, "STUDY_ID": sid, "SESSION_ID": same}
            ),
        )
        assert {r.status_code for r in repeated} == {403}
        assert checks() <= processes  # one per web process at most (each keeps its own cache)
        traversal = requests.get(
            f"{base}/s/ab-demo/enter",
            timeout=60,
            params={"PROLIFIC_PID": "P1", "STUDY_ID": sid, "SESSION_ID": "../../studies/x/"},
        )
        # 40 different made-up links from one address: the platform hears of the first few only.
        replies = [bogus(i) for i in range(40)]
        calls = checks()
    assert {r.status_code for r in replies} <= {403, 429} and 429 in {r.status_code for r in replies}
    assert calls <= processes * (1 + FAILURE_BURST), calls
    assert traversal.status_code == 400  # not a Prolific id: refused before it can reach a URL path
    assert not any(".." in r.path for r in fake.requests)
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Assignment)) == 0
    # Arrival checks are reads, which the audit log leaves out: bogus arrivals write no event rows at all.
    assert events(database_url, "prolific_call") - logged_before == 0
