"""The Prolific provider against a local fake of Prolific's REST API v1, over real HTTP both ways."""
from __future__ import annotations

from decimal import Decimal

import pytest
import requests
from sqlalchemy import func, select

from hitkit.config import load_study
from hitkit.db.models import Assignment, Event, Hit, Payment, Study, Worker
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.launch import WebServer
from hitkit.providers import prolific as prolific_module
from hitkit.providers.prolific import ProlificError, ProlificProvider
from hitkit.scheduler import tick
from hitkit.study import StudyContext, create_study, resolve_secret
from tests.fakes.prolific import TOKEN, FakeProlificServer
from tests.studies import pairwise_study

GROUP = "blockgrp01"


@pytest.fixture
def fake():
    with FakeProlificServer() as server:
        yield server


@pytest.fixture
def study(tmp_path, database_url, fake, monkeypatch):
    """The example A/B study on Prolific (the fake), running, its first wave posted, pages served."""
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    monkeypatch.setattr(prolific_module.time, "sleep", lambda s: None)
    prolific = {"api_url": fake.url, "project": "proj42", "estimated_minutes": 12,
                "device_compatibility": ["desktop", "tablet"], "blocklist_group": GROUP,
                "filters": [{"filter_id": "approval_rate", "selected_range": {"lower": 95}}]}
    config = load_study(pairwise_study(tmp_path, database_url, provider={
        "kind": "prolific", "currency": "GBP", "fee_rate": "0.333", "prolific": prolific},
        schedule={"approve_after_s": 0}))
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    tick(database_url, config.study, web.url)
    yield web.url, database_url, secret, config
    web.stop()


def provider(config, secret) -> ProlificProvider:
    return ProlificProvider(config, secret)


def enter(base: str, pid: str, study_id: str, session_id: str, **kw) -> requests.Response:
    return requests.get(f"{base}/s/ab-demo/enter",
                        params={"PROLIFIC_PID": pid, "STUDY_ID": study_id, "SESSION_ID": session_id}, **kw)


def take_and_submit(base: str, pid: str, study_id: str, session_id: str) -> requests.Response:
    """Arrive from Prolific, consent, answer every question, submit; the submit response, not followed."""
    http = requests.Session()
    page = enter(base, pid, study_id, session_id)
    assert page.status_code == 200, page.text
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    for unit in http.get(task + "state").json()["units"]:
        for q in unit["questions"]:
            assert http.post(task + "answer", json={"unit_id": unit["unit_id"], "question": q["name"],
                                                    "value": "a"}).status_code == 200
    return http.post(task + "submit", allow_redirects=False)


def test_first_post_creates_and_publishes_the_study_and_later_posts_set_its_places(study, fake):
    base, url, secret, config = study
    [created] = fake.calls("POST", "/studies/")
    body = created.body
    assert created.authorization == f"Token {TOKEN}"
    assert body["external_study_url"] == (f"{base}/s/ab-demo/enter?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}"
                                          f"&STUDY_ID={{{{%STUDY_ID%}}}}&SESSION_ID={{{{%SESSION_ID%}}}}")
    assert body["reward"] == 50 and body["currency"] == "GBP"
    assert body["name"] == "Which chatbot reply is better?" and body["internal_name"] == "hitkit:ab-demo"
    assert body["estimated_completion_time"] == 12 and body["device_compatibility"] == ["desktop", "tablet"]
    assert body["project"] == "proj42" and body["prolific_id_option"] == "url_parameters"
    code = provider(config, secret).completion_code()
    assert body["completion_codes"] == [{"code": code, "code_type": "COMPLETED",
                                         "actions": [{"action": "MANUALLY_REVIEW"}]}]
    assert body["filters"] == [{"filter_id": "approval_rate", "selected_range": {"lower": 95}},
                               {"filter_id": "participant_group_blocklist", "selected_values": [GROUP]}]
    [sid] = fake.studies
    assert fake.calls("POST", f"/studies/{sid}/transition/")[0].body == {"action": "PUBLISH"}
    with session_scope(url) as s:
        hits = s.scalars(select(Hit).where(Hit.status == "posted").order_by(Hit.index)).all()
        places = sum(h.max_assignments for h in hits)
        assert len(hits) == 4 and all(h.provider_hit_id.startswith(f"{sid}:") for h in hits)
        assert body["total_available_places"] == hits[0].max_assignments
    assert fake.studies[sid]["status"] == "ACTIVE" and fake.studies[sid]["total_available_places"] == places
    # Posting a HIT key again (a retry after a lost commit) sets the same total: nothing grows.
    before = len(fake.requests)
    with session_scope(url) as s:
        ctx = StudyContext.load(s, "ab-demo", secret)
        again = ctx.provider.post_hit("ab-demo-1", f"{base}/s/ab-demo/hit/2", Decimal("0.50"), 3, 3600)
    assert again.provider_hit_id == f"{sid}:ab-demo-1"
    assert fake.studies[sid]["total_available_places"] == places
    assert fake.calls("PATCH", f"/studies/{sid}/")[-1:] and len(fake.calls("POST", "/studies/")) == 1
    assert not [r for r in fake.requests[before:] if r.method == "PATCH"]
    # Every call is in the audit log, and the token never is.
    with session_scope(url) as s:
        logged = s.scalars(select(Event).where(Event.kind == "prolific_call")).all()
        assert len(logged) == len(fake.requests)
        assert TOKEN not in repr([e.data for e in s.scalars(select(Event))])
    # A Prolific study has one reward: a HIT paying another amount cannot join it.
    with pytest.raises(ProlificError, match="same hit.reward"), session_scope(url) as s:
        StudyContext.load(s, "ab-demo", secret).provider.post_hit(
            "ab-demo-99", f"{base}/s/ab-demo/hit/99", Decimal("0.75"), 3, 3600)
    assert fake.studies[sid]["total_available_places"] == places


