"""Answers a human really typed: signals bounded at the edge, scored for review, and shown in the export,
the dashboard and QC; a simulated crowd with LLM pasters, slow typists and phone typists over real HTTP."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest
import requests
import yaml
from sqlalchemy import func, select

from hitkit.analysis.authenticity import FLAG_AT, MIN_CHARS, AnswerScore, score_answer, score_worker
from hitkit.dashboard import worker_rows
from hitkit.db.models import Assignment, Study, Turn, Worker
from hitkit.db.session import session_scope
from hitkit.simulation import crowd_typing
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext, resolve_secret
from hitkit.tables.export import export_study
from hitkit.worker import security
from hitkit.worker.authenticity import COUNT_MAX, SIGNALS, clean_signals
from tests.studies import launch, pairwise_study
from tests.test_input_bounds import PASSWORD, USER, logged_in
from tests.test_live_chat_study import bot_server, live_chat_study  # noqa: F401 - the bot server fixture
from tests.test_security import arrive, serve, token_of

TYPED = {
    "keys": 60,
    "typed_chars": 60,
    "composed_chars": 0,
    "pasted_chars": 0,
    "pastes": 0,
    "deletes": 3,
    "iki_median_ms": 150,
    "iki_iqr_ms": 90,
    "compose_ms": 12_000,
    "blurs": 0,
}


# The signals at the edge ----------------------------------------------------------------------------
def test_signals_keep_known_numbers_clamped_and_drop_everything_else():
    raw = {
        "keys": 12.7,
        "pasted_chars": 10**12,
        "pastes": -4,
        "compose_ms": float("nan"),
        "blurs": True,
        "typed_chars": "40",
        "deletes": None,
        "keystrokes": ["h", "e"],
        "iki_median_ms": 3e9,
    }
    assert clean_signals(raw) == {
        "keys": 12,
        "pasted_chars": COUNT_MAX,
        "pastes": 0,
        "iki_median_ms": SIGNALS["iki_median_ms"][0],
    }
    for junk in (None, "pasted", 3, ["keys", 3], {"keys": "x"}, {}):
        assert clean_signals(junk) is None


# Scoring -------------------------------------------------------------------------------------------------
def test_typed_text_is_not_flagged_and_pasted_text_is():
    assert score_answer(TYPED, 57) == AnswerScore(0.0, "typed", False)
    pasted = {**TYPED, "keys": 1, "typed_chars": 1, "pasted_chars": 180, "pastes": 1, "compose_ms": 9000}
    scored = score_answer(pasted, 180)
    assert scored.flagged and scored.reason == "pasted" and scored.score == 1.0


def test_text_with_no_input_and_implausibly_fast_typing_are_flagged():
    nothing = dict.fromkeys(SIGNALS, 0)
    assert score_answer(nothing, 80).reason == "no input" and score_answer(nothing, 80).flagged
    fast = {**TYPED, "keys": 200, "typed_chars": 200, "compose_ms": 4000}  # 50 characters a second
    assert score_answer(fast, 200) == AnswerScore(1.0, "too fast", True)


def test_a_suggested_prompt_sent_as_offered_is_not_no_input_but_unoffered_text_still_is():
    # The arena's page fills the box with the drawn prompt; the instructions let the worker send it as it is.
    nothing = dict.fromkeys(SIGNALS, 0)
    assert score_answer(nothing, 80, offered_chars=80) == AnswerScore(0.0, "sent as offered", False)
    half = score_answer(nothing, 80, offered_chars=40)  # 40 characters no input accounts for
    assert half.reason == "no input" and half.flagged


def test_short_answers_and_answers_without_signals_are_never_flagged():
    paste = {"pasted_chars": 5, "pastes": 1}
    assert not score_answer(paste, MIN_CHARS - 1).flagged
    assert score_answer(paste, MIN_CHARS - 1).score >= FLAG_AT
    assert score_answer(None, 300) == AnswerScore(None, "no signals", False)


def test_a_worker_is_flagged_for_a_pattern_not_for_one_paste():
    typed, pasted = AnswerScore(0.0, "typed", False), AnswerScore(1.0, "pasted", True)
    once = score_worker([typed] * 9 + [pasted])
    assert (once.flagged, once.flag, once.label) == (1, False, "1 of 10 flagged, mostly pasted")
    pattern = score_worker([typed] * 6 + [pasted] * 4 + [AnswerScore(None, "no signals", False)])
    assert (pattern.scored, pattern.flagged, pattern.share, pattern.flag) == (10, 4, 0.4, True)
    assert pattern.label == "review: 4 of 10 flagged, mostly pasted"
    assert score_worker([]).label == "no signals"


@pytest.mark.parametrize("profile", ["diligent", "slow_typist", "phone", "noisy"])
def test_honest_simulated_typists_are_rarely_flagged(profile):
    rng = random.Random(7)
    flagged = 0
    for w in range(50):
        who = crowd_typing.typist(profile, f"sim-{profile}-{w:03d}")
        answers = [
            score_answer(crowd_typing.typed_signals(who, text, rng), len(text))
            for text in ["I went for a long walk yesterday and it was lovely."] * 12
        ]
        flagged += score_worker(answers).flag
    assert flagged == 0


def test_simulated_llm_pasters_are_flagged():
    rng = random.Random(7)
    caught = 0
    for w in range(50):
        who = crowd_typing.typist("llm_paster", f"sim-llm_paster-{w:03d}")
        answers = []
        for _ in range(12):
            if who.pastes(rng):
                text = crowd_typing.bot_written_message(rng)
                answers.append(score_answer(crowd_typing.pasted_signals(who, text, rng), len(text)))
            else:
                answers.append(score_answer(crowd_typing.typed_signals(who, "Do you have any pets?", rng), 21))
        caught += score_worker(answers).flag
    assert caught >= 48


# Over real HTTP ----------------------------------------------------------------------------------------
def test_a_forged_signals_object_is_bounded_and_never_costs_the_message(
    tmp_path,
    database_url,
    bot_server,  # noqa: F811 - the fixture imported above
    monkeypatch,
):
    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", PASSWORD)
    monkeypatch.delenv("HITKIT_DASHBOARD_PASSWORD_HASH", raising=False)
    web, _ = serve(tmp_path, database_url, live_chat_study(tmp_path, database_url, bot_server))
    try:
        task = arrive(web.url, "chat-demo", "W-forger")
        uid = next(u for u in requests.get(task + "state").json()["units"] if u["position"] == 0)["unit_id"]
        topic = {
            "unit_id": uid,
            "question": "topic",
            "value": "films and the people who make them",
            "signals": {"keys": 30, "typed_chars": 30, "pasted_chars": 4, "pastes": 1, "compose_ms": 9000},
        }
        assert requests.post(task + "answer", json=topic).ok
        assert requests.post(
            task + "answer",
            json={"unit_id": uid, "question": "topic_sentiment", "value": "like", "signals": "typed, honest"},
        ).ok
        forged = {"keys": 10**30, "typed_chars": -1, "content": "h,e,l,l,o", **{f"x{i}": i for i in range(2000)}}
        pasted = {"keys": 0, "typed_chars": 0, "pasted_chars": 120, "pastes": 1, "compose_ms": 8000, "blurs": 2}
        sent = [
            ("Hello there, which films have you liked lately?", forged),
            ("A wonderful question! Many films explore the human condition in fascinating ways.", pasted),
            ("Cinema offers a unique window into diverse cultures and perspectives worth exploring.", pasted),
            ("and no signals at all", None),
            ("a list", [1, 2, 3]),
        ]
        for text, signals in sent:
            reply = requests.post(task + f"chat/{uid}/message", json={"text": text, "signals": signals})
            assert reply.ok, reply.text
        page = logged_in(web.url).get(f"{web.url}/dashboard/study/chat-demo/workers")
        assert page.ok and "Typed" in page.text
        # The topic is typed, the forged message has no input for its text, and no signals count for nothing.
        assert "review: 3 of 4 flagged, mostly pasted" in page.text
    finally:
        web.stop()
    with session_scope(database_url) as s:
        stored = [t.signals for t in s.scalars(select(Turn).where(Turn.speaker == "worker").order_by(Turn.index))]
        assert len(stored) == len(sent)
        assert stored[0] == {"keys": COUNT_MAX, "typed_chars": 0}
        assert stored[1] == stored[2] == {**pasted}
        assert stored[3] is None and stored[4] is None


def test_a_live_chat_crowd_of_pasters_and_honest_typists_is_scored_end_to_end(
    tmp_path,
    one_database_url,
    bot_server,  # noqa: F811 - the fixture imported above
):
    path = live_chat_study(tmp_path, one_database_url, bot_server, hits=8, min_inputs=3)
    data = yaml.safe_load(path.read_text())
    data["simulated"]["workers"] = [
        {"profile": p, "count": 2} for p in ("llm_paster", "slow_typist", "phone", "diligent")
    ]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = launch(path, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=300)
    assert result.crowd_errors == []
    export = tmp_path / "runs" / "chat-demo" / "export"
    workers = pd.read_csv(export / "authenticity_workers.csv", dtype={"worker_id": str}).set_index("worker_id")
    assert sorted(workers.index) == sorted(
        f"sim-{p}-{i:03d}" for p in ("llm_paster", "slow_typist", "phone", "diligent") for i in range(2)
    )
    pasters = workers.index.str.startswith("sim-llm_paster")
    assert workers.loc[pasters, "flag"].tolist() == [1, 1]
    assert workers.loc[~pasters, "flag"].tolist() == [0] * 6
    assert all("pasted" in r for r in workers.loc[pasters, "reasons"])
    answers = pd.read_csv(export / "authenticity.csv", dtype={"worker_id": str})
    assert set(answers["kind"]) == {"message", "answer", "comment"}
    assert set(answers.loc[answers["kind"] == "answer", "question"]) == {"topic"}
    # Comments on the whole HIT (about a third of HITs) carry their signals too: a paster's is pasted.
    comments = answers[answers["kind"] == "comment"]
    assert set(comments["question"]) == {"feedback"}
    feedback = pd.read_csv(export / "feedback.csv", dtype={"worker_id": str})
    assert len(comments) == feedback["feedback"].notna().sum() > 0
    assert len(answers[answers["kind"] == "message"]) == 8 * 6 * 3
    # The ratings are those of diligent workers: the analysis is unchanged by how they typed.
    assert pd.read_csv(export / "ratings.csv")["worker_id"].nunique() == 8
    config = load_study(path)
    with session_scope(one_database_url) as s:
        assert (
            s.scalar(select(func.count()).select_from(Turn).where(Turn.speaker == "worker", Turn.signals.is_(None)))
            == 0
        )
        study = s.scalar(select(Study))
        ctx = StudyContext.of(study, resolve_secret(one_database_url))
        rows = {r.external_id: r for r in worker_rows(s, ctx, None)}
    assert config.authenticity.show_instruction and not config.authenticity.block_paste
    assert rows["sim-llm_paster-000"].authenticity.flag and not rows["sim-phone-000"].authenticity.flag
    # A flag is for review: every paster's work was submitted (and paid as the study's policy says), none rejected.
    assert all(r.statuses.get("rejected", 0) == 0 for r in rows.values())


def test_the_hit_comment_carries_signals_on_a_pairwise_page(tmp_path, database_url):
    """The comment box every protocol's submit form has: a pasted comment is flagged, a typed one is not,
    a forged or unreadable signals field never costs the submission, and a blank comment keeps none."""
    web, secret = serve(tmp_path, database_url, pairwise_study(tmp_path, database_url))
    pasted_comment = crowd_typing.bot_written_message(random.Random(1))
    typed_comment = "The second answers were often cut off mid-sentence."
    rng = random.Random(2)
    sent = {
        "W-paster": (
            pasted_comment,
            json.dumps(crowd_typing.pasted_signals(crowd_typing.typist("llm_paster", "W-paster"), pasted_comment, rng)),
        ),
        "W-typist": (
            typed_comment,
            json.dumps(crowd_typing.typed_signals(crowd_typing.typist("diligent", "W-typist"), typed_comment, rng)),
        ),
        "W-forger": ("Nothing to add, it was fine.", "{not json"),
        "W-silent": ("", json.dumps({"keys": 3})),
    }
    try:
        for hit, (worker, (comment, signals)) in enumerate(sent.items(), start=1):
            task = arrive(web.url, "ab-demo", worker, hit=hit)
            page = requests.get(task).text
            assert "authenticity.js" in page and 'name="feedback"' in page  # the page watches the comment box
            state = requests.get(task + "state").json()
            form = {
                "csrf": security.csrf_value(secret, token_of(task)),
                "feedback": comment,
                "feedback_signals": signals,
            }
            form.update({f"answer-{u['unit_id']}-{q['name']}": "a" for u in state["units"] for q in u["questions"]})
            reply = requests.post(task + "submit", data=form)
            assert reply.status_code == 200 and "submitted" in reply.text, reply.text
    finally:
        web.stop()
    with session_scope(database_url) as s:
        stored = {
            w: (a.feedback, a.feedback_signals)
            for a, w in s.execute(
                select(Assignment, Worker.external_id).join(Worker, Assignment.worker_id == Worker.id)
            )
        }
        assert stored["W-paster"] == (pasted_comment, clean_signals(json.loads(sent["W-paster"][1])))
        assert stored["W-paster"][1]["pasted_chars"] == len(pasted_comment)
        assert stored["W-typist"][1]["typed_chars"] >= len(typed_comment)
        assert stored["W-forger"] == ("Nothing to add, it was fine.", None)
        assert stored["W-silent"] == (None, None)
        ctx = StudyContext.of(s.scalar(select(Study)), secret)
        export_study(s, ctx, tmp_path / "export", "csv")
    answers = pd.read_csv(tmp_path / "export" / "authenticity.csv", dtype={"worker_id": str}).set_index("worker_id")
    assert sorted(answers.index) == ["W-paster", "W-typist"]
    assert set(answers["kind"]) == {"comment"} and set(answers["question"]) == {"feedback"}
    assert answers.loc["W-paster", "flagged"] == 1 and answers.loc["W-paster", "reason"] == "pasted"
    assert answers.loc["W-typist", "flagged"] == 0 and answers.loc["W-typist", "chars"] == len(typed_comment)
    workers = pd.read_csv(tmp_path / "export" / "authenticity_workers.csv", dtype={"worker_id": str})
    assert workers.set_index("worker_id")[["answers", "flagged"]].to_dict("index") == {
        "W-paster": {"answers": 1, "flagged": 1},
        "W-typist": {"answers": 1, "flagged": 0},
    }
