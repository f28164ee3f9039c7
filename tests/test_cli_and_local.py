"""The CLI around a study: init scaffolds a study that runs; local invites work; status reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import requests
from click.testing import CliRunner
from sqlalchemy import func, select

from hitkit.cli import main
from hitkit.db.models import Assignment, Response, Study, Worker
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from server.embedded import WebServer
from tests.studies import REPO, pairwise_study


def test_init_scaffolds_a_study_that_launches_and_ranks(tmp_path, database_url, monkeypatch):
    monkeypatch.setenv("HITKIT_DATABASE_URL", database_url)
    runner = CliRunner()
    made = runner.invoke(main, ["init", str(tmp_path / "mystudy")])
    assert made.exit_code == 0, made.output
    study = tmp_path / "mystudy" / "study.yaml"
    config = load_study(study)
    assert config.task == "pairwise" and config.provider.kind == "simulated"
    run = runner.invoke(main, ["launch", str(study), "--yes", "--no-progress", "--timeout", "120"])
    assert run.exit_code == 0, run.output
    assert (tmp_path / "mystudy" / "runs" / "my-ab-study" / "analysis" / "ranking.csv").exists()
    status = runner.invoke(main, ["status", str(study), "--json"])
    info = json.loads(status.output)
    assert info["status"] == "completed" and info["answers_done"] == info["answers_needed"] == 27
    assert runner.invoke(main, ["init", str(tmp_path / "mystudy")]).exit_code == 1  # refuses to overwrite


def test_local_invite_links_let_annotators_work_and_forged_invites_are_refused(tmp_path, database_url, monkeypatch):
    monkeypatch.setenv("HITKIT_DATABASE_URL", database_url)
    study_file = pairwise_study(tmp_path, database_url, provider={"kind": "local"})
    config = load_study(study_file)
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, study_file, secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    try:
        tick(database_url, config.study, web.url)
        links = CliRunner().invoke(main, ["invites", str(study_file), "-n", "2", "--base-url", web.url]).output.split()
        assert len(links) == 2 and all("/s/ab-demo/enter?invite=" in link for link in links)
        http = requests.Session()
        page = http.get(links[0])
        assert page.status_code == 200 and "I agree" in page.text
        task = page.url
        http.post(task + "consent")
        state = http.get(task + "state").json()
        for unit in state["units"]:
            for q in unit["questions"]:
                http.post(task + "answer", json={"unit_id": unit["unit_id"], "question": q["name"], "value": "b"})
        assert http.post(task + "submit", headers={"Accept": "application/json"}).json()["submitted"]
        # The same link hands the annotator their next HIT, not the finished one.
        assert http.get(links[0]).url != task
        forged = requests.get(links[1][:-3] + "abc")
        assert forged.status_code == 403 and "not valid" in forged.text
        assert requests.get(f"{web.url}/s/ab-demo/enter").status_code == 403
    finally:
        web.stop()
    with session_scope(database_url) as s:
        assert s.scalar(select(Worker.external_id)) == "annotator-001"
        assert s.scalar(select(func.count()).select_from(Assignment)) == 2
        assert s.scalar(select(func.count()).select_from(Response)) >= 10


def test_db_upgrade_command_reports_the_head_revision(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    run = subprocess.run(
        [sys.executable, "-m", "hitkit.cli", "db", "upgrade", "--db", url],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=os.environ.copy(),
    )
    from alembic.script import ScriptDirectory

    from hitkit.db.migrate import alembic_config

    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    assert run.returncode == 0 and f"revision {head}" in run.stdout


def test_analyze_live_chat_with_replicate_adds_run_to_run_correlations(tmp_path):
    data = REPO / "tests" / "data" / "ji2022-run1"
    run = CliRunner().invoke(
        main, ["analyze", "live_chat", str(data), "--out", str(tmp_path), "--replicate", str(data)]
    )
    assert run.exit_code == 0, run.output
    replication = pd.read_csv(tmp_path / "replication.csv").set_index("criterion")
    assert replication.loc["overall", "pearson"] == pytest.approx(1.0)
    refused = CliRunner().invoke(
        main, ["analyze", "pairwise", str(data), "--out", str(tmp_path), "--replicate", str(data)]
    )
    assert refused.exit_code == 1 and "live_chat` only" in refused.output
