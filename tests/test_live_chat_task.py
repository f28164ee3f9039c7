"""The live_chat task type and its chat mechanics (METHODS §1): packing, blind shuffled slots,
answer validation, turns on the database (SQLite and PostgreSQL), and export → analysis."""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from hitkit import timing
from hitkit.db.models import Assignment, Conversation, Hit, Response, Study, Turn, Unit
from hitkit.db.session import session_scope
from hitkit.errors import AnswerError, ConfigError, FlowError
from hitkit.protocols import task_for
from hitkit.protocols.live_chat.analysis import analyze_live_chat
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA, RATING_COLUMNS
from hitkit.protocols.live_chat.task import SCORE_PREFIX, LiveChatTask, balanced_hits, conversation_key
from hitkit.study.config import StudyConfig
from hitkit.study.loading import parse_study
from hitkit.study.stored import create_study, resolve_secret
from hitkit.tables.export import export_study
from hitkit.worker import admission, chat, chat_turns, flow
from server import create_app

REAL = ["bot-anna", "bot-bert", "bot-cleo", "bot-dora", "bot-emil"]
QUALITY = {"bot-anna": 0.9, "bot-bert": 0.75, "bot-cleo": 0.6, "bot-dora": 0.45, "bot-emil": 0.3, "qc": 0.05}


def bot(name: str, **extra) -> dict:
    """A system entry with an (unused) endpoint, as live chat requires."""
    return {"name": name, "url": "http://127.0.0.1:9", "model": name, **extra}


def config(database_url: str | None = None, systems=REAL, **live_chat) -> StudyConfig:
    data = {
        "study": "chat-test",
        "task": "live_chat",
        "seed": 3,
        "budget": "100.00",
        "systems": [{"name": s, "url": "http://127.0.0.1:9", "model": s} for s in [*systems, "qc"]],
        "live_chat": {"hits": 2, "min_inputs": 2, **live_chat},
        "simulated": {"quality": {s: q for s, q in QUALITY.items() if s in [*systems, "qc"]}},
    }
    if database_url:
        data["database"] = database_url
    return parse_study(data)


# ------------------------------------------------------------------------- config


def test_the_study_file_needs_a_live_chat_section_that_can_be_balanced():
    base = {"study": "x", "task": "live_chat", "budget": "1", "systems": [bot(s) for s in [*REAL, "qc"]]}
    cases = [
        ({}, "needs a 'live_chat:' section"),
        ({"live_chat": {"hits": 2, "conversations_per_system": 2}}, "exactly one of"),
        ({"live_chat": {"hits": 2, "control": "judge"}}, "not in 'systems'"),
        ({"live_chat": {"hits": 2, "slots_per_hit": 7}}, "needs 6 real systems"),
        ({"live_chat": {"hits": 2, "icebreaker": True}}, "persona statements for every system"),
    ]
    for extra, message in cases:
        with pytest.raises(ConfigError, match=message):
            parse_study({**base, **extra})
    seven = {**base, "systems": [bot(f"s{i}") for i in range(7)] + [bot("qc")]}
    with pytest.raises(ConfigError, match="use a multiple of 7"):
        parse_study({**seven, "live_chat": {"hits": 3}})
    assert parse_study({**seven, "live_chat": {"conversations_per_system": 5}}).live_chat.hit_count(7) == 7
    default = parse_study({**base, "live_chat": {"hits": 1}}).live_chat
    assert [c.name for c in default.criteria] == [
        "robotic",
        "interesting",
        "fun",
        "consistent",
        "fluent",
        "repetitive",
        "topic",
    ]
    assert (default.slots_per_hit, default.min_inputs, default.control) == (6, 10, "qc")
    assert default.criterion_list() == DEFAULT_CRITERIA  # what the analysis takes
    with pytest.raises(ConfigError, match=r"systems.0 \('bot-anna'\): a live-chat system needs 'url'"):
        parse_study({**base, "live_chat": {"hits": 1}, "systems": [{"name": "bot-anna"}] + base["systems"][1:]})
    with pytest.raises(ConfigError, match=r"systems.1 \('bot-bert'\) options: temperature"):
        parse_study(
            {
                **base,
                "live_chat": {"hits": 1},
                "systems": [base["systems"][0], bot("bot-bert", options={"temperature": 9})] + base["systems"][2:],
            }
        )


