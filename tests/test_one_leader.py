"""One leader per study, and money exact under any interleaving: real ``hitkit sync`` and ``hitkit scheduler``
processes, several at once, against the Prolific fake, some killed with SIGKILL at each step of a payment.

Every assertion is on money as both books hold it: the fake's own record of what it approved and paid
(``paid``, each submission's ``bonus_payments``, the APPROVE calls it received) and the Payment ledger.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from decimal import Decimal

import pytest
from sqlalchemy import select, update

from hitkit.db.models import Assignment, Event, Hit, Payment, Study, StudyLease, utcnow
from hitkit.db.session import session_scope
from hitkit.money import bonuses, ledger
from hitkit.providers.prolific import client as prolific_api
from hitkit.running.scheduler import tick
from hitkit.study import lease
from hitkit.study.stored import StudyContext, resolve_secret
from tests.fakes.prolific import TOKEN, FakeProlificServer
from tests.studies import REPO
from tests.test_provider_faults import prolific_submit
from tests.test_provider_sync import on_prolific, start

BONUS = Decimal("0.40")
REASON = "Thank you for careful answers"


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)


@pytest.fixture
def prolific():
    with FakeProlificServer() as fake:
        yield fake
        assert fake.violations == []  # every request and answer matched Prolific's OpenAPI document


def env(lease_s: float = 2.0) -> dict:
    return {**os.environ, "PROLIFIC_TOKEN": TOKEN, "PYTHONPATH": str(REPO), "HITKIT_LEASE_S": str(lease_s)}


def pending_money(tmp_path, database_url, prolific, workers: int, bonuses_each: int = 2):
    """A Prolific study whose ``workers`` submissions wait for approval, each with ``bonuses_each`` bonuses
    recorded in the ledger and never paid (the paying process died after the ledger commit)."""
    web, config, secret = start(tmp_path, database_url, on_prolific(prolific))
    try:
        tick(database_url, "ab-demo", web.url)  # creates and publishes the Prolific study
        sessions = prolific_submit(web.url, prolific, [f"P{i}" for i in range(workers)], config, secret)
    finally:
        web.stop()
    with session_scope(database_url) as s:
        ctx = StudyContext.load(s, "ab-demo", resolve_secret(database_url))
        for a in s.scalars(select(Assignment).order_by(Assignment.id)):
            for tag in range(1, bonuses_each + 1):
                bonuses.record_bonus(s, ctx, a, BONUS, ledger.bonus_key(ctx.study_id, a.id, tag), REASON, "cli")
        # Older than sync's guard: no process is paying them now.
        s.execute(update(Payment).values(created_at=utcnow() - dt.timedelta(hours=1)))
        study_id = ctx.study_id
    lease.release(database_url, study_id)  # this test process's tick led; the processes below take over
    return sessions


def syncs(study_file, n: int, lease_s: float = 2.0) -> list[subprocess.Popen]:
    cmd = [sys.executable, "-m", "hitkit.cli", "sync", str(study_file), "--json", "--wait", "120"]
    return [
        subprocess.Popen(cmd, cwd=REPO, env=env(lease_s), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(n)
    ]


def finish(procs: list[subprocess.Popen], timeout: float = 180) -> dict[int, str]:
    """Wait for every process; each one's stderr by pid."""
    deadline, errors = time.monotonic() + timeout, {}
    for p in procs:
        try:
            errors[p.pid] = p.communicate(timeout=max(1.0, deadline - time.monotonic()))[1] or ""
        except subprocess.TimeoutExpired:
            p.kill()
            raise
    return errors


def assert_finished_or_stood_down(procs: list[subprocess.Popen], errors: dict[int, str]) -> None:
    """Each sync finished, or, starved of CPU past its lease while another sync took the study over (as on
    a loaded machine), stopped with the leader named and recorded nothing more; at least one finished."""
    for p in procs:
        assert p.returncode == 0 or (p.returncode == 1 and "no longer leads" in errors[p.pid]), errors[p.pid][-2000:]
    assert any(p.returncode == 0 for p in procs)


