"""The control bot's reply streams like the real bots' replies it hides among (issue 40), through the real
server: the embedded web server's ``/stream`` route, hitkit's bot client asking with ``stream: true``,
hitkit's bot server relaying backends that type. The real bots type a seeded random number of words at a
seeded random pace (so their streams vary in length and rhythm); the control bot answers whole at once.
A worker's client counts the text events of each reply and times its first text: 50 control replies
and 50 real ones must not be told apart by a Mann–Whitney or a Kolmogorov–Smirnov test (p > 0.001 each,
:data:`TELL`), in live chat and in the arena. (Before the fix: 1 event for every control reply, p < 1e-15.)

The real replies compared are the ones measured first; the control replies are then drawn from the
shapes the server measured (the order of a study's first minutes, when real replies come first).
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from scipy.stats import ks_2samp, mannwhitneyu
from sqlalchemy import select

from hitkit.bots.protocol import ChatCompletionRequest
from hitkit.bots.server import BotServer
from hitkit.db.models import Turn, Unit
from hitkit.db.session import session_scope
from hitkit.study.stored import resolve_secret
from server.embedded import WebServer
from tests.streaming_bot import Typist, script
from tests.test_arena_study import REAL, arena_study
from tests.test_chat_streaming import events
from tests.test_fault_tolerance import SYSTEMS, chat_study, start_study

WORKERS = 5
TELL = 0.001
"""The p-value below which a test tells the control replies apart. Four tests at 0.05 would fail a bot that
streams exactly like the others in about one run in five (and first-text times drift on a loaded machine
between the real replies and the control ones measured after them: p = 0.047 in one CI run); the tell
this guards against gave p < 1e-15."""


class Jittery(Typist):
    """A real bot whose replies vary: 50–400 ms before the first word, then 3 to ``max_tokens`` words, each
    after 5–30 ms (seeded draws)."""

    def __init__(self, name: str, seed: int) -> None:
        super().__init__(name)
        self.rng, self.draw_lock = random.Random(seed), threading.Lock()

    def words(self, request: ChatCompletionRequest) -> list[str]:
        with self.draw_lock:
            return script(request)[: self.rng.randint(3, request.reply_budget)]

    def pace(self) -> float:
        with self.draw_lock:
            return self.rng.uniform(0.005, 0.03)

    def lead(self) -> float:
        with self.draw_lock:
            return self.rng.uniform(0.05, 0.4)


@pytest.fixture
def bots():
    backends = {n: Jittery(n, seed) for seed, n in enumerate(sorted({*SYSTEMS, *REAL} - {"qc"}))}
    backends["qc"] = Typist("qc", step_s=0.0)  # the degraded bot: the whole reply at once
    with BotServer(backends, port=0) as server:
        yield server.url


@pytest.fixture
def web(database_url):
    server = WebServer(database_url, "127.0.0.1", 0, 16, resolve_secret(database_url)).start()
    yield server
    server.stop()


def streamed(http: requests.Session, chat: str, text: str) -> tuple[int, float]:
    """Send ``text`` on the chat's stream: (text events seen, seconds to the first text)."""
    began = time.monotonic()
    first, count = None, 0
    with http.post(chat + "/stream", json={"text": text}, stream=True, timeout=60) as reply:
        assert reply.status_code == 200, reply.text[:300]
        for kind, data in events(reply):
            if kind == "text":
                count += 1
                first = time.monotonic() - began if first is None else first
            else:
                assert kind == "state", data
    assert first is not None
    return count, first


def enter(http: requests.Session, web_url: str, study: str, hit: int) -> str:
    page = http.get(f"{web_url}/s/{study}/hit/{hit}", params={"workerId": f"W{hit}", "assignmentId": f"A{hit}"})
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    return task


def systems_of(database_url: str) -> dict[str, dict]:
    with session_scope(database_url) as s:
        return {key: payload for key, payload in s.execute(select(Unit.public_key, Unit.payload))}


def run_workers(worker) -> list:
    """Run ``worker(hit)`` for every HIT at once; the first worker failure that is not a broken barrier."""
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = [pool.submit(worker, hit) for hit in range(1, WORKERS + 1)]
    errors = [e for f in futures if (e := f.exception()) is not None]
    if errors:
        raise next((e for e in errors if not isinstance(e, threading.BrokenBarrierError)), errors[0])
    return [f.result() for f in futures]


def indistinguishable(control: list[tuple[int, float]], real: list[tuple[int, float]]) -> None:
    assert len(control) == len(real) == 50
    for what, pick in (("text events", 0), ("first-text time", 1)):
        c, r = [x[pick] for x in control], [x[pick] for x in real]
        p_mw = mannwhitneyu(c, r).pvalue
        p_ks = ks_2samp(c, r).pvalue
        assert p_mw > TELL and p_ks > TELL, (what, p_mw, p_ks, sorted(c), sorted(r))
    assert max(count for count, _ in control) > 1  # the control reply arrives in pieces


