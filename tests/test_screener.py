"""The screener: questions before consent; who fails is screened out, paid once, let go, and never a worker.

Real HTTP: the simulated crowd answers the screener through the pages; Prolific's side goes through the
fake, whose screen-out code pays and frees the place as its documentation says.
"""

from __future__ import annotations

import re
from decimal import Decimal

import pandas as pd
import pytest
import requests
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Event, Payment, Response, Study
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.providers.prolific import client as prolific_api
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from tests.fakes.prolific import TOKEN, FakeProlificServer
from tests.studies import launch, pairwise_study

SCREENER = {
    "questions": [
        {"name": "language", "text": "Do you read English fluently?", "options": ["yes", "no"], "accept": ["yes"]},
        {"name": "device", "text": "What are you using?", "options": ["computer", "phone"], "accept": ["computer"]},
    ],
    "screen_out_reward": "0.15",
    "slots": 5,
}


def test_a_screener_failing_3_of_10_simulated_participants_pays_3_screen_outs_frees_3_places_and_analyses_7(
    tmp_path, one_database_url
):
    study_file = pairwise_study(
        tmp_path,
        one_database_url,
        screener=SCREENER,
        schedule={"per_worker_cap": 6},
        simulated={
            "workers": [
                {"profile": "diligent", "count": 7},
                {"profile": "diligent", "count": 3, "fails_screener": True},
            ]
        },
    )
    result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=240)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "ab-demo"
    with session_scope(one_database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        out_rows = s.scalars(select(Assignment).where(Assignment.status == "screened_out")).all()
        assert sorted(a.worker.external_id for a in out_rows) == [f"sim-diligent-{i:03d}" for i in (7, 8, 9)]
        # No answer of theirs (a pairwise HIT may hold ties stored without asking when the HIT was taken:
        # source "auto", never exported for an assignment that was not handed in).
        assert all(a.consented_at is None and all(r.source == "auto" for r in a.responses) for a in out_rows)
        pay = s.scalars(select(Payment).where(Payment.kind == "screen_out")).all()
        assert sorted((p.assignment_id, p.amount, p.status) for p in pay) == sorted(
            (a.id, Decimal("0.15"), "paid") for a in out_rows
        )
        # The freed places were taken by others: every comparison has its votes from workers who passed.
        answered_by = set(
            s.scalars(select(Assignment.worker_id).join(Response).where(Response.source == "worker").distinct())
        )
        assert len(answered_by) == 7 and not answered_by & {a.worker_id for a in out_rows}
        assert s.scalar(select(func.count()).select_from(Event).where(Event.kind == "screened_out")) == 3
    from hitkit.running.status import study_status

    info = study_status(one_database_url, "ab-demo")
    assert info["workers"] == 7 and info["assignments"]["screened_out"] == 3
    votes = pd.read_csv(out / "export" / "votes.csv")
    assignments = pd.read_csv(out / "export" / "assignments.csv")
    assert votes["worker_id"].nunique() == 7 and assignments["worker_id"].nunique() == 7
    assert "screened_out" not in set(assignments["status"])
    payments = pd.read_csv(out / "export" / "payments.csv")
    assert (payments["kind"] == "screen_out").sum() == 3


def test_a_screen_out_reward_that_breaks_prolifics_rules_is_refused_at_load(tmp_path, database_url):
    base = {"kind": "prolific", "currency": "GBP", "prolific": {"estimated_minutes": 2}}
    for reward, why in (("0.50", "must be less than hit.reward 0.50"), ("0.05", "under Prolific's floor of 0.10 GBP")):
        with pytest.raises(ConfigError, match=why):
            load_study(
                pairwise_study(
                    tmp_path, database_url, provider=base, screener={**SCREENER, "screen_out_reward": reward}
                )
            )
    with pytest.raises(ConfigError, match="not among its options"):
        load_study(
            pairwise_study(
                tmp_path,
                database_url,
                screener={
                    **SCREENER,
                    "questions": [{"name": "q", "text": "?", "options": ["a", "b"], "accept": ["c"]}],
                },
            )
        )


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)
    with FakeProlificServer() as server:
        yield server
        assert server.violations == []