# ------------------------------------------------------------------------- packing


@st.composite
def study_sizes(draw):
    systems = draw(st.integers(1, 12))
    per_hit = draw(st.integers(1, systems))
    step = systems // math.gcd(systems, per_hit)
    return systems, per_hit, step * draw(st.integers(0, 6)), draw(st.integers(0, 10_000))


@settings(max_examples=150, deadline=None)
@given(study_sizes())
def test_balanced_hits_gives_every_system_the_same_share_and_no_system_twice_in_a_hit(size):
    n_systems, per_hit, hits, seed = size
    systems = [f"s{i}" for i in range(n_systems)]
    plan = balanced_hits(systems, hits, per_hit, random.Random(seed))
    assert len(plan) == hits
    assert all(len(h) == per_hit and len(set(h)) == per_hit and set(h) <= set(systems) for h in plan)
    counts = Counter(s for h in plan for s in h)
    assert all(counts[s] == hits * per_hit // n_systems for s in systems)
    assert plan == balanced_hits(systems, hits, per_hit, random.Random(seed))


def test_balanced_hits_refuses_what_cannot_be_balanced():
    with pytest.raises(ConfigError, match="cannot be shared equally by 4 systems"):
        balanced_hits(["a", "b", "c", "d"], 3, 2, random.Random(0))
    with pytest.raises(ConfigError, match="needs at least 3 systems"):
        balanced_hits(["a", "b"], 3, 3, random.Random(0))
    with pytest.raises(ConfigError, match="repeat"):
        balanced_hits(["a", "a"], 2, 1, random.Random(0))


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 9).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(2, n + 1), st.integers(1, 4), st.integers(0, 999))
    )
)
def test_packed_hits_hold_one_control_slot_and_distinct_systems(size):
    n_real, slots, multiple, seed = size
    step = n_real // math.gcd(n_real, slots - 1)
    cfg = config(systems=[f"s{i}" for i in range(n_real)], hits=step * multiple, slots_per_hit=slots)
    task = task_for(cfg)
    units = task.build().units
    specs = task.pack(units, random.Random(seed))
    payload = {u.key: u.payload for u in units}
    assert len(specs) == step * multiple
    assert sorted(k for s in specs for k in s.unit_keys) == sorted(payload)  # every slot exactly once
    for spec in specs:
        systems = [payload[k]["system"] for k in spec.unit_keys]
        assert len(systems) == slots and len(set(systems)) == slots
        assert sum(payload[k]["is_control"] for k in spec.unit_keys) == 1 and "qc" in systems
        assert spec.max_assignments == 1
    per_system = Counter(payload[k]["system"] for s in specs for k in s.unit_keys if k[:2] != "qc")
    assert len(set(per_system.values())) == 1 and len(per_system) == n_real


# ------------------------------------------------------------------------- questions, validation, view


def _unit(task: LiveChatTask, unit_id: int = 1, system: str = "bot-anna", **extra) -> Unit:
    return Unit(
        id=unit_id,
        public_key=f"k{unit_id}",
        study_id=1,
        key=f"{system}#0",
        required_answers=1,
        payload={"system": system, "is_control": system == "qc", "slot": 0, **extra},
    )


def test_slider_sentiment_and_topic_answers_are_validated_and_normalised():
    task = task_for(config())
    unit = _unit(task)
    asked = [q.name for q in task.questions(unit)]
    assert asked == ["topic", "topic_sentiment", *[SCORE_PREFIX + c.name for c in task.config.live_chat.criteria]]
    for given_value, stored in (("0", "0"), ("100", "100"), (" 57 ", "57"), (42, "42"), ("007", "7")):
        assert task.validate(unit, "score_fun", given_value) == stored
    for bad in ("101", "-1", "57.5", "abc", "", "True", "1e2", "1000", "\u0665\u0665"):
        with pytest.raises(AnswerError, match="whole number from 0 to 100"):
            task.validate(unit, "score_fun", bad)
    assert task.validate(unit, "topic_sentiment", "ambivalent") == "ambivalent"
    with pytest.raises(AnswerError, match="choose one of like, ambivalent, dislike"):
        task.validate(unit, "topic_sentiment", "love")
    assert task.validate(unit, "topic", "  gardening ") == "gardening"
    with pytest.raises(AnswerError, match="topic is empty"):
        task.validate(unit, "topic", "   ")
    with pytest.raises(AnswerError, match="has no question 'score_boring'"):
        task.validate(unit, "score_boring", "50")


