"""Runs that explain themselves: `launch` and `status` state the stopping rule's outcome in one sentence with
one meaning of HIT and assignment; the status line counts answers as they are saved (and says which are in
submitted work); bot trouble leaves it once the study is done; the dashboard says bot health in a sentence."""

from __future__ import annotations

import re

import requests
import yaml
from click.testing import CliRunner
from sqlalchemy import func, select

from hitkit.cli import main
from hitkit.dashboard.bots import health_sentence
from hitkit.db.models import Event, Hit, Payment, Study
from hitkit.db.session import session_scope
from hitkit.running.monitor import progress, snapshot
from hitkit.running.stopping import FIRED, outcome_line
from hitkit.study.counts import answers_in_progress
from hitkit.study.stored import StudyContext
from tests.studies import REPO, launch, pairwise_study, served


def test_the_outcome_sentence_names_assignments_hits_decision_and_spend():
    assert outcome_line(
        fired=True,
        counted=14,
        assignments=27,
        hits=9,
        outcome="alpha is best",
        spent="8.50",
        budget="60.00",
        currency="USD",
    ) == ("Stopped after 14 of 27 assignments (9 HITs in the fixed design): alpha is best; spent 8.50 of 60.00 USD.")
    assert outcome_line(
        fired=False, counted=27, assignments=27, hits=9, outcome="", spent="13.50", budget="60.00", currency="USD"
    ) == ("The stopping rule did not fire: the whole design ran (27 assignments, 9 HITs); spent 13.50 of 60.00 USD.")


def test_launch_and_status_print_the_rules_outcome_as_the_database_holds_it(tmp_path, one_database_url):
    data = yaml.safe_load((REPO / "examples" / "pairwise_stop.yaml").read_text())
    data["pairwise"]["responses"] = str(REPO / "examples" / "data" / "ab_responses.jsonl")
    data.update(out=str(tmp_path / "runs"), database=one_database_url)
    study_file = tmp_path / "study.yaml"
    study_file.write_text(yaml.safe_dump(data, sort_keys=False))
    said: list[str] = []
    result = launch(study_file, yes=True, show_progress=False, echo=said.append, timeout_s=300, analyse=False)
    assert result.stop_line in said
    m = re.fullmatch(
        r"Stopped after (\d+) of (\d+) assignments \((\d+) HITs in the fixed design\): (.+); "
        r"spent (\S+) of 60\.00 USD\.",
        result.stop_line,
    )
    assert m, result.stop_line
    with session_scope(one_database_url) as s:
        study = s.scalar(select(Study))
        fired = s.scalar(select(Event).where(Event.study_id == study.id, Event.kind == FIRED))
        hits = s.scalar(select(func.count()).select_from(Hit).where(Hit.study_id == study.id))
        places = s.scalar(select(func.sum(Hit.max_assignments)).where(Hit.study_id == study.id))
        paid = s.scalar(select(func.sum(Payment.amount)).where(Payment.study_id == study.id, Payment.status == "paid"))
    assert int(m.group(1)) == fired.data["hits"] < int(m.group(2)) == places
    assert int(m.group(3)) == hits and m.group(4) == fired.data["outcome"] and m.group(4).startswith("alpha is best")
    assert m.group(5) == f"{paid:.2f}"
    status = CliRunner().invoke(main, ["status", str(study_file)])
    assert status.exit_code == 0 and f"  {result.stop_line}" in status.output.splitlines()


def test_a_study_without_a_rule_prints_no_outcome_sentence(tmp_path, one_database_url):
    said: list[str] = []
    result = launch(
        pairwise_study(tmp_path, one_database_url, pairwise={"votes_per_prompt": 1}),
        yes=True,
        show_progress=False,
        echo=said.append,
        timeout_s=300,
        analyse=False,
    )
    assert result.stop_line == "" and not any(line.startswith(("Stopped after", "The stopping rule")) for line in said)


def test_the_status_line_counts_an_answer_as_it_is_saved_before_the_hit_is_submitted(tmp_path, one_database_url):
    for base, config, secret in served(pairwise_study(tmp_path, one_database_url), one_database_url):
        http = requests.Session()
        page = http.get(f"{base}/s/ab-demo/hit/1", params={"workerId": "W-1", "assignmentId": "A-1", "hitId": "h1"})
        task = page.url.split("?")[0]
        assert http.post(task + "consent").status_code == 200
        units = http.get(task + "state").json()["units"]
        for unit in units[:2]:
            q = unit["questions"][0]["name"]
            assert http.post(task + "answer", json={"unit_id": unit["unit_id"], "question": q, "value": "a"}).ok
        with session_scope(one_database_url) as s:
            study_id = s.scalar(select(Study.id))
        # progress() opens its own session: not inside another one, which on SQLite holds the write lock
        done, total = progress(one_database_url, study_id)
        with session_scope(one_database_url) as s:
            assert answers_in_progress(s, study_id) == 2
            snap = snapshot(s, StudyContext.load(s, config.study, secret))
        assert done == 0 and snap.counts.saved == 2
        assert snap.line(30).startswith(f"answers saved 2/{total} (0 in submitted work)")


def test_bot_health_is_a_sentence_and_a_finished_study_asks_the_bots_nothing():
    ok = {"status": "ok", "window_s": 600.0, "systems": {}, "message": "bots ok"}
    assert health_sentence(ok, "running") == "Every bot answered in time over the last 10 minutes."
    slow = {"status": "slow", "window_s": 600.0, "systems": {}, "message": "bots slow: alpha, beta (replies over 10 s)"}
    assert health_sentence(slow, "running") == (
        "Some bots were slow over the last 10 minutes: alpha, beta (replies over 10 s)."
    )
    assert health_sentence(slow, "completed") == (
        "The study is completed: no worker is chatting, so the bots are not being asked anything now."
    )
    assert health_sentence(None, "running") == ""
    assert "{" not in health_sentence(ok, "running")


def test_bot_trouble_shows_while_the_study_runs_and_leaves_the_status_line_when_it_is_done(tmp_path, one_database_url):
    from hitkit.bots.health import record
    from hitkit.study.loading import load_study
    from hitkit.study.stored import create_study, resolve_secret
    from tests.test_live_chat_study import live_chat_study

    config = load_study(live_chat_study(tmp_path, one_database_url, "http://127.0.0.1:9", hits=2))
    secret = resolve_secret(one_database_url)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, config, None, secret)
        s.get(Study, ctx.study_id).status = "running"
    # As the bot client records a reply that took 12 s (hitkit.bots.health).
    assert record(one_database_url, ctx.study_id, "anna", "bot_slow", 12.0, "replied after 12.0 s", interval_s=0)
    with session_scope(one_database_url) as s:
        running = snapshot(s, StudyContext.load(s, config.study, secret))
    assert "bots slow: anna" in running.health and "bots slow: anna" in running.line(5)
    with session_scope(one_database_url) as s:
        s.get(Study, ctx.study_id).status = "completed"
    with session_scope(one_database_url) as s:
        done = snapshot(s, StudyContext.load(s, config.study, secret))
    assert done.health == "" and "bots" not in done.line(60)
