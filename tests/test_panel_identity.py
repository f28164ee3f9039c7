"""Identity on the panel provider: a participant id typed into a URL opens nobody's work. A returning
participant gets their assignment only with the session id stored at their first arrival or with the
assignment's signed token their browser kept; ``hitkit confirm`` counts a session only as it arrived."""

from __future__ import annotations

import csv

import pytest
import requests
from click.testing import CliRunner
from sqlalchemy import func, select

from hitkit.cli import main
from hitkit.db.models import Assignment, Hit, Response, Study
from hitkit.db.session import session_scope
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext, create_study, resolve_secret
from tests.test_provider_panel import panel_study


@pytest.fixture
def panel_site(tmp_path, database_url):
    """A running panel study (with or without session ids) served over real HTTP."""
    from server.embedded import WebServer

    started = []

    def start(**panel):
        path = panel_study(tmp_path, database_url, **panel)
        secret = resolve_secret(database_url)
        with session_scope(database_url) as s:
            ctx = create_study(s, load_study(path), path, secret)
            s.get(Study, ctx.study_id).status = "running"
        from hitkit.running.scheduler import tick

        tick(database_url, "ab-demo", "http://127.0.0.1")  # posts the first wave
        web = WebServer(database_url, "127.0.0.1", 0, 4, secret).start()
        started.append(web)
        return path, web.url

    yield start
    for web in started:
        web.stop()


def _arrive(http: requests.Session, url: str, **params) -> requests.Response:
    return http.get(f"{url}/s/ab-demo/enter", params=params, timeout=30)


def _answer_first(http: requests.Session, page: requests.Response, value: str) -> str:
    base = page.url.split("?")[0].rstrip("/")
    http.post(f"{base}/consent", timeout=30).raise_for_status()
    unit = http.get(f"{base}/state", timeout=30).json()["units"][0]["unit_id"]
    http.post(
        f"{base}/answer", json={"unit_id": unit, "question": "vote", "value": value}, timeout=30
    ).raise_for_status()
    return base


def _stored(database_url: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    with session_scope(database_url) as s:
        rows = [
            (a.worker.external_id, a.provider_assignment_id, a.status)
            for a in s.scalars(select(Assignment).order_by(Assignment.id))
        ]
        votes = list(s.scalars(select(Response.value).where(Response.question == "vote", Response.source != "auto")))
    return rows, votes


def test_a_victims_participant_id_with_a_made_up_session_id_opens_nothing_of_theirs(panel_site, database_url):
    _, url = panel_site()
    victim = requests.Session()
    page = _arrive(victim, url, participantId="P-VICTIM", assignmentId="S-VICTIM")
    assert page.status_code == 200 and "/a/ab-demo/" in page.url
    victim_base = _answer_first(victim, page, "a")
    before = _stored(database_url)

    attacker = requests.Session()  # another browser: no cookie of the victim's
    refused = _arrive(attacker, url, participantId="P-VICTIM", assignmentId="S-ATTACKER", allow_redirects=False)
    assert refused.status_code == 403
    assert "another session" in refused.text and "/a/ab-demo/" not in refused.text
    assert "Location" not in refused.headers and not attacker.cookies
    # Starting nothing, reading nothing: the database is as the victim left it.
    assert _stored(database_url) == before == ([("P-VICTIM", "S-VICTIM", "accepted")], ["a"])

    # Nor on another HIT's own link: the participant id holds work, and this arrival proves nothing.
    with session_scope(database_url) as s:
        other_hit = s.scalar(select(Hit.id).where(Hit.id != s.scalar(select(Assignment.hit_id))).order_by(Hit.id))
    elsewhere = attacker.get(
        f"{url}/s/ab-demo/hit/{other_hit}",
        params={"participantId": "P-VICTIM", "assignmentId": "S-ATTACKER"},
        allow_redirects=False,
        timeout=30,
    )
    assert elsewhere.status_code == 403 and "another session" in elsewhere.text and _stored(database_url) == before

    # The victim comes back: with the session id they arrived with (a fresh browser) ...
    again = _arrive(requests.Session(), url, participantId="P-VICTIM", assignmentId="S-VICTIM")
    assert again.status_code == 200 and again.url.split("?")[0].rstrip("/") == victim_base
    # ... or from their own browser, which kept the assignment's signed token, whatever session id the panel gives.
    own = _arrive(victim, url, participantId="P-VICTIM", assignmentId="S-NEW-VISIT")
    assert own.status_code == 200 and own.url.split("?")[0].rstrip("/") == victim_base
    assert _stored(database_url) == before


def test_without_session_ids_the_participant_id_alone_resumes_nothing(panel_site, database_url):
    _, url = panel_site(session_param=None, completion_url=None)
    victim = requests.Session()
    page = _arrive(victim, url, participantId="P-VICTIM")
    assert page.status_code == 200
    victim_base = _answer_first(victim, page, "b")
    assert victim.cookies.get("hitkit_assignment")

    refused = _arrive(requests.Session(), url, participantId="P-VICTIM", allow_redirects=False)
    assert refused.status_code == 403 and "another session" in refused.text
    forged = requests.Session()
    forged.cookies.set("hitkit_assignment", "not-a-token", path="/s/ab-demo/")
    assert _arrive(forged, url, participantId="P-VICTIM", allow_redirects=False).status_code == 403

    back = _arrive(victim, url, participantId="P-VICTIM")
    assert back.status_code == 200 and back.url.split("?")[0].rstrip("/") == victim_base
    rows, votes = _stored(database_url)
    assert [r[0] for r in rows] == ["P-VICTIM"] and votes == ["b"]


def _submit(http: requests.Session, base: str) -> None:
    state = http.get(f"{base}/state", timeout=30).json()
    for view in state["units"]:
        http.post(
            f"{base}/answer", json={"unit_id": view["unit_id"], "question": "vote", "value": "a"}, timeout=30
        ).raise_for_status()
    done = http.post(f"{base}/submit", allow_redirects=False, timeout=30)
    assert done.status_code in (200, 302), done.text


def _listing(tmp_path, rows: list[tuple[str, str]]):
    path = tmp_path / "completed.csv"
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["participantId", "assignmentId"])
        out.writerows(rows)
    return path