def test_feedback_is_optional_and_can_be_switched_off():
    task = task_for(config())
    unit = _unit(task)
    assert "feedback" not in [q.name for q in task.questions(unit)]  # so submission does not wait for it
    assert [q.name for q in task.optional_questions(unit)] == ["feedback"]
    assert task.validate(unit, "feedback", "") == ""
    assert task.validate(unit, "feedback", "the bot was rude") == "the bot was rude"
    with pytest.raises(AnswerError, match="limit is 2000"):
        task.validate(unit, "feedback", "x" * 2001)
    off = task_for(config(feedback=False))
    with pytest.raises(AnswerError, match="no question 'feedback'"):
        off.validate(_unit(off), "feedback", "hi")


def test_icebreaker_prescribes_the_topic_from_the_bots_persona():
    personas = {s: [f"{s} persona {i}" for i in range(3)] for s in [*REAL, "qc"]}
    task = task_for(config(icebreaker=True, personas=personas))
    units = task.build().units
    assert all(u.payload["icebreaker"] in personas[u.payload["system"]] for u in units)
    assert units == task_for(config(icebreaker=True, personas=personas)).build().units  # seeded, repeatable
    unit = _unit(task, icebreaker="bot-anna persona 1")
    assert "topic" not in [q.name for q in task.questions(unit)]
    assert task.auto_answers(unit) == {"topic": "bot-anna persona 1"}
    assert task.view(unit, {"order": [1]})["topic"] == "bot-anna persona 1"
    assert "topic" not in task.simulate("diligent", task.view(unit, {"order": [1]}), random.Random(0), {"k1": 0.5})


def test_simulated_profiles_rate_as_described():
    task = task_for(config())
    views = {u: task.view(_unit(task, u), {"order": [1, 2]}) for u in (1, 2)}
    context = {"k1": 0.9, "k2": 0.05}  # keyed as views name units: by public key
    rng = random.Random(1)

    def positive_mean(profile, unit):
        answers = [task.simulate(profile, views[unit], rng, context) for _ in range(40)]
        return sum(int(a["score_fun"]) for a in answers) / len(answers)

    assert positive_mean("diligent", 1) > 75 and positive_mean("diligent", 2) < 25
    tie = task.simulate("always_tie", views[1], rng, context)
    assert {v for k, v in tie.items() if k.startswith(SCORE_PREFIX)} == {"50"}
    for _ in range(20):
        answers = task.simulate("spammer", views[1], rng, context)
        assert all(task.validate(_unit(task), q, v) == v for q, v in answers.items())
    # A spammer keeps one kind across slots: constant everywhere, or random everywhere.
    kinds = set()
    for worker in (f"sim-spammer-{i:03d}" for i in range(12)):
        scores = [
            {
                v
                for q, v in task.simulate("spammer", views[u], rng, context, worker).items()
                if q.startswith(SCORE_PREFIX)
            }
            for u in (1, 2, 1, 2)
        ]
        constant = all(len(s) == 1 for s in scores) and len(set.union(*scores)) == 1
        kinds.add(constant)
        if not constant:
            assert all(len(s) > 1 for s in scores)
    assert kinds == {True, False}


# ------------------------------------------------------------------------- on the database


@pytest.fixture
def study(tmp_path, database_url):
    """A running live-chat study (2 HITs, min_inputs 2) with its HITs open."""
    cfg = config(database_url)
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, cfg, None, secret)
        s.get(Study, ctx.study_id).status = "running"
        for hit in s.scalars(select(Hit).where(Hit.study_id == ctx.study_id)):
            hit.status = "posted"
    return database_url, ctx


