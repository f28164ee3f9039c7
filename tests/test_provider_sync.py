"""Whole studies on MTurk and Prolific (through their fakes) and ``hitkit sync`` putting the database in step.

Each whole-study test runs the example A/B study with the simulated crowd's workers arriving as the
marketplace sends them, the scheduler ticking between rounds, then a bonus for every approved
assignment (each asked for twice): every submission is approved once, every bonus paid once, and
no worker does more than the cap, on the provider's own books as much as in the database.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from decimal import Decimal

import pytest
import requests
from click.testing import CliRunner
from sqlalchemy import func, select

from hitkit.cli import main
from hitkit.db.models import Assignment, Event, Hit, Payment, Study, Worker, utcnow
from hitkit.db.session import session_scope
from hitkit.money.bonuses import grant_bonus
from hitkit.providers.base import ProviderWork, WorkStatus
from hitkit.providers.mturk import MTurkProvider
from hitkit.providers.prolific import client as prolific_api
from hitkit.providers.prolific.provider import ProlificProvider
from hitkit.running.scheduler import tick
from hitkit.running.sync import decide, sync_study
from hitkit.simulation.crowd import SimWorker, crowd_from_config
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext, create_study, resolve_secret
from hitkit.worker.admission import open_hits
from server.embedded import WebServer
from tests.fakes.crowd import run_rounds, take_hit
from tests.fakes.mturk import FakeMTurk, dummy_aws
from tests.fakes.prolific import TOKEN, FakeProlificServer, Refused
from tests.studies import pairwise_study

PUBLIC = "https://tasks.example.org"
SANDBOX = "https://workersandbox.mturk.com"
GROUP = "capgroup1"
BONUS = Decimal("0.10")


@pytest.fixture(autouse=True)
def _quick(monkeypatch, tmp_path):
    dummy_aws(monkeypatch, tmp_path)
    monkeypatch.setattr(MTurkProvider, "service_fault_backoff_s", 0)
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)


@pytest.fixture
def mturk():
    fake = FakeMTurk().start()
    yield fake
    fake.stop()


@pytest.fixture
def prolific():
    with FakeProlificServer() as fake:
        yield fake


def on_prolific(fake, **settings) -> dict:
    """``provider:`` for the fake Prolific: its workspace pays in GBP; 0.50 for 2 minutes meets the hourly minimum."""
    return {
        "kind": "prolific",
        "currency": "GBP",
        "prolific": {"api_url": fake.url, "estimated_minutes": 2, **settings},
    }


def prolific_pid(name: str) -> str:
    """A Prolific-shaped participant id (24 hex characters) for a simulated worker's name."""
    import hashlib

    return hashlib.sha256(name.encode()).hexdigest()[:24]


def start(tmp_path, database_url, provider: dict, approve_after_s: float = 0, **schedule):
    """The example A/B study on ``provider``, running, pages served; (web, config, secret)."""
    config = load_study(
        pairwise_study(
            tmp_path, database_url, provider=provider, schedule={"approve_after_s": approve_after_s, **schedule}
        )
    )
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    return WebServer(database_url, "127.0.0.1", 0, 8, secret).start(), config, secret


def context(database_url: str, secret: str):
    with session_scope(database_url) as s:
        ctx = StudyContext.load(s, "ab-demo", secret)
        return ctx, ctx.task.simulation_context(s, s.get(Study, ctx.study_id))


def completed(database_url: str) -> bool:
    with session_scope(database_url) as s:
        return s.scalar(select(Study.status)) == "completed"


def bonus_everyone(database_url: str) -> list[int]:
    """A bonus for every approved assignment, each asked for twice (the second is a retry)."""
    with session_scope(database_url) as s:
        ids = list(s.scalars(select(Assignment.id).where(Assignment.status == "approved").order_by(Assignment.id)))
    for _ in range(2):
        for a in ids:
            grant_bonus(database_url, "ab-demo", a, BONUS, "Thank you for careful answers")
    return ids


def assert_ledger_once(database_url: str, approved: int) -> None:
    with session_scope(database_url) as s:
        rows = s.scalars(select(Payment)).all()
        kinds = Counter(p.kind for p in rows)
        assert kinds == {"reward": approved, "fee": approved, "bonus": approved, "bonus_fee": approved}
        assert {p.status for p in rows} == {"paid"}
        per_assignment = Counter((p.assignment_id, p.kind) for p in rows)
        assert set(per_assignment.values()) == {1}


