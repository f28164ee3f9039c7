"""``hitkit launch --test-participant``: Prolific's documented test study, against the fake. The study is made
but not published; the coordinator takes the test study through hitkit's real pages; a later launch publishes."""

from __future__ import annotations

import pytest
import requests
from click.testing import CliRunner

from hitkit.cli import main
from hitkit.providers.prolific import client as prolific_api
from hitkit.providers.prolific import test_run
from hitkit.running.scheduler import tick
from tests.fakes.prolific import TOKEN, FakeProlificServer
from tests.studies import pairwise_study
from tests.test_prolific_recontact import take
from tests.test_provider_prolific import PROLIFIC, code_of, launch_on, pid


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)
    monkeypatch.setenv(test_run.ENV, "0")  # restored after the test, whatever the flag set


@pytest.fixture
def fake():
    with FakeProlificServer() as server:
        yield server
        assert server.violations == []


def test_a_test_run_leaves_the_study_unpublished_admits_the_coordinator_and_a_later_launch_publishes(
    tmp_path, database_url, fake, monkeypatch
):
    monkeypatch.setenv(test_run.ENV, "1")
    web, config, secret = launch_on(tmp_path, database_url, fake)
    try:
        [sid] = [s for s, v in fake.studies.items() if "_test_of" not in v]
        assert fake.studies[sid]["status"] == "UNPUBLISHED"
        assert not fake.calls("POST", f"/studies/{sid}/transition/")
        assert len(fake.calls("POST", f"/studies/{sid}/test-study")) == 1
        [test] = fake.hooks["test_studies"]
        tick(database_url, config.study, web.url)  # a later tick asks for no second test study
        assert len(fake.calls("POST", f"/studies/{sid}/test-study")) == 1
        # The coordinator takes the test study: hitkit's pages verify the submission like any other.
        session_id = fake.start_session(pid("me"), test["study_id"])
        # A link naming neither study is still refused.
        assert (
            requests.get(
                f"{web.url}/s/ab-demo/enter",
                params={"PROLIFIC_PID": pid("me"), "STUDY_ID": "f" * 24, "SESSION_ID": session_id},
            ).status_code
            == 403
        )
        assert take(web.url, "ab-demo", pid("me"), test["study_id"], session_id, "tie").status_code == 302
        monkeypatch.setenv(test_run.ENV, "0")  # launched again without --test-participant
        tick(database_url, config.study, web.url)
        assert fake.studies[sid]["status"] in ("PUBLISHING", "ACTIVE")  # PLATFORMS: PUBLISHING → ACTIVE
        assert [r.body for r in fake.calls("POST", f"/studies/{sid}/transition/")] == [{"action": "PUBLISH"}]
        assert code_of(config, secret)
    finally:
        web.stop()


def test_the_flag_runs_a_launch_as_a_test_run_and_is_refused_off_prolific(tmp_path, database_url, fake):
    study_file = pairwise_study(
        tmp_path,
        database_url,
        provider={"kind": "prolific", "currency": "GBP", "prolific": {"api_url": fake.url, **PROLIFIC}},
    )
    result = CliRunner().invoke(
        main, ["launch", str(study_file), "--yes", "--no-progress", "--timeout", "3", "--test-participant"]
    )
    assert "Test run: the Prolific study is created but not published" in result.output, result.output
    [sid] = [s for s, v in fake.studies.items() if "_test_of" not in v]
    assert fake.studies[sid]["status"] == "UNPUBLISHED" and len(fake.hooks["test_studies"]) == 1
    simulated = pairwise_study(tmp_path, database_url)
    refused = CliRunner().invoke(main, ["launch", str(simulated), "--yes", "--test-participant"])
    assert refused.exit_code != 0 and "provider is not prolific" in refused.output
