"""Property-based fuzzing of every worker-page endpoint (hypothesis, through the Flask test client).

Two real studies share one database: a live chat (answers, chat messages, retries, topics, against
a stub bot on loopback) and a pairwise A/B study. Hypothesis sends arbitrary query parameters,
JSON bodies of any shape and type, form fields, unit ids, questions, values, tokens and study names.
Whatever it sends, the server never answers 500 (the only 5xx allowed are the documented 502
"the bot is slow, your turn is saved" and 503 "the database is unavailable"), a JSON endpoint
answers JSON, and a refused request stores nothing. Runs derandomised, so CI is reproducible.
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote, urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from hitkit.db.models import (
    Assignment,
    Conversation,
    Event,
    Hit,
    Payment,
    Response,
    Study,
    Turn,
    Unit,
    Worker,
)
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from hitkit.worker import security, tokens
from tests.studies import pairwise_study
from tests.test_live_chat_study import live_chat_study

FUZZ = settings(
    max_examples=150,
    deadline=timedelta(seconds=10),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
CHAT, AB = "chat-demo", "ab-demo"


# A stub bot: OpenAI-compatible, instant --------------------------------------------------------------
class _Bot(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps(
            {
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "Tell me more."}, "finish_reason": "stop"}
                ]
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def stub_bot():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bot)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


# Two studies, some workers at every stage ----------------------------------------------------------
class Site:
    """The app's test client and what the fuzzers pick from: genuine tokens, unit ids, questions."""

    def __init__(self, url: str, client, secret: str):
        self.url, self.client, self.secret = url, client, secret
        self.tokens: dict[str, list[str]] = {CHAT: [], AB: []}
        self.units: dict[str, list[int]] = {}
        self.questions: dict[str, list[str]] = {}

    def arrive(self, study: str, worker: str, nth: int) -> str:
        """Arrive as ``worker`` on the study's ``nth`` posted HIT and consent; the assignment's token."""
        with session_scope(self.url) as s:
            hit = s.scalars(
                select(Hit.id).join(Study).where(Study.name == study, Hit.status == "posted").order_by(Hit.index)
            ).all()[nth]
        reply = self.client.get(
            f"/s/{study}/hit/{hit}?"
            + urlencode({"workerId": worker, "assignmentId": f"{worker}-{hit}", "hitId": f"h{hit}"})
        )
        assert reply.status_code == 302, reply.text
        token = reply.headers["Location"].rstrip("/").rsplit("/", 1)[1]
        assert self.client.post(f"/a/{study}/{token}/consent").status_code == 302
        self.tokens[study].append(token)
        return token

    def snapshot(self) -> tuple:
        """Every row a worker request can write, in a comparable form."""
        with session_scope(self.url) as s:
            counts = tuple(
                s.scalar(select(func.count()).select_from(m))
                for m in (Response, Turn, Conversation, Assignment, Worker, Event, Payment)
            )
            responses = tuple(s.execute(select(Response.id, Response.value).order_by(Response.id)).all())
            assignments = tuple(
                s.execute(
                    select(Assignment.id, Assignment.status, Assignment.consented_at, Assignment.feedback).order_by(
                        Assignment.id
                    )
                ).all()
            )
            metas = tuple(
                json.dumps(m, sort_keys=True) for m in s.scalars(select(Conversation.meta).order_by(Conversation.id))
            )
        return counts, responses, assignments, metas


