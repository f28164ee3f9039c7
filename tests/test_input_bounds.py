"""Input bounds over real HTTP (docs/THREAT_MODEL.md): huge or malformed ids are 404/400, never 500;
answer fields are bounded and stored in one form; topic changes are capped; the dashboard's login
`next` refuses CR/LF and logout ends the session on the server; SQLite files are private."""

from __future__ import annotations

import json
import os
import re
import stat

import pytest
import requests
from sqlalchemy import select, text

from hitkit.db.models import Conversation, Response
from hitkit.db.session import session_scope
from hitkit.errors import AnswerError
from hitkit.worker import validation
from server.embedded import WebServer
from tests.studies import pairwise_study
from tests.test_live_chat_study import bot_server, live_chat_study  # noqa: F401 - the bot server fixture
from tests.test_security import JSON, arrive, serve

HUGE = ["2147483648", "9223372036854775808", "18446744073709551616", "9" * 5000, "٣", "-1", "1e3", "0x10"]
USER, PASSWORD = "coordinator", "correct horse battery"


@pytest.fixture
def ab_dashboard(tmp_path, database_url, monkeypatch):
    """The example A/B study served on loopback with the dashboard on: (base URL, database URL)."""
    monkeypatch.setenv("HITKIT_DASHBOARD_USER", USER)
    monkeypatch.setenv("HITKIT_DASHBOARD_PASSWORD", PASSWORD)
    monkeypatch.delenv("HITKIT_DASHBOARD_PASSWORD_HASH", raising=False)
    web, _ = serve(tmp_path, database_url, pairwise_study(tmp_path, database_url))
    yield web.url, database_url
    web.stop()


def logged_in(base: str) -> requests.Session:
    client = requests.Session()
    page = client.get(f"{base}/dashboard/login")
    csrf = re.search(r'name="csrf" value="([0-9a-f]{32})"', page.text).group(1)
    done = client.post(
        f"{base}/dashboard/login", data={"username": USER, "password": PASSWORD, "csrf": csrf}, allow_redirects=False
    )
    assert done.status_code == 302
    return client


def dashboard_csrf(client: requests.Session, base: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]{32})"', client.get(f"{base}/dashboard/").text).group(1)


def test_huge_and_malformed_ids_in_worker_chat_and_dashboard_paths_are_404(ab_dashboard):
    base, _ = ab_dashboard
    task = arrive(base, "ab-demo", "W-ids")
    client = logged_in(base)
    csrf = dashboard_csrf(client, base)
    for ident in HUGE:
        for method, url in [
            ("GET", f"{base}/s/ab-demo/hit/{ident}?hitId=h1"),
            ("GET", f"{task}chat/{ident}"),
            ("POST", f"{task}chat/{ident}/message"),
            ("POST", f"{task}chat/{ident}/topic"),
            ("POST", f"{task}chat/{ident}/retry"),
            ("POST", f"{task}chat/{ident}/stream"),
            ("GET", f"{base}/dashboard/study/ab-demo/conversations/{ident}"),
            ("POST", f"{base}/dashboard/study/ab-demo/workers/{ident}/block"),
            ("POST", f"{base}/dashboard/study/ab-demo/assignments/{ident}/approve"),
        ]:
            reply = client.request(
                method,
                url,
                json={"text": "hi", "by": "worker"} if "/chat/" in url else None,
                data={"csrf": csrf} if "/dashboard/" in url else None,
            )
            assert reply.status_code == 404, (method, url[:120], reply.status_code)
    # The largest id any backend holds still reaches the route, which says "not found" its own way.
    assert client.get(f"{base}/dashboard/study/ab-demo/conversations/2147483647").status_code == 404
    assert requests.get(f"{base}/s/ab-demo/hit/2147483647?hitId=h1").status_code == 404
    for page in ("99999999999999999999999", "-3", "٣", "1" * 5000):
        assert client.get(f"{base}/dashboard/events", params={"page": page}).status_code == 200


OUT_OF_BOUNDS = [
    ("unit_id", 2**31),
    ("unit_id", 2**63),
    ("unit_id", 2**64),
    ("unit_id", "9" * 400),
    ("unit_id", 1.5),
    ("unit_id", True),
    ("unit_id", -1),
    ("unit_id", "1e3"),
    ("unit_id", None),
    ("unit_id", [1]),
    ("elapsed_s", -1e300),
    ("elapsed_s", 1e300),
    ("elapsed_s", -1),
    ("elapsed_s", "NaN"),
    ("elapsed_s", True),
    ("elapsed_s", 86400.5),
    ("elapsed_s", {"s": 1}),
    ("value", None),
    ("value", {"a": 1}),
    ("value", [1, 2]),
]


def stored_answers(url: str) -> list[tuple]:
    with session_scope(url) as s:
        return sorted(s.execute(select(Response.id, Response.unit_id, Response.question, Response.value)).all())


def test_out_of_bounds_answer_fields_are_400_and_store_nothing(ab_dashboard):
    # Every case on one served study (one server start instead of twenty): each refused answer leaves the
    # stored answers exactly as they were, and the same body with that field in bounds is then accepted.
    base, url = ab_dashboard
    task = arrive(base, "ab-demo", "W-bounds")
    state = requests.get(task + "state").json()
    unit = state["units"][0]
    valid = {"unit_id": unit["unit_id"], "elapsed_s": 0, "value": "a"}
    for field, value in OUT_OF_BOUNDS:
        before = stored_answers(url)
        body = {"unit_id": unit["unit_id"], "question": "vote", "value": "a", "elapsed_s": 3.5, field: value}
        reply = requests.post(task + "answer", json=body)
        assert reply.status_code == 400 and reply.json()["error"], (field, value, reply.text)
        assert stored_answers(url) == before, (field, value)
        ok = requests.post(task + "answer", json={**body, field: valid[field]})
        assert ok.status_code == 200, (field, value, ok.text)
    assert len(stored_answers(url)) == 1  # the accepted answers were one vote, saved again


