"""The Prolific provider against a fake of Prolific's REST API v1 built from its documentation.

Real HTTP both ways: hitkit's client calls the fake, participants reach hitkit's server. The fake
validates every request and answer against Prolific's OpenAPI document; each test ends by checking
that nothing hitkit sent or read broke it.
"""

from __future__ import annotations

import hashlib
import threading
from decimal import Decimal

import pytest
import requests
from click.testing import CliRunner
from sqlalchemy import create_engine, func, select, text

from hitkit.analysis.sequential import RuleState
from hitkit.cli import main
from hitkit.db.models import Assignment, Event, Hit, Payment, Study
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.providers.prolific import client as prolific_api
from hitkit.providers.prolific.client import ProlificError
from hitkit.providers.prolific.provider import ProlificProvider
from hitkit.running import provider_side, stopping
from hitkit.running.control import pause_study, resume_study
from hitkit.running.scheduler import tick
from hitkit.running.sync import sync_study
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext, create_study, resolve_secret
from server.embedded import WebServer
from tests.fakes.prolific import TOKEN, FakeProlificServer, Refused
from tests.studies import pairwise_study

PROLIFIC = {"estimated_minutes": 2}
"""0.50 for an estimate of 2 minutes is 15/hour, over Prolific's minimum; 10 minutes allowed ≥ 2 + 4 + 2√2."""


def pid(name: str) -> str:
    """A Prolific-shaped participant id (24 hex characters) for a readable name."""
    return hashlib.sha256(name.encode()).hexdigest()[:24]


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)
    monkeypatch.setattr(provider_side, "RETURNS_EVERY_S", 0)


@pytest.fixture
def fake():
    with FakeProlificServer() as server:
        yield server
        assert server.violations == []  # nothing hitkit sent or read broke Prolific's OpenAPI document


def launch_on(tmp_path, database_url, fake, prolific=None, schedule=None, provider=None, **changes):
    """The example A/B study on the fake, running, its first wave posted, pages served: (web, config, secret)."""
    settings = {"api_url": fake.url, **PROLIFIC, **(prolific or {})}
    config = load_study(
        pairwise_study(
            tmp_path,
            database_url,
            provider={"kind": "prolific", "currency": "GBP", "prolific": settings, **(provider or {})},
            schedule={"approve_after_s": 0, **(schedule or {})},
            **changes,
        )
    )
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    tick(database_url, config.study, web.url)
    return web, config, secret


@pytest.fixture
def study(tmp_path, database_url, fake):
    """(base url, database url, secret, config) of a running study whose first wave is posted."""
    group = fake.make_group()
    web, config, secret = launch_on(
        tmp_path,
        database_url,
        fake,
        prolific={
            "project": "proj42",
            "device_compatibility": ["desktop", "tablet"],
            "blocklist_group": group,
            "filters": [{"filter_id": "current-country-of-residence", "selected_values": ["1"]}],
        },
    )
    yield web.url, database_url, secret, config
    web.stop()


def enter(base: str, participant: str, study_id: str, session_id: str, **kw) -> requests.Response:
    return requests.get(
        f"{base}/s/ab-demo/enter",
        params={"PROLIFIC_PID": participant, "STUDY_ID": study_id, "SESSION_ID": session_id},
        **kw,
    )


def take_and_submit(base: str, participant: str, study_id: str, session_id: str) -> requests.Response:
    """Arrive from Prolific, consent, answer every question, submit; the submit response, not followed."""
    http = requests.Session()
    page = enter(base, participant, study_id, session_id)
    assert page.status_code == 200, page.text
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    for unit in http.get(task + "state").json()["units"]:
        for q in unit["questions"]:
            assert (
                http.post(
                    task + "answer", json={"unit_id": unit["unit_id"], "question": q["name"], "value": "a"}
                ).status_code
                == 200
            )
    return http.post(task + "submit", allow_redirects=False)


def code_of(config, secret) -> str:
    return ProlificProvider(config, secret).completion_code()


def events(url: str, kind: str) -> list[dict]:
    with session_scope(url) as s:
        return list(s.scalars(select(Event.data).where(Event.kind == kind).order_by(Event.id)))


# -- posting -----------------------------------------------------------------------------------------


