"""The worker entry flow over real HTTP: preview, tokens, answers, submission, hand-back."""

from __future__ import annotations

import pytest
import requests
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Response
from hitkit.db.session import session_scope
from hitkit.worker import tokens
from tests.studies import pairwise_study, served


@pytest.fixture
def live(tmp_path, database_url):
    """A running study with its first wave posted and the worker pages served on loopback."""
    for url, _config, secret in served(pairwise_study(tmp_path, database_url), database_url):
        yield url, database_url, secret


@pytest.fixture
def live_one(tmp_path, one_database_url):
    """``live`` on one store, for the browser tests, whose subject is the page rather than storage."""
    for url, _config, secret in served(pairwise_study(tmp_path, one_database_url), one_database_url):
        yield url, one_database_url, secret


def accept(base: str, worker: str, hit: int = 1) -> tuple[requests.Session, str]:
    """Arrive as ``worker`` on HIT ``hit``, consent, and return the session and the task page URL."""
    http = requests.Session()
    page = http.get(
        f"{base}/s/ab-demo/hit/{hit}",
        params={"workerId": worker, "assignmentId": f"{worker}-A{hit}", "hitId": f"h{hit}"},
    )
    assert page.status_code == 200, page.text
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    return http, task


def answer_all(http: requests.Session, task: str) -> dict:
    state = http.get(task + "state").json()
    for unit in state["units"]:
        for q in unit["questions"]:
            r = http.post(task + "answer", json={"unit_id": unit["unit_id"], "question": q["name"], "value": "a"})
            assert r.status_code == 200, r.text
    return state


def test_preview_shows_the_task_read_only_and_cannot_submit(live):
    base, url, _ = live
    page = requests.get(
        f"{base}/s/ab-demo/hit/1", params={"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "h1"}
    )
    assert page.status_code == 200
    assert "Preview" in page.text and "disabled" in page.text and 'id="submit"' not in page.text
    # With no token there is nothing to post to; a made-up one is refused.
    assert requests.post(f"{base}/a/ab-demo/not-a-token/submit").status_code == 403
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Assignment)) == 0


def test_a_token_for_one_assignment_cannot_answer_or_submit_another(live):
    base, url, secret = live
    http_a, task_a = accept(base, "W-A")
    http_b, task_b = accept(base, "W-B")
    answer_all(http_b, task_b)
    with session_scope(url) as s:
        a, b = s.scalars(select(Assignment).order_by(Assignment.id)).all()
        # A token signed for A's id cannot be altered to name B: the signature no longer matches.
        token_a = tokens.assignment_token(secret, a.id, a.token_nonce)
        forged = tokens.assignment_token("wrong-secret", b.id, b.token_nonce)
        swapped = token_a.split(".")[0][:-2] + "Mg." + token_a.split(".")[1]
    for bad in (forged, swapped, "x.y", token_a + "x"):
        assert (
            requests.post(f"{base}/a/ab-demo/{bad}/submit", headers={"Accept": "application/json"}).status_code == 403
        )
    # A's genuine token only ever reaches A's assignment, which is still open and unanswered.
    assert http_a.post(task_a + "submit", headers={"Accept": "application/json"}).status_code == 400
    with session_scope(url) as s:
        statuses = dict(s.execute(select(Assignment.provider_assignment_id, Assignment.status)).all())
        assert statuses == {"W-A-A1": "accepted", "W-B-A1": "accepted"}


def test_every_answer_is_saved_as_given_and_submitting_twice_stores_once(live):
    base, url, _ = live
    http, task = accept(base, "W-1")
    state = answer_all(http, task)
    unit = state["units"][0]["unit_id"]
    # Changing an answer replaces it.
    http.post(task + "answer", json={"unit_id": unit, "question": "vote", "value": "tie"})
    # A reload shows the saved answers.
    assert http.get(task + "state").json()["answers"][str(unit)]["vote"] == "tie"
    first = http.post(task + "submit", headers={"Accept": "application/json"})
    second = http.post(task + "submit", headers={"Accept": "application/json"})
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Response)) == len(state["units"])
        assert s.scalar(select(Assignment.status)) == "submitted"
    # After submission answers can no longer change.
    late = http.post(task + "answer", json={"unit_id": unit, "question": "vote", "value": "b"})
    assert late.status_code == 409