def assert_cap(database_url: str, cap: int) -> set[str]:
    """No worker did more than the cap; the workers at the cap."""
    with session_scope(database_url) as s:
        counts = dict(
            s.execute(
                select(Worker.external_id, func.count(Assignment.id))
                .join(Assignment, Assignment.worker_id == Worker.id)
                .group_by(Worker.external_id)
            ).all()
        )
    assert counts and max(counts.values()) <= cap
    return {w for w, n in counts.items() if n == cap}


def test_a_whole_study_on_mturk_pays_every_reward_and_bonus_once_and_holds_the_cap(tmp_path, one_database_url, mturk):
    database_url = one_database_url  # one store: what this test checks is not storage
    web, config, secret = start(tmp_path, database_url, {"kind": "mturk", "mturk": {"endpoint_url": mturk.url}})
    try:
        ctx, sim = context(database_url, secret)
        # MTurk worker ids have MTurk's shape (botocore: ^A[A-Z0-9]+$), which the fake enforces.
        workers = [
            SimWorker("A" + re.sub(r"[^A-Z0-9]", "", w.worker_id.upper()), w.profile) for w in crowd_from_config(config)
        ]
        refused_by_mturk: set[str] = set()

        def one_round() -> int:
            n = 0
            for w in workers:
                with session_scope(database_url) as s:
                    row = s.scalar(select(Worker).where(Worker.external_id == w.worker_id))
                    hits = open_hits(s, ctx.study_id, row, utcnow(), ctx.task)
                    if not hits:
                        continue
                    hit_id, provider_hit_id = hits[0].id, hits[0].provider_hit_id
                try:
                    aid = mturk.accept_assignment(provider_hit_id, w.worker_id)
                except PermissionError:  # the cap qualification hides the HIT from this worker
                    refused_by_mturk.add(w.worker_id)
                    continue
                done = take_hit(
                    ctx,
                    sim,
                    w,
                    f"{web.url}/s/ab-demo/hit/{hit_id}",
                    {"workerId": w.worker_id, "assignmentId": aid, "hitId": provider_hit_id, "turkSubmitTo": SANDBOX},
                )
                assert done is not None, f"{w.worker_id} was refused by hitkit after MTurk let them in"
                mturk.external_submit(aid)
                n += 1
            return n

        taken = run_rounds(
            40, one_round, lambda: tick(database_url, "ab-demo", PUBLIC), lambda: completed(database_url)
        )
        assert completed(database_url)
        ids = bonus_everyone(database_url)
    finally:
        web.stop()
    places = 10 * 3
    assert taken == places == len(ids) == len(mturk.assignments)
    assert {a["AssignmentStatus"] for a in mturk.assignments.values()} == {"Approved"}
    approvals = Counter(b["AssignmentId"] for b in mturk.calls("ApproveAssignment"))
    assert set(approvals.values()) == {1} and len(approvals) == places
    assert sorted(b["AssignmentId"] for b in mturk.bonuses) == sorted(mturk.assignments)
    assert {b["BonusAmount"] for b in mturk.bonuses} == {"0.10"}
    assert_ledger_once(database_url, places)
    at_cap = assert_cap(database_url, config.schedule.per_worker_cap)
    # MTurk's own books: no worker over the cap, and every worker at the cap holds the qualification, once.
    assert max(Counter(a["WorkerId"] for a in mturk.assignments.values()).values()) <= config.schedule.per_worker_cap
    granted = Counter(q["WorkerId"] for q in mturk.worker_qualifications)
    assert set(granted) == at_cap and set(granted.values()) == {1}
    assert all(q["SendNotification"] is False and q["IntegerValue"] == 1 for q in mturk.worker_qualifications)
    assert refused_by_mturk <= at_cap
    # Everything is in step: a sync finds nothing to do.
    report = sync_study(database_url, "ab-demo")
    assert (report.approved, report.marked, report.mismatches, report.bonuses_paid) == ([], [], [], [])
    assert report.checked == places


