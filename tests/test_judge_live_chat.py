"""Live-chat studies with an LLM judge (the study file's ``judge:``): each real system's conversation is
rated by its worker with probability ``judge.human_share`` (the QC bot's always), a scripted
OpenAI-compatible judge over real HTTP rates every finished conversation on every criterion after the
crowd, and the analysis reports human-only, judge-only and prediction-powered mean z per system and
criterion."""

from __future__ import annotations

import hashlib
import json
import math
import re

import pandas as pd
import pytest
import requests
import yaml
from sqlalchemy import select

from hitkit.db.models import Conversation, JudgeLabel, Response, Study, Unit
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA
from hitkit.protocols.live_chat.judge import parse
from hitkit.study.loading import load_study
from hitkit.worker import admission, flow
from tests.studies import REPO, launch, served
from tests.test_judge import JudgeServer, serving
from tests.test_live_chat_study import REAL as QUALITY
from tests.test_live_chat_study import live_chat_study

FAVOURED = "emil"
"""The scripted judge's pet system: it rates emil's conversations far above what people think of them."""
NAMES = [c.name for c in DEFAULT_CRITERIA]
NEGATIVE = {c.name for c in DEFAULT_CRITERIA if c.polarity == "negative"}
HITS = 10


class ChatAndJudge(JudgeServer):
    """One OpenAI-compatible server for the study's bots and its judge. A bot (model = system name)
    signs each reply with its name; the judge (model ``scripted-judge``) reads the signatures in the
    conversation, rates by the system's quality (with a strong pull toward :data:`FAVOURED`), leaves
    ``fun`` out of every fifth reply, and answers HTTP 500 from request ``fail_after`` on."""

    def __init__(self):
        super().__init__()
        self.judged: list[str] = []
        self.fail_after: int | None = None

    def reply_to(self, body: dict) -> tuple[int, str]:
        model, prompt = body["model"], body["messages"][-1]["content"]
        if model != "scripted-judge":
            return 200, f"[{model}] That sounds nice, tell me more."
        with self.lock:
            if self.fail_after is not None and len(self.judged) >= self.fail_after:
                return 500, "scripted judge failure"
            self.judged.append(prompt)
            n = len(self.judged)
        system = re.search(r"Chatbot: \[(\w+)\]", prompt).group(1)
        agree = 100 * min(1.0, QUALITY.get(system, 0.05) + 0.4 * (system == FAVOURED))
        noise = int(hashlib.sha256(prompt.encode()).hexdigest()[:4], 16) % 11 - 5
        lines = [
            f"{name}: {round(max(0, min(100, (100 - agree if name in NEGATIVE else agree) + noise)))}"
            for name in NAMES
            if not (n % 5 == 0 and name == "fun")
        ]
        return 200, "Here are my ratings:\n" + "\n".join(lines)


@pytest.fixture
def endpoint():
    yield from serving(ChatAndJudge())