def test_first_post_creates_checks_and_publishes_the_study_as_documented(study, fake):
    base, url, secret, config = study
    [created] = fake.calls("POST", "/studies/")
    body = created.body
    assert created.authorization == f"Token {TOKEN}"
    assert body["external_study_url"] == (
        f"{base}/s/ab-demo/enter?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
        f"&STUDY_ID={{{{%STUDY_ID%}}}}&SESSION_ID={{{{%SESSION_ID%}}}}"
    )
    assert "currency" not in body and body["reward"] == 50
    assert body["submissions_config"] == {"max_submissions_per_participant": 3}  # schedule.per_worker_cap
    assert body["internal_name"].startswith("hitkit:ab-demo:") and len(body["internal_name"]) > len("hitkit:ab-demo:")
    assert body["estimated_completion_time"] == 2 and body["maximum_allowed_time"] == 10
    assert body["project"] == "proj42" and body["device_compatibility"] == ["desktop", "tablet"]
    assert body["completion_codes"] == [
        {"code": code_of(config, secret), "code_type": "COMPLETED", "actions": [{"action": "MANUALLY_REVIEW"}]}
    ]
    [sid] = fake.studies
    # The balance is read before publishing; the currency the study came back with matched.
    assert fake.calls("GET", rf"/workspaces/{fake.workspace['id']}/balance/")
    assert fake.calls("POST", f"/studies/{sid}/transition/")[0].body == {"action": "PUBLISH"}
    with session_scope(url) as s:
        hits = s.scalars(select(Hit).where(Hit.status == "posted").order_by(Hit.index)).all()
        places = sum(h.max_assignments for h in hits)
        assert len(hits) == 4 and all(h.provider_hit_id.startswith(f"{sid}:") for h in hits)
    study_now = requests.get(f"{fake.url}/studies/{sid}/", headers={"Authorization": f"Token {TOKEN}"}).json()
    assert study_now["status"] == "ACTIVE" and study_now["total_available_places"] == places
    assert study_now["currency_code"] == "GBP"
    # Posting a HIT key again (a retry after a crash) sets the same total: nothing grows.
    before = len(fake.requests)
    again = ProlificProvider(config, secret).post_hit("ab-demo-1", f"{base}/s/ab-demo/hit/2", Decimal("0.50"), 3, 3600)
    assert again.provider_hit_id == f"{sid}:ab-demo-1"
    assert fake.studies[sid]["total_available_places"] == places
    assert not [r for r in fake.requests[before:] if r.method != "GET"]
    # A Prolific study has one reward: a HIT paying another amount cannot join it.
    with pytest.raises(ProlificError, match="same hit.reward"):
        ProlificProvider(config, secret).post_hit("ab-demo-99", f"{base}/s/ab-demo/hit/99", Decimal("0.75"), 3, 3600)
    # Every call that changed something is in the audit log; the API token never reaches the database.
    changes = [r for r in fake.requests if r.method != "GET"]
    assert len(events(url, "prolific_call")) == len(changes)
    with session_scope(url) as s:
        assert TOKEN not in repr([e.data for e in s.scalars(select(Event))])


def test_fees_default_to_prolifics_rate_plus_vat_in_estimate_and_ledger(tmp_path, database_url, fake):
    from hitkit.money.ledger import estimate_cost

    web, config, secret = launch_on(tmp_path, database_url, fake)
    try:
        with session_scope(database_url) as s:
            ctx = StudyContext.load(s, config.study, secret)
            assert ctx.fee(Decimal("0.50"), 3) == Decimal("0.20")  # 0.50 × 33.3 % × 1.20 VAT = 0.1998
            estimate = estimate_cost(s, ctx)
            assert estimate.fees == Decimal("0.20") * estimate.assignments
        [sid] = fake.studies
        session_id = fake.start_session(pid("fee"), sid)
        take_and_submit(web.url, pid("fee"), sid, session_id)
        fake.complete(session_id, code_of(config, secret))
        assert tick(database_url, config.study, web.url).approved == 1
        with session_scope(database_url) as s:
            ledger = {p.kind: (p.amount, p.status, p.currency) for p in s.scalars(select(Payment))}
        assert ledger == {"reward": (Decimal("0.50"), "paid", "GBP"), "fee": (Decimal("0.20"), "paid", "GBP")}
    finally:
        web.stop()


def test_a_study_that_breaks_prolifics_pay_rules_is_refused_before_anything_is_posted(tmp_path, database_url, fake):
    underpaid = pairwise_study(
        tmp_path,
        database_url,
        provider={"kind": "prolific", "currency": "GBP", "prolific": {"api_url": fake.url, "estimated_minutes": 8}},
    )
    with pytest.raises(ConfigError) as refused:
        load_study(underpaid)
    message = str(refused.value)
    assert "3.75 GBP/hour, under Prolific's minimum of 6.00 GBP/hour" in message
    assert "raise hit.reward to at least 0.80" in message
    assert "raise hit.assignment_minutes to 24 or more" in message  # 2 + 16 + 2√8 = 23.7
    result = CliRunner().invoke(main, ["launch", str(underpaid), "--yes", "--no-progress"])
    assert result.exit_code != 0 and "raise hit.reward to at least 0.80" in result.output
    assert fake.requests == []