def test_a_whole_study_on_prolific_pays_every_reward_and_bonus_once_and_holds_the_cap(tmp_path, database_url, prolific):
    group = prolific.make_group()
    web, config, secret = start(tmp_path, database_url, on_prolific(prolific, blocklist_group=group))
    try:
        ctx, sim = context(database_url, secret)
        code = ProlificProvider(config, secret).completion_code()
        workers = crowd_from_config(config)

        def one_round() -> int:
            if not prolific.studies:
                return 0
            [sid] = prolific.studies
            n = 0
            for w in workers:
                participant = prolific_pid(w.worker_id)
                try:  # Prolific decides who may start: places, the blocklist, one live session each
                    session_id = prolific.start_session(participant, sid)
                except Refused:
                    continue
                done = take_hit(
                    ctx,
                    sim,
                    w,
                    f"{web.url}/s/ab-demo/enter",
                    {"PROLIFIC_PID": participant, "STUDY_ID": sid, "SESSION_ID": session_id},
                )
                if done is None:  # no package left for this participant right now: they return the place
                    prolific.return_session(session_id)
                    continue
                assert done.headers["Location"].endswith(f"cc={code}")
                prolific.complete(session_id, code)
                n += 1
            return n

        taken = run_rounds(
            40, one_round, lambda: tick(database_url, "ab-demo", web.url), lambda: completed(database_url)
        )
        assert completed(database_url)
        ids = bonus_everyone(database_url)
    finally:
        web.stop()
    places = 10 * 3
    assert taken == places == len(ids)
    done = [s for s in prolific.submissions.values() if s["status"] != "RETURNED"]
    assert len(done) == places and {s["status"] for s in done} == {"APPROVED"}
    approvals = Counter(
        r.path
        for r in prolific.requests
        if r.method == "POST" and r.path.endswith("/transition/") and r.path.startswith("/submissions/")
    )
    assert set(approvals.values()) == {1} and len(approvals) == places
    # Prolific's own record of payments: one paid bulk bonus per approved submission, keyed by submission.
    assert len(prolific.paid) == len(set(prolific.paid)) == places
    paid_to = Counter(prolific.bonuses[b]["rows"][0][0] for b in prolific.paid)
    assert set(paid_to) == {s["id"] for s in done} and set(paid_to.values()) == {1}
    assert_ledger_once(database_url, places)
    at_cap = assert_cap(database_url, config.schedule.per_worker_cap)
    assert set(prolific.groups[group]) == at_cap
    assert len(prolific.calls("POST", f"/participant-groups/{group}/participants/")) == len(at_cap)
    # Prolific's own books: no participant has more submissions than max_submissions_per_participant.
    per_participant = Counter(s["participant"] for s in done)
    assert max(per_participant.values()) <= config.schedule.per_worker_cap
    report = sync_study(database_url, "ab-demo")
    assert (report.approved, report.marked, report.mismatches, report.bonuses_paid) == ([], [], [], [])
    assert prolific.violations == []


# The reconciliation policy ------------------------------------------------------------------------
def work(status: WorkStatus, worker: str = "W1") -> ProviderWork:
    return ProviderWork("A1", worker, status)


@pytest.mark.parametrize(
    "ours, theirs, action",
    [
        (("submitted", "W1"), work(WorkStatus.SUBMITTED), "approve"),
        (("approved", "W1"), work(WorkStatus.SUBMITTED), "approve"),  # approved here, the approve call was lost
        (("accepted", "W1"), work(WorkStatus.SUBMITTED), "mismatch:submitted on the provider but accepted in hitkit"),
        (
            ("submitted", "W2"),
            work(WorkStatus.SUBMITTED),
            "mismatch:the provider records another worker on this assignment",
        ),
        ((None, None), work(WorkStatus.SUBMITTED), "mismatch:the provider holds work hitkit has no record of"),
        (("submitted", "W1"), None, "mismatch:not submitted on the provider"),
        (("submitted", "W1"), work(WorkStatus.APPROVED), "mark_approved"),
        (("approved", "W1"), work(WorkStatus.APPROVED), "none"),
        (("submitted", "W1"), work(WorkStatus.REJECTED), "mark_rejected"),
        (("accepted", "W1"), work(WorkStatus.APPROVED), "mismatch:approved on the provider but accepted in hitkit"),
        (("accepted", "W1"), work(WorkStatus.WORKING), "none"),
        (("submitted", "W1"), work(WorkStatus.WORKING), "none"),  # not handed in yet: the scheduler does it in time
        (("accepted", "W1"), work(WorkStatus.RETURNED), "mark_returned"),  # returned or timed out: the place is free
        (("submitted", "W1"), work(WorkStatus.RETURNED), "mismatch:completed in hitkit but returned on the provider"),
        (("expired", "W1"), None, "none"),
    ],
)
def test_sync_approves_only_work_both_sides_agree_on(ours, theirs, action):
    assert decide(ours[0], ours[1], theirs) == action