def leader_pid(database_url: str) -> int | None:
    with session_scope(database_url) as s:
        row = s.scalar(select(StudyLease))
        return None if row is None else row.pid


def assert_paid_once(database_url: str, prolific, sessions: list[str], bonuses_each: int) -> None:
    """Each bonus paid exactly once on Prolific, each submission approved, and the ledger equal to Prolific."""
    for sid in sessions:
        assert prolific.submissions[sid]["bonus_payments"] == [int(BONUS * 100)] * bonuses_each, sid
        assert prolific.submissions[sid]["status"] == "APPROVED"
    paid_rows = Counter(r for b in prolific.paid for r, _ in prolific.bonuses[b]["rows"])
    assert paid_rows == {sid: bonuses_each for sid in sessions}
    with session_scope(database_url) as s:
        rows = s.scalars(select(Payment)).all()
        bonuses = [p for p in rows if p.kind == "bonus"]
        assert {p.state for p in bonuses} <= {"paid", "confirmed"} and {p.status for p in rows} == {"paid"}
        assert sum(p.amount for p in bonuses) == sum(v for b in prolific.paid for _, v in prolific.bonuses[b]["rows"])
        assert sorted(p.provider_ref for p in bonuses) == sorted(prolific.paid)  # the ledger names what was paid
        assert Counter(p.kind for p in rows)["reward"] == len(sessions)
        assert {a.status for a in s.scalars(select(Assignment))} == {"approved"}


@pytest.mark.parametrize("n", [2, 8])
def test_concurrent_syncs_pay_every_pending_bonus_and_approval_exactly_once(tmp_path, database_url, prolific, n):
    # Two syncs (one waits for the other) and eight (most wait, and a starved leader may stand down): four
    # met nothing the two do not, and each sync process costs about 1.6 s of CPU.
    sessions = pending_money(tmp_path, database_url, prolific, workers=3)
    # A 10 s lease: the syncs start together and contend for it. A leader starved of CPU past it (8 processes
    # starting on 2 loaded cores) stops when it next records, and another takes over: correct, and allowed.
    procs = syncs(tmp_path / "study.yaml", n, lease_s=10.0)
    assert_finished_or_stood_down(procs, finish(procs))
    assert_paid_once(database_url, prolific, sessions, bonuses_each=2)
    approvals = Counter(
        r.path
        for r in prolific.requests
        if r.method == "POST" and r.path.endswith("/transition/") and r.body.get("action") == "APPROVE"
    )
    assert set(approvals.values()) == {1}  # one leader at a time: APPROVE is sent once per submission


