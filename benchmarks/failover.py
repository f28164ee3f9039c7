"""Failover under load: the leading scheduler ``kill -9``ed every ``--kill-every`` seconds while a study runs.

A pairwise study on the simulated provider runs on a fresh PostgreSQL database (created from
``--postgres``, dropped after): its pages on hitkit's embedded server on loopback, the simulated crowd
(the study file's workers, slowed so the study lasts ``--minutes``) answering through them, and two
``hitkit scheduler`` processes sharing the database's job store. Every ``--kill-every`` seconds the
process that holds the study's lease (:mod:`hitkit.study.lease`) is killed with SIGKILL and a fresh
scheduler is started in its place, so one standby is always waiting.

Measured:

- ``failovers``: kills after which another scheduler took the lease;
- ``max_gap_s``: the longest time from a kill to the moment the standby's lease begins (the lease row's
  ``since``) — at most two ticks (``2 × --interval``) is the target;
- ``double_actions``: HITs recorded posted twice, assignments recorded approved twice, ledger rows doubled;
- ``lost``: answers the server acknowledged to the crowd that are not in the database at the end, plus
  work handed in that was never decided when the run ends.

The last line is::

    RESULT failovers=… max_gap_s=… double_actions=0 lost=0 interval_s=…

Usage: ``python benchmarks/failover.py`` (5 minutes, a kill every 30 s); a short run:
``python benchmarks/failover.py --minutes 1 --kill-every 10``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def fresh_database(admin_url: str) -> tuple[str, str]:
    """A new, migrated PostgreSQL database next to ``admin_url``: (its URL, its name)."""
    import psycopg
    from sqlalchemy.engine import make_url

    from hitkit.db.migrate import upgrade

    name = f"hitkit_failover_{uuid.uuid4().hex[:8]}"
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


def write_study(folder: Path, database_url: str, interval_s: float, seconds_per_answer: float) -> Path:
    """The example pairwise study on the simulated provider, its crowd answering every ``seconds_per_answer``."""
    data = yaml.safe_load((REPO / "examples" / "pairwise.yaml").read_text())
    data["pairwise"]["responses"] = str(REPO / "examples" / "data" / "ab_responses.jsonl")
    data.update(out=str(folder / "runs"), database=database_url)
    data["schedule"].update(interval_s=interval_s, approve_after_s=0, qc_failures="pay")
    data["simulated"].update(seconds_per_answer=seconds_per_answer, ack_log=True)
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


LOGS: list[Path] = []


def scheduler_process(database_url: str, timeout_s: float = 60.0) -> subprocess.Popen:
    """A ``hitkit scheduler`` process, returned once it says it runs (a standby that is still starting
    would make the gap after a kill the time Python takes to start, not the failover's)."""
    log = Path(tempfile.gettempdir()) / f"hitkit-failover-scheduler-{uuid.uuid4().hex[:8]}.log"
    LOGS.append(log)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hitkit.cli", "scheduler", "--db", database_url],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=log.open("w"),
        text=True,
    )
    said: list[str] = []
    reader = threading.Thread(target=lambda: said.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not said or "Scheduler running" not in said[0]:
        proc.kill()
        raise SystemExit(f"the scheduler did not start within {timeout_s:.0f} s: {said}")
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep its pipe drained
    return proc


def lease_row(database_url: str):
    from sqlalchemy import select

    from hitkit.db.models import StudyLease
    from hitkit.db.session import session_scope

    with session_scope(database_url) as s:
        row = s.scalar(select(StudyLease))
        return None if row is None else (row.pid, row.since, row.expires_at)


def count_doubles(database_url: str) -> int:
    from sqlalchemy import select

    from hitkit.db.models import Event, Payment
    from hitkit.db.session import session_scope

    with session_scope(database_url) as s:
        posted = Counter(e.data["hit"] for e in s.scalars(select(Event).where(Event.kind == "hit_posted")))
        approved = Counter(
            e.data["assignment"] for e in s.scalars(select(Event).where(Event.kind == "assignment_approved"))
        )
        money = Counter((p.assignment_id, p.kind) for p in s.scalars(select(Payment)))
    return sum(n - 1 for c in (posted, approved, money) for n in c.values() if n > 1)


def count_lost(database_url: str, acks: Path) -> int:
    from sqlalchemy import select

    from hitkit.db.models import Assignment, Response, Unit
    from hitkit.db.session import session_scope

    with session_scope(database_url) as s:
        keys = dict(s.execute(select(Unit.id, Unit.public_key)).all())
        stored = {
            (r.assignment.provider_assignment_id, keys[r.unit_id]): r.value
            for r in s.scalars(select(Response).where(Response.source == "worker"))
        }
        undecided = len(s.scalars(select(Assignment.id).where(Assignment.status == "submitted")).all())
    acked = [json.loads(line) for line in acks.read_text().splitlines()] if acks.exists() else []
    return sum(1 for a in acked if stored.get((a["assignment"], a["unit_id"])) != a["value"]) + undecided


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="how long the study runs under kills")
    parser.add_argument("--kill-every", type=float, default=30.0, help="seconds between kills of the leader")
    parser.add_argument("--interval", type=float, default=1.0, help="the scheduler's tick, seconds")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("HITKIT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
        help="a PostgreSQL URL whose server gets a fresh database for the run",
    )
    args = parser.parse_args()
    logging.getLogger("apscheduler").setLevel(logging.CRITICAL)  # the job-store writer below stops at once
    if args.minutes <= 0 or args.kill_every <= 0 or args.interval <= 0:
        parser.error("--minutes, --kill-every and --interval must be positive")

    from sqlalchemy import select

    from hitkit.db.models import Study
    from hitkit.db.session import session_scope
    from hitkit.running.monitor import progress
    from hitkit.running.scheduler import make_scheduler, schedule_study
    from hitkit.simulation.crowd import SimulatedCrowd
    from hitkit.study.loading import load_study
    from hitkit.study.stored import create_study, resolve_secret
    from server.embedded import WebServer

    database_url, dbname = fresh_database(args.postgres)
    folder = Path(tempfile.mkdtemp(prefix="hitkit-failover-"))
    procs: list[subprocess.Popen] = []
    web = crowd = None
    try:
        probe = load_study(write_study(folder, database_url, args.interval, 0.0))
        secret = resolve_secret(database_url)
        with session_scope(database_url) as s:
            ctx = create_study(s, probe, folder / "study.yaml", secret)
            s.get(Study, ctx.study_id).status = "running"
        needed = progress(database_url, ctx.study_id)[1]
        concurrency = probe.simulated.concurrency
        # Slow the crowd so that the study lasts the run (its answers spread over --minutes).
        spa = args.minutes * 60 * concurrency / max(needed, 1) * 0.9
        write_study(folder, database_url, args.interval, spa)  # the file says what the run did
        with session_scope(database_url) as s:
            study = s.get(Study, ctx.study_id)
            study.config = {**study.config, "simulated": {**study.config["simulated"], "seconds_per_answer": spa}}
        web = WebServer(database_url, "127.0.0.1", 0, 16, secret).start()
        sched = make_scheduler(database_url)
        sched.start(paused=True)
        schedule_study(sched, database_url, probe.study, web.url, args.interval)
        sched.shutdown(wait=False)
        procs = [scheduler_process(database_url), scheduler_process(database_url)]
        with session_scope(database_url) as s:
            from hitkit.study.stored import StudyContext

            ctx = StudyContext.load(s, probe.study, secret)
        acks = folder / "acks.jsonl"
        crowd = SimulatedCrowd(database_url, ctx, web.url, ack_log=acks).start()
        started = time.monotonic()
        end = started + args.minutes * 60
        gaps: list[float] = []
        next_kill = started + args.kill_every
        while time.monotonic() < end:
            with session_scope(database_url) as s:
                if s.scalar(select(Study.status).where(Study.id == ctx.study_id)) == "completed":
                    break
            if time.monotonic() < next_kill:
                time.sleep(0.05)
                continue
            next_kill += args.kill_every
            row = lease_row(database_url)
            live = {p.pid: p for p in procs if p.poll() is None}
            if row is None or row[0] not in live:
                continue  # no scheduler leads right now (one is taking over): try at the next kill
            os.kill(row[0], signal.SIGKILL)
            killed_at = dt.datetime.now(dt.timezone.utc)
            live[row[0]].wait()
            deadline = time.monotonic() + 20 * args.interval
            while time.monotonic() < deadline:
                now_row = lease_row(database_url)
                if now_row is not None and now_row[0] != row[0] and now_row[1] > killed_at:
                    gaps.append((now_row[1] - killed_at).total_seconds())
                    break
                time.sleep(0.02)
            else:
                gaps.append(float("inf"))
                print(
                    f"no takeover after killing pid {row[0]}: lease {lease_row(database_url)}; survivors "
                    f"{[p.pid for p in procs if p.poll() is None]}; logs {[str(x) for x in LOGS]}",
                    flush=True,
                )
            procs.append(scheduler_process(database_url))  # a fresh standby, as a supervisor would start
        crowd.stop()
        settle_until = time.monotonic() + 30 * args.interval  # the leader approves what was handed in
        while time.monotonic() < settle_until and count_lost(database_url, acks) > 0:
            time.sleep(args.interval)
        doubles, lost = count_doubles(database_url), count_lost(database_url, acks)
        failovers = sum(1 for g in gaps if g != float("inf"))
        print(
            f"kills={len(gaps)} gaps_s={[round(g, 3) for g in gaps]} seconds_per_answer={spa:.3f} "
            f"crowd_errors={len(crowd.stats.errors)}",
            flush=True,
        )
        print(
            f"RESULT failovers={failovers} max_gap_s={max(gaps, default=0.0):.3f} double_actions={doubles} "
            f"lost={lost} interval_s={args.interval:g} kills={len(gaps)}",
            flush=True,
        )
    finally:
        if crowd is not None:
            crowd.stop()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if web is not None:
            web.stop()
        drop_database(args.postgres, dbname)


if __name__ == "__main__":
    main()