def test_on_prolific_a_screened_out_participant_gets_the_fixed_screen_out_code_and_prolific_pays_it(
    tmp_path, database_url, fake
):
    from tests.test_provider_prolific import launch_on, pid

    web, config, secret = launch_on(tmp_path, database_url, fake, screener={**SCREENER, "slots": 2})
    try:
        [sid] = fake.studies
        [created] = fake.calls("POST", "/studies/")
        so = created.body["completion_codes"][1]
        assert so["code_type"] == "FIXED_SCREENOUT" and so["actions"] == [
            {"action": "FIXED_SCREEN_OUT_PAYMENT", "slots": 2, "fixed_screen_out_reward": 15}
        ]
        places = fake.places_taken(sid)
        session_id = fake.start_session(pid("phone"), sid)
        http = requests.Session()
        page = http.get(
            f"{web.url}/s/ab-demo/enter",
            params={"PROLIFIC_PID": pid("phone"), "STUDY_ID": sid, "SESSION_ID": session_id},
        )
        assert page.status_code == 200 and "screener-language" in page.text
        task = page.url.split("?")[0]
        assert http.post(task + "consent").status_code == 409  # no consent before the screener
        reply = http.post(task + "screener", json={"answers": {"language": "yes", "device": "phone"}})
        assert reply.json()["screened_out"] is True
        assert reply.json()["url"] == f"https://app.prolific.com/submissions/complete?cc={so['code']}"
        assert (
            http.post(task + "screener", json={"answers": {"language": "yes", "device": "computer"}}).json()[
                "screened_out"
            ]
            is True
        )  # the first answer stands
        with session_scope(database_url) as s:
            assert s.scalar(select(Payment.status).where(Payment.kind == "screen_out")) == "pending"
        fake.complete(session_id, so["code"])  # the participant follows the redirect
        assert fake.submissions[session_id]["status"] == "SCREENED OUT" and fake.places_taken(sid) == places
        tick(database_url, config.study, web.url)
        with session_scope(database_url) as s:
            rows = {p.kind: (p.amount, p.status) for p in s.scalars(select(Payment))}
            assert rows == {"screen_out": (Decimal("0.15"), "paid"), "fee": (Decimal("0.06"), "paid")}
            assert s.scalar(select(Assignment.status)) == "screened_out"
    finally:
        web.stop()


def test_on_a_panel_a_screened_out_participant_goes_to_the_screen_out_url_and_frees_the_place(tmp_path, database_url):
    from tests.studies import served
    from tests.test_provider_panel import PANEL

    screen_out = "https://connect.example/screenout?code={code}&s={session_id}"
    study_file = pairwise_study(
        tmp_path,
        database_url,
        provider={"kind": "panel", "panel": PANEL},
        screener={**SCREENER, "screen_out_url": screen_out, "screen_out_code": "SO42"},
    )
    pages = served(study_file, database_url)
    base, config, _ = next(pages)
    try:
        http = requests.Session()
        page = http.get(f"{base}/s/ab-demo/enter", params={"participantId": "P-1", "assignmentId": "S-1"})
        assert page.status_code == 200 and "screener-device" in page.text
        task = page.url.split("?")[0]
        form = {
            "csrf": re.search(r'name="csrf" value="([^"]+)"', page.text).group(1),
            "screener-language": "yes",
            "screener-device": "phone",
        }
        done = http.post(task + "screener", data=form, allow_redirects=False)
        assert (
            done.status_code == 302 and done.headers["Location"] == "https://connect.example/screenout?code=SO42&s=S-1"
        )
        again = http.get(f"{base}/s/ab-demo/enter", params={"participantId": "P-1", "assignmentId": "S-2"})
        assert again.status_code in (403, 409)  # screened out once: not again in this study
        with session_scope(database_url) as s:
            # The second visit's assignment was returned at once: no place is held by a screened-out participant.
            assert sorted(s.scalars(select(Assignment.status))) == ["returned", "screened_out"]
            pay = s.scalars(select(Payment).where(Payment.kind == "screen_out")).all()
            assert [(p.amount, p.status) for p in pay] == [(Decimal("0.15"), "paid")]  # the panel pays it
        # A passing participant goes on to the instructions and consents.
        ok = requests.Session()
        page = ok.get(f"{base}/s/ab-demo/enter", params={"participantId": "P-2", "assignmentId": "S-3"})
        task = page.url.split("?")[0]
        assert ok.post(task + "screener", json={"answers": {"language": "yes", "device": "computer"}}).json() == {
            "passed": True
        }
        assert "screener-device" not in ok.get(task).text
        assert ok.post(task + "consent").status_code == 200
    finally:
        pages.close()
