"""The hidden design stays hidden under faults and timing: a worker cannot tell the QC slot by how
fast its replies come (the degraded bot answers at once, real models take a while), nor by the error
text a failing bot gives. Real HTTP (gunicorn + PostgreSQL, or waitress + SQLite) to a fake
OpenAI-compatible bot server whose real models take 0.15-0.35 s and whose QC bot takes 0.01 s."""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from sqlalchemy import select, update
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from hitkit.db.models import Event, Hit, Study, Unit
from hitkit.db.session import session_scope
from hitkit.study.bot_sections import PacingConfig
from hitkit.study.loading import parse_study
from hitkit.study.stored import create_study, resolve_secret
from hitkit.worker.pacing import release_delay
from tests.test_concurrency import serving
from tests.test_live_chat_task import REAL

LEAKS = ("qc", "bot-", "http", "127.0.0.1", "connect", "503", "overloaded", "10.0.0.5")


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args, **kwargs) -> None:
        pass


class FakeBots:
    """An OpenAI-style chat-completions server (``POST /v1/chat/completions``, the reply in
    ``choices[0].message.content``, as the OpenAI API reference documents): each model answers after
    its own latency; models in ``down`` answer 503 with an error body naming an internal address."""

    def __init__(self, latency: dict[str, tuple[float, float]]):
        self.latency, self.down = latency, set()
        self.rng, self.lock = random.Random(7), threading.Lock()
        self._server = make_server("127.0.0.1", 0, self.app, threaded=True, request_handler=_Quiet)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @Request.application
    def app(self, request: Request) -> Response:
        model = request.get_json()["model"]
        if model in self.down:
            body = {"error": {"message": f"model {model} overloaded at http://10.0.0.5:8000"}}
            return Response(json.dumps(body), 503, content_type="application/json")
        with self.lock:
            low, high = self.latency[model]
            wait = self.rng.uniform(low, high)
        time.sleep(wait)
        reply = {
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": f"a reply from {model}"},
                    "finish_reason": "stop",
                }
            ]
        }
        return Response(json.dumps(reply), content_type="application/json")

    def stop(self) -> None:
        self._server.shutdown()


@pytest.fixture
def bots():
    server = FakeBots({**{name: (0.15, 0.35) for name in REAL}, "qc": (0.0, 0.02)})
    yield server
    server.stop()


def _study(database_url: str, bot_url: str, hits: int):
    data = {
        "study": "chat-pace",
        "task": "live_chat",
        "seed": 11,
        "budget": "100.00",
        "database": database_url,
        "systems": [
            {"name": s, "url": bot_url, "model": s, "options": {"timeout_s": 5, "retries": 0}} for s in [*REAL, "qc"]
        ],
        "live_chat": {"hits": hits, "min_inputs": 2},
        "bots": {"pacing": {"cold_start_s": 0.3, "min_observed": 5}},
    }
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, parse_study(data), None, secret)
        s.get(Study, ctx.study_id).status = "running"
        s.execute(update(Hit).where(Hit.study_id == ctx.study_id).values(status="posted"))
        control = {
            u.public_key: bool(u.payload["is_control"])
            for u in s.scalars(select(Unit).where(Unit.study_id == ctx.study_id))
        }
    return secret, control


def _open(base: str, worker: str) -> tuple[requests.Session, str, list[str]]:
    http = requests.Session()
    page = http.get(
        f"{base}/s/chat-pace/enter", params={"workerId": worker, "assignmentId": f"{worker}-A", "hitId": "h"}
    )
    assert page.status_code == 200, page.text[:300]
    task = page.url.split("?")[0]
    assert http.post(task + "consent").status_code == 200
    keys = [v["unit_id"] for v in http.get(task + "state").json()["units"]]
    for key in keys:
        for question, value in (("topic", "gardening"), ("topic_sentiment", "like")):
            assert (
                http.post(task + "answer", json={"unit_id": key, "question": question, "value": value}).status_code
                == 200
            )
    return http, task, keys


def _chat(base: str, worker: str, turns: int) -> list[tuple[str, float]]:
    http, task, keys = _open(base, worker)
    timed = []
    for turn in range(turns):
        for key in keys:
            began = time.monotonic()
            sent = http.post(f"{task}chat/{key}/message", json={"text": f"hello number {turn}"})
            assert sent.status_code == 200, sent.text[:300]
            timed.append((key, time.monotonic() - began))
    return timed