def judged_chat_study(tmp_path, database_url, url, hits: int = HITS, **judge) -> str:
    """Live chat's study of :mod:`tests.test_live_chat_study`, smaller, all diligent, with a judge."""
    path = live_chat_study(tmp_path, database_url, url, hits=hits, min_inputs=1)
    data = yaml.safe_load(path.read_text())
    data["study"] = "chat-judge"
    data["schedule"].update(wave_size=hits, max_concurrent=hits, qc_failures="pay")
    data["simulated"].update(workers=[{"profile": "diligent", "count": hits}], concurrency=5)
    data["judge"] = {
        "url": url,
        "model": "scripted-judge",
        "human_share": 0.5,
        "options": {"retries": 0, "backoff_s": 0, "timeout_s": 10, "concurrency": 4},
        **judge,
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_judged_live_chat_study_rates_a_random_share_judges_every_conversation_and_reports_ppi(
    tmp_path, one_database_url, endpoint
):
    database_url = one_database_url  # one store: what this test checks is not storage
    study_file = judged_chat_study(tmp_path, database_url, endpoint.url)
    lines = []
    result = launch(study_file, yes=True, show_progress=False, echo=lines.append, timeout_s=300)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "chat-judge"
    real = HITS * 5

    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        units = {u.id: u for u in s.scalars(select(Unit))}
        drawn = {u.key: u.payload.get("rated") for u in units.values()}
        assert all(drawn[k] is None for k in drawn if k.startswith("qc#"))  # the QC bot's slot: always rated
        share = [v for k, v in drawn.items() if not k.startswith("qc#")]
        assert len(share) == real and 0 < sum(share) < real  # some rated, some not
        answered = {}
        for r in s.scalars(select(Response)):
            answered.setdefault(r.unit_id, set()).add(r.question)
        for unit_id, questions in answered.items():
            rated = units[unit_id].payload.get("rated", True)
            assert any(q.startswith("score_") for q in questions) == rated
            assert ("chat_done" in questions) == (not rated)
        labels = s.scalars(select(JudgeLabel)).all()
        assert len(labels) == real * len(NAMES) and {r.status for r in labels} == {"done"}
        judged = {r.unit_key.split("/")[0] for r in labels}
        kinds = dict(s.execute(select(Conversation.key, Conversation.meta)).all())
        assert judged == {k for k, meta in kinds.items() if not meta["is_control"]}  # every real one, no QC bot's
    assert len(endpoint.judged) == real  # one request per conversation, none asked twice

    ratings = pd.read_csv(out / "export" / "ratings.csv", dtype=str)
    judge = pd.read_csv(out / "export" / "judge.csv", dtype={"conversation_id": str, "worker_id": str})
    assert len(judge) == real * len(NAMES)
    sampled = set(judge.loc[judge["human_subset"], "conversation_id"])
    rated = set(ratings.loc[ratings["is_control"] == "0", "conversation_id"])
    assert rated == sampled and len(sampled) == sum(share)  # only the sampled conversations have ratings
    unparsed = judge[~judge["parsed"]]
    assert len(unparsed) == real // 5 and set(unparsed["criterion"]) == {"fun"} and (unparsed["score"] == 50).all()

    scores = pd.read_csv(out / "analysis" / "judge_scores.csv")
    assert set(scores["system"]) == set(QUALITY) and set(scores["criterion"]) == {"overall", *NAMES}
    for kind in ("human", "judge", "ppi"):
        assert scores[[kind, f"{kind}_low", f"{kind}_high"]].notna().all().all()
        assert ((scores[f"{kind}_low"] <= scores[kind]) & (scores[kind] <= scores[f"{kind}_high"])).all()
    assert scores["lam"].between(0, 1).all() and (scores["fallback"] == (scores["lam"] == 0)).all()
    assert (scores["n_judge"] > scores["n_human"]).all() and (scores["n_human"] >= 2).all()
    bias = pd.read_csv(out / "analysis" / "judge_bias.csv").set_index("system")["bias"]
    # The judge rates emil (0.3 + its pull of 0.4) about as bert (0.75), people far below it. (The judge's z
    # are not on the workers' scale: workers standardise with the QC bot's conversations too.)
    assert bias[FAVOURED] > bias["bert"] + 0.3
    summary = json.loads((out / "analysis" / "summary.json").read_text())
    assert summary["judge"]["conversations"] == real and summary["judge"]["unparsed"] == real // 5
    assert any(line.startswith(f"Judge: {real} conversations planned") for line in lines)

    from hitkit.report.build import report

    files = report(out, tmp_path / "report")
    assert "People and the LLM judge" in files.html.read_text()
    assert "PPI++" in files.methods and "rated by its worker with probability 0.5" in files.methods


def test_the_server_refuses_ratings_on_an_unrated_slot_and_needs_none_there(tmp_path, database_url, endpoint):
    study_file = judged_chat_study(tmp_path, database_url, endpoint.url)
    pages = served(study_file, database_url)
    url, config, secret = next(pages)
    try:
        from hitkit.study.stored import StudyContext

        with session_scope(database_url) as s:
            ctx = StudyContext.load(s, config.study, secret)
            entry = admission.enter(s, ctx, None, {"workerId": "W1", "assignmentId": "W1-A", "hitId": "h"})
            flow.consent(s, ctx, entry.token)
            units = {u.id: u for u in s.scalars(select(Unit).where(Unit.id.in_(entry.assignment.layout["order"])))}
            slot = next(u for u in units.values() if u.payload.get("rated") is False)
            public = slot.public_key
        answer = f"{url}/a/{config.study}/{entry.token}/answer"
        for question, value in (("topic", "cats"), ("topic_sentiment", "like")):
            assert requests.post(answer, json={"unit_id": public, "question": question, "value": value}).ok
        state = requests.get(f"{url}/a/{config.study}/{entry.token}/state").json()
        view = next(v for v in state["units"] if v["unit_id"] == public)
        assert view["rated"] is False and view["criteria"] == [] and view["optional"] == []
        assert [q["name"] for q in view["questions"]] == ["topic", "topic_sentiment", "chat_done"]
        refused = requests.post(answer, json={"unit_id": public, "question": "score_fun", "value": "70"})
        assert refused.status_code == 400 and "not rated" in refused.json()["error"]
        early = requests.post(answer, json={"unit_id": public, "question": "chat_done", "value": "yes"})
        assert early.status_code == 409  # "Next chatbot" waits for min_inputs messages, as the sliders do
        chat = f"{url}/a/{config.study}/{entry.token}/chat/{public}/message"
        assert requests.post(chat, json={"text": "hello there"}).ok
        assert requests.post(answer, json={"unit_id": public, "question": "chat_done", "value": "yes"}).ok
        with session_scope(database_url) as s:
            assignment = flow.assignment_for(s, ctx, entry.token)
            missing = {u for u, _ in flow.missing_answers(ctx, assignment)}
            assert slot.id not in missing and len(missing) == len(units) - 1
    finally:
        pages.close()


def test_a_reply_becomes_a_rating_per_criterion():
    reply = (
        "Sure! Here you go:\n- **Interesting**: 73\nfun = 60.5\n 3. robotic - 20\nrepetitive: 250\n"
        "topic: 40\nTopic: 99\nfluent: n/a"
    )
    assert parse(reply, NAMES) == {"interesting": 73, "fun": 60, "robotic": 20, "topic": 40}
    assert parse("I cannot rate this.", NAMES) == {}
    assert parse("Consistent: 100\nstays on topic: 5", ["consistent", "stays_on_topic"]) == {
        "consistent": 100,
        "stays_on_topic": 5,
    }


def test_a_judge_whose_replies_named_no_rating_falls_back_to_the_peoples_estimates():
    # SmolLM2-135M did this in the example study: every reply named no rating, so every score is the neutral 50.
    from hitkit.protocols.live_chat.judge import analysis_tables

    rows, judged = [], []
    for c in range(12):
        worker, system = f"w{c % 4}", ("anna", "bert")[c % 2]
        for k, criterion in enumerate(("interesting", "fun")):
            if c % 3:  # two in three conversations rated by their worker
                rows.append(
                    {
                        "conversation_id": f"c{c}",
                        "worker_id": worker,
                        "system": system,
                        "criterion": criterion,
                        "is_control": False,
                        "z": (c % 5 - 2) / 2 + k / 4,
                    }
                )
            judged.append(
                {
                    "conversation_id": f"c{c}",
                    "worker_id": worker,
                    "system": system,
                    "criterion": criterion,
                    "score": 50.0,
                    "parsed": False,
                    "human_subset": bool(c % 3),
                    "model": "m",
                }
            )
    criteria = [c for c in DEFAULT_CRITERIA if c.name in ("interesting", "fun")]
    tables, _, _ = analysis_tables(pd.DataFrame(rows), pd.DataFrame(judged), criteria, {f"w{i}" for i in range(4)})
    table = tables["judge_scores"]
    assert table["fallback"].all() and (table["lam"] == 0).all()
    assert table["ppi"].tolist() == pytest.approx(table["human"].tolist())
    assert table["ppi_low"].tolist() == pytest.approx(table["human_low"].tolist())
    assert table["n_effective"].tolist() == pytest.approx(table["n_human"].astype(float).tolist())


def test_a_failing_judge_keeps_the_crowds_work_and_hitkit_judge_asks_only_for_the_rest(
    tmp_path, one_database_url, endpoint
):
    database_url = one_database_url  # one store: what this test checks is not storage
    from click.testing import CliRunner

    from hitkit.cli import main

    # Six HITs (30 real conversations), the judge failing from its thirteenth: what is checked is which
    # conversations are asked again, whatever the study's size (ten HITs took longer; with four, the seeded
    # draw rates one conversation of a system, fewer than an interval needs).
    hits, stored = 6, 12
    real = hits * 5
    study_file = judged_chat_study(tmp_path, database_url, endpoint.url, hits=hits)
    endpoint.fail_after = stored
    lines = []
    launch(study_file, yes=True, show_progress=False, echo=lines.append, timeout_s=300, analyse=False)
    failed = f"failed on {real - stored} of {real} conversations"
    assert any(failed in line and f"hitkit judge {study_file}" in line for line in lines), lines
    ratings = pd.read_csv(tmp_path / "runs" / "chat-judge" / "export" / "ratings.csv")
    assert ratings["conversation_id"].nunique() > 0  # the crowd's work is exported whatever the judge did
    endpoint.fail_after = None
    run = CliRunner().invoke(main, ["judge", str(study_file), "--no-progress"])
    assert run.exit_code == 0, run.output
    assert f"{real} conversations planned, {stored} already stored, {real - stored} judged now" in run.output
    assert len(endpoint.judged) == real  # those before the failure and the missing ones: none asked twice
    with session_scope(database_url) as s:
        rows = s.scalars(select(JudgeLabel)).all()
        assert {r.status for r in rows} == {"done"} and len(rows) == real * len(NAMES)


@pytest.mark.parametrize(
    "judge, message",
    [
        ({"human_share": None, "human_items": 20}, "judge.human_items cannot size a live_chat study"),
        ({"prompt": "Rate {conversation}"}, "it lacks {criteria}"),
        ({"human_share": 0.01}, "each system needs at least 2 rated"),
    ],
)
def test_a_live_chat_judge_is_checked_before_anything_is_stored(tmp_path, database_url, judge, message):
    from hitkit.protocols import task_for

    path = judged_chat_study(tmp_path, database_url, "http://127.0.0.1:9", **judge)
    data = yaml.safe_load(path.read_text())
    data["judge"] = {k: v for k, v in data["judge"].items() if v is not None}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=re.escape(message)):
        task_for(load_study(path)).build()


def test_the_example_judged_live_chat_study_validates():
    config = load_study(REPO / "examples" / "live_chat_judge.yaml")
    assert config.judge is not None and config.judge.human_share < 1 and math.isfinite(config.judge.human_share)
