"""The MTurk provider through boto3, against a local fake of MTurk's JSON 1.1 wire protocol."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from decimal import Decimal
from html import unescape
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests
from sqlalchemy import select

from hitkit.db.models import Assignment, Payment, Study, Worker
from hitkit.db.session import session_scope
from hitkit.errors import BudgetError, ConfigError, FlowError
from hitkit.money.amounts import mturk_bonus_fee, mturk_reward_fee
from hitkit.providers import make_provider
from hitkit.providers.base import CompletionKind
from hitkit.providers.mturk import MTurkProvider
from hitkit.providers.mturk_client import MTurkClosedError, MTurkError, make_client
from hitkit.providers.mturk_posting import (
    APPROVAL_RATE_QUALIFICATION,
    APPROVED_HITS_QUALIFICATION,
    LOCALE_QUALIFICATION,
    MASTERS_QUALIFICATION,
)
from hitkit.study.loading import load_study
from tests.fakes.mturk import FakeMTurk
from tests.studies import pairwise_study

ENTRY = "https://tasks.example.org/s/ab-demo/hit/1?a=1&b=2"
SANDBOX_SUBMIT = "https://workersandbox.mturk.com/mturk/externalSubmit"
PRODUCTION_SUBMIT = "https://www.mturk.com/mturk/externalSubmit"


@pytest.fixture(autouse=True)
def _dummy_aws(monkeypatch, tmp_path):
    """Dummy credentials, and no AWS config of the machine running the tests."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


@pytest.fixture
def fake():
    server = FakeMTurk().start()
    yield server
    server.stop()


def study_file(tmp_path, fake: FakeMTurk | None, database_url: str | None = None, **mturk):
    """The example A/B study on MTurk, its requester endpoint pointed at ``fake`` (None: MTurk's own)."""
    endpoint = {"endpoint_url": fake.url} if fake is not None else {}
    return pairwise_study(
        tmp_path,
        database_url or f"sqlite:///{tmp_path / 'unused.db'}",
        provider={"kind": "mturk", "mturk": {**endpoint, **mturk}},
        schedule={"approve_after_s": 0},
    )  # a real provider's default is a review window


# MTurk's closure ----------------------------------------------------------------------------
@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "production"])
def test_posting_to_mturks_own_endpoints_is_refused_naming_the_closure(tmp_path, sandbox, monkeypatch):
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("a refused post must not reach the network")

    monkeypatch.setattr(socket, "create_connection", no_network)
    p = provider_for(tmp_path, None, sandbox=sandbox)
    for attempt in (
        lambda: p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600),
        p.check_posting,
        p.balance,
        lambda: p.approve("A1"),
    ):
        with pytest.raises(MTurkClosedError) as err:
            attempt()
        text = str(err.value)
        assert "closed permanently on 2026-09-30" in text
        assert "provider.kind: prolific" in text and "provider.kind: panel" in text and "hitkit import mturk" in text
        assert ("sandbox" if sandbox else "production") in text
    assert p._client is None  # boto3 was never asked for a client


def test_the_closure_is_a_clear_cli_message_before_anything_is_posted(tmp_path, database_url):
    from click.testing import CliRunner

    from hitkit.cli import main

    path = study_file(tmp_path, None, database_url)
    result = CliRunner().invoke(main, ["launch", str(path), "--yes", "--no-progress"])
    assert result.exit_code != 0
    assert "closed permanently on 2026-09-30" in result.output and "Traceback" not in result.output
    with session_scope(database_url) as s:
        assert s.scalar(select(Payment.id)) is None


UID = "5f1c0d3e9a7b4c2d8e6f0a1b2c3d4e5f"
"""A study uid as the database makes them (Study.uid): one database, every process."""


def provider_for(tmp_path, fake: FakeMTurk | None, uid: str = UID, **mturk) -> MTurkProvider:
    provider = make_provider(load_study(study_file(tmp_path, fake, **mturk)), "test-secret")
    assert isinstance(provider, MTurkProvider)
    provider.service_fault_backoff_s = 0
    provider.study_uid = uid
    return provider