def test_a_currency_mismatch_is_refused_once_before_publishing_and_waits_for_the_coordinator(
    tmp_path, database_url, fake
):
    fake.workspace["currency_code"] = "USD"
    web, config, secret = launch_on(tmp_path, database_url, fake)
    try:
        [sid] = fake.studies
        assert fake.studies[sid]["status"] == "UNPUBLISHED"
        assert not fake.calls("POST", f"/studies/{sid}/transition/")
        [refusal] = events(database_url, "provider_refused_post")
        assert (
            refusal["permanent"] and "pays in USD but the study file says provider.currency: GBP" in refusal["reason"]
        )
        before = len(fake.requests)
        report = tick(database_url, config.study, web.url)  # no rollback loop: the next tick posts nothing
        assert report.posted == 0 and len(fake.requests) == before
        with session_scope(database_url) as s:
            assert s.scalar(select(func.count()).select_from(Hit).where(Hit.status == "posted")) == 0
            assert s.scalar(select(Study.status)) == "running"
    finally:
        web.stop()


def test_a_balance_that_cannot_cover_the_places_is_refused_before_publishing(tmp_path, database_url, fake):
    fake.workspace["available_balance"] = 100  # £1.00
    web, _, _ = launch_on(tmp_path, database_url, fake)
    try:
        [sid] = fake.studies
        assert fake.studies[sid]["status"] == "UNPUBLISHED"
        [refusal] = events(database_url, "provider_refused_post")
        assert "available balance is 1 GBP" in refusal["reason"] and "top up" in refusal["reason"]
    finally:
        web.stop()


def test_a_rerun_with_a_fresh_database_creates_a_new_study_and_never_adopts_another_databases(
    tmp_path, database_url, fake
):
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    web, config, _ = launch_on(tmp_path / "one", database_url, fake)
    web.stop()
    [first] = fake.studies
    other = f"sqlite:///{tmp_path / 'two.db'}"
    from hitkit.db.migrate import upgrade

    upgrade(other)
    web2, _, _ = launch_on(tmp_path / "two", other, fake)
    web2.stop()
    assert len(fake.studies) == 2
    names = {s["internal_name"] for s in fake.studies.values()}
    assert len(names) == 2 and all(n.startswith("hitkit:ab-demo:") for n in names)
    assert fake.studies[first]["total_available_places"] == sum(
        h["places"] for h in events(database_url, "prolific_places")
    )


def test_a_post_recorded_on_prolific_before_a_crash_is_not_posted_twice(tmp_path, database_url, fake):
    config = load_study(
        pairwise_study(
            tmp_path,
            database_url,
            provider={"kind": "prolific", "currency": "GBP", "prolific": {"api_url": fake.url, **PROLIFIC}},
        )
    )
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
        hits = [(h.id, h.index, h.max_assignments) for h in s.scalars(select(Hit).order_by(Hit.index).limit(4))]
    # The scheduler posted the wave on Prolific, then died before recording any HIT as posted.
    p = ProlificProvider(config, secret)
    for hit_id, index, places in hits:
        p.post_hit(f"ab-demo-{index}", f"http://workers.example/s/ab-demo/hit/{hit_id}", Decimal("0.50"), places, 3600)
    [sid] = fake.studies
    places = fake.studies[sid]["total_available_places"]
    tick(database_url, config.study, "http://workers.example")
    assert list(fake.studies) == [sid] and fake.studies[sid]["total_available_places"] == places
    assert len(fake.calls("POST", "/studies/")) == 1
    with session_scope(database_url) as s:
        posted = s.scalars(select(Hit).where(Hit.status == "posted")).all()
        assert len(posted) == 4 and sum(h.max_assignments for h in posted) == places


# -- arrival -----------------------------------------------------------------------------------------