def test_live_chat_control_replies_stream_like_the_real_ones(tmp_path, database_url, bots, web):
    study = start_study(tmp_path, database_url, chat_study(tmp_path, database_url, bots, hits=WORKERS), web.url)
    real_done = threading.Barrier(WORKERS)

    def worker(hit: int) -> tuple[list, list]:
        with requests.Session() as http:
            task = enter(http, web.url, study, hit)
            payloads = systems_of(database_url)
            units = [u["unit_id"] for u in http.get(task + "state").json()["units"]]
            qc = next(u for u in units if payloads[u]["system"] == "qc")
            real = next(u for u in units if payloads[u]["system"] != "qc")
            for unit in (qc, real):
                for question, value in (("topic", "films"), ("topic_sentiment", "like")):
                    assert http.post(task + "answer", json={"unit_id": unit, "question": question, "value": value}).ok
            reals = [streamed(http, f"{task}chat/{real}", f"tell me more {i}") for i in range(10)]
            real_done.wait(120)
            controls = [streamed(http, f"{task}chat/{qc}", f"tell me more {i}") for i in range(10)]
            return controls, reals

    results = run_workers(worker)
    indistinguishable([x for c, _ in results for x in c], [x for _, r in results for x in r])
    with session_scope(database_url) as s:
        timings = s.execute(select(Turn.first_token_ms, Turn.reply_ms).where(Turn.speaker == "bot")).all()
    # Streamed: the first text before the whole reply (equal only for a reply that came in one piece).
    assert len(timings) == 100 and all(first <= whole for first, whole in timings)
    assert sum(first < whole for first, whole in timings) >= 80


def test_arena_control_side_streams_like_the_real_sides(tmp_path, database_url, bots, web):
    study = start_study(
        tmp_path,
        database_url,
        arena_study(tmp_path, database_url, bots, hits=WORKERS, battles_per_hit=4, control_share=0.5, max_turns=10),
        web.url,
    )
    real_done = threading.Barrier(WORKERS)

    def exchange(http: requests.Session, task: str, unit: str, text: str) -> dict[str, tuple[int, float]]:
        with ThreadPoolExecutor(2) as sides:  # both sides at once, as the page sends them
            got = sides.map(lambda side: streamed(http, f"{task}chat/{unit}-{side}", text), "ab")
            return dict(zip("ab", got))

    # Battles are dealt to HITs by the study's plan, so a HIT may hold no QC battle: the 50 real replies
    # and then the 50 control replies are shared out among the workers as their battles allow.
    wanted = {"real": 50, "control": 50}
    wanted_lock = threading.Lock()

    def take(kind: str, n: int) -> bool:
        with wanted_lock:
            if wanted[kind] < n:
                return False
            wanted[kind] -= n
            return True

    def worker(hit: int) -> tuple[list, list]:
        with requests.Session() as http:
            task = enter(http, web.url, study, hit)
            payloads = systems_of(database_url)
            units = [u["unit_id"] for u in http.get(task + "state").json()["units"]]
            real_battles = [u for u in units if not payloads[u]["is_control"]]
            qc_battles = [u for u in units if payloads[u]["is_control"]]
            reals: list = []
            for turn in range(10):
                for battle in real_battles:
                    if take("real", 2):
                        reals += exchange(http, task, battle, f"question {turn}").values()
            real_done.wait(120)
            controls: list = []
            for turn in range(10):
                for battle in qc_battles:
                    if take("control", 1):
                        qc_side = "a" if payloads[battle]["system_a"] == "qc" else "b"
                        controls.append(exchange(http, task, battle, f"question {turn}")[qc_side])
            return controls, reals

    results = run_workers(worker)
    indistinguishable([x for c, _ in results for x in c], [x for _, r in results for x in r])


# The pure pieces: a shape measured, a prior, a schedule --------------------------------------------------
def test_a_shape_is_measured_from_the_texts_that_grew_of_the_attempt_that_finished():
    from hitkit.worker.pieces import shape_of

    seen = [(0.0, 0), (0.2, 5), (0.3, 2), (0.5, 4), (0.5, 4), (0.6, 9), (0.9, 15)]  # a retry began at 0.3 s
    shape = shape_of(seen)
    assert shape is not None
    assert shape.first_s == pytest.approx(0.3) and shape.gaps == pytest.approx((0.2, 0.1, 0.3))
    assert shape.sizes == (2, 2, 5, 6) and shape.total_s == pytest.approx(0.9)
    assert shape_of([(0.1, 0)]) is None


def test_pieces_follow_the_shape_cut_between_words_where_there_are_enough():
    from hitkit.worker.pieces import Shape, schedule

    shape = Shape(first_s=0.25, gaps=(0.05, 0.1), sizes=(1, 1, 2))
    pieces = schedule("one two three four five six seven eight", shape)
    assert [at for at, _ in pieces] == pytest.approx([0.25, 0.3, 0.4])
    assert [text for _, text in pieces] == [
        "one two ",
        "one two three four ",
        "one two three four five six seven eight",
    ]
    # Fewer words than pieces: cut between characters; fewer characters than pieces: one per character.
    assert [text for _, text in schedule("abcdef", shape)] == ["ab", "abcd", "abcdef"]
    assert [text for _, text in schedule("ab", shape)] == ["a", "ab"]


def test_allocation_keeps_every_piece_and_every_unit():
    from hitkit.worker.pieces import allocate

    assert allocate(10, [1, 1, 1]) == [4, 3, 3]
    assert allocate(3, [100, 0, 0]) == [1, 1, 1]
    assert allocate(12, [0, 0]) == [6, 6]
    assert sum(allocate(97, [5, 1, 30, 2])) == 97
    with pytest.raises(ValueError, match="cannot split 2 unit"):
        allocate(2, [1, 1, 1])


def test_the_prior_streams_a_word_a_text_and_ends_near_the_cold_start_until_enough_shapes_are_seen():
    from hitkit.study.bot_sections import PacingConfig
    from hitkit.worker.pieces import Shape, draw_shape

    settings = PacingConfig(cold_start_s=1.0, min_observed=2)
    text = "a reply of six words here"
    prior = draw_shape([Shape(0.1, (), (3,))], text, settings, random.Random(1))
    assert prior.pieces == 6 and 0.3 <= prior.first_s <= 0.6 and 0.5 < prior.total_s < 1.5
    real = [Shape(0.1, (), (3,)), Shape(0.2, (0.1,), (1, 1))]
    assert draw_shape(real, text, settings, random.Random(1)) in real