# Posting ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sandbox", [True, False])
def test_create_sends_the_external_question_and_the_qualifications(tmp_path, fake, sandbox):
    p = provider_for(
        tmp_path,
        fake,
        sandbox=sandbox,
        locales=["US", "gb"],
        min_approval_rate=95,
        min_approved_hits=500,
        masters=True,
        frame_height=700,
        auto_approval_delay_s=3600,
    )
    posted = p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 7200)

    [hit_type] = fake.calls("CreateHITType")
    assert hit_type["Reward"] == "0.50"
    assert hit_type["Title"] == "Which chatbot reply is better?"
    assert hit_type["AssignmentDurationInSeconds"] == 600
    assert hit_type["AutoApprovalDelayInSeconds"] == 3600
    [cap] = fake.qualification_types
    reqs = {r["QualificationTypeId"]: r for r in hit_type["QualificationRequirements"]}
    assert reqs[LOCALE_QUALIFICATION]["Comparator"] == "In"
    assert reqs[LOCALE_QUALIFICATION]["LocaleValues"] == [{"Country": "US"}, {"Country": "GB"}]
    assert (reqs[APPROVAL_RATE_QUALIFICATION]["Comparator"], reqs[APPROVAL_RATE_QUALIFICATION]["IntegerValues"]) == (
        "GreaterThanOrEqualTo",
        [95],
    )
    assert reqs[APPROVED_HITS_QUALIFICATION]["IntegerValues"] == [500]
    assert reqs[MASTERS_QUALIFICATION[sandbox]]["Comparator"] == "Exists"
    assert MASTERS_QUALIFICATION[not sandbox] not in reqs
    assert reqs[cap]["Comparator"] == "DoesNotExist"  # the cap qualification excludes its holders

    [create] = fake.calls("CreateHITWithHITType")
    question = ET.fromstring(create["Question"])
    ns = "{http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd}"
    assert question.tag == ns + "ExternalQuestion"
    assert question.find(ns + "ExternalURL").text == ENTRY
    assert question.find(ns + "FrameHeight").text == "700"
    assert (create["MaxAssignments"], create["LifetimeInSeconds"]) == (3, 7200)
    assert create["UniqueRequestToken"] == p.token("hit", "ab-demo-0") and len(create["UniqueRequestToken"]) <= 64
    assert posted.provider_hit_id in fake.hits
    assert fake.hits[posted.provider_hit_id]["HITTypeId"] == hit_type_id(fake)


def hit_type_id(fake: FakeMTurk) -> str:
    [t] = fake.hit_types.values()
    return t["HITTypeId"]


def test_the_hit_type_and_cap_are_made_once_per_study_across_processes(tmp_path, fake):
    first = provider_for(tmp_path, fake)
    first.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600)
    first.post_hit("ab-demo-1", ENTRY, Decimal("0.50"), 3, 3600)
    assert len(fake.calls("CreateHITType")) == 1 and len(fake.calls("CreateQualificationType")) == 1
    second = provider_for(tmp_path, fake)  # another process: finds the cap made by the first
    second.post_hit("ab-demo-2", ENTRY, Decimal("0.50"), 3, 3600)
    assert len(fake.qualification_types) == 1 and len(fake.hit_types) == 1 and len(fake.hits) == 3


def test_a_retried_create_with_the_same_token_does_not_duplicate(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    # MTurk creates the HIT but the answer is lost: the retry carries the same token.
    fake.inject("CreateHITWithHITType", "ServiceFault", after=True)
    posted = p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600)
    creates = fake.calls("CreateHITWithHITType")
    assert len(creates) == 2 and creates[0]["UniqueRequestToken"] == creates[1]["UniqueRequestToken"]
    assert list(fake.hits) == [posted.provider_hit_id]
    # A crash before the database recorded the HIT: a new process posts the same key again.
    again = provider_for(tmp_path, fake).post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600)
    assert again.provider_hit_id == posted.provider_hit_id and len(fake.hits) == 1
    # A different key is a different HIT.
    assert p.post_hit("ab-demo-1", ENTRY, Decimal("0.50"), 3, 3600).provider_hit_id != posted.provider_hit_id