def test_arrival_reads_the_participant_from_the_single_submission_shape(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    session_id = fake.start_session(pid("one"), sid)
    single = requests.get(f"{fake.url}/submissions/{session_id}/", headers={"Authorization": f"Token {TOKEN}"}).json()
    assert single["participant"] == pid("one") and "participant_id" not in single  # the documented shape
    submitted = take_and_submit(base, pid("one"), sid, session_id)
    code = code_of(config, secret)
    assert submitted.status_code == 302
    assert submitted.headers["Location"] == f"https://app.prolific.com/submissions/complete?cc={code}"
    with session_scope(url) as s:
        a = s.scalar(select(Assignment))
        assert a.provider_assignment_id == session_id and a.status == "submitted"
        assert a.worker.external_id == pid("one") and a.worker.provider == "prolific"
    # One Prolific session is one HIT: coming back after submitting opens no second HIT.
    again = enter(base, pid("one"), sid, session_id)
    assert again.status_code == 409 and f"cc={code}" in again.text
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Assignment)) == 1


def test_forged_malformed_foreign_or_finished_sessions_are_refused_and_store_nothing(study, fake):
    base, url, _, _ = study
    [sid] = fake.studies
    other = requests.post(
        f"{fake.url}/studies/",
        headers={"Authorization": f"Token {TOKEN}"},
        json={
            "name": "x",
            "description": "x",
            "external_study_url": "https://x.example",
            "prolific_id_option": "url_parameters",
            "total_available_places": 5,
            "reward": 100,
            "estimated_completion_time": 1,
            "completion_codes": [{"code": "X", "code_type": "COMPLETED", "actions": []}],
        },
    ).json()["id"]
    fake.studies[other]["status"] = "ACTIVE"
    mine = fake.start_session(pid("two"), sid)
    foreign_study = fake.start_session(pid("two"), other)
    gone = fake.start_session(pid("three"), sid)
    fake.return_session(gone)
    cases = [
        (pid("two"), sid, "0" * 24, 403),  # no such submission
        (pid("nine"), sid, mine, 403),  # someone else's session
        (pid("two"), other, foreign_study, 403),  # a session of another study
        (pid("two"), sid, foreign_study, 403),  # study id swapped in the link
        (pid("three"), sid, gone, 403),  # returned on Prolific
        (pid("two"), sid, "../../studies/x", 400),  # not a Prolific id: never reaches a URL path
        ("PID-2", sid, mine, 400),
    ]
    for participant, study_id, session_id, status in cases:
        assert enter(base, participant, study_id, session_id).status_code == status, (participant, session_id)
    assert requests.get(f"{base}/s/ab-demo/enter", params={"PROLIFIC_PID": pid("two")}).status_code == 403
    preview = requests.get(f"{base}/s/ab-demo/enter")  # Prolific's researcher preview: no ids
    assert preview.status_code == 200 and "Preview" in preview.text
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Assignment)) == 0