@pytest.fixture
def site(tmp_path, sqlite_template, stub_bot, monkeypatch):
    import shutil

    from server import create_app

    monkeypatch.setenv("HITKIT_RATE_LIMIT", "100000/100000")
    monkeypatch.setenv("HITKIT_ENTRY_RATE_LIMIT", "100000/100000")
    path = tmp_path / "hitkit.db"
    shutil.copy(sqlite_template, path)
    url = f"sqlite:///{path}"
    secret = resolve_secret(url)
    chat_dir, ab_dir = tmp_path / "chat", tmp_path / "ab"
    chat_dir.mkdir(), ab_dir.mkdir()
    files = [
        live_chat_study(chat_dir, url, stub_bot, hits=4, min_inputs=2),
        pairwise_study(ab_dir, url, schedule={"per_worker_cap": 50}),
    ]
    for study_file in files:
        config = load_study(study_file)
        with session_scope(url) as s:
            ctx = create_study(s, config, study_file, secret)
            s.get(Study, ctx.study_id).status = "running"
        tick(url, config.study, "http://127.0.0.1:9")
    site = Site(url, create_app(url, secret).test_client(), secret)
    # Workers at the interesting stages: consented, chatting, and one live-chat slot opened.
    chat_token = site.arrive(CHAT, "W-chat", 0)
    site.arrive(CHAT, "W-chat2", 1)
    site.arrive(AB, "W-ab", 0)
    site.arrive(AB, "W-ab2", 1)
    with session_scope(url) as s:
        for study in (CHAT, AB):
            sid = s.scalar(select(Study.id).where(Study.name == study))
            site.units[study] = list(s.scalars(select(Unit.id).where(Unit.study_id == sid)))
    state = site.client.get(f"/a/{CHAT}/{chat_token}/state").get_json()
    first = state["units"][0]["unit_id"]
    for question, value in (("topic", "cooking"), ("topic_sentiment", "like")):
        assert (
            site.client.post(
                f"/a/{CHAT}/{chat_token}/answer", json={"unit_id": first, "question": question, "value": value}
            ).status_code
            == 200
        )
    site.questions[CHAT] = sorted({q["name"] for u in state["units"] for q in u["questions"]} | {"feedback"})
    ab_state = site.client.get(f"/a/{AB}/{site.tokens[AB][0]}/state").get_json()
    site.questions[AB] = sorted({q["name"] for u in ab_state["units"] for q in u["questions"]})
    return site


# Strategies -----------------------------------------------------------------------------------------
# Text as hostile clients send it: any code point, lone surrogates and NUL included.
any_text = st.text(st.characters(exclude_categories=()), max_size=40) | st.sampled_from(
    ["", " ", "\x00", "\ud800", "a\x00b", "<script>alert(1)</script>", "0", "-1", "1e400", "NaN", "x" * 3000]
)
json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | any_text
)
json_value = st.recursive(
    json_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3), max_leaves=6
)
segment = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30)


def study_names():
    return st.sampled_from([CHAT, AB]) | segment


def tokens_for(site: Site):
    genuine = st.sampled_from(site.tokens[CHAT] + site.tokens[AB])
    forged = st.builds(
        lambda n, nonce: tokens.assignment_token(site.secret, n, nonce),
        st.integers(min_value=0, max_value=2**40),
        st.text("0123456789abcdef", max_size=16),
    )
    wrong_key = st.builds(lambda n: tokens.assignment_token("not-the-secret", n, "0" * 16), st.integers(0, 50))
    return genuine | genuine | forged | wrong_key | segment


def unit_ids(site: Site, study: str):
    return st.sampled_from(site.units[study]) | st.integers(min_value=-(2**64), max_value=2**64) | json_value


def questions(site: Site, study: str):
    return st.sampled_from(site.questions[study]) | any_text | json_value


HOSTILE_TEXT = st.sampled_from(["\x00", "\ud800", "a\x00b", "ok \udfff", "x" * 3000, " ", ""]) | st.text(
    st.characters(exclude_categories=()), min_size=1, max_size=8
)
ANSWER_VALUES = st.one_of(
    st.sampled_from(["a", "b", "tie", "like", "dislike", "neutral", "0", "100", "101", "-5", "50.5", " 7 ", "cooking"]),
    HOSTILE_TEXT,
    json_value,
)


def body(fields):
    """A request body: JSON of the expected shape with fuzzed fields, arbitrary JSON, or junk bytes."""
    return st.one_of(
        st.fixed_dictionaries({}, optional=fields).map(lambda d: ("json", d)),
        json_value.map(lambda v: ("json", v)),
        st.binary(max_size=60).map(lambda b: ("raw", b)),
        st.dictionaries(any_text, any_text, max_size=4).map(lambda d: ("form", d)),
    )


# The checks -----------------------------------------------------------------------------------------
ALLOWED_5XX = {502, 503}