def test_a_genuine_session_gets_an_assignment_bound_to_it_and_submit_redirects_with_the_code(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    session_id = fake.start_session("PID-1", sid)
    submitted = take_and_submit(base, "PID-1", sid, session_id)
    code = provider(config, secret).completion_code()
    assert submitted.status_code == 302
    assert submitted.headers["Location"] == f"https://app.prolific.com/submissions/complete?cc={code}"
    with session_scope(url) as s:
        a = s.scalar(select(Assignment))
        assert a.provider_assignment_id == session_id and a.status == "submitted"
        assert a.worker.external_id == "PID-1" and a.worker.provider == "prolific"
    # One Prolific session is one HIT: coming back after submitting opens no second HIT.
    again = enter(base, "PID-1", sid, session_id)
    assert again.status_code == 409 and f"cc={code}" in again.text
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Assignment)) == 1


def test_forged_foreign_or_inactive_sessions_are_refused_and_store_nothing(study, fake):
    base, url, _, _ = study
    [sid] = fake.studies
    other = fake._create_study({"name": "x", "description": "x", "external_study_url": "x",
                                "total_available_places": 1, "reward": 1, "estimated_completion_time": 1,
                                "completion_codes": []}).get_json()["id"]
    mine = fake.start_session("PID-2", sid)
    foreign_study = fake.start_session("PID-2", other)
    done = fake.start_session("PID-2", sid)
    fake.complete(done, "X")
    cases = [("PID-2", sid, "made-up-session"),   # no such submission
             ("PID-9", sid, mine),                # someone else's session
             ("PID-2", other, foreign_study),     # a session of another study
             ("PID-2", sid, foreign_study),       # study id swapped in the link
             ("PID-2", sid, done)]                # no longer active
    for pid, study_id, session_id in cases:
        refused = enter(base, pid, study_id, session_id)
        assert refused.status_code == 403, (pid, study_id, session_id)
    partial = requests.get(f"{base}/s/ab-demo/enter", params={"PROLIFIC_PID": "PID-2"})
    assert partial.status_code == 403
    # Without Prolific's ids the link is a read-only preview.
    preview = requests.get(f"{base}/s/ab-demo/enter")
    assert preview.status_code == 200 and "Preview" in preview.text
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Assignment)) == 0
        assert s.scalar(select(func.count()).select_from(Worker)) == 0