def test_a_service_fault_is_retried_a_bounded_number_of_times(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    fake.inject("GetAccountBalance", "ServiceFault", times=2)
    assert p.balance() == Decimal("10000.00")
    assert len(fake.calls("GetAccountBalance")) == 3
    fake.inject("GetAccountBalance", "ServiceFault", times=p.service_fault_attempts)
    with pytest.raises(MTurkError) as err:
        p.balance()
    assert err.value.code == "ServiceFault"
    assert len(fake.calls("GetAccountBalance")) == 3 + p.service_fault_attempts


def test_throttling_is_retried_by_botocore(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    fake.inject("GetAccountBalance", "ThrottlingException")
    assert p.balance() == Decimal("10000.00")
    assert len(fake.calls("GetAccountBalance")) == 2


def test_posting_is_refused_beyond_the_account_balance(tmp_path):
    fake = FakeMTurk(balance="1.79").start()
    try:
        p = provider_for(tmp_path, fake)
        # 3 × (0.50 + 20 % fee 0.10) = 1.80 worst case
        with pytest.raises(BudgetError, match=r"1\.79.*1\.80"):
            p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600)
        assert fake.calls("CreateHITWithHITType") == []
        fake.balance = Decimal("1.80")
        assert p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600).provider_hit_id in fake.hits
    finally:
        fake.stop()


def test_posting_needs_an_https_entry_url(tmp_path, fake):
    with pytest.raises(ConfigError, match="HTTPS"):
        provider_for(tmp_path, fake).post_hit("ab-demo-0", "http://127.0.0.1:5000/s/x/hit/1", Decimal("0.50"), 3, 60)
    assert fake.calls("CreateHITWithHITType") == []


def test_request_tokens_are_unique_to_each_database_on_one_account(tmp_path, fake):
    # Two databases (each study row has its own random uid) with the same study name and HIT keys,
    # posting to one requester account: neither takes the other's HIT or bonus for its own.
    ours, theirs = provider_for(tmp_path, fake), provider_for(tmp_path, fake, uid="0" * 32)
    first = ours.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600)
    second = theirs.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600)
    assert first.provider_hit_id != second.provider_hit_id and len(fake.hits) == 2
    tokens = [c["UniqueRequestToken"] for c in fake.calls("CreateHITWithHITType")]
    assert len(set(tokens)) == 2 and all(len(t) <= 64 for t in tokens)
    a = fake.submit_assignment(first.provider_hit_id, "AW1")
    b = fake.submit_assignment(second.provider_hit_id, "AW1")
    ours.pay_bonus("AW1", a, Decimal("0.30"), "thanks", "bonus:1:1")
    theirs.pay_bonus("AW1", b, Decimal("0.30"), "thanks", "bonus:1:1")  # the same ledger key in the other database
    assert len(fake.bonuses) == 2
    assert ours.cap_qualification_id() != theirs.cap_qualification_id()


def test_a_provider_without_the_studys_uid_refuses_to_make_tokens(tmp_path, fake):
    from hitkit.errors import HitkitError

    p = provider_for(tmp_path, fake, uid=None)
    with pytest.raises(HitkitError, match="uid"):
        p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600)
    assert fake.calls("CreateHITWithHITType") == []


def test_the_fake_refuses_what_botocores_service_model_refuses(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    hit_id = p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600).provider_hit_id
    a = fake.submit_assignment(hit_id, "AW1")
    with pytest.raises(MTurkError) as err:  # WorkerId must match ^A[A-Z0-9]+$
        p.pay_bonus("not-a-worker", a, Decimal("0.10"), "thanks", "bonus:9:9")
    assert err.value.code == "ValidationException" and fake.bonuses == []
    accepted = fake.accept_assignment(hit_id, "AW2")
    assert p.work_of(accepted).status.value == "returned"  # accepted, unsubmitted work is invisible
    assert p.work_of("not/an/id").worker_id == "" and fake.calls("GetAssignment") == [{"AssignmentId": accepted}]