def test_a_burst_of_participants_arriving_at_once_each_get_one_place_and_none_is_oversold(study, fake):
    base, url, _, _ = study
    [sid] = fake.studies
    places = fake.studies[sid]["total_available_places"]
    sessions = [(pid(f"burst-{i}"), fake.start_session(pid(f"burst-{i}"), sid)) for i in range(places)]
    with pytest.raises(Refused, match="AWAITING REVIEW"):  # full: Prolific itself lets no more in
        fake.start_session(pid("burst-late"), sid)
    gate, answers, texts = threading.Barrier(len(sessions)), {}, {}

    def arrive(participant, session_id):
        gate.wait()
        for attempt in range(10):
            threading.Event().wait(0.05 * attempt)
            # Two arrivals can pick the same package at once; the one that finds it full reloads
            # (hitkit's flow picks the HIT before locking it: a race reported to the flow's owner).
            reply = enter(base, participant, sid, session_id, allow_redirects=False)
            status = reply.status_code
            if status != 409:
                break
        answers[participant] = status
        texts[participant] = reply.text[reply.text.find("<main") :][:400]

    threads = [threading.Thread(target=arrive, args=s) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(set(answers.values())) == [302] and len(answers) == places, [
        t for p, t in texts.items() if answers[p] != 302
    ]
    with session_scope(url) as s:
        rows = s.scalars(select(Assignment)).all()
        assert len(rows) == places and {a.provider_assignment_id for a in rows} == {x for _, x in sessions}
        for hit in s.scalars(select(Hit).where(Hit.status == "posted")):
            assert sum(1 for a in rows if a.hit_id == hit.id) <= hit.max_assignments


def test_returns_and_time_outs_on_prolific_reopen_their_places_in_hitkit(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    places = fake.studies[sid]["total_available_places"]
    sessions = {}
    for i in range(places):
        sessions[i] = fake.start_session(pid(f"r-{i}"), sid)
        assert enter(base, pid(f"r-{i}"), sid, sessions[i], allow_redirects=False).status_code == 302
    fake.return_session(sessions[0])
    fake.time_out(sessions[1])
    assert tick(url, "ab-demo", base).released == 2
    with session_scope(url) as s:
        status = {a.provider_assignment_id: a.status for a in s.scalars(select(Assignment))}
    assert status[sessions[0]] == status[sessions[1]] == "returned"
    assert list(status.values()).count("accepted") == places - 2
    # The freed places are open again on Prolific and in hitkit: two newcomers take them and finish.
    for name in ("new-a", "new-b"):
        session_id = fake.start_session(pid(name), sid)
        assert take_and_submit(base, pid(name), sid, session_id).status_code == 302
    # hitkit's sync agrees and changes nothing more.
    assert sync_study(url, "ab-demo").mismatches == []


def test_a_participant_hitkit_cannot_place_is_told_to_return_the_study_on_prolific(study, fake):
    base, url, _, _ = study
    [sid] = fake.studies
    with session_scope(url) as s:
        for hit in s.scalars(select(Hit).where(Hit.status == "posted")):
            hit.status = "completed"  # every package done in hitkit, while Prolific still has places
    session_id = fake.start_session(pid("late"), sid)
    refused = enter(base, pid("late"), sid, session_id)
    assert refused.status_code == 409 and "return this study on Prolific" in refused.text


def test_work_submitted_in_hitkit_but_never_handed_in_is_completed_on_prolific_or_listed(tmp_path, database_url, fake):
    web, config, secret = launch_on(tmp_path, database_url, fake, prolific={"complete_after_s": 0})
    try:
        [sid] = fake.studies
        closed_tab = fake.start_session(pid("closed-tab"), sid)
        take_and_submit(web.url, pid("closed-tab"), sid, closed_tab)  # never reaches Prolific's page
        timed_out = fake.start_session(pid("slow"), sid)
        take_and_submit(web.url, pid("slow"), sid, timed_out)
        fake.time_out(timed_out)
        report = tick(database_url, config.study, web.url)
        assert report.handed_in == 1
        assert fake.calls("POST", f"/submissions/{closed_tab}/transition/")[0].body == {
            "action": "COMPLETE",
            "completion_code": code_of(config, secret),
        }
        assert fake.submissions[closed_tab]["status"] == "APPROVED"  # then approved like any other
        [listed] = events(database_url, "work_not_handed_in")
        sync = sync_study(database_url, config.study)
        assert [x["provider_assignment_id"] for x in sync.not_handed_in] == [timed_out]
        from hitkit.running.sync import describe

        assert f"hitkit settle STUDY_FILE {listed['assignment']} --pay" in describe(sync)
        # The coordinator settles it: its reward as a bonus, once however often the command runs.
        study_file = tmp_path / "study.yaml"
        result = CliRunner().invoke(main, ["settle", str(study_file), str(listed["assignment"]), "--pay"])
        assert result.exit_code == 0, result.output
        again = CliRunner().invoke(main, ["settle", str(study_file), str(listed["assignment"]), "--pay"])
        assert again.exit_code != 0 and "is approved" in again.output
        assert len(fake.paid) == 1 and fake.submissions[timed_out]["bonus_payments"] == [50]
    finally:
        web.stop()


# -- decisions ---------------------------------------------------------------------------------------


def test_approval_waits_for_prolific_and_repeats_safely(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    session_id = fake.start_session(pid("wait"), sid)
    take_and_submit(base, pid("wait"), sid, session_id)
    for _ in range(2):  # still ACTIVE on Prolific: nothing to approve yet, and no failure logged
        report = tick(url, "ab-demo", base)
        assert (report.approved, report.approve_failed) == (0, 0)
    fake.complete(session_id, code_of(config, secret))
    assert tick(url, "ab-demo", base).approved == 1
    assert fake.submissions[session_id]["status"] == "APPROVED"
    assert events(url, "approve_failed") == []
    p = ProlificProvider(config, secret)
    p.approve(session_id)  # documented idempotent: approving again is no error
    active = fake.start_session(pid("wait-2"), sid)
    with pytest.raises(ProlificError, match="the submission is ACTIVE"):
        p.approve(active)


def test_reject_and_asynchronous_bulk_approve_speak_prolifics_protocol(study, fake):
    _, _, secret, config = study
    [sid] = fake.studies
    p = ProlificProvider(config, secret)
    a, b, c = (fake.start_session(pid(x), sid) for x in "abc")
    for x in (a, b, c):
        fake.complete(x, p.completion_code())
    # A short reason still reaches the participant in the study's rejection message, 100+ characters as
    # Prolific requires, with the study's category (LOW_EFFORT unless the study file names another).
    p.reject(a, "too fast")
    [sent] = fake.calls("POST", f"/submissions/{a}/transition/")
    assert sent.body["rejection_category"] == "LOW_EFFORT" and len(sent.body["message"]) >= 100
    assert "'ab-demo'" in sent.body["message"] and "too fast." in sent.body["message"]
    with pytest.raises(ProlificError, match="not one of Prolific's"):
        p.reject(b, "too fast", "SLOW")
    p.approve_many([b, c])
    assert fake.calls("POST", "/submissions/bulk-approve/")[0].body == {"submission_ids": [b, c]}
    assert fake.submissions[b]["status"] == "AWAITING REVIEW"  # asynchronous: not done yet
    assert sorted(p.sync_submissions()) == sorted([(a, "REJECTED"), (b, "APPROVED"), (c, "APPROVED")])


def test_submission_and_study_lists_are_read_across_every_page(study, fake):
    _, _, secret, config = study
    [sid] = fake.studies
    made = {fake.start_session(pid(f"page-{i}"), sid) for i in range(8)}  # pages of 3
    p = ProlificProvider(config, secret)
    assert {w.provider_assignment_id for w in p.list_work([])} == made
    assert {w.worker_id for w in p.list_work([])} == {pid(f"page-{i}") for i in range(8)}
    assert len(fake.calls("GET", f"/studies/{sid}/submissions/")) >= 3


# -- bonuses -----------------------------------------------------------------------------------------


def test_a_bonus_is_created_by_submission_id_then_paid_once_even_when_paying_fails(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    session_id = fake.start_session(pid("bonus"), sid)
    take_and_submit(base, pid("bonus"), sid, session_id)
    p = ProlificProvider(config, secret)
    fake.fail_next(r"POST /bulk-bonus-payments/.*/pay/", 503)
    with pytest.raises(ProlificError, match="HTTP 503"):
        p.pay_bonus(pid("bonus"), session_id, Decimal("1.25"), "well done", "bonus:x:1")
    [created] = fake.calls("POST", "/submissions/bonus-payments/")
    assert created.body == {"study_id": sid, "csv_bonuses": f"{session_id},1.25\n"}
    [bonus_id] = fake.bonuses
    assert fake.paid == []
    # The retry pays the bonus already created; later retries call nothing.
    assert p.pay_bonus(pid("bonus"), session_id, Decimal("1.25"), "well done", "bonus:x:1") == bonus_id
    assert p.pay_bonus(pid("bonus"), session_id, Decimal("1.25"), "well done", "bonus:x:1") == bonus_id
    assert fake.paid == [bonus_id] and len(fake.calls("POST", "/submissions/bonus-payments/")) == 1
    with pytest.raises(ProlificError, match="give every distinct bonus its own idempotency key"):
        p.pay_bonus(pid("bonus"), session_id, Decimal("3.00"), "r", "bonus:x:1")


def test_throttled_calls_back_off_as_told_and_give_up_after_bounded_retries(study, fake, monkeypatch):
    _, _, secret, config = study
    waits: list[float] = []
    monkeypatch.setattr(prolific_api.time, "sleep", waits.append)
    p = ProlificProvider(config, secret)
    fake.throttle(2, retry_after="3")
    assert p.sync_submissions() == []
    assert waits == [3.0, 3.0]
    fake.throttle(prolific_api.MAX_RETRIES + 1, retry_after="1000")
    with pytest.raises(ProlificError, match="HTTP 429"):
        p.sync_submissions()
    assert waits[2:] == [prolific_api.MAX_WAIT_S] * prolific_api.MAX_RETRIES


def test_a_missing_token_is_a_clear_error(study, monkeypatch):
    _, _, secret, config = study
    monkeypatch.delenv("PROLIFIC_TOKEN")
    with pytest.raises(ConfigError, match="PROLIFIC_TOKEN, which is not set"):
        ProlificProvider(config, secret).sync_submissions()


# -- study states ------------------------------------------------------------------------------------


def test_a_paused_study_stays_paused_until_the_coordinator_resumes_it(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    pause_study(url, "ab-demo")
    assert fake.studies[sid]["status"] == "PAUSED"
    with session_scope(url) as s:
        s.scalar(select(Study)).status = "running"  # even were hitkit's own flag lost, Prolific's pause holds
    for _ in range(3):
        tick(url, "ab-demo", base)
    assert fake.studies[sid]["status"] == "PAUSED"
    assert not [r for r in fake.calls("POST", f"/studies/{sid}/transition/") if r.body == {"action": "START"}]
    # Paused on Prolific's site: hitkit adds no places and never starts it either.
    with session_scope(url) as s:
        for hit in s.scalars(select(Hit).where(Hit.status == "posted")):
            hit.status = "completed"
    tick(url, "ab-demo", base)
    assert fake.studies[sid]["status"] == "PAUSED"
    assert any("is paused" in e["reason"] for e in events(url, "provider_refused_post"))
    resume_study(url, "ab-demo")
    assert fake.studies[sid]["status"] == "ACTIVE"


def test_pause_resume_and_stop_commands_work_through_the_cli(study, fake, tmp_path):
    base, url, _, _ = study
    [sid] = fake.studies
    study_file = tmp_path / "study.yaml"
    runner = CliRunner()
    assert runner.invoke(main, ["pause", str(study_file)]).exit_code == 0
    with session_scope(url) as s:
        assert s.scalar(select(Study.status)) == "paused"
    assert fake.studies[sid]["status"] == "PAUSED"
    with pytest.raises(Refused):  # a paused study recruits no one on Prolific
        fake.start_session(pid("paused"), sid)
    assert runner.invoke(main, ["resume", str(study_file)]).exit_code == 0
    assert fake.studies[sid]["status"] == "ACTIVE"
    session_id = fake.start_session(pid("in-progress"), sid)
    assert runner.invoke(main, ["stop", str(study_file)]).exit_code == 0
    # STOP with work in progress: AWAITING REVIEW until it is reviewed (PLATFORMS.md).
    assert fake.studies[sid]["status"] == "AWAITING REVIEW"
    with session_scope(url) as s:
        assert s.scalar(select(Study.status)) == "stopped"
    assert enter(base, pid("in-progress"), sid, session_id).status_code == 410  # hitkit recruits no one either
    refused = runner.invoke(main, ["pause", str(study_file)])
    assert refused.exit_code != 0 and "is stopped" in refused.output


def test_the_study_stops_when_no_package_is_left_and_extra_places_only_ever_go_up(study, fake):
    _, url, secret, config = study
    [sid] = fake.studies
    p = ProlificProvider(config, secret)
    with session_scope(url) as s:
        hits = s.scalars(select(Hit).order_by(Hit.index)).all()
        for h in hits[1:]:
            h.status = "completed"
        first = hits[0].provider_hit_id
    p.expire_hit(first)
    assert fake.studies[sid]["status"] == "ACTIVE"  # a package is still open
    before = fake.studies[sid]["total_available_places"]
    p.extend_hit(first, 2, 3600)
    assert fake.studies[sid]["total_available_places"] == before + 2
    with session_scope(url) as s:
        s.scalar(select(Hit).order_by(Hit.index).limit(1)).status = "completed"
    p.expire_hit(first)
    assert fake.calls("POST", f"/studies/{sid}/transition/")[-1].body == {"action": "STOP"}
    assert fake.studies[sid]["status"] == "COMPLETED"  # nothing left to review


def test_when_the_stopping_rule_fires_prolific_gets_no_more_places_and_the_study_is_stopped(
    tmp_path, database_url, fake, monkeypatch
):
    web, config, secret = launch_on(
        tmp_path,
        database_url,
        fake,
        design="adaptive",
        stop={"decision": "best"},
        schedule={"wave_size": 1, "max_concurrent": 1},
    )
    try:
        [sid] = fake.studies
        places = fake.studies[sid]["total_available_places"]
        session_id = fake.start_session(pid("early"), sid)
        take_and_submit(web.url, pid("early"), sid, session_id)
        fake.complete(session_id, code_of(config, secret))
        # The decision is made (as if the votes had settled it): the next tick acts on it.
        decided = RuleState("best", True, "alpha is best: it beats every other system", [])
        monkeypatch.setattr(stopping, "rule_state", lambda session, ctx: decided)
        tick(database_url, "ab-demo", web.url)
        tick(database_url, "ab-demo", web.url)
        transitions = [c.body for c in fake.calls("POST", f"/studies/{sid}/transition/")]
        assert transitions[-1] == {"action": "STOP"}
        assert fake.studies[sid]["total_available_places"] == places  # no more places were added
        with pytest.raises(Refused):
            fake.start_session(pid("late"), sid)
        with session_scope(database_url) as s:
            assert s.scalar(select(Study.status)) == "completed"
            assert {h.status for h in s.scalars(select(Hit))} == {"closed", "withdrawn"}
            assert s.scalar(select(func.count()).select_from(Event).where(Event.kind == "stop_rule_fired")) == 1
    finally:
        web.stop()


def test_a_whole_study_runs_end_to_end_with_participants_arriving_from_prolific(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    code = code_of(config, secret)
    n = 0
    for _ in range(50):
        with session_scope(url) as s:
            if s.scalar(select(Study.status)) == "completed":
                break
        while True:  # everyone Prolific lets in takes part, one HIT per session
            try:
                session_id = fake.start_session(pid(f"e2e-{n + 1}"), sid)
            except Refused:
                break
            n += 1
            submitted = take_and_submit(base, pid(f"e2e-{n}"), sid, session_id)
            assert submitted.headers["Location"].endswith(f"cc={code}")
            fake.complete(session_id, code)
        tick(url, "ab-demo", base)
    with session_scope(url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        assignments = s.scalars(select(Assignment)).all()
        places = sum(h.max_assignments for h in s.scalars(select(Hit)))
        assert len(assignments) == places == n and {a.status for a in assignments} == {"approved"}
        assert {a.provider_assignment_id for a in assignments} == set(fake.submissions)
        assert s.scalar(select(func.sum(Payment.amount)).where(Payment.kind == "reward")) == Decimal("0.50") * n
    assert fake.studies[sid]["status"] == "COMPLETED"


def test_provider_calls_are_never_made_while_the_scheduler_or_sync_hold_a_write_transaction(
    tmp_path, fake, monkeypatch
):
    """On SQLite a write transaction locks the file: the fake tries to write at every call and must never wait."""
    url = f"sqlite:///{tmp_path / 'locks.db'}"
    from hitkit.db.migrate import upgrade

    upgrade(url)
    probe = create_engine(url, connect_args={"timeout": 0.2})
    locked: list[str] = []
    probing = threading.Event()
    probing.set()
    answer = fake._answer

    def answer_and_probe(request):
        if not probing.is_set():
            return answer(request)
        try:
            with probe.begin() as conn:
                conn.execute(text("CREATE TABLE IF NOT EXISTS probe (x INTEGER)"))
                conn.execute(text("INSERT INTO probe VALUES (1)"))
        except Exception as exc:  # noqa: BLE001 - "database is locked": a transaction was open
            locked.append(f"{request.method} {request.path}: {exc}")
        return answer(request)

    monkeypatch.setattr(fake, "_answer", answer_and_probe)
    web, config, secret = launch_on(tmp_path, url, fake, prolific={"complete_after_s": 0})
    try:
        [sid] = fake.studies
        probing.clear()  # the worker pages' own transactions are the flow's, not the scheduler's or sync's
        for name in ("lock-a", "lock-b"):
            session_id = fake.start_session(pid(name), sid)
            take_and_submit(web.url, pid(name), sid, session_id)
            fake.complete(session_id, code_of(config, secret))
        probing.set()
        tick(url, config.study, web.url)
        from hitkit.money.bonuses import grant_bonus

        with session_scope(url) as s:
            first = s.scalar(select(Assignment.id).order_by(Assignment.id).limit(1))
        grant_bonus(url, config.study, first, Decimal("0.30"), "thanks")
        sync_study(url, config.study, bonus_min_age_s=0)
        assert len(fake.requests) > 10 and locked == []
    finally:
        web.stop()
        probe.dispose()


def test_refusing_to_post_is_reported_by_launch_with_the_fix(tmp_path, database_url, fake):
    fake.workspace["currency_code"] = "USD"
    path = pairwise_study(
        tmp_path,
        database_url,
        provider={"kind": "prolific", "currency": "GBP", "prolific": {"api_url": fake.url, **PROLIFIC}},
        schedule={"interval_s": 0.2},
    )
    result = CliRunner().invoke(main, ["launch", str(path), "--yes", "--no-progress", "--timeout", "60"])
    assert result.exit_code != 0
    assert "prolific refused to post the study" in result.output and "set provider.currency to USD" in result.output
    assert "hitkit resume" in result.output and "Traceback" not in result.output


def test_pause_and_resume_work_for_every_provider_including_the_simulated_crowd(tmp_path, database_url):
    config = load_study(pairwise_study(tmp_path, database_url, schedule={"wave_size": 2}))
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    assert tick(database_url, config.study, "http://workers.example").posted == 2
    pause_study(database_url, config.study)
    assert tick(database_url, config.study, "http://workers.example").posted == 0  # no new work while paused
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "paused"
    resume_study(database_url, config.study)
    assert tick(database_url, config.study, "http://workers.example").posted == 2  # the next wave goes out
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "running"
        kinds = [e.kind for e in s.scalars(select(Event).where(Event.actor == "cli").order_by(Event.id))]
        assert kinds[-3:] == ["study_paused", "study_resumed", "posting_resumed"]