def test_the_scheduler_approves_submitted_work_on_prolific_and_records_reward_and_fee(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    session_id = fake.start_session("PID-3", sid)
    take_and_submit(base, "PID-3", sid, session_id)
    fake.complete(session_id, provider(config, secret).completion_code())
    assert tick(url, "ab-demo", base).approved == 1
    assert fake.submissions[session_id]["status"] == "APPROVED"
    assert fake.calls("POST", f"/submissions/{session_id}/transition/")[0].body == {"action": "APPROVE"}
    with session_scope(url) as s:
        assert s.scalar(select(Assignment.status)) == "approved"
        ledger = {p.kind: (p.amount, p.status, p.currency) for p in s.scalars(select(Payment))}
        assert ledger == {"reward": (Decimal("0.50"), "paid", "GBP"), "fee": (Decimal("0.17"), "paid", "GBP")}
    assert provider(config, secret).sync_submissions() == [(session_id, "APPROVED")]
    # Approving again (a tick retried after a lost commit) is not an error; approving work Prolific
    # still holds open is, with the submission's state in the message.
    provider(config, secret).approve(session_id)
    active = fake.start_session("PID-3b", sid)
    with pytest.raises(ProlificError, match="the submission is ACTIVE"):
        provider(config, secret).approve(active)


def test_reject_and_bulk_approve_speak_prolifics_protocol(study, fake):
    _, _, secret, config = study
    [sid] = fake.studies
    p = provider(config, secret)
    a, b, c = (fake.start_session(f"PID-{i}", sid) for i in "abc")
    for x in (a, b, c):
        fake.complete(x, p.completion_code())
    with pytest.raises(ProlificError, match="at least 100 characters"):
        p.reject(a, "too fast")
    reason = ("Your answers were given faster than the texts can be read, and they did not match the two "
              "attention checks in this task.")
    assert len(reason) >= 100
    p.reject(a, reason, "FAILED_CHECK")
    assert fake.calls("POST", f"/submissions/{a}/transition/")[-1].body == {
        "action": "REJECT", "message": reason, "rejection_category": "FAILED_CHECK"}
    p.approve_many([b, c])
    assert fake.calls("POST", "/submissions/bulk-approve/")[0].body == {"study_id": sid, "submission_ids": [b, c]}
    assert sorted(p.sync_submissions()) == sorted([(a, "REJECTED"), (b, "APPROVED"), (c, "APPROVED")])


def test_a_bonus_is_paid_exactly_once_even_when_paying_fails_between_create_and_pay(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    session_id = fake.start_session("PID-4", sid)
    take_and_submit(base, "PID-4", sid, session_id)
    p = provider(config, secret)
    fake.fail_next(r"POST /bulk-bonus-payments/.*/pay/", 503)
    with pytest.raises(ProlificError, match="HTTP 503"):
        p.pay_bonus("PID-4", session_id, Decimal("1.25"), "well done", "bonus:ab-demo:PID-4")
    [created] = fake.calls("POST", "/submissions/bonus-payments/")
    assert created.body == {"study_id": sid, "csv_bonuses": "PID-4,1.25\n"}
    [bonus_id] = fake.bonuses
    assert fake.paid == []
    with session_scope(url) as s:
        row = s.scalar(select(Payment).where(Payment.idempotency_key == "bonus:ab-demo:PID-4"))
        assert (row.status, row.provider_ref, row.amount) == ("pending", bonus_id, Decimal("1.25"))
    # The retry pays the bonus already created; later retries call nothing.
    assert p.pay_bonus("PID-4", session_id, Decimal("1.25"), "well done", "bonus:ab-demo:PID-4") == bonus_id
    assert p.pay_bonus("PID-4", session_id, Decimal("1.25"), "well done", "bonus:ab-demo:PID-4") == bonus_id
    assert fake.paid == [bonus_id] and len(fake.bonuses) == 1
    assert len(fake.calls("POST", "/submissions/bonus-payments/")) == 1
    with session_scope(url) as s:
        ledger = {p.kind: (p.amount, p.status) for p in s.scalars(select(Payment).where(Payment.kind.like("bonus%")))}
        assert ledger == {"bonus": (Decimal("1.25"), "paid"), "bonus_fee": (Decimal("0.42"), "paid")}


def test_a_pay_call_without_an_answer_is_never_retried_blindly(study, fake, monkeypatch):
    base, url, secret, config = study
    [sid] = fake.studies
    session_id = fake.start_session("PID-5", sid)
    take_and_submit(base, "PID-5", sid, session_id)
    p = provider(config, secret)
    real = p._http.request

    def drop_pay(method, url_, **kw):
        if url_.endswith("/pay/"):
            real(method, url_, **kw)  # Prolific received it and paid, but the answer was lost
            raise requests.ConnectionError("connection reset")
        return real(method, url_, **kw)

    monkeypatch.setattr(p._http, "request", drop_pay)
    with pytest.raises(ProlificError, match="did not answer"):
        p.pay_bonus("PID-5", session_id, Decimal("2.00"), "r", "bonus:ab-demo:PID-5")
    with pytest.raises(ProlificError, match="will not risk paying twice"):
        p.pay_bonus("PID-5", session_id, Decimal("2.00"), "r", "bonus:ab-demo:PID-5")
    assert len(fake.paid) == 1
    with session_scope(url) as s:
        assert s.scalar(select(Payment.status).where(Payment.idempotency_key == "bonus:ab-demo:PID-5")) == "paying"
    # The same key for a different amount is a caller's mistake, said as such.
    with pytest.raises(ProlificError, match="give every distinct bonus its own idempotency key"):
        p.pay_bonus("PID-5", session_id, Decimal("3.00"), "r", "bonus:ab-demo:PID-5")


def test_throttled_calls_back_off_as_told_and_give_up_after_bounded_retries(study, fake, monkeypatch):
    _, _, secret, config = study
    waits: list[float] = []
    monkeypatch.setattr(prolific_module.time, "sleep", waits.append)
    p = provider(config, secret)
    fake.throttle(2, retry_after="3")
    before = len(fake.requests)
    assert p.sync_submissions() == []
    assert waits == [3.0, 3.0] and len(fake.requests) - before == 3
    fake.throttle(prolific_module.MAX_RETRIES + 1, retry_after="1000")
    with pytest.raises(ProlificError, match="HTTP 429"):
        p.sync_submissions()
    assert waits[2:] == [prolific_module.MAX_WAIT_S] * prolific_module.MAX_RETRIES


def test_a_missing_token_is_a_clear_error(study, monkeypatch):
    _, _, secret, config = study
    monkeypatch.delenv("PROLIFIC_TOKEN")
    with pytest.raises(ConfigError, match="PROLIFIC_TOKEN, which is not set"):
        provider(config, secret).sync_submissions()


@pytest.fixture
def capped(tmp_path, database_url, fake, monkeypatch):
    """An A/B study on Prolific with a cap of one HIT and a blocklist group, its first wave posted:
    (config, secret, web server, Prolific study id)."""
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    prolific = {"api_url": fake.url, "blocklist_group": GROUP}
    config = load_study(pairwise_study(tmp_path, database_url, schedule={"per_worker_cap": 1},
                                       provider={"kind": "prolific", "prolific": prolific}))
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    try:
        tick(database_url, config.study, web.url)
        [sid] = fake.studies
        yield config, secret, web, sid
    finally:
        web.stop()


def test_a_participant_at_the_cap_joins_the_blocklist_group_once(database_url, fake, capped):
    config, secret, web, sid = capped
    take_and_submit(web.url, "PID-cap", sid, fake.start_session("PID-cap", sid))
    assert fake.groups == {GROUP: ["PID-cap"]}
    assert fake.calls("POST", f"/participant-groups/{GROUP}/participants/")[0].body == {
        "participant_ids": ["PID-cap"]}
    # Handing back the same submission again does not add the participant again.
    with session_scope(database_url) as s:
        session_id = s.scalar(select(Assignment.provider_assignment_id))
    ProlificProvider(config, secret).completion(session_id, {})
    assert len(fake.calls("POST", f"/participant-groups/{GROUP}/participants/")) == 1


def test_a_wave_posted_before_a_lost_commit_is_not_posted_twice(tmp_path, database_url, fake, monkeypatch):
    from hitkit.db.models import utcnow
    from hitkit.scheduler import post_wave

    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    config = load_study(pairwise_study(tmp_path, database_url, provider={
        "kind": "prolific", "prolific": {"api_url": fake.url}}))
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    # The scheduler posts a wave, then dies before its transaction commits: hitkit remembers nothing.
    with pytest.raises(RuntimeError), session_scope(database_url) as s:
        ctx = StudyContext.load(s, config.study, secret)
        assert post_wave(s, ctx, utcnow(), "http://workers.example") == 4
        raise RuntimeError("kill -9")
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Event).where(Event.kind.like("prolific_%"))) == 0
    [sid] = fake.studies
    places = fake.studies[sid]["total_available_places"]
    tick(database_url, config.study, "http://workers.example")
    assert list(fake.studies) == [sid] and fake.studies[sid]["total_available_places"] == places
    assert len(fake.calls("POST", "/studies/")) == 1
    with session_scope(database_url) as s:
        posted = s.scalars(select(Hit).where(Hit.status == "posted")).all()
        assert len(posted) == 4 and sum(h.max_assignments for h in posted) == places