STEPS = {
    # step: (the call stalled, stalled before Prolific acts, how many matching calls pass first)
    "before create": (r"POST /submissions/bonus-payments/", True, 0),
    "after create": (r"POST /submissions/bonus-payments/", False, 0),
    "after pay": (r"POST /bulk-bonus-payments/.*/pay/", False, 0),
    "after ledger commit": (r"POST /submissions/bonus-payments/", True, 1),  # the first bonus committed paid
    "mid approval": (r"POST /submissions/.*/transition/", False, 0),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_a_sync_killed_at_any_step_of_a_payment_leaves_nothing_paid_twice_or_unpaid(
    tmp_path, one_database_url, prolific, step
):
    database_url = one_database_url
    sessions = pending_money(tmp_path, database_url, prolific, workers=2)
    pattern, before, skip = STEPS[step]
    stall = prolific.stall_next(pattern, before=before, skip=skip)
    procs = syncs(tmp_path / "study.yaml", 3)  # the one killed, and two that contend for its lease afterwards
    assert stall.reached.wait(90), "no sync reached the step"
    victim = leader_pid(database_url)  # the process whose call is stalled leads the study
    os.kill(victim, signal.SIGKILL)
    stall.release.set()
    errors = finish(procs)
    killed = [p for p in procs if p.pid == victim]
    assert len(killed) == 1 and killed[0].returncode == -signal.SIGKILL
    assert_finished_or_stood_down([p for p in procs if p.pid != victim], errors)
    assert_paid_once(database_url, prolific, sessions, bonuses_each=2)


def scheduler_job(database_url: str, base_url: str, interval_s: float = 0.5) -> None:
    """The study's tick job in the database's job store, as ``hitkit launch`` leaves it."""
    from hitkit.running.scheduler import make_scheduler, schedule_study

    sched = make_scheduler(database_url)
    sched.start(paused=True)
    schedule_study(sched, database_url, "ab-demo", base_url, interval_s)
    sched.shutdown(wait=False)


def schedulers(database_url: str, n: int) -> list[subprocess.Popen]:
    cmd = [sys.executable, "-m", "hitkit.cli", "scheduler", "--db", database_url]
    return [
        subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(n)
    ]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_schedulers_on_one_database_create_one_prolific_study_and_post_each_hit_once(tmp_path, database_url, prolific):
    # Four schedulers contend for every tick (two did too, and met nothing four do not).
    n = 4
    web = start(tmp_path, database_url, on_prolific(prolific))[0]
    web.stop()  # posting needs no pages: participants never come
    scheduler_job(database_url, "https://tasks.example.org")
    procs = schedulers(database_url, n)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with session_scope(database_url) as s:
                posted = s.scalar(select(Hit.id).where(Hit.status == "posted").limit(1))
            if posted is not None and len(prolific.calls("POST", r"/studies/.*/transition/")) > 0:
                break
            time.sleep(0.2)
        time.sleep(2)  # more ticks, by whichever scheduler leads
    finally:
        stop(procs)
    assert len(prolific.studies) == 1 and len(prolific.calls("POST", "/studies/")) == 1
    [remote] = prolific.studies.values()
    assert remote["status"] == "ACTIVE"
    with session_scope(database_url) as s:
        posted_events = Counter(e.data["hit"] for e in s.scalars(select(Event).where(Event.kind == "hit_posted")))
        hits = s.scalars(select(Hit).where(Hit.status == "posted")).all()
        refused = s.scalars(select(Event).where(Event.kind == "provider_refused_post")).all()
    assert hits and set(posted_events.values()) == {1} and len(posted_events) == len(hits)
    assert remote["total_available_places"] == sum(h.max_assignments for h in hits)
    assert refused == []


def test_a_standby_scheduler_takes_over_within_two_ticks_when_the_leader_is_killed(tmp_path, database_url, prolific):
    # Ticks of 1.5 s: the lease runs out at most 2.25 s after the kill and the standby, which sleeps to
    # that moment, takes it 0.1 s later; the 0.65 s left of the two-tick bound absorbs a loaded CI
    # machine's scheduling delays (with 0.5 s ticks, 0.15 s was too little: a takeover came at 1.1 s).
    interval = 1.5
    web = start(tmp_path, database_url, on_prolific(prolific), interval_s=interval)[0]
    web.stop()
    scheduler_job(database_url, "https://tasks.example.org", interval)
    procs = schedulers(database_url, 2)
    try:
        deadline = time.monotonic() + 60
        while leader_pid(database_url) not in {p.pid for p in procs} and time.monotonic() < deadline:
            time.sleep(0.05)
        first = leader_pid(database_url)
        assert first in {p.pid for p in procs}
        time.sleep(2 * interval)  # it leads for a while, renewing each tick
        assert leader_pid(database_url) == first
        os.kill(first, signal.SIGKILL)
        killed_at = dt.datetime.now(dt.timezone.utc)
        while leader_pid(database_url) == first and time.monotonic() < deadline:
            time.sleep(0.02)
        with session_scope(database_url) as s:
            row = s.scalar(select(StudyLease))
        assert row.pid in {p.pid for p in procs} - {first}
        assert (row.since - killed_at).total_seconds() <= 2 * interval
        with session_scope(database_url) as s:  # the standby went on where the leader stopped
            assert s.scalar(select(Study.status)) == "running"
    finally:
        stop(procs)


def crowd_through_a_killed_leader(database_url, prolific, config, secret, hosts: list[str]) -> tuple[int, int, Counter]:
    """The simulated crowd takes the Prolific study's places until it completes (at most 240 s), worker n
    entering through ``hosts[n % len(hosts)]``; after ten HITs the scheduler holding the lease is killed
    (SIGKILL). (places taken, the killed pid, places taken per host)."""
    from hitkit.providers.prolific.provider import ProlificProvider
    from hitkit.simulation.crowd import crowd_from_config
    from tests.fakes.crowd import take_hit
    from tests.fakes.prolific import Refused
    from tests.test_provider_sync import context, prolific_pid

    ctx, sim = context(database_url, secret)
    code = ProlificProvider(config, secret).completion_code()
    workers, taken, killed, entered = crowd_from_config(config), 0, None, Counter()
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        with session_scope(database_url) as s:
            if s.scalar(select(Study.status)) == "completed":
                break
        if killed is None and taken >= 10:  # mid-study: the leader dies
            killed = leader_pid(database_url)
            os.kill(killed, signal.SIGKILL)
        for n, w in enumerate(workers if prolific.studies else []):
            [sid] = prolific.studies
            participant = prolific_pid(w.worker_id)
            try:
                session_id = prolific.start_session(participant, sid)
            except Refused:
                continue
            host = hosts[n % len(hosts)]
            done = take_hit(
                ctx,
                sim,
                w,
                f"{host}/s/ab-demo/enter",
                {"PROLIFIC_PID": participant, "STUDY_ID": sid, "SESSION_ID": session_id},
            )
            if done is None:
                prolific.return_session(session_id)
                continue
            prolific.complete(session_id, code)
            taken += 1
            entered[host] += 1
        time.sleep(0.3)
    return taken, killed, entered


def assert_whole_study_paid_once(database_url, prolific, taken: int) -> None:
    """The example study (10 HITs × 3 places) completed on Prolific: every place taken, approved and paid
    once, one Prolific study, each HIT posted once, every unit's answers kept once."""
    from hitkit.db.models import Response, Unit

    places = 10 * 3
    done = [s for s in prolific.submissions.values() if s["status"] != "RETURNED"]
    assert taken == places == len(done) and {s["status"] for s in done} == {"APPROVED"}
    assert len(prolific.studies) == 1 and len(prolific.calls("POST", "/studies/")) == 1
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        per_unit = Counter(r.unit_id for r in s.scalars(select(Response)))
        assert per_unit == Counter(dict(s.execute(select(Unit.id, Unit.required_answers)).all()))
        rows = s.scalars(select(Payment)).all()
        assert Counter(p.kind for p in rows) == {"reward": places, "fee": places}
        assert {p.status for p in rows} == {"paid"}
        assert set(Counter((p.assignment_id, p.kind) for p in rows).values()) == {1}
        posted = Counter(e.data["hit"] for e in s.scalars(select(Event).where(Event.kind == "hit_posted")))
        assert set(posted.values()) == {1} and len(posted) == 10
    approvals = Counter(
        r.path
        for r in prolific.requests
        if r.method == "POST" and r.path.endswith("/transition/") and r.path.startswith("/submissions/")
    )
    assert len(approvals) == places and sum(approvals.values()) <= places + 1  # one call may die with its sender


def test_two_schedulers_on_postgresql_run_a_whole_prolific_study_with_the_leader_killed_midway(
    tmp_path, one_database_url, prolific
):
    database_url = one_database_url
    if not database_url.startswith("postgresql"):
        pytest.skip("this whole study runs on PostgreSQL, as a deployment with several processes does")
    web, config, secret = start(tmp_path, database_url, on_prolific(prolific))
    scheduler_job(database_url, web.url)
    procs = schedulers(database_url, 2)
    try:
        taken, killed, _ = crowd_through_a_killed_leader(database_url, prolific, config, secret, [web.url])
    finally:
        stop(procs)
        web.stop()
    assert killed in {p.pid for p in procs}
    assert_whole_study_paid_once(database_url, prolific, taken)


def test_status_and_the_dashboard_name_the_leading_process_and_since_when(tmp_path, database_url, monkeypatch):
    import json
    import socket

    from click.testing import CliRunner

    from hitkit.cli import main
    from tests.test_dashboard import app_for, login, make_study

    monkeypatch.setenv("HITKIT_DASHBOARD_USER", "coordinator")
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", "a long enough passphrase")
    monkeypatch.delenv("HITKIT_DASHBOARD_PASSWORD_HASH", raising=False)
    ctx = make_study(tmp_path, database_url)  # its tick made this process the leader
    assert lease.try_take(database_url, ctx.study_id, "scheduler", 60)  # renewed as a tick would, for a minute
    study_file = tmp_path / "study.yaml"
    with session_scope(database_url) as s:
        s.get(Study, ctx.study_id).config_path = str(study_file)
        since = s.get(StudyLease, ctx.study_id).since
    shown = json.loads(CliRunner().invoke(main, ["status", str(study_file), "--json"]).output)
    assert shown["leader"]["pid"] == os.getpid() and shown["leader"]["host"] == socket.gethostname()[:64]
    assert shown["leader"]["role"] == "scheduler" and shown["leader"]["since"] == since.isoformat()
    text = CliRunner().invoke(main, ["status", str(study_file)]).output
    assert f"leader: scheduler on {socket.gethostname()[:64]} (pid {os.getpid()})" in text
    client = app_for(database_url).test_client()
    login(client, "a long enough passphrase")
    page = client.get(f"/dashboard/study/{ctx.name}").get_data(as_text=True)
    assert (
        f'data-leader-pid="{os.getpid()}"' in page
        and f"(process {os.getpid()}), since {since:%Y-%m-%d %H:%M:%S}" in page
    )
    lease.release(database_url, ctx.study_id)
    assert json.loads(CliRunner().invoke(main, ["status", str(study_file), "--json"]).output)["leader"] is None
    after = client.get(f"/dashboard/study/{ctx.name}").get_data(as_text=True)
    # Between ticks nobody holds the lease: the page names who acted last rather than flickering to "none".
    assert 'data-leader-pid=""' in after and f"(process {os.getpid()}) acted last" in after


def test_prolifics_cannot_publish_an_active_study_is_taken_as_published_not_as_a_lasting_refusal(
    tmp_path, database_url, prolific
):
    import threading

    web = start(tmp_path, database_url, on_prolific(prolific))[0]
    web.stop()
    # Our look at the draft answers UNPUBLISHED; before our PUBLISH arrives, a rival's publish makes it ACTIVE.
    stall = prolific.stall_next(r"GET /studies/[0-9a-f]+/", before=False)
    ticking = threading.Thread(target=tick, args=(database_url, "ab-demo", "https://tasks.example.org"))
    ticking.start()
    assert stall.reached.wait(60)
    [remote] = prolific.studies.values()
    remote["status"] = "ACTIVE"  # API (publish-study): the rival's PUBLISH took it UNPUBLISHED → ACTIVE
    stall.release.set()
    ticking.join(60)
    publishes = [r for r in prolific.calls("POST", r"/studies/.*/transition/") if r.body == {"action": "PUBLISH"}]
    assert len(publishes) == 1  # ours, refused with "Cannot PUBLISH a study that is ACTIVE"
    with session_scope(database_url) as s:
        assert s.scalars(select(Event).where(Event.kind == "provider_refused_post")).all() == []
        assert s.scalars(select(Hit).where(Hit.status == "posted")).all()
    assert tick(database_url, "ab-demo", "https://tasks.example.org").posted >= 0  # posting goes on
    assert len(prolific.studies) == 1
