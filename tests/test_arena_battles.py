"""One arena battle over real HTTP: the same message to both sides, no vote before both replies are
complete, one vote however many arrive at once, names shown only after it; and the style and leak rules."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy import func, select

from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.db.models import Response, Unit
from hitkit.db.session import session_scope
from hitkit.protocols.arena.quality import DEFAULT_LEAK_WORDS, leak_pattern, leaks
from hitkit.protocols.arena.style import count_tokens, markdown_counts, style_of
from hitkit.protocols.arena.task import plan_battles
from tests.studies import served
from tests.test_arena_study import REAL, arena_study


@pytest.fixture(scope="module")
def bot_server():
    server = BotServer(build_backends(degraded=[DegradedSpec(n) for n in [*REAL, "qc"]], seed=3), port=0).start()
    yield server.url
    server.shutdown()


@pytest.fixture
def battle(tmp_path, database_url, bot_server):
    """A worker on the first battle of an arena HIT (names shown after the vote): (session, task URL, battle key)."""
    study = arena_study(
        tmp_path, database_url, bot_server, hits=2, reveal=True, max_turns=2, display_names={"anna": "Anna (public)"}
    )
    pages = served(study, database_url)
    url, _, _ = next(pages)
    http = requests.Session()
    page = http.get(f"{url}/s/arena-demo/hit/1", params={"workerId": "W-1", "assignmentId": "W-1-a", "hitId": "h1"})
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    keys = [u["unit_id"] for u in sorted(http.get(task + "state").json()["units"], key=lambda u: u["position"])]
    with session_scope(database_url) as s:  # a real battle: a QC battle's names are never revealed
        control = {u.public_key: u.payload["is_control"] for u in s.scalars(select(Unit))}
    yield http, task, next(k for k in keys if not control[k])
    http.close()
    pages.close()


def vote(http, task, key, value):
    return http.post(task + "answer", json={"unit_id": key, "question": "vote", "value": value})


def test_the_vote_waits_for_both_replies_and_both_sides_get_the_same_message(battle, database_url):
    http, task, key = battle
    assert vote(http, task, key, "a").status_code == 409  # nothing asked yet
    first = http.post(f"{task}chat/{key}-a/message", json={"text": "What is a prime number?"})
    assert first.status_code == 200 and first.json()["turns"][-1]["speaker"] == "bot"
    early = vote(http, task, key, "a")
    assert early.status_code == 409 and "both" in early.json()["error"]  # side b has no reply yet
    other = http.post(f"{task}chat/{key}-b/message", json={"text": "Something else entirely"})
    assert other.status_code == 409 and "same message" in other.json()["error"]
    assert http.post(f"{task}chat/{key}-c/message", json={"text": "hi"}).status_code == 400  # no side c
    assert http.post(f"{task}chat/{key}-b/message", json={"text": "What is a prime number?"}).status_code == 200
    assert http.get(f"{task}reveal/{key}").json()["revealed"] is None  # never before the vote
    assert vote(http, task, key, "b").status_code == 200
    names = http.get(f"{task}reveal/{key}").json()["revealed"]
    public = {"Anna (public)", "bert", "cleo"}  # a system's public name where the study gives one
    assert set(names) == {"a", "b"} and names["a"] != names["b"] and {names["a"], names["b"]} <= public
    closed = http.post(f"{task}chat/{key}-a/message", json={"text": "one more?"})
    assert closed.status_code == 409  # the vote closes the battle's chats
    with session_scope(database_url) as s:
        assert s.scalar(select(Response.value).where(Response.question == "vote")) == "b"


def test_twenty_parallel_votes_on_one_battle_store_one(battle, database_url):
    http, task, key = battle
    for side in ("a", "b"):
        assert http.post(f"{task}chat/{key}-{side}/message", json={"text": "Tell me a fun fact."}).status_code == 200
    cookies = http.cookies.get_dict()

    def one(i: int) -> int:
        with requests.Session() as own:
            own.cookies.update(cookies)
            return vote(own, task, key, ("a", "b", "tie", "both_bad")[i % 4]).status_code

    with ThreadPoolExecutor(20) as pool:
        codes = list(pool.map(one, range(20)))
    assert sorted(set(codes)) <= [200, 409] and codes.count(200) == 1, codes
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Response).where(Response.question == "vote")) == 1


def test_battles_cover_pairs_uniformly_with_sides_balanced_and_the_control_share():
    plan = plan_battles(["w", "x", "y", "z"], "qc", 100, 20, random.Random(1))
    real = [(a, b) for a, b, c in plan if not c]
    assert len(plan) == 100 and len(real) == 80 and sum(c for *_, c in plan) == 20
    pairs = {}
    for a, b in real:
        pairs.setdefault(tuple(sorted((a, b))), []).append(a)
    assert len(pairs) == 6 and max(map(len, pairs.values())) - min(map(len, pairs.values())) <= 1
    assert all(abs(2 * lefts.count(pair[0]) - len(lefts)) <= 1 for pair, lefts in pairs.items())
    controls = [(a, b) for a, b, c in plan if c]
    assert all((a == "qc") != (b == "qc") for a, b in controls)
    assert abs(sum(a == "qc" for a, _ in controls) - 10) <= 2  # the QC bot's side alternates too


def test_style_counts_follow_fastchats_markdown_definitions():
    text = (
        "# Title\n## Part\nSome **bold** and __also bold__ words.\n- one\n  * two\n+ three\n1. first\n"
        "10. tenth\n```python\n# a comment, not a header\n- not a list\n```\n#not a header\n**not\nbold**"
    )
    assert markdown_counts(text) == (2, 5, 2)
    assert count_tokens("Hello, world! It's 2026.") == 9  # Hello , world ! It ' s 2026 .
    both = style_of(["# A\n- x", "**b** c"])
    # tokens: # A - x, then * * b * * c (markdown marks are visible characters, so tokens too)
    assert (both.header_count, both.list_count, both.bold_count) == (1, 1, 1) and both.tokens == 10


def test_a_reply_naming_a_model_or_vendor_is_a_leak_but_a_lookalike_word_is_not():
    pattern = leak_pattern(DEFAULT_LEAK_WORDS)
    assert leaks(["I am ChatGPT, made by OpenAI."], pattern)
    assert leaks(["As a Llama model I cannot"], pattern)
    assert leaks(["I'm Yi-34B."], pattern)
    assert not leaks(["The llamas grazed on the hill.", "Gptx is not a word."], pattern)
    assert not leaks(["A fine reply about metal and aloe."], pattern)


def test_a_qc_battle_never_reveals_the_names_so_no_worker_sees_the_bots_internal_name(tmp_path):
    from hitkit.errors import ConfigError
    from hitkit.protocols import task_for
    from hitkit.study.loading import load_study

    config = load_study(arena_study(tmp_path, "sqlite:///unused.db", "http://127.0.0.1:9/v1", reveal=True))
    unit = Unit(payload={"system_a": "qc", "system_b": "anna", "is_control": True})
    assert task_for(config).revealed(None, None, unit) is None  # decided before any vote is looked up
    with pytest.raises(ConfigError, match="arena.display_names names nobody"):
        load_study(arena_study(tmp_path, "sqlite:///unused.db", "http://127.0.0.1:9/v1", display_names={"nobody": "X"}))