def test_the_study_stops_when_no_package_is_left_and_restarts_when_extended(study, fake):
    _, url, secret, config = study
    [sid] = fake.studies
    p = provider(config, secret)
    with session_scope(url) as s:
        hits = s.scalars(select(Hit).order_by(Hit.index)).all()
        for h in hits[1:]:
            h.status = "completed"
        first = hits[0].provider_hit_id
    p.expire_hit(first)
    assert fake.studies[sid]["status"] == "ACTIVE"  # a package is still open
    p.pause()
    assert fake.studies[sid]["status"] == "PAUSED"
    p.extend_hit(first, 2, 3600)
    assert fake.studies[sid]["status"] == "ACTIVE"
    with session_scope(url) as s:
        total = sum(h.max_assignments for h in s.scalars(select(Hit).where(Hit.provider_hit_id.is_not(None))))
        s.scalar(select(Hit).order_by(Hit.index).limit(1)).status = "completed"
    assert fake.studies[sid]["total_available_places"] == total + 2
    p.expire_hit(first)
    assert fake.studies[sid]["status"] == "COMPLETED"
    assert fake.calls("POST", f"/studies/{sid}/transition/")[-1].body == {"action": "STOP"}


def test_a_whole_study_runs_end_to_end_with_participants_arriving_from_prolific(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    code = provider(config, secret).completion_code()
    n = 0
    for _ in range(50):
        with session_scope(url) as s:
            if s.scalar(select(Study.status)) == "completed":
                break
        # Everyone Prolific lets in (the study's open places) takes part, one HIT per session.
        taken = sum(1 for sub in fake.submissions.values() if sub["status"] != "RETURNED")
        for _ in range(fake.studies[sid]["total_available_places"] - taken):
            n += 1
            session_id = fake.start_session(f"PID-e2e-{n}", sid)
            submitted = take_and_submit(base, f"PID-e2e-{n}", sid, session_id)
            assert submitted.headers["Location"].endswith(f"cc={code}")
            fake.complete(session_id, code)
        tick(url, "ab-demo", base)
    with session_scope(url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        assignments = s.scalars(select(Assignment)).all()
        places = sum(h.max_assignments for h in s.scalars(select(Hit)))
        assert len(assignments) == places == n and {a.status for a in assignments} == {"approved"}
        assert {a.provider_assignment_id for a in assignments} == set(fake.submissions)
        rewards = s.scalar(select(func.sum(Payment.amount)).where(Payment.kind == "reward"))
        assert rewards == Decimal("0.50") * n
    assert fake.studies[sid]["status"] == "COMPLETED"
    assert {status for _, status in provider(config, secret).sync_submissions()} == {"APPROVED"}


def test_a_failed_blocklist_call_does_not_fail_the_hand_back_and_the_scheduler_retries_it(
        database_url, fake, capped):
    config, _, web, sid = capped
    fake.fail_next(rf"POST /participant-groups/{GROUP}/participants/", 503)
    submitted = take_and_submit(web.url, "PID-cap", sid, fake.start_session("PID-cap", sid))
    assert submitted.status_code == 302  # handed back to Prolific all the same
    assert fake.groups == {}
    assert tick(database_url, config.study, web.url).capped == 1
    tick(database_url, config.study, web.url)
    assert fake.groups == {GROUP: ["PID-cap"]}
    assert len(fake.calls("POST", f"/participant-groups/{GROUP}/participants/")) == 2  # the failure, the retry


def test_work_still_active_on_prolific_waits_quietly_and_is_approved_once_it_awaits_review(study, fake):
    base, url, secret, config = study
    [sid] = fake.studies
    session_id = fake.start_session("PID-wait", sid)
    take_and_submit(base, "PID-wait", sid, session_id)  # the participant never reached Prolific's page yet
    for _ in range(2):
        report = tick(url, "ab-demo", base)
        assert (report.approved, report.approve_failed) == (0, 0)
    assert fake.calls("POST", f"/submissions/{session_id}/transition/") == []
    fake.complete(session_id, provider(config, secret).completion_code())
    assert tick(url, "ab-demo", base).approved == 1
    assert fake.submissions[session_id]["status"] == "APPROVED"
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Event).where(Event.kind == "approve_failed")) == 0
