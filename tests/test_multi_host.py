"""Several web hosts, one database (docs/DEPLOYMENT.md): two gunicorn instances on loopback share one
database, as two web hosts behind nginx share PostgreSQL. A simulated crowd goes through a whole study
with every worker's requests spread over both hosts (what a load balancer without sticky sessions
does): a token made on one host is good on the other, every answer is kept once, the study completes
and every submission is paid once. With two ``hitkit scheduler`` processes beside the two hosts and the
leading one killed midway, the standby finishes the study on Prolific with every place paid once. The
shipped nginx recipe balances over two or more hosts with the same client timeouts as the one-host recipe."""

from __future__ import annotations

import random
import re
from collections import Counter
from itertools import cycle

import pytest
import requests
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Payment, Response, Study
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.simulation.crowd import crowd_from_config
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext, create_study, resolve_secret
from tests.fakes.crowd import run_rounds
from tests.studies import REPO, pairwise_study
from tests.test_bounded_requests import _gunicorn


def _take(ctx, sim, n: int, worker, visit: int, hosts: list[str], acks: Counter) -> bool:
    """The ``n``-th simulated worker takes a HIT, each request on the next host; False when refused."""
    http = requests.Session()
    host = cycle(hosts[n % len(hosts) :] + hosts[: n % len(hosts)])  # half the crowd starts on each host
    page = http.get(
        f"{next(host)}/s/ab-demo/enter",
        params={"workerId": worker.worker_id, "assignmentId": f"{worker.worker_id}-{visit}", "hitId": "h"},
        timeout=30,
    )
    if page.status_code in (403, 409, 410):
        return False
    assert page.status_code == 200, page.text[:300]
    path = re.sub(r"^https?://[^/]+", "", page.url.split("?")[0])
    assert http.post(f"{next(host)}{path}consent", timeout=30).status_code == 200
    state = http.get(f"{next(host)}{path}state", timeout=30).json()
    rng = random.Random(f"{worker.worker_id}:{path}")
    for view in state["units"]:
        for question, value in ctx.task.simulate(worker.profile, view, rng, sim, worker.worker_id).items():
            saved = http.post(
                f"{next(host)}{path}answer",
                timeout=30,
                json={"unit_id": view["unit_id"], "question": question, "value": value},
            )
            assert saved.status_code == 200, saved.text[:300]
            acks[(path, view["unit_id"], question)] = value
    done = http.post(f"{next(host)}{path}submit", json={}, timeout=30)
    assert done.status_code == 200 and done.json()["submitted"], done.text[:300]
    return True


def test_two_web_hosts_on_one_database_run_a_whole_study(tmp_path, one_database_url):
    path = pairwise_study(tmp_path, one_database_url)
    config = load_study(path)
    secret = resolve_secret(one_database_url)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, config, path, secret)
        s.get(Study, ctx.study_id).status = "running"
    hosts, procs = [], []
    try:
        for n in range(2):
            proc, port = _gunicorn(one_database_url, secret, tmp_path / f"host{n}.log")
            procs.append(proc)
            hosts.append(f"http://127.0.0.1:{port}")
        with session_scope(one_database_url) as s:
            ctx = StudyContext.load(s, "ab-demo", secret)
            sim = ctx.task.simulation_context(s, s.get(Study, ctx.study_id))
        workers = crowd_from_config(config)
        acks: Counter = Counter()
        visits = iter(range(100_000))

        def one_round() -> int:
            return sum(_take(ctx, sim, n, w, next(visits), hosts, acks) for n, w in enumerate(workers))

        def finished() -> bool:
            with session_scope(one_database_url) as s:
                return s.scalar(select(Study.status)) == "completed"

        taken = run_rounds(20, one_round, lambda: tick(one_database_url, "ab-demo", hosts[0]), finished)
        for _ in range(3):  # approvals of the last submissions
            tick(one_database_url, "ab-demo", hosts[0])
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(20)
    for n in range(2):
        assert "Traceback" not in (tmp_path / f"host{n}.log").read_text()
    assert finished()
    with session_scope(one_database_url) as s:
        assignments = s.scalars(select(Assignment)).all()
        worker_answers = s.scalar(select(func.count()).select_from(Response).where(Response.source != "auto"))
        paid = Counter((p.assignment_id, p.kind) for p in s.scalars(select(Payment)))
    assert taken == len(assignments) > 0 and {a.status for a in assignments} == {"approved"}
    assert worker_answers == len(acks)  # every acknowledged answer kept, once
    assert set(paid.values()) == {1} and Counter(kind for _, kind in paid) == {"reward": taken, "fee": taken}