def take(url, ctx, worker: str) -> tuple[str, list[int]]:
    """Worker ``worker`` takes the next open HIT: their token and unit ids in the order they see them."""
    with session_scope(url) as s:
        entry = admission.enter(s, ctx, None, {"workerId": worker, "assignmentId": f"{worker}-A", "hitId": "h"})
        flow.consent(s, ctx, entry.token)  # nothing is answered or chatted before consent
        return entry.token, list(entry.assignment.layout["order"])


def assignment_of(url, token: str, ctx) -> int:
    with session_scope(url) as s:
        return flow.assignment_for(s, ctx, token).id


def start_chat(url, ctx, token, unit_id, topic="gardening"):
    with session_scope(url) as s:
        flow.save_answer(s, ctx, token, unit_id, "topic", topic)
        flow.save_answer(s, ctx, token, unit_id, "topic_sentiment", "like")


def echo(history):
    return "you said: " + history[-1]["content"]


def test_layout_shuffles_the_slots_per_assignment_records_them_and_stays_blind(study):
    url, ctx = study
    with session_scope(url) as s:
        for hit in s.scalars(select(Hit).where(Hit.study_id == ctx.study_id)):
            units = [hu.unit for hu in hit.units]
            orders = {tuple(ctx.task.layout(units, random.Random(seed))["order"]) for seed in range(12)}
            assert all(sorted(order) == sorted(u.id for u in units) for order in orders)
            assert len(orders) > 6  # shuffled per assignment, not the HIT's own order each time
    token, order = take(url, ctx, "W-layout")
    with session_scope(url) as s:
        assignment = s.scalar(select(Assignment))
        assert assignment.layout == {"order": order}  # recorded with the assignment
        state = flow.state(s, ctx, assignment)
        keys = {u.id: u.public_key for u in s.scalars(select(Unit))}
    by_position = sorted(state["units"], key=lambda v: v["position"])
    assert [v["unit_id"] for v in by_position] == [keys[i] for i in order]  # workers see public keys
    assert [v["label"] for v in by_position] == [f"Chatbot {i}" for i in range(1, 7)]
    shown = json.dumps(state)
    assert not any(name in shown for name in [*REAL, "qc", "is_control"])


def test_the_worker_turn_is_stored_before_the_bot_is_asked(study):
    url, ctx = study
    token, order = take(url, ctx, "W-order")
    start_chat(url, ctx, token, order[0])
    seen = []

    def reply(history):
        # Another connection must already see the worker's turn: it was committed before this call.
        with session_scope(url) as s:
            seen.append([(t.speaker, t.text) for t in s.scalars(select(Turn).order_by(Turn.index))])
        return "hello, human"

    state = chat.send(url, ctx, token, order[0], "  hi bot ", reply)
    assert seen == [[("worker", "hi bot")]]
    assert [(t["speaker"], t["text"]) for t in state.turns] == [("worker", "hi bot"), ("bot", "hello, human")]
    assert (state.bot_owes_reply, state.inputs, state.can_rate) == (False, 1, False)
    with session_scope(url) as s:
        conv = s.scalar(select(Conversation))
        assert conv.kind == "human_bot" and state.conversation_id == s.get(Unit, order[0]).public_key
        bot_turn = s.scalar(select(Turn).where(Turn.speaker == "bot"))
        unit = s.get(Unit, order[0])
        assert bot_turn.system_id is not None and conv.meta["system"] == unit.payload["system"]