def test_an_over_long_or_invalid_answer_is_refused_clearly_and_loses_nothing(live):
    base, url, _ = live
    http, task = accept(base, "W-2")
    unit = http.get(task + "state").json()["units"][0]["unit_id"]
    assert http.post(task + "answer", json={"unit_id": unit, "question": "vote", "value": "b"}).status_code == 200
    too_long = http.post(task + "answer", json={"unit_id": unit, "question": "vote", "value": "b" * 5000})
    assert too_long.status_code == 400
    assert "5,000 characters; the limit is 2,000" in too_long.json()["error"]  # numbers as Babel writes English
    wrong = http.post(task + "answer", json={"unit_id": unit, "question": "vote", "value": "maybe"})
    assert "choose one of a, b, tie" in wrong.json()["error"]
    huge = http.post(task + "answer", data=b"{" + b"x" * 200_000, headers={"Content-Type": "application/json"})
    assert huge.status_code == 413
    with session_scope(url) as s:
        assert s.scalar(select(Response.value)) == "b"


def test_a_worker_cannot_exceed_the_cap_or_take_a_full_hit(live):
    base, url, _ = live
    for hit in (1, 2, 3):
        accept(base, "W-cap", hit)
    refused = requests.get(f"{base}/s/ab-demo/hit/4", params={"workerId": "W-cap", "assignmentId": "x4", "hitId": "h4"})
    assert refused.status_code == 403 and "most HITs" in refused.text
    for w in ("W-x", "W-y"):
        accept(base, w, 1)
    full = requests.get(f"{base}/s/ab-demo/hit/1", params={"workerId": "W-z", "assignmentId": "z1", "hitId": "h1"})
    assert full.status_code == 409
    # Coming back to a HIT one already holds resumes it rather than taking a second place.
    again = requests.get(f"{base}/s/ab-demo/hit/1", params={"workerId": "W-x", "assignmentId": "x1", "hitId": "h1"})
    assert again.status_code == 200
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Assignment)) == 5


def test_gunicorn_serves_the_worker_pages_with_the_shipped_config(live, tmp_path):
    import os
    import socket
    import subprocess
    import sys
    import time

    from tests.studies import REPO

    _, url, secret = live
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "HITKIT_DATABASE_URL": url,
        "HITKIT_SECRET": secret,
        "HITKIT_BIND": f"127.0.0.1:{port}",
        "HITKIT_WEB_WORKERS": "2",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "ops/gunicorn.conf.py", "server.wsgi:app"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.2)
        http, task = accept(base, "W-gunicorn")
        answer_all(http, task)
        assert http.post(task + "submit", headers={"Accept": "application/json"}).json()["submitted"] is True
    finally:
        proc.terminate()
        proc.wait(10)
    with session_scope(url) as s:
        assert s.scalar(select(Assignment.status)) == "submitted"


def test_a_returned_assignment_frees_its_place_and_its_answers_do_not_count(live):
    base, url, _ = live
    first, task = accept(base, "W-r1")
    answer_all(first, task)
    for w in ("W-r2", "W-r3"):
        accept(base, w)
    full = requests.get(f"{base}/s/ab-demo/hit/1", params={"workerId": "W-r4", "assignmentId": "r4", "hitId": "h1"})
    assert full.status_code == 409
    assert first.post(task + "return", headers={"Accept": "application/json"}).json() == {"returned": True}
    accept(base, "W-r4")
    # The returned worker cannot come back to the same HIT, nor answer on it.
    again = requests.get(f"{base}/s/ab-demo/hit/1", params={"workerId": "W-r1", "assignmentId": "r1", "hitId": "h1"})
    assert again.status_code == 409
    assert first.post(task + "answer", json={"unit_id": 1, "question": "vote", "value": "a"}).status_code == 410
    with session_scope(url) as s:
        statuses = sorted(s.scalars(select(Assignment.status)))
        assert statuses == ["accepted", "accepted", "accepted", "returned"]


def test_a_comment_on_the_whole_hit_is_stored_with_the_submission_and_exported(live, tmp_path):
    import pandas as pd

    from hitkit.study.stored import StudyContext
    from hitkit.tables.export import export_study

    base, url, secret = live
    http, task = accept(base, "W-fb")
    answer_all(http, task)
    done = http.post(
        task + "submit", json={"feedback": "The B answers were cut off."}, headers={"Accept": "application/json"}
    )
    assert done.status_code == 200
    with session_scope(url) as s:
        assert s.scalar(select(Assignment.feedback)) == "The B answers were cut off."
        export_study(s, StudyContext.load(s, "ab-demo", secret), tmp_path / "export")
    feedback = pd.read_csv(tmp_path / "export" / "feedback.csv")
    assert list(feedback["feedback"]) == ["The B answers were cut off."]
    assert list(feedback["worker_id"]) == ["W-fb"]
