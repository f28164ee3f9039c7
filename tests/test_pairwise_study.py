"""A whole A/B study with the simulated crowd, through real HTTP, asserted on the database and exports."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal

import pandas as pd
import pytest
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Hit, Payment, Response, Study, Unit
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from tests.studies import REPO, launch, pairwise_study


def test_simulated_ab_study_stores_every_acknowledged_vote_once_within_budget_and_cap(tmp_path, database_url):
    study_file = pairwise_study(tmp_path, database_url, simulated={"ack_log": True})
    result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=240)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "ab-demo"
    acks = [json.loads(line) for line in (out / "acks.jsonl").read_text().splitlines()]
    votes = pd.read_csv(out / "export" / "votes.csv")

    with session_scope(database_url) as s:
        study = s.scalar(select(Study))
        assert study.status == "completed"
        keys = dict(s.execute(select(Unit.id, Unit.public_key)).all())  # workers (and the acks) name units by key
        stored = {
            (r.assignment.provider_assignment_id, keys[r.unit_id]): r.value
            for r in s.scalars(select(Response).where(Response.question == "vote", Response.source == "worker"))
        }
        # Every acknowledged vote is in the database with the value the worker gave.
        for ack in acks:
            assert stored[(ack["assignment"], ack["unit_id"])] == ack["value"]
        # Every vote in the database is in the export exactly once.
        total_votes = s.scalar(select(func.count()).select_from(Response).where(Response.question == "vote"))
        assert len(votes) == total_votes
        assert not votes.duplicated(["assignment_id", "item_id", "system_a", "system_b"]).any()
        # Each comparison has exactly the required votes, from distinct workers.
        per_unit = Counter(r.unit_id for r in s.scalars(select(Response)))
        for unit in s.scalars(select(Unit)):
            assert per_unit[unit.id] == unit.required_answers
        # No worker over the cap; spend within the budget.
        per_worker = Counter(a.worker_id for a in s.scalars(select(Assignment)))
        assert max(per_worker.values()) <= 3
        paid = s.scalar(select(func.sum(Payment.amount)).where(Payment.status == "paid"))
        assert Decimal(paid) <= study.budget
        assert s.scalar(select(func.count()).select_from(Assignment).where(Assignment.status != "approved")) == 0

    # Identical responses were recorded as ties without asking.
    assert set(
        votes.loc[
            votes["item_id"].isin(["q07", "q19"])
            & votes["system_a"].isin(["beta", "gamma"])
            & votes["system_b"].isin(["beta", "gamma"]),
            "vote",
        ]
    ) == {"tie"}
    ranking = pd.read_csv(out / "analysis" / "ranking.csv")
    assert list(ranking.sort_values("rank")["system"]) == ["alpha", "beta", "gamma"]
    assert (out / "analysis" / "pairs.csv").exists()


def test_budget_is_a_hard_ceiling_and_raising_it_lets_a_resumed_study_finish(tmp_path, one_database_url):
    # Each HIT costs 3 × 0.50 = 1.50 at worst; a 4.00 budget allows two HITs, never a third.
    database_url = one_database_url  # one store: what this test checks is not storage
    study_file = pairwise_study(tmp_path, database_url, budget="4.00")
    with pytest.raises(HitkitError, match="budget .* is committed"):
        launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=60)
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Hit).where(Hit.status != "pending")) == 2
        paid = s.scalar(select(func.coalesce(func.sum(Payment.amount), 0)))
        assert Decimal(paid) <= Decimal("4.00")
        answers_before = s.scalar(select(func.count()).select_from(Response))

    study_file = pairwise_study(tmp_path, database_url, budget="60.00")
    launch(study_file, yes=True, resume=True, show_progress=False, echo=lambda _m: None, timeout_s=240, analyse=False)
    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        assert s.scalar(select(func.count()).select_from(Response)) > answers_before


def test_resume_refuses_a_changed_study_design(tmp_path, database_url):
    study_file = pairwise_study(tmp_path, database_url, budget="4.00")
    with pytest.raises(HitkitError):
        launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=60)
    changed = pairwise_study(tmp_path, database_url, budget="4.00", pairwise={"votes_per_prompt": 5})
    with pytest.raises(HitkitError, match="pairwise changed since the study was launched"):
        launch(changed, yes=True, resume=True, show_progress=False, echo=lambda _m: None, timeout_s=10)


def test_judge_like_simulated_workers_prefer_the_longer_and_the_first_response_over_http(tmp_path, one_database_url):
    # Equal systems, so only a judge's habits move the votes: the longer response and position A win.
    study_file = pairwise_study(
        tmp_path,
        one_database_url,
        simulated={
            "workers": [{"profile": "judge_like", "count": 14}],
            "quality": {"alpha": 0.5, "beta": 0.5, "gamma": 0.5},
        },
        schedule={"per_worker_cap": 9},
        pairwise={"votes_per_prompt": 9},
        budget="200.00",
    )
    launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=240, analyse=False)
    out = tmp_path / "runs" / "ab-demo"
    votes = pd.read_csv(out / "export" / "votes.csv")
    texts = {
        (r["id"], s): t
        for r in map(json.loads, (REPO / "examples" / "data" / "ab_responses.jsonl").read_text().splitlines())
        for s, t in r["responses"].items()
    }
    decided = votes[votes["vote"].isin(["a", "b"])]
    longer = [
        len(texts[(i, a)]) > len(texts[(i, b)])
        for i, a, b in decided[["item_id", "system_a", "system_b"]].itertuples(index=False)
    ]
    different = [
        len(texts[(i, a)]) != len(texts[(i, b)])
        for i, a, b in decided[["item_id", "system_a", "system_b"]].itertuples(index=False)
    ]
    picked_longer = [(v == "a") == lng for v, lng, d in zip(decided["vote"], longer, different) if d]
    assert sum(picked_longer) / len(picked_longer) > 0.65
    # Position: the longer response wins more often when it is shown as A than when shown as B. (Comparing
    # within each case keeps the random sides' imbalance between long and short out of the check; the
    # share of votes for A alone swung from 0.50 to 0.59 between runs of 260 votes. With 9 votes a prompt,
    # about 775, the two rates came out 0.79–0.82 against 0.64–0.66 in four runs, as the profile's logits
    # of 1.4 and 0.6 predict.)
    a_longer = [v == "a" for v, lng, d in zip(decided["vote"], longer, different) if d and lng]
    b_longer = [v == "b" for v, lng, d in zip(decided["vote"], longer, different) if d and not lng]
    assert sum(a_longer) / len(a_longer) > sum(b_longer) / len(b_longer)