def send(site: Site, method: str, path: str, kind: str = "none", payload=None, accept_json: bool = False):
    headers = {"Accept": "application/json"} if accept_json else {}
    client = site.client
    if kind == "json":  # json.dumps escapes lone surrogates and writes NaN/Infinity, as a hostile client may
        return client.open(
            path, method=method, data=json.dumps(payload), content_type="application/json", headers=headers
        )
    if kind == "raw":
        return client.open(path, method=method, data=payload, content_type="application/json", headers=headers)
    if kind == "form":
        form = {
            k.encode("utf-8", "surrogatepass").decode("utf-8", "replace"): v.encode("utf-8", "surrogatepass").decode(
                "utf-8", "replace"
            )
            for k, v in payload.items()
        }
        return client.open(path, method=method, data=form, headers=headers)
    return client.open(path, method=method, headers=headers)


def check(
    site: Site,
    method: str,
    path: str,
    kind: str = "none",
    payload=None,
    *,
    json_endpoint: bool,
    accept_json: bool = False,
    waiting_ok: bool = False,
):
    """Send one request; assert no 500, JSON where promised, and nothing stored when refused."""
    before = site.snapshot()
    reply = send(site, method, path, kind, payload, accept_json)
    status = reply.status_code
    where = f"{method} {path} {kind} {payload!r:.300} -> {status} {reply.get_data(as_text=True)[:300]!r}"
    assert status < 500 or status in ALLOWED_5XX, where
    assert status != 502 or waiting_ok, where
    if status == 503:
        assert reply.headers.get("Retry-After"), where
    # Paths that reach no route (an encoded '/' in a segment, a trailing slash) get Werkzeug's own
    # 404/405/308: there is no JSON endpoint to hold to its promise.
    routed = reply.is_json or not (status in (404, 405) or 300 <= status < 400)
    # The CSRF guard (server/__init__.py) answers a form post in the form's terms, as HTML: the page
    # itself only ever posts JSON to these endpoints.
    csrf_refused = status == 403 and kind == "form" and "did not come from the task page" in reply.get_data(True)
    if json_endpoint and routed and status != 413 and not csrf_refused:
        assert reply.is_json, where
        data = reply.get_json()
        assert isinstance(data, dict), where
        if status >= 400:
            assert isinstance(data.get("error"), str) and data["error"], where
    if status == 502:
        assert reply.get_json().get("waiting") is True, where
    elif status >= 400:
        assert site.snapshot() == before, f"a refused request changed the database: {where}"
    return reply


# The fuzzers ---------------------------------------------------------------------------------------
def test_entry_with_arbitrary_query_parameters_never_fails(site):
    keys = (
        st.sampled_from(
            [
                "workerId",
                "assignmentId",
                "hitId",
                "turkSubmitTo",
                "invite",
                "preview",
                "PROLIFIC_PID",
                "STUDY_ID",
                "SESSION_ID",
            ]
        )
        | segment
    )
    params = st.dictionaries(
        keys, any_text.map(lambda t: t.encode("utf-8", "surrogatepass").decode("utf-8", "replace")), max_size=4
    )

    @FUZZ
    @given(study=study_names(), hit=st.none() | st.integers(min_value=0, max_value=2**80), args=params)
    def fuzz(study, hit, args):
        where = "enter" if hit is None else f"hit/{hit}"
        check(site, "GET", f"/s/{quote(study, safe='')}/{where}?{urlencode(args)}", json_endpoint=False)

    fuzz()


def test_answer_with_arbitrary_bodies_never_fails_and_refusals_store_nothing(site):
    @FUZZ
    @given(data=st.data(), study=st.sampled_from([CHAT, AB]))
    def fuzz(data, study):
        token = data.draw(tokens_for(site))
        payload = data.draw(
            body(
                {
                    "unit_id": unit_ids(site, study),
                    "question": questions(site, study),
                    "value": ANSWER_VALUES,
                    "elapsed_s": json_scalar,
                }
            )
        )
        check(site, "POST", f"/a/{study}/{quote(token, safe='')}/answer", *payload, json_endpoint=True)

    fuzz()