def test_fees_are_mturks(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    for reward, n in ((Decimal("0.50"), 3), (Decimal("0.50"), 10), (Decimal("0.01"), 1), (Decimal("1.25"), 9)):
        assert p.fee(reward, n) == mturk_reward_fee(reward, n)
    assert p.fee(Decimal("1.00"), 9) == Decimal("0.20") and p.fee(Decimal("1.00"), 10) == Decimal("0.40")
    assert p.fee(Decimal("0.01"), 1) == Decimal("0.01")
    assert p.bonus_fee(Decimal("2.00")) == mturk_bonus_fee(Decimal("2.00")) == Decimal("0.40")
    masters = provider_for(tmp_path, fake, masters=True)  # Masters: 5 % more on the reward (PLATFORMS.md)
    assert masters.fee(Decimal("1.00"), 9) == Decimal("0.25") and masters.fee(Decimal("1.00"), 10) == Decimal("0.45")
    assert masters.fee(Decimal("0.01"), 1) == Decimal("0.01") and masters.fee(Decimal("0.50"), 3) == Decimal("0.13")
    assert masters.bonus_fee(Decimal("2.00")) == Decimal("0.40")  # bonuses: 20 %, Masters or not


# Keeping the HIT open or closed -------------------------------------------------------------
def test_expire_and_extend(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    hit_id = p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600).provider_hit_id
    p.expire_hit(hit_id)
    p.expire_hit(hit_id)  # a repeat: MTurk refuses the same HIT and time as a duplicate; still expired, no error
    assert fake.hits[hit_id]["HITStatus"] == "Unassignable"
    assert len(fake.calls("UpdateExpirationForHIT")) == 2
    p.extend_hit(hit_id, 2, 3600)
    p.extend_hit(hit_id, 2, 3600)  # a retry: same token, places added once
    assert fake.hits[hit_id]["MaxAssignments"] == 5 and fake.hits[hit_id]["HITStatus"] == "Assignable"
    p.extend_hit(hit_id, 2, 3600, request_key="second round")
    assert fake.hits[hit_id]["MaxAssignments"] == 7
    p.extend_hit(hit_id, 0, 60)  # more time only
    assert len(fake.calls("CreateAdditionalAssignmentsForHIT")) == 3
    with pytest.raises(MTurkError, match="10 or more"):  # MTurk's fee rule: no crossing 10 by extension
        p.extend_hit(hit_id, 3, 3600)


# Arrival and hand-back ----------------------------------------------------------------------
def test_arrival_reads_mturks_parameters(tmp_path, fake):
    p = provider_for(tmp_path, fake, sandbox=True)
    preview = p.arrival({"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "H1"})
    assert preview.preview and preview.worker_id is None and preview.provider_hit_id == "H1"
    worker = p.arrival(
        {"assignmentId": "A1", "hitId": "H1", "workerId": "AW1", "turkSubmitTo": "https://workersandbox.mturk.com"}
    )
    assert (worker.preview, worker.worker_id, worker.provider_assignment_id) == (False, "AW1", "A1")
    with pytest.raises(FlowError):  # a production host on a sandbox study: never post the form there
        p.arrival({"assignmentId": "A1", "hitId": "H1", "workerId": "AW1", "turkSubmitTo": "https://www.mturk.com"})
    with pytest.raises(FlowError):
        p.arrival({"assignmentId": "A1", "hitId": "H1", "workerId": "AW1", "turkSubmitTo": "https://evil.example"})
    with pytest.raises(FlowError):
        p.arrival({"assignmentId": "A1", "hitId": "H1"})
    assert fake.requests == []  # arriving calls nothing at MTurk
    done = p.completion("A1", {})
    assert done.kind is CompletionKind.POST_FORM and done.url == SANDBOX_SUBMIT
    assert done.fields["assignmentId"] == "A1" and len(done.fields) >= 2


@pytest.fixture
def mturk_live(request, tmp_path, database_url, fake):
    """An MTurk study (sandbox or production, by ``request.param``) with its first wave posted to the fake."""
    from hitkit.running.scheduler import tick
    from hitkit.study.stored import create_study, resolve_secret
    from server.embedded import WebServer

    config = load_study(study_file(tmp_path, fake, database_url, sandbox=request.param))
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 4, secret).start()
    tick(database_url, config.study, "https://tasks.example.org")
    yield web.url, database_url, request.param
    web.stop()


def export_tables(database_url: str, study: str) -> dict:
    """The study's export tables as ``hitkit export`` writes them (CSV, read back as text)."""
    import tempfile

    import pandas as pd

    from hitkit.study.stored import StudyContext, resolve_secret
    from hitkit.tables.export import export_study

    out = Path(tempfile.mkdtemp())
    with session_scope(database_url) as s:
        export_study(s, StudyContext.load(s, study, resolve_secret(database_url)), out, "csv")
    return {p.stem: pd.read_csv(p, dtype=str, keep_default_na=False) for p in out.glob("*.csv")}


def _hit_row(database_url: str, index: int = 0):
    from hitkit.db.models import Hit

    with session_scope(database_url) as s:
        hit = s.scalar(select(Hit).where(Hit.index == index))
        return hit.id, hit.provider_hit_id, hit.reward, hit.max_assignments


def _do_the_hit(base: str, hit_id: int, params: dict) -> requests.Response:
    http = requests.Session()
    page = http.get(f"{base}/s/ab-demo/hit/{hit_id}", params=params)
    assert page.status_code == 200, page.text
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    state = http.get(task + "state").json()
    for unit in state["units"]:
        for q in unit["questions"]:
            assert (
                http.post(
                    task + "answer", json={"unit_id": unit["unit_id"], "question": q["name"], "value": "a"}
                ).status_code
                == 200
            )
    return http.post(task + "submit")


@pytest.mark.parametrize("mturk_live", [True, False], indirect=True, ids=["sandbox", "production"])
def test_the_hand_back_form_posts_to_the_marketplaces_external_submit(mturk_live, fake):
    from hitkit.running.scheduler import tick

    base, database_url, sandbox = mturk_live
    host = "https://workersandbox.mturk.com" if sandbox else "https://www.mturk.com"
    hit_id, provider_hit_id, reward, places = _hit_row(database_url)
    assert provider_hit_id in fake.hits
    assignment_id = fake.submit_assignment(provider_hit_id, "AWONE")
    done = _do_the_hit(
        base,
        hit_id,
        {"workerId": "AWONE", "assignmentId": assignment_id, "hitId": provider_hit_id, "turkSubmitTo": host},
    )
    assert done.status_code == 200, done.text
    [action] = re.findall(r'<form id="handback" method="post" action="([^"]+)"', done.text)
    assert unescape(action) == (SANDBOX_SUBMIT if sandbox else PRODUCTION_SUBMIT)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', done.text))
    assert fields["assignmentId"] == assignment_id and len(fields) >= 2

    # The scheduler approves through MTurk and books MTurk's fee (METHODS.md §5) in the ledger.
    tick(database_url, "ab-demo", "https://tasks.example.org")
    assert fake.assignments[assignment_id]["AssignmentStatus"] == "Approved"
    with session_scope(database_url) as s:
        assert s.scalar(select(Assignment.status)) == "approved"
        paid = {p.kind: p.amount for p in s.scalars(select(Payment))}
    assert paid == {"reward": reward, "fee": mturk_reward_fee(reward, places)}
    assert paid["fee"] > 0  # the study's flat fee_rate is 0: the provider's own fee was used
    # MTurk showed the assignment as this worker's before approval: confirmed, exported and counted.
    tables = export_tables(database_url, "ab-demo")
    assert list(tables["assignments"]["status"]) == ["approved"]
    assert set(tables["votes"]["assignment_id"]) == {assignment_id}


@pytest.mark.parametrize("mturk_live", [True], indirect=True, ids=["sandbox"])
def test_a_preview_is_read_only(mturk_live, fake):
    base, database_url, _ = mturk_live
    hit_id, provider_hit_id, _, _ = _hit_row(database_url)
    calls = len(fake.requests)
    page = requests.get(
        f"{base}/s/ab-demo/hit/{hit_id}",
        params={"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": provider_hit_id},
    )
    assert page.status_code == 200 and "disabled" in page.text and 'id="submit"' not in page.text
    with session_scope(database_url) as s:
        assert s.scalar(select(Assignment.id)) is None and s.scalar(select(Worker.id)) is None
    assert len(fake.requests) == calls
    wrong = requests.get(
        f"{base}/s/ab-demo/hit/{hit_id}",
        params={
            "assignmentId": "A1",
            "hitId": provider_hit_id,
            "workerId": "AW1",
            "turkSubmitTo": "https://www.mturk.com",
        },
    )
    assert wrong.status_code == 400


# Deciding and paying ------------------------------------------------------------------------
def test_approve_and_reject_once_each(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    hit_id = p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600).provider_hit_id
    good, bad = fake.submit_assignment(hit_id, "AW1"), fake.submit_assignment(hit_id, "AW2")
    balance = fake.balance
    p.approve(good)
    p.approve(good)  # a retry after a lost answer is not an error, and pays nothing more
    assert fake.assignments[good]["AssignmentStatus"] == "Approved" and fake.balance == balance - Decimal("0.50")
    p.reject(bad, "Every answer was the same.")
    assert fake.assignments[bad]["AssignmentStatus"] == "Rejected"
    assert fake.calls("RejectAssignment")[0]["RequesterFeedback"] == "Every answer was the same."
    with pytest.raises(MTurkError):  # approved work cannot be rejected
        p.reject(good, "changed my mind")
    assert {(w.provider_assignment_id, w.worker_id, w.status) for w in p.sync_submissions(hit_id)} == {
        (good, "AW1", "Approved"),
        (bad, "AW2", "Rejected"),
    }


def test_a_retried_bonus_pays_once(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    hit_id = p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600).provider_hit_id
    a = fake.submit_assignment(hit_id, "AW1")
    fake.inject("SendBonus", "ServiceFault", after=True)  # paid, but the answer is lost
    ref = p.pay_bonus("AW1", a, Decimal("0.75"), "Thank you for careful work", "bonus:1:7")
    ref_again = p.pay_bonus("AW1", a, Decimal("0.75"), "Thank you for careful work", "bonus:1:7")
    sends = fake.calls("SendBonus")
    assert len(sends) == 3 and {s["UniqueRequestToken"] for s in sends} == {p.token("bonus", "bonus:1:7")}
    assert [b["BonusAmount"] for b in fake.bonuses] == ["0.75"] and ref == ref_again
    p.pay_bonus("AW1", a, Decimal("0.25"), "Second bonus", "bonus:1:8")
    assert [b["BonusAmount"] for b in fake.bonuses] == ["0.75", "0.25"]


def test_the_cap_qualification_is_granted_without_notification(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    p.post_hit("ab-demo-0", ENTRY, Decimal("0.50"), 3, 3600)
    p.cap_worker("AW1")
    [grant] = fake.calls("AssociateQualificationWithWorker")
    assert grant["WorkerId"] == "AW1" and grant["SendNotification"] is False
    [hit_type] = fake.calls("CreateHITType")
    excluded = [
        r["QualificationTypeId"] for r in hit_type["QualificationRequirements"] if r["Comparator"] == "DoesNotExist"
    ]
    assert excluded == [grant["QualificationTypeId"]]


def test_an_unreachable_endpoint_is_an_error_a_coordinator_can_act_on(tmp_path, fake):
    p = provider_for(tmp_path, fake)
    fake.stop()
    with pytest.raises(MTurkError, match="endpoint_url"):
        p.balance()


# The cap and forged arrivals through the scheduler -------------------------------------------------
def test_the_scheduler_grants_the_cap_qualification_once_and_retries_a_failed_grant(
    tmp_path, database_url, fake, monkeypatch
):
    from hitkit.db.models import Event, Hit
    from hitkit.running.scheduler import tick
    from hitkit.study.stored import create_study, resolve_secret
    from server.embedded import WebServer

    monkeypatch.setattr(MTurkProvider, "service_fault_backoff_s", 0)
    config = load_study(
        pairwise_study(
            tmp_path,
            database_url,
            schedule={"per_worker_cap": 1, "approve_after_s": 0},
            provider={"kind": "mturk", "mturk": {"endpoint_url": fake.url}},
        )
    )
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 4, secret).start()
    try:
        tick(database_url, config.study, "https://tasks.example.org")
        hit_id, provider_hit_id, _, _ = _hit_row(database_url)
        aid = fake.accept_assignment(provider_hit_id, "AWCAP")
        done = _do_the_hit(
            web.url,
            hit_id,
            {
                "workerId": "AWCAP",
                "assignmentId": aid,
                "hitId": provider_hit_id,
                "turkSubmitTo": "https://workersandbox.mturk.com",
            },
        )
        assert done.status_code == 200
        fake.external_submit(aid)
        fake.inject("AssociateQualificationWithWorker", "ServiceFault", times=MTurkProvider.service_fault_attempts)
        assert tick(database_url, config.study, "https://tasks.example.org").capped == 0
        assert fake.worker_qualifications == []
        assert tick(database_url, config.study, "https://tasks.example.org").capped == 1  # retried
        tick(database_url, config.study, "https://tasks.example.org")
    finally:
        web.stop()
    [grant] = fake.worker_qualifications
    assert (grant["WorkerId"], grant["IntegerValue"], grant["SendNotification"]) == ("AWCAP", 1, False)
    with session_scope(database_url) as s:
        assert s.scalar(select(Event.data).where(Event.kind == "cap_failed"))["worker"] == "AWCAP"
        other = s.scalar(select(Hit.provider_hit_id).where(Hit.index == 1))
    with pytest.raises(PermissionError):  # MTurk no longer shows the study's HITs to W-cap
        fake.accept_assignment(other, "AWCAP")


@pytest.mark.parametrize("mturk_live", [True], indirect=True, ids=["sandbox"])
def test_a_forged_worker_id_on_someone_elses_assignment_is_never_approved(mturk_live, fake):
    from hitkit.db.models import Event
    from hitkit.running.scheduler import tick

    base, database_url, _ = mturk_live
    hit_id, provider_hit_id, _, _ = _hit_row(database_url)
    victim = fake.accept_assignment(provider_hit_id, "AWVICTIM")
    fake.external_submit(victim)  # the victim did the work on MTurk
    # Someone who learnt the victim's assignment id arrives with it under their own worker id.
    forged = _do_the_hit(
        base,
        hit_id,
        {
            "workerId": "AWFORGER",
            "assignmentId": victim,
            "hitId": provider_hit_id,
            "turkSubmitTo": "https://workersandbox.mturk.com",
        },
    )
    assert forged.status_code == 200
    for _ in range(2):
        assert tick(database_url, "ab-demo", "https://tasks.example.org").approved == 0
    assert fake.assignments[victim]["AssignmentStatus"] == "Submitted" and fake.calls("ApproveAssignment") == []
    with session_scope(database_url) as s:
        assert s.scalar(select(Assignment.status)) == "submitted" and s.scalar(select(Payment.id)) is None
        [held] = s.scalars(select(Event).where(Event.kind == "approve_held")).all()
        assert "another worker" in held.data["reason"]
        assert s.scalar(select(Assignment.confirmed_at)) is None
    # The forged submission is never exported as counted work (issue 20: URL-parameter identities).
    tables = export_tables(database_url, "ab-demo")
    assert list(tables["assignments"]["status"]) == ["unconfirmed"]
    assert tables["votes"].empty


def test_the_cost_shown_before_posting_has_rewards_mturks_fees_and_bonuses_and_the_budget_is_a_ceiling(
    tmp_path, database_url, fake
):
    from hitkit.db.models import Hit
    from hitkit.money.bonuses import grant_bonus
    from hitkit.money.ledger import estimate_cost
    from hitkit.running.scheduler import tick
    from hitkit.study.stored import create_study, resolve_secret

    config = load_study(
        pairwise_study(
            tmp_path, database_url, budget="10.00", provider={"kind": "mturk", "mturk": {"endpoint_url": fake.url}}
        )
    )
    with session_scope(database_url) as s:
        ctx = create_study(s, config, None, resolve_secret(database_url))
        estimate = estimate_cost(s, ctx)
    # 10 HITs × 3 places × ($0.50 + MTurk's 20 % = $0.10)
    assert (estimate.rewards, estimate.fees, estimate.bonuses, estimate.total) == (
        Decimal("15.00"),
        Decimal("3.00"),
        Decimal(0),
        Decimal("18.00"),
    )
    assert not estimate.within_budget and estimate.hits_covered == 5
    text = estimate.describe()
    assert "rewards 15.00 + fees 3.00 + bonuses 0" in text and "first 5 of 10 HITs" in text
    with session_scope(database_url) as s:
        s.get(Study, ctx.study_id).status = "running"
    assert tick(database_url, "ab-demo", "https://tasks.example.org").posted == 4  # the wave; 5 would fit
    with session_scope(database_url) as s:
        a_worker = Worker(provider="mturk", external_id="AW1")
        s.add(a_worker)
        s.flush()
        hit = s.scalar(select(Hit).where(Hit.index == 0))
        fake.submit_assignment(hit.provider_hit_id, "AW1")
        a = Assignment(
            hit_id=hit.id, worker_id=a_worker.id, provider_assignment_id="A-x", status="submitted", token_nonce="n"
        )
        s.add(a)
        s.flush()
        a_id = a.id
    # 4 HITs committed = 7.20; a bonus of 2.50 + 0.50 fee would pass 10.00: refused before anything is paid.
    with pytest.raises(BudgetError, match="past the budget"):
        grant_bonus(database_url, "ab-demo", a_id, Decimal("2.50"), "thanks")
    assert fake.calls("SendBonus") == []
    with session_scope(database_url) as s:
        assert s.scalar(select(Payment.id)) is None


@pytest.mark.parametrize("mturk_live", [True], indirect=True, ids=["sandbox"])
def test_a_forged_worker_id_cannot_open_someone_elses_assignment(mturk_live, fake):
    base, database_url, _ = mturk_live
    hit_id, provider_hit_id, _, _ = _hit_row(database_url)
    victim = fake.accept_assignment(provider_hit_id, "AWVICTIM")
    params = {
        "workerId": "AWVICTIM",
        "assignmentId": victim,
        "hitId": provider_hit_id,
        "turkSubmitTo": "https://workersandbox.mturk.com",
    }
    assert requests.get(f"{base}/s/ab-demo/hit/{hit_id}", params=params).status_code == 200
    # Someone who knows only the victim's worker id arrives with an assignment id of their own.
    forged = requests.get(
        f"{base}/s/ab-demo/hit/{hit_id}", params={**params, "assignmentId": "A-other"}, allow_redirects=False
    )
    assert forged.status_code in (403, 409), "a worker id alone must not open the assignment it holds"


@pytest.mark.parametrize("mturk_live", [True], indirect=True, ids=["sandbox"])
def test_a_new_assignment_id_mturk_cannot_vouch_for_is_refused(mturk_live, fake):
    base, database_url, _ = mturk_live
    hit_id, provider_hit_id, _, _ = _hit_row(database_url)
    first = fake.accept_assignment(provider_hit_id, "AWAGAIN")
    params = {
        "workerId": "AWAGAIN",
        "assignmentId": first,
        "hitId": provider_hit_id,
        "turkSubmitTo": "https://workersandbox.mturk.com",
    }
    assert requests.get(f"{base}/s/ab-demo/hit/{hit_id}", params=params).status_code == 200
    # Returned on MTurk and accepted again: MTurk's requester API shows no unsubmitted assignment
    # (AssignmentStatus is Submitted/Approved/Rejected only), so the new id cannot be told from a
    # stranger's, and the hitkit assignment stays with the first id.
    second = fake.accept_assignment(provider_hit_id, "AWAGAIN")
    again = requests.get(
        f"{base}/s/ab-demo/hit/{hit_id}", params={**params, "assignmentId": second}, allow_redirects=False
    )
    assert again.status_code == 403
    with session_scope(database_url) as s:
        assert s.scalars(select(Assignment.provider_assignment_id)).all() == [first]


def test_one_client_is_made_per_endpoint_and_credentials_and_then_shared(monkeypatch):
    """Providers are made afresh each tick; the boto3 client behind them is made once for what it depends on."""
    here = SimpleNamespace(endpoint_url="http://127.0.0.1:9", region="us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFIRST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    first = make_client(here, 30.0)
    assert make_client(SimpleNamespace(**vars(here)), 30.0) is first
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASECOND")  # other credentials: never the first's client
    second = make_client(here, 30.0)
    assert second is not first and second._request_signer._credentials.access_key == "AKIASECOND"
    assert make_client(SimpleNamespace(endpoint_url="http://127.0.0.1:10", region="us-east-1"), 30.0) is not second
    assert make_client(here, 5.0) is not second