def test_a_failing_bot_loses_no_turn_and_the_chat_resumes(study):
    url, ctx = study
    token, order = take(url, ctx, "W-fail")
    start_chat(url, ctx, token, order[0])

    def broken(history):
        raise ConnectionError("bot server down")

    with pytest.raises(chat.BotReplyError, match="not answering.*your message is saved") as failed:
        chat.send(url, ctx, token, order[0], "anyone there?", broken)
    assert failed.value.status == 502 and "bot server down" not in str(failed.value)  # the cause stays in the log
    with session_scope(url) as s:
        state = chat_turns.conversation_state(s, ctx, token, order[0])
        assert [t["text"] for t in state.turns] == ["anyone there?"] and state.bot_owes_reply
        # The worker waits for the reply owed before typing again.
        with pytest.raises(FlowError, match="has not replied") as refused:
            chat_turns.add_worker_turn(s, ctx, token, order[0], "hello??")
        assert refused.value.status == 409
    state = chat.bot_reply(url, ctx, token, order[0], {s: echo for s in [*REAL, "qc"]})
    assert [t["text"] for t in state.turns] == ["anyone there?", "you said: anyone there?"]
    assert not state.bot_owes_reply
    # A second retry finds nothing owed and stores nothing.
    assert chat.bot_reply(url, ctx, token, order[0], broken).turns == state.turns
    state = chat.send(url, ctx, token, order[0], "good", echo)
    assert [t["index"] for t in state.turns] == [0, 1, 2, 3]


def test_chatting_needs_a_topic_first_and_rating_needs_min_inputs(study):
    url, ctx = study
    token, order = take(url, ctx, "W-min")
    slot = order[0]
    with pytest.raises(FlowError, match="answer topic and topic_sentiment"):
        chat.send(url, ctx, token, slot, "hi", echo)
    start_chat(url, ctx, token, slot)
    chat.send(url, ctx, token, slot, "one", echo)
    with session_scope(url) as s:
        with pytest.raises(FlowError, match="1 of 2 messages so far"):
            flow.save_answer(s, ctx, token, slot, "score_fun", "80")
        with pytest.raises(FlowError, match="1 of 2 messages so far"):
            flow.save_answer(s, ctx, token, slot, "feedback", "nice")
    assert chat.send(url, ctx, token, slot, "two", echo).can_rate
    with session_scope(url) as s:
        assert flow.save_answer(s, ctx, token, slot, "score_fun", "80").value == "80"
        with pytest.raises(AnswerError, match="whole number"):
            flow.save_answer(s, ctx, token, slot, "score_fun", "80.5")
    # Once rated, the chat is closed.
    with pytest.raises(FlowError, match="has been rated"):
        chat.send(url, ctx, token, slot, "three", echo)
    # Every rating question answered everywhere, yet the other five chats are too short to submit.
    with session_scope(url) as s:
        assignment = s.scalar(select(Assignment))
        given = {(r.unit_id, r.question) for r in assignment.responses}
        for unit_id in order:
            for q in ctx.task.questions(s.get(Unit, unit_id)):
                if (unit_id, q.name) not in given:
                    s.add(
                        Response(
                            assignment_id=assignment.id,
                            unit_id=unit_id,
                            question=q.name,
                            value="like" if q.name == "topic_sentiment" else "50",
                        )
                    )
    with session_scope(url) as s:
        with pytest.raises(FlowError, match="5 chat\\(s\\) have fewer than 2"):
            flow.submit(s, ctx, token)
        assert s.scalar(select(Assignment.status)) == "accepted"


def test_topic_changes_are_recorded_with_who_and_when(study):
    url, ctx = study
    token, order = take(url, ctx, "W-topic")
    start_chat(url, ctx, token, order[1])
    chat.send(url, ctx, token, order[1], "let's talk about trees", echo)
    with session_scope(url) as s:
        chat_turns.change_topic(s, ctx, token, order[1], "worker", " football ")
    chat.send(url, ctx, token, order[1], "who won?", echo)
    with session_scope(url) as s:
        chat_turns.change_topic(s, ctx, token, order[1], "bot")
        with pytest.raises(AnswerError, match="'worker' or 'bot'"):
            chat_turns.change_topic(s, ctx, token, order[1], "coordinator")
    with session_scope(url) as s:
        changes = chat_turns.conversation_state(s, ctx, token, order[1]).topic_changes
        assert [(c["by"], c["at_turn"], c["topic"]) for c in changes] == [("worker", 2, "football"), ("bot", 4, None)]
        assert s.scalar(select(Conversation)).meta["topic_changes"] == changes


