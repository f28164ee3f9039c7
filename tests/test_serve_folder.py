"""`hitkit serve --db RUNS_FOLDER` serves the studies launched into the folder after it started, as a
coordinator expects of a runs folder: a real `hitkit serve` process over real HTTP."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import requests

from hitkit.db.migrate import upgrade
from hitkit.db.session import session_scope
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from tests.studies import REPO, pairwise_study


def make_study(tmp_path, runs, name: str) -> None:
    folder = tmp_path / name
    folder.mkdir()
    path = pairwise_study(folder, f"sqlite:///{runs / name / 'hitkit.db'}", study=name)
    config = load_study(path)
    upgrade(config.database_url)
    with session_scope(config.database_url) as s:
        create_study(s, config, path, resolve_secret(config.database_url))


def login(base: str) -> requests.Session:
    http = requests.Session()
    page = http.get(f"{base}/dashboard/login", timeout=10).text
    csrf = re.search(r'name="csrf" value="([0-9a-f]{32})"', page).group(1)
    done = http.post(
        f"{base}/dashboard/login",
        data={"username": "coordinator", "password": "a long test password", "csrf": csrf},
        timeout=10,
    )
    assert done.status_code == 200
    return http


def test_a_study_launched_into_the_runs_folder_after_serve_started_is_served_and_listed(tmp_path):
    runs = tmp_path / "runs"
    make_study(tmp_path, runs, "first-study")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "HITKIT_DASHBOARD_USER": "coordinator",
        "HITKIT_DASHBOARD_PASSWORD": "a long test password",
        "PYTHONPATH": str(REPO),
    }
    env.pop("HITKIT_DATABASE_URL", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "hitkit.cli", "serve", "--db", str(runs), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                if requests.get(f"{base}/", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.25)
        http = login(base)
        assert "first-study" in http.get(f"{base}/dashboard/", timeout=10).text
        assert http.get(f"{base}/s/second-study/enter", timeout=10).status_code == 404

        make_study(tmp_path, runs, "second-study")  # launched while the server runs
        time.sleep(2.5)  # the folder is looked at again at most every 2 s
        overview = http.get(f"{base}/dashboard/", timeout=10).text
        assert "first-study" in overview and "second-study" in overview
        assert http.get(f"{base}/dashboard/study/second-study", timeout=10).status_code == 200
        assert requests.get(f"{base}/s/second-study/enter", timeout=10).status_code != 404
    finally:
        server.terminate()
        server.wait(timeout=15)
