"""Re-contact, blocklists and messages on Prolific, against the fake: a second wave invites only the first
wave's workers who passed quality control; workers who fail it join a blocklist group every study shares;
the coordinator writes to one participant or to everyone; a rejection always carries the study's message.
"""

from __future__ import annotations

import pytest
import requests
from click.testing import CliRunner
from sqlalchemy import select

from hitkit.cli import main
from hitkit.db.models import Assignment, Event
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.providers.prolific import client as prolific_api
from hitkit.running import recontact
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from tests.fakes.prolific import TOKEN, FakeProlificServer, Refused
from tests.studies import pairwise_study
from tests.test_provider_prolific import code_of, launch_on, pid


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)


@pytest.fixture
def fake():
    with FakeProlificServer() as server:
        yield server
        assert server.violations == []


def take(base: str, name: str, participant: str, study_id: str, session_id: str, value: str) -> requests.Response:
    """Arrive from Prolific, consent, vote ``value`` on every comparison, submit (the submit response)."""
    http = requests.Session()
    page = http.get(
        f"{base}/s/{name}/enter", params={"PROLIFIC_PID": participant, "STUDY_ID": study_id, "SESSION_ID": session_id}
    )
    assert page.status_code == 200, page.text
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    for unit in http.get(task + "state").json()["units"]:
        for q in unit["questions"]:
            assert (
                http.post(
                    task + "answer", json={"unit_id": unit["unit_id"], "question": q["name"], "value": value}
                ).status_code
                == 200
            )
    return http.post(task + "submit", allow_redirects=False)


def first_wave(tmp_path, database_url, fake, **prolific):
    """Three careful workers vote alike (a tie: the same whichever side each system is shown on) on two HITs;
    one votes against them on every comparison."""
    web, config, secret = launch_on(tmp_path, database_url, fake, prolific=prolific)
    [sid] = fake.studies
    for who, value in (("g1", "tie"), ("g2", "tie"), ("bad", "a"), ("g1", "tie"), ("g2", "tie"), ("g3", "tie")):
        session_id = fake.start_session(pid(who), sid)
        assert take(web.url, "ab-demo", pid(who), sid, session_id, value).status_code == 302
        fake.complete(session_id, code_of(config, secret))
    tick(database_url, config.study, web.url)
    return web, config, sid


def test_a_second_wave_invited_from_the_first_waves_passing_workers_admits_only_them(tmp_path, database_url, fake):
    web, config, sid = first_wave(tmp_path, database_url, fake)
    try:
        ctx = recontact.context(database_url, config.study)
        assert recontact.qc_outcomes(database_url, ctx) == {
            pid("g1"): True,
            pid("g2"): True,
            pid("g3"): True,
            pid("bad"): False,
        }
        result = CliRunner().invoke(
            main, ["workers", "--passed-qc", str(tmp_path / "study.yaml"), "--to-group", "ab-demo-passed"]
        )
        assert result.exit_code == 0, result.output
        [gid] = [g for g, meta in fake.hooks["groups"].items() if meta["name"] == "ab-demo-passed"]
        assert sorted(fake.groups[gid]) == sorted(pid(x) for x in ("g1", "g2", "g3"))
        assert f"({gid})" in result.output
    finally:
        web.stop()
    (tmp_path / "wave2").mkdir()
    web2, _, _ = launch_on(
        tmp_path / "wave2", database_url, fake, study="wave-2", prolific={"allowlist": "ab-demo-passed"}
    )
    try:
        [second] = [s for s in fake.studies if s != sid]
        assert {"filter_id": "participant_group_allowlist", "selected_values": [gid]} in fake.studies[second]["filters"]
        for outsider in ("bad", "newcomer"):
            with pytest.raises(Refused, match="allowlist"):
                fake.start_session(pid(outsider), second)
        session_id = fake.start_session(pid("g2"), second)
        arrived = requests.get(
            f"{web2.url}/s/wave-2/enter",
            params={"PROLIFIC_PID": pid("g2"), "STUDY_ID": second, "SESSION_ID": session_id},
        )
        assert arrived.status_code == 200
        with session_scope(database_url) as s:
            workers = {a.worker.external_id for a in s.scalars(select(Assignment)) if a.hit.study.name == "wave-2"}
        assert workers == {pid("g2")}
    finally:
        web2.stop()