def test_state_consent_submit_and_return_never_fail(site):
    @FUZZ
    @given(
        data=st.data(),
        study=study_names(),
        action=st.sampled_from(["state", "page", "consent", "submit", "return"]),
        accept_json=st.booleans(),
    )
    def fuzz(data, study, action, accept_json):
        token = data.draw(tokens_for(site))
        base = f"/a/{quote(study, safe='')}/{quote(token, safe='')}/"
        if action == "state":
            check(site, "GET", base + "state", json_endpoint=True)
        elif action == "page":
            check(site, "GET", base, json_endpoint=False)
        else:
            units = site.units.get(study, site.units[AB])
            form_key = st.builds(
                lambda u, q: f"answer-{u}-{q}",
                st.sampled_from(units) | st.integers() | segment,
                st.sampled_from(site.questions.get(study, site.questions[AB])) | segment,
            )
            fields = {"feedback": json_value, "csrf": st.just(security.csrf_value(site.secret, token)) | any_text}
            kind, payload = data.draw(
                body(fields) | st.dictionaries(form_key | any_text, any_text, max_size=4).map(lambda d: ("form", d))
            )
            if kind == "form" and data.draw(st.booleans()):
                payload = {**payload, "csrf": security.csrf_value(site.secret, token)}
            check(site, "POST", base + action, kind, payload, json_endpoint=False, accept_json=accept_json)

    fuzz()


def test_chat_message_retry_topic_and_state_never_fail(site):
    @FUZZ
    @given(
        data=st.data(),
        study=st.sampled_from([CHAT, CHAT, AB]) | segment,
        action=st.sampled_from(["state", "message", "retry", "topic"]),
    )
    def fuzz(data, study, action):
        token = data.draw(tokens_for(site))
        unit = data.draw(st.sampled_from(site.units[CHAT]) | st.integers(min_value=0, max_value=2**80))
        path = f"/a/{quote(study, safe='')}/{quote(token, safe='')}/chat/{unit}"
        if action == "state":
            check(site, "GET", path, json_endpoint=True)
            return
        fields = {
            "text": st.sampled_from(["hello there", "how are you?"]) | json_value,
            "by": st.sampled_from(["worker", "bot"]) | json_value,
            "topic": json_value,
        }
        kind, payload = data.draw(body(fields))
        check(
            site,
            "POST",
            f"{path}/{action}",
            kind,
            payload,
            json_endpoint=True,
            waiting_ok=action in ("message", "retry"),
        )

    fuzz()


def test_genuine_workers_own_units_with_arbitrary_values_never_fail(site):
    """Deeper than the broad fuzzers: the right token, unit and question, with a hostile value."""
    chat_token = site.tokens[CHAT][0]

    @settings(FUZZ, max_examples=80)
    @given(data=st.data(), study=st.sampled_from([CHAT, AB]), value=ANSWER_VALUES, elapsed=json_scalar)
    def fuzz(data, study, value, elapsed):
        token = site.tokens[study][0]
        state = site.client.get(f"/a/{study}/{token}/state").get_json()
        unit = data.draw(st.sampled_from(state["units"]))
        names = [q["name"] for q in unit["questions"]] + ["feedback"]
        question = data.draw(
            st.sampled_from(names) | st.sampled_from([n for n in names if n in ("topic", "feedback")] or names)
        )
        check(
            site,
            "POST",
            f"/a/{study}/{token}/answer",
            "json",
            {"unit_id": unit["unit_id"], "question": question, "value": value, "elapsed_s": elapsed},
            json_endpoint=True,
        )
        if study == CHAT:
            kind, payload = data.draw(
                st.sampled_from(["message", "topic"]).flatmap(
                    lambda a: st.tuples(
                        st.just(a),
                        st.fixed_dictionaries(
                            {"text": ANSWER_VALUES, "by": st.sampled_from(["worker", "bot"]), "topic": ANSWER_VALUES}
                        ),
                    )
                )
            )
            check(
                site,
                "POST",
                f"/a/{CHAT}/{chat_token}/chat/{state['units'][0]['unit_id']}/{kind}",
                "json",
                payload,
                json_endpoint=True,
                waiting_ok=True,
            )

    fuzz()


def test_the_fuzzed_study_still_works_for_a_genuine_worker(site):
    """After the fuzzing fixtures, the pages still serve a worker normally (nothing was left broken)."""
    token = site.arrive(AB, "W-after", 2)
    state = site.client.get(f"/a/{AB}/{token}/state").get_json()
    for unit in state["units"]:
        for q in unit["questions"]:
            assert (
                site.client.post(
                    f"/a/{AB}/{token}/answer", json={"unit_id": unit["unit_id"], "question": q["name"], "value": "a"}
                ).status_code
                == 200
            )
    done = site.client.post(f"/a/{AB}/{token}/submit", headers={"Accept": "application/json"})
    assert done.status_code == 200 and done.get_json()["submitted"] is True