def test_confirm_counts_work_only_under_the_session_id_stored_at_arrival(panel_site, database_url, tmp_path):
    study_file, url = panel_site()
    victim = requests.Session()
    page = _arrive(victim, url, participantId="P-VICTIM", assignmentId="S-VICTIM")
    _submit(victim, _answer_first(victim, page, "a"))

    def confirmed() -> int:
        with session_scope(database_url) as s:
            return s.scalar(select(func.count()).select_from(Assignment).where(Assignment.confirmed_at.is_not(None)))

    # The panel lists the participant with another session id: the participant id alone confirms nothing.
    other = CliRunner().invoke(
        main, ["confirm", str(study_file), "--completed", str(_listing(tmp_path, [("P-VICTIM", "S-OTHER")]))]
    )
    assert other.exit_code == 0, other.output
    assert "Confirmed 0 assignment(s)" in other.output and "S-OTHER" in other.output and confirmed() == 0
    # The stored session id listed for another participant is not this arrival's either.
    swapped = CliRunner().invoke(
        main, ["confirm", str(study_file), "--completed", str(_listing(tmp_path, [("P-SOMEONE", "S-VICTIM")]))]
    )
    assert "Confirmed 0 assignment(s)" in swapped.output and "another participant id" in swapped.output
    assert confirmed() == 0
    # Confirming by the participant column is refused with the reason.
    by_worker = CliRunner().invoke(
        main,
        [
            "confirm",
            str(study_file),
            "--column",
            "participantId",
            "--completed",
            str(_listing(tmp_path, [("P-VICTIM", "S-VICTIM")])),
        ],
    )
    assert by_worker.exit_code == 1 and "session column" in by_worker.output and confirmed() == 0
    # The session as it arrived confirms it.
    right = CliRunner().invoke(
        main, ["confirm", str(study_file), "--completed", str(_listing(tmp_path, [("P-VICTIM", "S-VICTIM")]))]
    )
    assert "Confirmed 1 assignment(s)" in right.output and confirmed() == 1


def test_the_simulated_crowd_fills_a_panel_study_by_the_same_path(tmp_path, database_url):
    """Simulated arrivals (the provider asked inside the transaction) keep working: each arrival with a
    new session id takes a new HIT; a repeat of the stored session id resumes the same assignment."""
    from hitkit.worker import admission

    path = panel_study(tmp_path, database_url)
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, load_study(path), path, secret)
        s.get(Study, ctx.study_id).status = "running"
    from hitkit.running.scheduler import tick

    tick(database_url, "ab-demo", "http://127.0.0.1")
    with session_scope(database_url) as s:
        ctx = StudyContext.load(s, "ab-demo", secret)
        first = admission.enter(s, ctx, None, {"participantId": "P1", "assignmentId": "S1"})
        again = admission.enter(s, ctx, None, {"participantId": "P1", "assignmentId": "S1"})
        assert again.assignment.id == first.assignment.id