def test_an_allowlist_group_that_does_not_exist_stops_posting_with_what_to_do(tmp_path, database_url, fake):
    web, _, _ = launch_on(tmp_path, database_url, fake, prolific={"allowlist": "never-made"})
    try:
        assert fake.studies == {}
        with session_scope(database_url) as s:
            [refusal] = s.scalars(select(Event.data).where(Event.kind == "provider_refused_post"))
        assert (
            refusal["permanent"]
            and "hitkit workers --passed-qc FIRST_STUDY_FILE --to-group never-made" in refusal["reason"]
        )
    finally:
        web.stop()


def test_workers_who_fail_qc_join_a_blocklist_group_every_study_of_the_workspace_shares(tmp_path, database_url, fake):
    web, config, sid = first_wave(tmp_path, database_url, fake, qc_failures_blocklist="qc-failed")
    try:
        [gid] = [g for g, meta in fake.hooks["groups"].items() if meta["name"] == "qc-failed"]
        assert {"filter_id": "participant_group_blocklist", "selected_values": [gid]} in fake.studies[sid]["filters"]
        assert fake.groups[gid] == [pid("bad")]
        tick(database_url, config.study, web.url)  # once each
        assert len(fake.calls("POST", f"/participant-groups/{gid}/participants/")) == 1
    finally:
        web.stop()
    (tmp_path / "other").mkdir()
    web2, _, _ = launch_on(
        tmp_path / "other", database_url, fake, study="other", prolific={"qc_failures_blocklist": "qc-failed"}
    )
    try:
        [second] = [s for s in fake.studies if s != sid]
        assert {"filter_id": "participant_group_blocklist", "selected_values": [gid]} in fake.studies[second]["filters"]
        with pytest.raises(Refused, match="blocklisted"):
            fake.start_session(pid("bad"), second)
    finally:
        web2.stop()


def test_the_coordinator_writes_to_one_participant_or_everyone_in_the_study(tmp_path, database_url, fake):
    web, config, sid = first_wave(tmp_path, database_url, fake)
    try:
        study_file = str(tmp_path / "study.yaml")
        one = CliRunner().invoke(main, ["message", study_file, "--to", pid("g1"), "--text", "Thanks! A question."])
        assert one.exit_code == 0, one.output
        assert fake.messages == [{"to": pid("g1"), "body": "Thanks! A question.", "study_id": sid}]
        everyone = CliRunner().invoke(main, ["message", study_file, "--everyone", "--text", "Results are in."])
        assert everyone.exit_code == 0 and "4 participant(s)" in everyone.output
        assert len(fake.calls("POST", "/messages/bulk/")) == 1
        assert sorted(m["to"] for m in fake.messages[1:]) == sorted(pid(x) for x in ("g1", "g2", "g3", "bad"))
        stranger = CliRunner().invoke(main, ["message", study_file, "--to", pid("nobody"), "--text", "hi"])
        assert stranger.exit_code != 0 and "did not take part" in stranger.output
        with session_scope(database_url) as s:
            assert [d["to"] for d in s.scalars(select(Event.data).where(Event.kind == "message_sent"))] == [
                [pid("g1")],
                sorted(pid(x) for x in ("g1", "g2", "g3", "bad")),
            ]
    finally:
        web.stop()


def test_a_rejection_template_that_could_fall_short_of_100_characters_is_refused_at_load(tmp_path, database_url):
    base = {"kind": "prolific", "currency": "GBP"}
    for prolific, why in (
        ({"rejection_message": "Rejected: {reason}"}, "Prolific needs 100 or more"),
        ({"rejection_message": "x" * 120 + "{who}"}, "may name only {study} and {reason}"),
        ({"rejection_category": "SLOW"}, "not one of Prolific's"),
    ):
        with pytest.raises(ConfigError, match=why):
            load_study(
                pairwise_study(
                    tmp_path, database_url, provider={**base, "prolific": {"estimated_minutes": 2, **prolific}}
                )
            )