def test_a_form_submit_with_a_huge_unit_id_is_400_not_500(ab_dashboard):
    base, _ = ab_dashboard
    task = arrive(base, "ab-demo", "W-form")
    page = requests.get(task)
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text).group(1)
    for ident in ("9223372036854775808", "9" * 5000):
        reply = requests.post(task + "submit", data={"csrf": csrf, f"answer-{ident}-vote": "a"}, headers=JSON)
        assert reply.status_code == 400, reply.text


def test_the_validators_on_plain_values():
    assert validation.record_id("42", "unit_id") == validation.record_id(42, "unit_id") == 42
    assert validation.elapsed_seconds(None) is None and validation.elapsed_seconds("2.5") == 2.5
    assert validation.answer_text({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert validation.answer_text(50) == "50" and validation.answer_text(True) == "true"
    for bad in (float("inf"), float("nan"), 2**60, object()):
        with pytest.raises(AnswerError):
            validation.answer_text(bad)
    with pytest.raises(AnswerError, match="limit"):
        validation.answer_text({"x": "y" * validation.MAX_JSON_ANSWER_CHARS})


def test_json_answers_are_stored_as_json_and_topic_changes_are_capped(tmp_path, database_url, bot_server):  # noqa: F811
    web, _ = serve(tmp_path, database_url, live_chat_study(tmp_path, database_url, bot_server))
    try:
        task = arrive(web.url, "chat-demo", "W-topics")
        unit = next(u for u in requests.get(task + "state").json()["units"] if u["position"] == 0)
        uid = unit["unit_id"]
        assert requests.post(task + "answer", json={"unit_id": uid, "question": "topic", "value": "films"}).ok
        assert requests.post(task + "answer", json={"unit_id": uid, "question": "topic_sentiment", "value": "like"}).ok
        for message in ("hello", "which films do you like?"):
            assert requests.post(task + f"chat/{uid}/message", json={"text": message}).ok
        saved = requests.post(
            task + "answer", json={"unit_id": uid, "question": "feedback", "value": {"liked": ["a", "b"], "score": 3}}
        )
        assert saved.status_code == 200, saved.text
        too_long = requests.post(task + f"chat/{uid}/topic", json={"by": "worker", "topic": "x" * 501})
        assert too_long.status_code == 400 and "500" in too_long.json()["error"]
        codes = [
            requests.post(task + f"chat/{uid}/topic", json={"by": "worker", "topic": f"topic {i}"}).status_code
            for i in range(validation.MAX_TOPIC_CHANGES + 3)
        ]
        assert codes == [200] * validation.MAX_TOPIC_CHANGES + [400] * 3
    finally:
        web.stop()
    with session_scope(database_url) as s:
        stored = s.scalar(select(Response.value).where(Response.question == "feedback"))
        assert json.loads(stored) == {"liked": ["a", "b"], "score": 3}
        meta = s.scalar(select(Conversation.meta))
        assert len(meta["topic_changes"]) == validation.MAX_TOPIC_CHANGES


def test_a_cr_lf_in_the_login_next_is_refused_cleanly(ab_dashboard):
    base, _ = ab_dashboard
    hostile = "/dashboard/\r\nSet-Cookie: pwned=1"
    page = requests.get(f"{base}/dashboard/login", params={"next": hostile})
    assert page.status_code == 200 and "pwned" not in page.text
    client = requests.Session()
    page = client.get(f"{base}/dashboard/login")
    csrf = re.search(r'name="csrf" value="([0-9a-f]{32})"', page.text).group(1)
    done = client.post(
        f"{base}/dashboard/login",
        allow_redirects=False,
        data={"username": USER, "password": PASSWORD, "csrf": csrf, "next": hostile},
    )
    assert done.status_code == 302 and done.headers["Location"].endswith("/dashboard/")
    assert "pwned" not in done.headers.get("Set-Cookie", "")
    assert "pwned" not in client.cookies


def test_logout_ends_the_session_on_the_server_for_every_copy_of_the_cookie(ab_dashboard):
    base, url = ab_dashboard
    coordinator = logged_in(base)
    stolen = requests.Session()
    stolen.cookies.update(coordinator.cookies)
    assert stolen.get(f"{base}/dashboard/", allow_redirects=False).status_code == 200
    out = coordinator.post(
        f"{base}/dashboard/logout", data={"csrf": dashboard_csrf(coordinator, base)}, allow_redirects=False
    )
    assert out.status_code == 302
    assert stolen.get(f"{base}/dashboard/", allow_redirects=False).status_code == 302
    # Another server process on the same database agrees: the revocation lives in the database.
    other = WebServer(url, "127.0.0.1", 0, 4, os.environ["HITKIT_SECRET"]).start()
    try:
        assert stolen.get(f"{other.url}/dashboard/", allow_redirects=False).status_code == 302
        assert logged_in(other.url).get(f"{base}/dashboard/", allow_redirects=False).status_code == 200
    finally:
        other.stop()


def test_a_new_sqlite_database_and_its_wal_files_are_private(tmp_path):
    from hitkit.db.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'fresh' / 'hitkit.db'}"
    old = os.umask(0o022)
    try:
        upgrade(url)
        with session_scope(url) as s:
            s.execute(text("SELECT count(*) FROM study"))
    finally:
        os.umask(old)
    files = sorted((tmp_path / "fresh").iterdir())
    assert {f.name for f in files} >= {"hitkit.db", "hitkit.db-wal", "hitkit.db-shm"}
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f.name