def best_threshold_accuracy(control: list[float], real: list[float]) -> float:
    """The balanced accuracy of the best rule "faster than t → QC slot" over every t: 0.5 is chance."""
    best = 0.5
    for t in sorted(control + real):
        hit_control = sum(x <= t for x in control) / len(control)
        hit_real = sum(x > t for x in real) / len(real)
        best = max(best, (hit_control + hit_real) / 2)
    return best


def test_no_reply_time_or_error_text_tells_the_qc_slot(tmp_path, one_database_url, bots):
    secret, control = _study(one_database_url, bots.url, hits=9)
    with serving(one_database_url, secret, tmp_path / "web.log") as base:
        with ThreadPoolExecutor(8) as pool:
            timed = [t for worker in pool.map(lambda n: _chat(base, f"W{n}", 3), range(8)) for t in worker]
        qc = [s for key, s in timed if control[key]]
        real = [s for key, s in timed if not control[key]]
        assert len(qc) == 24 and len(real) == 120  # 6 slots per HIT, one of them QC
        accuracy = best_threshold_accuracy(qc, real)
        assert accuracy <= 0.75, (accuracy, sorted(qc)[:5], sorted(real)[:5])
        # The same classifier on the bots' own latency (what the page saw before pacing) gives it away.
        assert best_threshold_accuracy([0.01] * 24, [0.15 + 0.2 * i / 95 for i in range(96)]) == 1.0

        # A failing QC bot and a failing real bot read the same, and name no system, address or cause.
        bots.down.update({"qc", REAL[0]})
        http, task, keys = _open(base, "W-FAULT")
        by_system = {}
        with session_scope(one_database_url) as s:
            systems = {u.public_key: u.payload["system"] for u in s.scalars(select(Unit))}
        for key in keys:
            if systems[key] in bots.down:
                sent = http.post(f"{task}chat/{key}/message", json={"text": "are you there?"})
                assert sent.status_code == 502 and sent.json()["waiting"] is True
                by_system[systems[key]] = sent.json()["error"]
                retried = http.post(f"{task}chat/{key}/retry")
                assert retried.status_code == 502 and retried.json()["error"] == by_system[systems[key]]
        assert set(by_system) == {"qc", REAL[0]}
        assert len(set(by_system.values())) == 1, by_system
        text = by_system["qc"].lower()
        assert "not answering" in text and not [word for word in LEAKS if word in text], text
    # The detail is kept for the coordinator: in the study's bot health events.
    with session_scope(one_database_url) as s:
        reasons = [e.data for e in s.scalars(select(Event).where(Event.kind.like("bot_%")))]
    assert any(r.get("system") == "qc" and "10.0.0.5" in json.dumps(r) for r in reasons), reasons[:3]


@pytest.mark.parametrize(
    "mode, elapsed, is_control, observed, expected",
    [
        ("off", 0.01, True, [1.0] * 10, 0.0),
        ("fixed", 0.01, True, [], 0.49),  # every slot waits for the floor
        ("fixed", 0.9, False, [], 0.0),
        ("observed", 0.01, True, [], 0.99),  # cold start: the configured time
        ("observed", 0.01, True, [2.0] * 10, 1.99),  # a draw from the real bots' latencies
        ("observed", 0.3, False, [2.0] * 10, 0.2),  # a real reply waits only for the floor
        ("observed", 3.0, True, [2.0] * 10, 0.0),  # a reply slower than the draw is never held
    ],
)
def test_the_release_policy(mode, elapsed, is_control, observed, expected):
    settings = PacingConfig(mode=mode, floor_s=0.5, cold_start_s=1.0, min_observed=5)
    assert release_delay(elapsed, is_control, observed, settings, random.Random(1)) == pytest.approx(
        expected if mode != "observed" or is_control else max(0.0, 0.5 - elapsed)
    )


def test_draws_are_seeded_and_follow_the_observed_distribution():
    settings = PacingConfig(min_observed=1)
    observed = [0.2, 0.4, 0.6, 0.8]
    draws = [release_delay(0.0, True, observed, settings, random.Random(f"3:pace:{n}:1")) for n in range(2000)]
    assert draws == [release_delay(0.0, True, observed, settings, random.Random(f"3:pace:{n}:1")) for n in range(2000)]
    shares = {v: draws.count(v) / len(draws) for v in observed}
    assert set(draws) == set(observed) and all(0.2 < share < 0.3 for share in shares.values()), shares