def test_exported_ratings_are_the_methods_table_and_the_analysis_accepts_them(tmp_path, database_url):
    cfg = config(database_url, hits=5, min_inputs=1)
    with session_scope(database_url) as s:
        ctx = create_study(s, cfg, None, resolve_secret(database_url))
        s.get(Study, ctx.study_id).status = "running"
        for hit in s.scalars(select(Hit).where(Hit.study_id == ctx.study_id)):
            hit.status = "posted"
        context = ctx.task.simulation_context(s, s.get(Study, ctx.study_id))
    profiles = {"W-1": "diligent", "W-2": "diligent", "W-3": "diligent", "W-4": "noisy", "W-5": "always_tie"}
    entered = {}
    for worker, profile in profiles.items():
        token, order = take(database_url, ctx, worker)
        assignment_id = assignment_of(database_url, token, ctx)
        rng = random.Random(worker)
        for unit_id in order:
            with session_scope(database_url) as s:
                view = ctx.task.view(s.get(Unit, unit_id), {"order": order})
            answers = ctx.task.simulate(profile, view, rng, context)
            start_chat(database_url, ctx, token, unit_id, answers.pop("topic"))
            chat.send(database_url, ctx, token, unit_id, "hello there", echo)
            with session_scope(database_url) as s:
                for question, value in answers.items():
                    flow.save_answer(s, ctx, token, unit_id, question, value)
                    entered[(conversation_key(assignment_id, unit_id), question)] = value
        with session_scope(database_url) as s:
            flow.submit(s, ctx, token)
    out = tmp_path / "export"
    with session_scope(database_url) as s:
        export_study(s, ctx, out)
    ratings = pd.read_csv(out / "ratings.csv", dtype={"worker_id": str})
    assert tuple(ratings.columns) == RATING_COLUMNS
    assert len(ratings) == 5 * 6 * 7
    assert ratings.groupby("assignment_id")["is_control"].sum().eq(7).all()
    assert set(ratings.loc[ratings["is_control"] == 1, "system"]) == {"qc"}
    # Raw as entered, negative criteria not reversed.
    assert {(r.conversation_id, SCORE_PREFIX + r.criterion): str(r.score) for r in ratings.itertuples()} == {
        k: v for k, v in entered.items() if k[1].startswith(SCORE_PREFIX)
    }
    # Slot is the position the worker saw the chat at.
    with session_scope(database_url) as s:
        asg = s.scalar(select(Assignment).order_by(Assignment.id))
        first = ratings[ratings["assignment_id"] == asg.provider_assignment_id]
        assert list(first.drop_duplicates("slot")["conversation_id"]) == [
            conversation_key(asg.id, u) for u in asg.layout["order"]
        ]
    conversations = [json.loads(line) for line in (out / "conversations.jsonl").read_text().splitlines()]
    assert {c["conversation_id"] for c in conversations} == set(ratings["conversation_id"])

    result = analyze_live_chat(out)
    workers = result.tables["workers"].set_index("worker_id")
    assert workers.loc[["W-1", "W-2", "W-3"], "passed"].all() and not workers.loc["W-5", "passed"]
    systems = result.tables["systems"].sort_values("rank")
    assert list(systems["system"]) == REAL  # the simulated qualities' order


def test_a_chat_turn_reports_where_its_time_went_only_when_timing_is_on(study, monkeypatch):
    url, ctx = study
    token, order = take(url, ctx, "W-timing")
    start_chat(url, ctx, token, order[0])

    def slow(history):
        time.sleep(0.05)
        return "a considered reply"

    timing.start()  # off by default: nothing is recorded, and no header would be sent
    chat.send(url, ctx, token, order[0], "first", slow)
    assert timing.header(1.0) is None
    assert create_app(url, ctx.secret).test_client().get("/health").headers.get("Server-Timing") is None

    monkeypatch.setenv("HITKIT_SERVER_TIMING", "1")
    timing.start()
    chat.send(url, ctx, token, order[0], "second", slow)
    phases = dict(item.split(";dur=") for item in timing.header(700.0).split(", "))
    assert set(phases) == {"store", "commit", "bot", "reply", "app"}
    assert float(phases["bot"]) >= 50 and float(phases["store"]) > 0 and float(phases["app"]) == 700.0
    assert "app;dur=" in create_app(url, ctx.secret).test_client().get("/health").headers["Server-Timing"]