# Sync against the fakes ---------------------------------------------------------------------------
def _arrive_and_submit(web_url: str, hit_id: int, params: dict) -> None:
    http = requests.Session()
    page = http.get(f"{web_url}/s/ab-demo/hit/{hit_id}", params=params)
    assert page.status_code == 200, page.text
    task = page.url.split("?")[0]
    http.post(task + "consent").raise_for_status()
    for unit in http.get(task + "state").json()["units"]:
        for q in unit["questions"]:
            http.post(
                task + "answer", json={"unit_id": unit["unit_id"], "question": q["name"], "value": "a"}
            ).raise_for_status()
    http.post(task + "submit").raise_for_status()


def test_sync_on_mturk_approves_what_both_agree_on_takes_over_decisions_and_reports_the_rest(
    tmp_path, database_url, mturk
):
    # The scheduler ticks once, before any work is in: sync alone decides here (no review window).
    web, _, _ = start(
        tmp_path, database_url, {"kind": "mturk", "mturk": {"endpoint_url": mturk.url}}, approve_after_s=0
    )
    try:
        tick(database_url, "ab-demo", PUBLIC)
        mturk.page_limit = 1  # every listing comes one assignment a page: sync must follow NextToken
        with session_scope(database_url) as s:
            hit = s.scalar(select(Hit).where(Hit.index == 0))
            hit.max_assignments = 10  # room for the whole cast, here and on MTurk
            hit_id, phid = hit.id, hit.provider_hit_id
        mturk.hits[phid]["MaxAssignments"] = mturk.hits[phid]["NumberOfAssignmentsAvailable"] = 10
        good, auto, rejected, forged, early, half = (
            mturk.accept_assignment(phid, w) for w in ("W-good", "W-auto", "W-rej", "W-victim", "W-early", "W-half")
        )
        # W-half opens the HIT in hitkit but never finishes it there; MTurk approves it all the same.
        assert (
            requests.get(
                f"{web.url}/s/ab-demo/hit/{hit_id}",
                params={"workerId": "W-half", "assignmentId": half, "hitId": phid, "turkSubmitTo": SANDBOX},
            ).status_code
            == 200
        )
        mturk.external_submit(half)
        mturk.assignments[half]["AssignmentStatus"] = "Approved"
        for aid, worker in ((good, "W-good"), (auto, "W-auto"), (rejected, "W-rej"), (early, "W-early")):
            _arrive_and_submit(
                web.url, hit_id, {"workerId": worker, "assignmentId": aid, "hitId": phid, "turkSubmitTo": SANDBOX}
            )
        # Someone else arrives with the victim's assignment id and a worker id of their own.
        _arrive_and_submit(
            web.url, hit_id, {"workerId": "W-forger", "assignmentId": forged, "hitId": phid, "turkSubmitTo": SANDBOX}
        )
        for aid in (good, auto, rejected, forged):
            mturk.external_submit(aid)
        mturk.assignments[auto]["AssignmentStatus"] = "Approved"  # MTurk's auto-approval ran
        mturk.assignments[rejected]["AssignmentStatus"] = "Rejected"  # rejected on the requester site
        # W-early's hand-back form never reached MTurk: their work is complete here only.
        stray = mturk.submit_assignment(phid, "W-stranger")  # work MTurk holds that hitkit never saw

        result = CliRunner().invoke(main, ["sync", str(tmp_path / "study.yaml"), "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        again = sync_study(database_url, "ab-demo")
    finally:
        web.stop()
    assert mturk.assignments[good]["AssignmentStatus"] == "Approved"
    assert mturk.assignments[forged]["AssignmentStatus"] == "Submitted"  # never approved for the forger
    assert len(mturk.calls("ApproveAssignment")) == 1
    with session_scope(database_url) as s:
        status = {a.worker.external_id: a.status for a in s.scalars(select(Assignment))}
        assert status == {
            "W-good": "approved",
            "W-auto": "approved",
            "W-rej": "rejected",
            "W-forger": "submitted",
            "W-early": "submitted",
            "W-half": "accepted",
        }
        rewards = Counter((p.kind, p.status) for p in s.scalars(select(Payment)))
        # The approved two, and W-half's reward that MTurk paid; nothing for the rest.
        assert rewards == {("reward", "paid"): 3, ("fee", "paid"): 3}
        mismatches = s.scalars(select(Event).where(Event.kind == "sync_mismatch")).all()
    reasons = {m["provider_assignment_id"]: m["reason"] for m in report["mismatches"]}
    assert reasons == {
        forged: "the provider records another worker on this assignment",
        early: "not submitted on the provider",
        half: "approved on the provider but accepted in hitkit",
        stray: "the provider holds work hitkit has no record of",
    }
    assert {m["status"] for m in report["marked"]} == {"approved", "rejected"} and len(report["approved"]) == 1
    # A second sync changes nothing and logs each lasting mismatch once.
    assert (again.approved, again.marked) == ([], []) and len(again.mismatches) == 4
    assert len(mismatches) == 4


def test_sync_on_prolific_approves_awaiting_review_work_and_takes_over_prolifics_decisions(
    tmp_path, database_url, prolific
):
    # No review window, so sync may approve at once (the scheduler's tick below runs before any work is in).
    web, config, secret = start(tmp_path, database_url, on_prolific(prolific), approve_after_s=0)
    names = {name: prolific_pid(name) for name in ("P-good", "P-approved", "P-active", "P-returned")}
    try:
        tick(database_url, "ab-demo", web.url)
        [sid] = prolific.studies
        code = ProlificProvider(config, secret).completion_code()
        sessions = {}
        for name, pid in names.items():
            sessions[name] = prolific.start_session(pid, sid)
            http = requests.Session()
            page = http.get(
                f"{web.url}/s/ab-demo/enter",
                params={"PROLIFIC_PID": pid, "STUDY_ID": sid, "SESSION_ID": sessions[name]},
            )
            assert page.status_code == 200
            if name == "P-returned":
                continue  # opened the task, then returned the study on Prolific
            task = page.url.split("?")[0]
            http.post(task + "consent").raise_for_status()
            for unit in http.get(task + "state").json()["units"]:
                for q in unit["questions"]:
                    http.post(
                        task + "answer", json={"unit_id": unit["unit_id"], "question": q["name"], "value": "a"}
                    ).raise_for_status()
            http.post(task + "submit", allow_redirects=False)
        prolific.complete(sessions["P-good"], code)
        prolific.complete(sessions["P-approved"], code)
        prolific.submissions[sessions["P-approved"]]["status"] = "APPROVED"  # approved on Prolific's site
        prolific.return_session(sessions["P-returned"])
        report = sync_study(database_url, "ab-demo")
    finally:
        web.stop()
    assert prolific.submissions[sessions["P-good"]]["status"] == "APPROVED"
    assert prolific.submissions[sessions["P-active"]]["status"] == "ACTIVE"
    assert len(report.approved) == 1
    assert sorted(m["status"] for m in report.marked) == ["approved", "returned"]
    assert report.mismatches == []  # still ACTIVE on Prolific: the scheduler hands it in in time
    with session_scope(database_url) as s:
        status = {a.worker.external_id: a.status for a in s.scalars(select(Assignment))}
    assert status == {
        names["P-good"]: "approved",
        names["P-approved"]: "approved",
        names["P-active"]: "submitted",
        names["P-returned"]: "returned",
    }
    assert sync_study(database_url, "ab-demo").marked == []  # a second sync repeats nothing
    assert prolific.violations == []


def test_hitkit_sync_on_a_prolific_study_on_sqlite_finishes_without_waiting_on_its_own_lock(tmp_path, prolific):
    """The old provider registered session listeners inside an open session: `hitkit sync` waited 30 s, then failed."""
    import time

    url = f"sqlite:///{tmp_path / 'sync.db'}"
    from hitkit.db.migrate import upgrade

    upgrade(url)
    web, config, secret = start(tmp_path, url, on_prolific(prolific))
    try:
        tick(url, "ab-demo", web.url)
    finally:
        web.stop()
    started = time.monotonic()
    result = CliRunner().invoke(main, ["sync", str(tmp_path / "study.yaml")])
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 10 and "0 assignment(s) checked" in result.output


def test_sync_on_the_simulated_provider_has_nothing_to_reconcile(tmp_path, database_url):
    config = load_study(pairwise_study(tmp_path, database_url))
    with session_scope(database_url) as s:
        create_study(s, config, None, resolve_secret(database_url))
    report = sync_study(database_url, "ab-demo")
    assert report.reconciled is False and report.checked == 0 and not report.errors
    result = CliRunner().invoke(main, ["sync", str(tmp_path / "study.yaml")])
    assert result.exit_code == 0 and "nothing to reconcile" in result.output
