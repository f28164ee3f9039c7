"""A new user's first hour: dry runs, commands on a study not yet launched, one-line errors with a fix,
the QC outcome policy, and a launch that stops cleanly (children included) on SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.cli import main
from hitkit.db.models import Assignment, Event, Payment, Study
from hitkit.db.session import session_scope
from hitkit.money.qc_policy import HELD_EVENT, decide
from hitkit.progress import eta_text
from hitkit.running.monitor import Snapshot
from hitkit.study.counts import Counts
from hitkit.study.loading import load_study
from hitkit.study.served import database_url_of
from tests.studies import REPO, launch, pairwise_study


def _sqlite_study(tmp_path: Path, **changes) -> Path:
    """The example pairwise study on its default SQLite file under tmp_path (no database written yet)."""
    path = pairwise_study(tmp_path, None, **changes)
    data = yaml.safe_load(path.read_text())
    data.pop("database", None)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# Dry run and commands before launch -----------------------------------------------------------------
def test_dry_run_packs_and_prices_the_study_and_writes_no_database(tmp_path):
    study = _sqlite_study(tmp_path)
    run = CliRunner().invoke(main, ["launch", str(study), "--dry-run"])
    assert run.exit_code == 0, run.output
    assert "90 units packed into 10 HITs" in run.output
    assert "= 15.00 USD at most (budget 60.00)" in run.output
    assert "Nothing was posted or saved" in run.output
    db_file = tmp_path / "runs" / "ab-demo" / "hitkit.db"
    assert not db_file.exists()
    # ...so a real launch afterwards is a first launch, not a resume.
    status = CliRunner().invoke(main, ["status", str(study)])
    assert status.exit_code == 1 and "has not been launched yet" in status.output


@pytest.mark.parametrize("command", [["status"], ["export"], ["report"], ["sync"], ["held"]])
def test_a_command_on_an_unlaunched_study_says_so_in_one_line_and_creates_nothing(tmp_path, command):
    study = _sqlite_study(tmp_path)
    run = CliRunner().invoke(main, [*command, str(study)])
    assert run.exit_code == 1
    lines = run.output.strip().splitlines()
    assert len(lines) == 1 and "has not been launched yet" in lines[0] and "--dry-run" in lines[0]
    assert "Traceback" not in run.output
    assert not (tmp_path / "runs" / "ab-demo" / "hitkit.db").exists()


def test_serve_takes_a_path_or_a_url_and_names_a_missing_file_in_one_line(tmp_path):
    assert database_url_of("postgresql://u@h/db") == "postgresql://u@h/db"
    assert database_url_of(str(tmp_path / "x.db")) == f"sqlite:///{tmp_path / 'x.db'}"
    run = CliRunner().invoke(main, ["serve", "--db", str(tmp_path / "missing.db")])
    assert run.exit_code == 1 and len(run.output.strip().splitlines()) == 1
    assert "no such database file" in run.output
    assert not (tmp_path / "missing.db").exists()


# Errors -------------------------------------------------------------------------------------------
def test_study_file_errors_carry_no_library_prefix_and_each_has_a_fix(tmp_path):
    study = _sqlite_study(
        tmp_path,
        schedule={"wave_size": "five", "per_worker_cap": 2.5},
        simulated={"workers": [{"profile": "diligent", "count": 1}]},
        task="spot_the_bot",
    )
    run = CliRunner().invoke(main, ["status", str(study)])
    assert run.exit_code == 1
    assert "Value error" not in run.output and "(top level)" not in run.output
    problems = [line for line in run.output.splitlines() if line.startswith("  ")]
    assert any("wave_size" in p and "whole number" in p for p in problems)
    assert any("per_worker_cap" in p and "no decimals" in p for p in problems)
    assert all("fix:" in p or "add " in p or "use " in p for p in problems), problems


def test_qc_reject_without_a_long_enough_reason_is_refused_for_prolific(tmp_path):
    study = _sqlite_study(
        tmp_path, schedule={"qc_failures": "reject", "qc_reject_reason": "too short"}, provider={"kind": "prolific"}
    )
    run = CliRunner().invoke(main, ["launch", str(study), "--dry-run"])
    assert run.exit_code == 1 and "qc_reject_reason (100+ characters" in run.output


# Progress -----------------------------------------------------------------------------------------
def test_progress_moves_with_chat_messages_before_any_answer_and_gives_an_eta():
    snap = Snapshot(Counts(saved=0, submitted=0, needed=24, chat_messages=60, chat_messages_needed=240))
    assert snap.fraction == pytest.approx(0.9 * 0.25)
    line = snap.line(elapsed_s=60)
    assert (
        "answers saved 0/24 (0 in submitted work)" in line
        and "chat messages 60/240" in line
        and "22 %" in line
        and "ETA" in line
    )
    assert eta_text(0.5, 120) == "ETA 2 min"
    assert eta_text(0.0, 120) == ""
    assert "bots: 3 timed out" in Snapshot(Counts(1, 1, 2), health="bots: 3 timed out in the last 60 s").line(10)
    # Every chat's rating begun, the last messages still to come: not 100 % (the new-user review saw
    # "answers saved 24/24 (18 in submitted work) · chat messages 236/240 · 100 %").
    almost = Snapshot(Counts(saved=24, submitted=18, needed=24, chat_messages=236, chat_messages_needed=240))
    assert almost.fraction < 1 and "100 %" not in almost.line(60)
    assert Snapshot(Counts(24, 24, 24, 240, 240)).fraction == 1


# The QC outcome policy -------------------------------------------------------------------------------
def test_qc_policy_is_a_pure_decision():
    assert decide("hold", False) == "hold"
    assert decide("reject", False) == "reject"
    assert decide("pay", False) == "approve"
    for policy in ("hold", "reject", "pay"):
        assert decide(policy, True) == "approve"
        assert decide(policy, None) == "approve"  # no verdict yet never holds anybody
    with pytest.raises(ValueError):
        decide("keep", False)


def test_qc_policy_defaults_to_hold_on_real_crowds_and_pay_on_simulated(tmp_path):
    default = {"qc_failures": None}  # as a study file that does not mention it
    assert load_study(_sqlite_study(tmp_path, schedule=default)).qc_failures == "pay"
    assert load_study(_sqlite_study(tmp_path, schedule=default, provider={"kind": "local"})).qc_failures == "pay"
    # Two-minute tasks, so the example's reward meets Prolific's minimum hourly rate.
    for provider in (
        {"kind": "prolific", "prolific": {"estimated_minutes": 2}},
        {"kind": "mturk"},
        {"kind": "panel", "panel": {"worker_param": "pid", "completion_code": "DONE1"}},
    ):
        assert load_study(_sqlite_study(tmp_path, schedule=default, provider=provider)).qc_failures == "hold"


REAL = {"anna": 0.9, "bert": 0.6}


@pytest.fixture(scope="module")
def bot_server():
    server = BotServer(build_backends(degraded=[DegradedSpec(n) for n in [*REAL, "qc"]], seed=1), port=0).start()
    yield server.url
    server.shutdown()


def test_held_qc_failures_are_not_paid_until_the_coordinator_decides(tmp_path, one_database_url, bot_server):
    database_url = one_database_url  # one store: what this test checks is not storage
    data = {
        "study": "hold-demo",
        "task": "live_chat",
        "seed": 5,
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "database": database_url,
        "systems": [
            {"name": n, "url": bot_server, "model": n, "options": {"max_tokens": 12, "timeout_s": 10}}
            for n in [*REAL, "qc"]
        ],
        "live_chat": {"hits": 4, "min_inputs": 2, "slots_per_hit": 3},
        "hit": {"reward": "1.00"},
        "schedule": {
            "per_worker_cap": 1,
            "interval_s": 0.3,
            "wave_size": 4,
            "max_concurrent": 4,
            "qc_failures": "hold",
        },
        "simulated": {
            "workers": [{"profile": "diligent", "count": 2}, {"profile": "spammer", "count": 2}],
            "quality": {**REAL, "qc": 0.05},
            "concurrency": 4,
        },
    }
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(data, sort_keys=False))
    lines: list[str] = []
    result = launch(study, yes=True, show_progress=False, echo=lines.append, timeout_s=300)
    with session_scope(database_url) as session:
        held = {e.data["assignment"] for e in session.scalars(select(Event).where(Event.kind == HELD_EVENT))}
        rows = session.scalars(select(Assignment)).all()
        by_id = {a.id: a for a in rows}
        paid = {
            p.assignment_id
            for p in session.scalars(select(Payment).where(Payment.kind == "reward", Payment.status == "paid"))
        }
        for a in rows:
            if a.id in held:
                assert a.status == "submitted" and a.id not in paid
                assert a.worker.external_id.startswith("sim-spammer")
            elif a.status in ("submitted", "approved"):
                assert a.status == "approved" and a.id in paid
    assert held, "seeded: the constant-slider spammers fail the QC test"
    assert f"{len(held)} of 4 judged workers failed QC: sim-spammer" in result.qc_line
    assert result.status == "held" and any("hitkit held" in line for line in lines)
    listing = CliRunner().invoke(main, ["held", str(study)])
    assert listing.exit_code == 0 and all(f"assignment {i}" in listing.output for i in held)
    first, *rest = sorted(held)
    reject = CliRunner().invoke(
        main, ["held", str(study), "--reject", str(first), "--reason", "ratings ignore the chats"]
    )
    assert reject.exit_code == 0, reject.output
    for aid in rest:
        assert CliRunner().invoke(main, ["held", str(study), "--approve", str(aid)]).exit_code == 0
    with session_scope(database_url) as session:
        assert session.get(Assignment, first).status == "rejected"
        assert all(session.get(Assignment, aid).status == "approved" for aid in rest)
        assert by_id  # the rows above were read from this database


# Stopping -----------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


@pytest.mark.slow
def test_sigterm_stops_the_launch_and_its_bot_server_quietly_and_says_how_to_resume(tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    data = {
        "study": "stop-demo",
        "task": "live_chat",
        "seed": 1,
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "systems": [{"name": n, "url": url, "model": n, "options": {"max_tokens": 12}} for n in ("a", "b", "qc")],
        "live_chat": {"hits": 20, "min_inputs": 30, "slots_per_hit": 3},
        "bots": {"serve": {"degraded": ["a", "b", "qc"], "port": port}},
        "schedule": {"per_worker_cap": 1, "interval_s": 0.3},
        "simulated": {"workers": [{"profile": "diligent", "count": 20}], "concurrency": 4, "seconds_per_answer": 0.2},
    }
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(data, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("HITKIT_DATABASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hitkit.cli", "launch", str(study), "--yes"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    pid_file = tmp_path / "runs" / "stop-demo" / "bots.pid"
    bot_pid = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if bot_pid is None and pid_file.exists() and pid_file.read_text().strip():
            bot_pid = int(pid_file.read_text())
        db = tmp_path / "runs" / "stop-demo" / "hitkit.db"
        if bot_pid and db.exists():
            try:
                with session_scope(f"sqlite:///{db}") as session:
                    if session.scalar(
                        select(Study.status).where(Study.name == "stop-demo")
                    ) == "running" and session.scalar(select(Event.id).where(Event.kind == "served")):
                        break
            except OperationalError:  # the launch is still creating the database's tables
                pass
        time.sleep(0.3)
    assert proc.poll() is None and bot_pid is not None, proc.communicate()
    time.sleep(2)  # chats under way
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - started
    assert proc.returncode == 130, (out, err)
    assert took < 20, took
    # No traceback and no HTTP 409 (a port such as 40949 in the invite links is not one)
    assert "Traceback" not in out + err and not re.search(r"\b409\b", out + err)
    assert f"hitkit launch {study} --resume" in err
    for _ in range(20):
        if not _alive(bot_pid):
            break
        time.sleep(0.5)
    assert not _alive(bot_pid), "the bot server outlived the launch"
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # its port is free again


def test_a_malformed_jsonl_line_is_reported_at_the_column_of_the_fault(tmp_path, database_url):
    good = '{"id": "p1", "prompt": "Any tips?", "responses": {"alpha": "Keep a start", "gamma": "no", "beta": "ok"}}'
    bad = good.replace('"ok"', "'ok'")  # single quotes, as a hand edit leaves them
    column = bad.index("'ok'") + 1
    data = tmp_path / "responses.jsonl"
    data.write_text("\ufeff" + good.replace("p1", "p0") + "\n" + bad + "\n", encoding="utf-8")  # BOM: accepted
    study = pairwise_study(tmp_path, database_url, pairwise={"responses": str(data)})
    run = CliRunner().invoke(main, ["launch", str(study), "--dry-run"])
    assert run.exit_code == 1
    assert f"responses.jsonl line 2: not valid JSON at column {column} (Expecting value" in run.output
    assert "near: " in run.output and "'ok'" in run.output


def test_one_dashboard_serves_the_studies_of_several_sqlite_files(tmp_path, monkeypatch):
    """Two studies launched into their own SQLite files: one server, one login, both studies, and each
    request reaches the database that holds its study."""
    import re

    from werkzeug.test import Client

    from hitkit.cli.running import expand_databases
    from hitkit.study.stored import create_study, resolve_secret
    from server.multi import create_multi_app

    monkeypatch.setenv("HITKIT_DASHBOARD_USER", "coordinator")
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", "a long test password")
    runs = tmp_path / "runs"
    for name in ("first-study", "second-study"):
        folder = tmp_path / name
        folder.mkdir()
        path = pairwise_study(folder, f"sqlite:///{runs / name / 'hitkit.db'}", study=name)
        config = load_study(path)
        from hitkit.db.migrate import upgrade

        upgrade(config.database_url)
        with session_scope(config.database_url) as s:
            create_study(s, config, path, resolve_secret(config.database_url))
    urls = expand_databases((str(runs),))  # a runs folder: every STUDY/hitkit.db in it
    assert len(urls) == 2
    client = Client(create_multi_app(urls))
    page = client.get("/dashboard/login").get_data(as_text=True)
    csrf = re.search(r'name="csrf" value="([0-9a-f]{32})"', page).group(1)
    client.post("/dashboard/login", data={"username": "coordinator", "password": "a long test password", "csrf": csrf})
    overview = client.get("/dashboard/").get_data(as_text=True)
    assert "first-study" in overview and "second-study" in overview
    listed = client.get("/dashboard/api/progress").get_json()
    assert sorted(s["name"] for s in listed["studies"]) == ["first-study", "second-study"]
    # The login holds for the second database's pages too, and each study page is its own database's.
    second = client.get("/dashboard/study/second-study")
    assert second.status_code == 200 and "second-study" in second.get_data(as_text=True)
    assert client.get("/dashboard/api/progress?study=first-study").get_json()["studies"][0]["name"] == "first-study"
    assert client.get("/s/second-study/enter").status_code != 404
    assert client.get("/dashboard/study/no-such-study").status_code == 404


def test_invite_links_work_as_printed_and_keep_their_port_on_resume(tmp_path):
    """provider local, server.port left at its default: invites print the address the launch serves,
    a printed link enters the study, and a resumed launch serves on the same port again."""
    import threading

    import requests

    from hitkit.errors import HitkitError
    from hitkit.study.served import served_url

    study = _sqlite_study(tmp_path, provider={"kind": "local"})
    config = load_study(study)
    before = CliRunner().invoke(main, ["invites", str(study), "-n", "1"])
    assert before.exit_code == 1 and "has not been launched yet" in before.output
    outcome: list[object] = []

    def run(resume: bool, timeout_s: float) -> None:
        try:
            launch(study, yes=True, resume=resume, show_progress=False, echo=lambda _m: None, timeout_s=timeout_s)
        except HitkitError as exc:  # stopped after the timeout: the annotators are not here
            outcome.append(exc)

    thread = threading.Thread(target=run, args=(False, 15))
    thread.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and served_url(config.database_url, config.study) is None:
        time.sleep(0.3)
    first = served_url(config.database_url, config.study)
    assert first is not None
    printed = CliRunner().invoke(main, ["invites", str(study), "-n", "2"])
    assert printed.exit_code == 0, printed.output
    links = printed.output.split()
    assert len(links) == 2 and all(link.startswith(f"{first}/s/ab-demo/enter?invite=") for link in links)
    while time.monotonic() < deadline:  # the scheduler's first wave
        with session_scope(config.database_url) as session:
            if session.scalar(select(Event.id).where(Event.kind == "hit_posted").limit(1)):
                break
        time.sleep(0.3)
    entered = requests.get(links[0], timeout=30, allow_redirects=False)
    assert entered.status_code == 302 and "/a/ab-demo/" in entered.headers["Location"]
    thread.join(60)
    assert len(outcome) == 1
    with session_scope(config.database_url) as session:
        served_before = session.scalar(select(func.count()).select_from(Event).where(Event.kind == "served"))
    # The resumed launch records where it serves before its timeout starts to run: a short one is enough.
    thread = threading.Thread(target=run, args=(True, 1))
    thread.start()
    thread.join(60)
    assert len(outcome) == 2 and "stopped after" in str(outcome[1]), outcome
    with session_scope(config.database_url) as session:
        assert session.scalar(select(func.count()).select_from(Event).where(Event.kind == "served")) > served_before
    assert served_url(config.database_url, config.study) == first  # the links handed out still work


def _stb_from_readme(tmp_path: Path, per_pair: int) -> Path:
    """A Spot The Bot study written from the README's field table: systems, generation, defaults."""
    data = {
        "study": "stb-readme",
        "task": "spot_the_bot",
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "systems": [{"name": n, "url": "http://127.0.0.1:9/v1", "model": n} for n in ("a", "b", "c")],
        "generation": {"conversations_per_pair": per_pair},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_spot_the_bot_defaults_pack_with_the_shipped_material_before_anything_is_generated(tmp_path):
    run = CliRunner().invoke(main, ["launch", str(_stb_from_readme(tmp_path, 10)), "--dry-run"])
    assert run.exit_code == 0, run.output
    assert "60 still to generate" in run.output and "HITs" in run.output and "Cost:" in run.output
    assert not (tmp_path / "runs" / "stb-readme").exists()


def test_spot_the_bot_material_too_short_is_one_error_with_every_fix(tmp_path):
    run = CliRunner().invoke(main, ["launch", str(_stb_from_readme(tmp_path, 45)), "--dry-run"])
    assert run.exit_code == 1
    assert len(run.output.strip().splitlines()) <= 3  # the plan's first line, then one error
    for fix in (
        "spot_the_bot.human_conversations",
        '{"id": "d1", "turns"',
        "segment_lengths",
        "segments_per_hit to 69",
        "at most 12 per pair",
    ):
        assert fix in run.output, fix
    # launch itself refuses before starting a bot server or generating anything
    refused = CliRunner().invoke(main, ["launch", str(tmp_path / "study.yaml"), "--yes"])
    assert refused.exit_code == 1 and "cannot pack 270 bot–bot conversations" in refused.output
    assert not (tmp_path / "runs" / "stb-readme" / "bot_bot.jsonl").exists()


def test_generation_progress_counts_bot_replies_in_plain_lines_without_a_terminal(tmp_path, bot_server, capfd):
    from hitkit.material.generation import generate

    data = {
        "study": "gen-progress",
        "task": "pairwise",
        "budget": "1",
        "out": str(tmp_path / "runs"),
        "systems": [{"name": n, "url": bot_server, "model": n} for n in REAL],
        "pairwise": {"responses": "unused.jsonl"},
        "generation": {"conversations_per_pair": 2, "exchanges": 3, "parallel": 2},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    report = generate(load_study(path), show_progress=True, lines_every_s=0)  # stderr is no terminal here
    assert report.generated == 6
    err = capfd.readouterr().err
    assert "\r" not in err  # no bar redrawn into a log
    lines = [line for line in err.splitlines() if "bot replies" in line]
    assert lines and "bot replies 24/24 (100 %)" in lines[-1]  # 6 conversations × 4 replies after the seed