def test_the_nginx_recipe_for_several_hosts_balances_over_them_with_the_one_host_timeouts():
    one = (REPO / "ops/nginx/hitkit.conf").read_text()
    many = (REPO / "ops/nginx/hitkit-hosts.conf").read_text()
    upstream = re.search(r"upstream hitkit_web \{(.*?)\}", many, re.DOTALL)
    assert upstream, "ops/nginx/hitkit-hosts.conf needs an upstream hitkit_web block"
    servers = re.findall(r"^\s*server (\S+):8000\b[^;]*;", upstream.group(1), re.MULTILINE)
    assert len(servers) >= 2 and len(set(servers)) == len(servers)
    assert re.search(r"^\s*proxy_pass http://hitkit_web;", many, re.MULTILINE)
    for directive in (
        "client_header_timeout",
        "client_body_timeout",
        "send_timeout",
        "client_max_body_size",
        "limit_conn hitkit_per_client",
        "proxy_request_buffering",
        "proxy_read_timeout",
    ):
        ours = re.search(rf"^\s*{directive} (\S+);", many, re.MULTILINE)
        theirs = re.search(rf"^\s*{directive} (\S+);", one, re.MULTILINE)
        assert ours and theirs and ours.group(1) == theirs.group(1), directive
    # Keep-alive to the hosts needs HTTP/1.1 and an empty Connection header; a failed host is skipped.
    assert re.search(r"^\s*proxy_http_version 1\.1;", many, re.MULTILINE)
    assert re.search(r"^\s*proxy_set_header Connection \"\";", many, re.MULTILINE)
    assert re.search(r"^\s*proxy_next_upstream error timeout;", many, re.MULTILINE)  # never a non-idempotent retry


def test_two_web_hosts_and_two_schedulers_finish_a_prolific_study_with_the_leader_killed_midway(
    tmp_path, one_database_url, monkeypatch
):
    """Issue 34's deployment, whole: two gunicorn web hosts and two ``hitkit scheduler`` processes share one
    PostgreSQL database; half the crowd enters through each host; the scheduler holding the study's lease is
    killed (SIGKILL) after ten HITs. Every acknowledged answer is kept once, each place is paid once, one
    Prolific study is created, and the standby finishes the study."""
    from tests.fakes.prolific import TOKEN, FakeProlificServer
    from tests.test_one_leader import (
        assert_whole_study_paid_once,
        crowd_through_a_killed_leader,
        scheduler_job,
        schedulers,
        stop,
    )
    from tests.test_provider_sync import on_prolific, start

    database_url = one_database_url
    if not database_url.startswith("postgresql"):
        pytest.skip("several web hosts and schedulers share PostgreSQL, as a deployment of them does")
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    with FakeProlificServer() as prolific:
        web, config, secret = start(tmp_path, database_url, on_prolific(prolific))
        web.stop()  # start() made the study; its pages are served by the two gunicorn hosts below
        hosts, procs = [], []
        for n in range(2):
            proc, port = _gunicorn(database_url, secret, tmp_path / f"host{n}.log")
            hosts.append(f"http://127.0.0.1:{port}")
            procs.append(proc)
        scheduler_job(database_url, hosts[0])
        procs += schedulers(database_url, 2)
        try:
            taken, killed, entered = crowd_through_a_killed_leader(database_url, prolific, config, secret, hosts)
        finally:
            stop(procs)
        assert prolific.violations == []
        assert killed in {p.pid for p in procs[2:]}
        assert entered[hosts[0]] > 0 and entered[hosts[1]] > 0  # half the crowd on each web host
        for n in range(2):
            assert "Traceback" not in (tmp_path / f"host{n}.log").read_text()
        assert_whole_study_paid_once(database_url, prolific, taken)
