"""The web tier's defences (docs/THREAT_MODEL.md) over real HTTP, on SQLite and PostgreSQL: hostile
text comes back escaped, forged and replayed requests store nothing, headers allow framing only by
the crowd sites, cross-site form posts need the CSRF field, floods get 429, logs hold no tokens."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from markupsafe import escape
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Event, Response, Study, Turn, Unit
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from hitkit.worker import security, tokens
from server.embedded import WebServer
from tests.studies import REPO, pairwise_study
from tests.test_live_chat_study import bot_server, live_chat_study  # noqa: F401 - the bot server fixture
from tests.test_spot_the_bot_study import stb_study

PAYLOADS = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')
JSON = {"Accept": "application/json"}
STATIC = REPO / "hit_templates" / "static"


def serve(tmp_path, database_url, study_file):
    """Create and start the study in ``study_file``, serve its pages on loopback, post its first wave."""
    config = load_study(study_file)
    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    tick(database_url, config.study, web.url)
    return web, secret


@pytest.fixture
def ab(tmp_path, database_url):
    """The example A/B study served on loopback: (base URL, database URL, secret)."""
    web, secret = serve(tmp_path, database_url, pairwise_study(tmp_path, database_url))
    yield web.url, database_url, secret
    web.stop()


def arrive(base: str, study: str, worker: str, hit: int = 1, consent: bool = True) -> str:
    """Arrive as ``worker`` on HIT ``hit`` (and consent, as the page's form does); the task page URL."""
    page = requests.get(
        f"{base}/s/{study}/hit/{hit}",
        params={"workerId": worker, "assignmentId": f"{worker}-{hit}", "hitId": f"h{hit}"},
    )
    assert page.status_code == 200, page.text
    task = page.url.split("?")[0]
    if consent:
        assert requests.post(task + "consent", data={"csrf": csrf_field(page.text)}).status_code == 200
    return task


def csrf_field(page_html: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page_html).group(1)


def token_of(task: str) -> str:
    return task.rstrip("/").rsplit("/", 1)[1]


def assert_escaped(text: str, expect_shown: bool = True) -> None:
    """No payload appears raw in an HTML page; where the page shows one, it is escaped."""
    for payload in PAYLOADS:
        assert payload not in text
        assert "<script>alert" not in text and "<img src=x" not in text
    if expect_shown:
        assert any(str(escape(p)) in text for p in PAYLOADS)


def count(url: str, model) -> int:
    with session_scope(url) as s:
        return s.scalar(select(func.count()).select_from(model))


# Hostile text -------------------------------------------------------------------------------------
def test_hostile_text_in_every_live_chat_field_comes_back_escaped_or_as_json_data(tmp_path, database_url, bot_server):  # noqa: F811
    web, secret = serve(tmp_path, database_url, live_chat_study(tmp_path, database_url, bot_server))
    try:
        base = web.url
        task = arrive(base, "chat-demo", "W-xss")
        state = requests.get(task + "state").json()
        unit = next(u for u in state["units"] if u["position"] == 0)
        uid = unit["unit_id"]
        hostile = " ".join(PAYLOADS)

        def post(path, body):
            reply = requests.post(task + path, json=body)
            assert reply.status_code == 200, reply.text
            return reply.json()

        post("answer", {"unit_id": uid, "question": "topic", "value": hostile})
        post("answer", {"unit_id": uid, "question": "topic_sentiment", "value": "like"})
        for payload in PAYLOADS:
            post(f"chat/{uid}/message", {"text": payload})
        change = post(f"chat/{uid}/topic", {"by": "worker", "topic": hostile})
        assert change["topic"] == hostile
        for criterion in unit["criteria"]:
            post("answer", {"unit_id": uid, "question": criterion["question"], "value": "40"})
        post("answer", {"unit_id": uid, "question": "feedback", "value": hostile})
        # A value refused with the payload in its message: the HTML error page escapes it.
        refused = requests.post(
            task + "submit",
            data={"csrf": security.csrf_value(secret, token_of(task)), f"answer-{uid}-topic_sentiment": PAYLOADS[1]},
        )
        assert refused.status_code == 400 and "text/html" in refused.headers["Content-Type"]
        assert_escaped(refused.text)

        # JSON gives the text back exactly, as data: the page inserts it with textContent only.
        chat = requests.get(task + f"chat/{uid}").json()
        assert [t["text"] for t in chat["turns"] if t["speaker"] == "worker"] == list(PAYLOADS)
        assert chat["topic_changes"][0]["topic"] == hostile
        answers = requests.get(task + "state").json()["answers"][str(uid)]
        assert answers["topic"] == hostile and answers["feedback"] == hostile
        # Every HTML page the worker can load shows no payload raw.
        for page in (requests.get(task), requests.get(f"{base}/s/chat-demo/hit/1", params={"hitId": "h1"})):
            assert page.status_code == 200 and "text/html" in page.headers["Content-Type"]
            assert_escaped(page.text, expect_shown=False)
    finally:
        web.stop()
    with session_scope(database_url) as s:
        stored = list(s.scalars(select(Turn.text).where(Turn.speaker == "worker").order_by(Turn.index)))
        assert stored == list(PAYLOADS)


def test_hostile_conversation_text_in_spot_the_bot_material_is_escaped_on_every_page(tmp_path, database_url):
    study_file = stb_study(tmp_path, database_url)
    # Material is data from outside (generated or collected): put the payloads in every turn of it.
    for name in ("bot_bot.jsonl", "human.jsonl"):
        rows = [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]
        for row in rows:
            turns = row["turns"]
            for i, turn in enumerate(turns):
                if isinstance(turn, dict):
                    turn["text"] = f"{PAYLOADS[i % 2]} {turn['text']}"
                else:
                    turns[i] = f"{PAYLOADS[i % 2]} {turn}"
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    web, _ = serve(tmp_path, database_url, study_file)
    try:
        preview = requests.get(f"{web.url}/s/stb-demo/hit/1", params={"hitId": "h1"})
        assert preview.status_code == 200 and "Speaker A" in preview.text
        assert_escaped(preview.text)  # the preview renders an example conversation server-side
        task = arrive(web.url, "stb-demo", "W-stb")
        page = requests.get(task)
        assert page.status_code == 200
        assert_escaped(page.text, expect_shown=False)
        shown = [t["text"] for u in requests.get(task + "state").json()["units"] for t in u["turns"]]
        assert shown and all(text.startswith(PAYLOADS) for text in shown)  # exact data, for textContent
    finally:
        web.stop()


def test_the_worker_pages_scripts_never_insert_html():
    scripts = sorted(STATIC.glob("*.js"))
    assert {p.name for p in scripts} >= {"hitkit.js", "live_chat.js", "spot_the_bot.js", "handback.js"}
    for path in scripts:
        source = path.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in source, f"{path.name} uses {sink}"


def test_templates_have_no_inline_script_style_or_handlers_the_policy_would_block():
    for path in (REPO / "hit_templates").glob("*.html"):
        source = path.read_text()
        # A <script type="application/json"> is data the page reads (the scripts' words), never run: script-src
        # does not apply to it. Any other inline script would be blocked.
        assert re.search(r'<script(?![^>]*\ssrc=)(?![^>]*type="application/json")', source) is None, path.name
        assert "<style" not in source and " style=" not in source, path.name
        assert re.search(r"\son[a-z]+=", source) is None, path.name
        assert "|safe" not in source and "autoescape false" not in source, path.name


# Forged, foreign, replayed, oversized and preview requests ------------------------------------------
def test_forged_and_foreign_tokens_and_another_workers_units_are_refused_and_store_nothing(ab):
    base, url, secret = ab
    task_a = arrive(base, "ab-demo", "W-A", hit=1)
    task_b = arrive(base, "ab-demo", "W-B", hit=2)
    unit_b = requests.get(task_b + "state").json()["units"][0]["unit_id"]
    unit_a = requests.get(task_a + "state").json()["units"][0]["unit_id"]
    with session_scope(url) as s:
        b = s.scalar(select(Assignment).where(Assignment.provider_assignment_id == "W-B-2"))
        b_id, b_nonce = b.id, b.token_nonce
    token_a = token_of(task_a)
    forged = [
        tokens.assignment_token("not-the-secret", b_id, b_nonce),  # signed without the secret
        token_a.split(".")[0] + "." + tokens.assignment_token(secret, b_id, "guess").split(".")[1],  # spliced
        tokens.assignment_token(secret, b_id, "0" * 16),  # right id, wrong nonce
        tokens.sign(secret, "invite:ab-demo", f"{b_id}:{b_nonce}"),  # another purpose's token
    ]
    for bad in forged:
        for path, body in (
            ("answer", {"unit_id": unit_b, "question": "vote", "value": "a"}),
            ("submit", None),
            ("return", None),
        ):
            reply = requests.post(f"{base}/a/ab-demo/{bad}/{path}", json=body, headers=JSON)
            assert reply.status_code == 403, (bad, path, reply.text)
        assert requests.get(f"{base}/a/ab-demo/{bad}/state").status_code == 403
    # A genuine token cannot reach another worker's unit.
    foreign = requests.post(task_a + "answer", json={"unit_id": unit_b, "question": "vote", "value": "a"})
    assert foreign.status_code == 400 and "not part of this HIT" in foreign.json()["error"]
    # Nor can a token from another study.
    assert requests.get(f"{base}/a/other-study/{token_a}/state").status_code == 404
    assert requests.post(task_a + "answer", json={"unit_id": unit_a, "question": "vote", "value": "b"}).ok
    with session_scope(url) as s:
        rows = s.execute(
            select(Response.assignment_id, Unit.public_key).join(  # workers name units by key
                Unit, Response.unit_id == Unit.id
            )
        ).all()
        assert len(rows) == 1 and rows[0][1] == unit_a and rows[0][0] != b_id
        assert sorted(s.scalars(select(Assignment.status))) == ["accepted", "accepted"]


def test_a_replayed_submission_is_stored_once_whichever_way_it_comes(ab):
    base, url, secret = ab
    task = arrive(base, "ab-demo", "W-replay")
    state = requests.get(task + "state").json()
    form = {"csrf": security.csrf_value(secret, token_of(task))}
    form.update({f"answer-{u['unit_id']}-{q['name']}": "a" for u in state["units"] for q in u["questions"]})
    first = requests.post(task + "submit", data=form)
    assert first.status_code == 200 and "submitted" in first.text
    replies = [
        requests.post(task + "submit", data=form),
        requests.post(task + "submit", headers=JSON),
        requests.post(task + "submit", data={**form, next(k for k in form if k != "csrf"): "b"}),
    ]
    assert all(r.status_code == 200 for r in replies)
    assert replies[1].json()["submitted"] is True
    with session_scope(url) as s:
        assert s.scalar(select(func.count()).select_from(Event).where(Event.kind == "assignment_submitted")) == 1
        assert set(s.scalars(select(Response.value))) == {"a"}  # the replay with "b" changed nothing
        assert s.scalar(select(func.count()).select_from(Response)) == sum(len(u["questions"]) for u in state["units"])


def test_oversized_bodies_get_413_and_store_nothing(ab):
    base, url, secret = ab
    task = arrive(base, "ab-demo", "W-big")
    unit = requests.get(task + "state").json()["units"][0]["unit_id"]
    big = "x" * (65 * 1024)
    replies = [
        requests.post(task + "answer", json={"unit_id": unit, "question": "vote", "value": big}),
        requests.post(
            task + "submit", data={"csrf": security.csrf_value(secret, token_of(task)), f"answer-{unit}-vote": big}
        ),
        requests.post(task + "return", data={"csrf": security.csrf_value(secret, token_of(task)), "note": big}),
    ]
    assert [r.status_code for r in replies] == [413, 413, 413]
    assert count(url, Response) == 0
    with session_scope(url) as s:
        assert s.scalar(select(Assignment.status)) == "accepted"


def test_a_preview_cannot_submit_or_answer_and_nothing_is_stored(ab):
    base, url, _ = ab
    preview = requests.get(
        f"{base}/s/ab-demo/hit/1", params={"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "h1"}
    )
    assert preview.status_code == 200 and "Preview" in preview.text
    assert 'name="csrf"' not in preview.text and "/a/ab-demo/" not in preview.text  # no token, nothing to post to
    assert requests.post(f"{base}/s/ab-demo/hit/1", data={"answer-1-vote": "a"}).status_code == 405
    for made_up in ("None", "preview", "ASSIGNMENT_ID_NOT_AVAILABLE"):
        assert requests.post(f"{base}/a/ab-demo/{made_up}/submit", headers=JSON).status_code == 403
        assert (
            requests.post(
                f"{base}/a/ab-demo/{made_up}/answer", json={"unit_id": 1, "question": "vote", "value": "a"}
            ).status_code
            == 403
        )
    assert count(url, Assignment) == 0 and count(url, Response) == 0


# Headers -------------------------------------------------------------------------------------------
def test_every_response_allows_framing_only_by_the_crowd_sites_and_sets_no_cookie(ab):
    base, _, _ = ab
    task = arrive(base, "ab-demo", "W-headers")
    replies = [
        requests.get(f"{base}/health"),
        requests.get(f"{base}/static/hitkit.js"),
        requests.get(task),
        requests.get(task + "state"),
        requests.get(f"{base}/nowhere"),
        requests.get(f"{base}/s/ab-demo/hit/1", params={"hitId": "h1"}),
        requests.post(task + "answer", json={"unit_id": 0, "question": "vote", "value": "a"}),
        requests.post(task + "consent", data={"x": "1"}),
    ]
    assert [r.status_code for r in replies] == [200, 200, 200, 200, 404, 200, 400, 403]
    for reply in replies:
        csp = reply.headers["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
        assert directives["default-src"] == "'self'" and directives["script-src"] == "'self'"
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        ancestors = directives["frame-ancestors"].split()
        assert ancestors[0] == "'self'"
        assert set(ancestors) >= {
            "https://*.mturk.com",
            "https://workersandbox.mturk.com",
            "https://worker.mturk.com",
            "https://*.prolific.com",
            "https://app.prolific.com",
        }
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
        assert reply.headers["Referrer-Policy"] == "no-referrer"
        assert "X-Frame-Options" not in reply.headers
        assert "Set-Cookie" not in reply.headers


def test_frame_ancestors_come_from_the_environment_and_a_bad_source_is_refused():
    assert security.frame_ancestors("https://lab.example.org http://127.0.0.1:8123") == (
        "'self'",
        "https://lab.example.org",
        "http://127.0.0.1:8123",
    )
    assert security.frame_ancestors(None)[1:] == security.PROVIDER_FRAME_ANCESTORS
    assert security.frame_ancestors("'none'") == ("'none'",)
    for bad in ("https://a.org; script-src *", "https://a.org,https://b.org", "'unsafe-inline'"):
        with pytest.raises(ConfigError, match="HITKIT_FRAME_ANCESTORS"):
            security.frame_ancestors(bad)


# CSRF ------------------------------------------------------------------------------------------------
def test_a_cross_site_form_post_needs_the_assignments_csrf_field(ab):
    base, url, secret = ab
    page = requests.get(f"{base}/s/ab-demo/hit/1", params={"workerId": "W-csrf", "assignmentId": "c1", "hitId": "h1"})
    task = page.url.split("?")[0]
    other = arrive(base, "ab-demo", "W-other", hit=2)
    evil = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
    refused = [
        requests.post(task + "consent", data={"x": "1"}, headers=evil),  # no field
        requests.post(
            task + "consent", data={"csrf": security.csrf_value(secret, token_of(other))}, headers=evil
        ),  # another's field
        requests.post(task + "consent", data={"csrf": "0" * 32}, headers=evil),  # a guess
        requests.post(
            task + "consent", data="csrf=" + csrf_field(page.text), headers={**evil, "Content-Type": "text/plain"}
        ),  # text/plain form
        requests.post(task + "consent", headers=evil),  # body-less fetch
        requests.post(task + "consent", data={"x": "1"}),  # form, no headers
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert "did not come from the task page" in refused[0].text
    with session_scope(url) as s:
        assert s.scalar(select(Assignment.consented_at).where(Assignment.provider_assignment_id == "c1")) is None
    accepted = requests.post(task + "consent", data={"csrf": csrf_field(page.text)}, headers=evil)
    assert accepted.status_code == 200 and 'id="task"' in accepted.text
    # The return form the same way: refused without the field, done with it.
    assert requests.post(task + "return", data={}, headers=evil).status_code == 403
    form = csrf_field(requests.get(task).text)
    assert requests.post(task + "return", data={"csrf": form}, headers=evil).status_code == 200
    # JSON needs a CORS preflight cross-site, which the server never grants: JSON is the page's own fetch.
    assert "Access-Control-Allow-Origin" not in requests.options(task + "answer", headers=evil).headers
    with session_scope(url) as s:
        row = s.execute(
            select(Assignment.consented_at, Assignment.status).where(Assignment.provider_assignment_id == "c1")
        ).one()
        assert row[0] is not None and row[1] == "returned"


def test_the_csrf_rule_on_plain_values():
    secret, token = "s", "tok"
    good = security.csrf_value(secret, token)
    form = "application/x-www-form-urlencoded"
    assert security.csrf_refusal(secret, token, "application/json", "http://evil.example", "cross-site", None) is None
    assert security.csrf_refusal(secret, token, "application/json; charset=utf-8", None, None, None) is None
    assert security.csrf_refusal(secret, token, form, "null", "same-origin", good) is None
    assert security.csrf_refusal(secret, token, None, None, None, None) is None  # a script, not a browser
    assert security.csrf_refusal(secret, token, form, None, None, None) is not None
    assert security.csrf_refusal(secret, token, form, None, None, security.csrf_value(secret, "other")) is not None
    assert security.csrf_refusal(secret, token, "multipart/form-data; boundary=x", None, None, "") is not None
    assert security.csrf_refusal(secret, token, None, "null", None, None) is not None
    assert security.csrf_refusal(secret, token, None, None, "same-origin", None) is not None
    assert security.csrf_refusal(secret, None, form, None, None, good) is not None


# Rate limits -----------------------------------------------------------------------------------------
def test_a_flood_from_one_worker_gets_429_then_recovers_without_slowing_others(tmp_path, database_url, monkeypatch):
    # A burst of 6 refilled at 0.25 a second: the request after the flood finds the bucket still empty unless
    # the machine took 4 s to serve one request (refilled at 2 a second, a loaded CI run once took 0.5 s).
    monkeypatch.setenv("HITKIT_RATE_LIMIT", "0.25/6")
    # Arrivals: a burst of 8 refilled at 0.1 a second, so the flood of entries below empties the bucket however
    # slowly a loaded machine serves them (refilled at 2 a second, a CI run under load kept up with it once).
    monkeypatch.setenv("HITKIT_ENTRY_RATE_LIMIT", "0.1/8")
    web, _ = serve(tmp_path, database_url, pairwise_study(tmp_path, database_url))
    try:
        base = web.url
        task = arrive(base, "ab-demo", "W-flood", consent=False)  # 1 entry request, 1 page (token)
        other = arrive(base, "ab-demo", "W-calm", hit=2, consent=False)
        codes = [requests.get(task + "state").status_code for _ in range(12)]
        assert codes[:4] == [200] * 4 and codes[-1] == 429
        limited = requests.get(task + "state", headers=JSON)
        assert limited.status_code == 429 and "too many requests" in limited.json()["error"]
        wait = int(limited.headers["Retry-After"])
        assert 1 <= wait <= 4
        assert requests.get(other + "state").status_code == 200  # another worker is not slowed
        time.sleep(wait)
        assert requests.get(task + "state").status_code == 200
        # Arrivals are limited per address; forged tokens share that bucket, not a bucket of their own.
        entries = [requests.get(f"{base}/s/ab-demo/hit/1", params={"hitId": "h1"}).status_code for _ in range(10)]
        assert entries[-1] == 429
        assert requests.get(f"{base}/a/ab-demo/forged.token/state").status_code == 429
    finally:
        web.stop()
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Assignment)) == 2


def spellings(token: str) -> list[str]:
    """Other spellings of ``token`` that a lenient base64 decoder reads as the same bytes."""
    body, mac = token.split(".")
    flipped = (
        mac[:-1]
        + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[
            ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".index(mac[-1]) ^ 1)
        ]
    )
    return [
        token + "==",
        token + "=",
        f"{body}.~~{mac}",
        f"{body}=.{mac}",
        f"{body}.{mac}~",
        f"{body}..{mac}",
        f"{body}.{mac}".replace("-", "+").replace("_", "/"),
        f"{body}.{mac}\n",
        f"{body}.{mac[:-2]}",
        f"{body}.{flipped}",
    ]


def test_a_token_has_one_spelling_and_every_other_is_refused():
    secret = "canonical-token-test-secret-0123456789"
    token = tokens.assignment_token(secret, 42, "0123456789abcdef")
    assert tokens.read_assignment_token(secret, token) == (42, "0123456789abcdef")
    variants = [v for v in spellings(token) if v != token]
    assert variants and all(tokens.read_assignment_token(secret, v) is None for v in variants)
    invite = tokens.sign(secret, "invite", "annotator-001")
    assert tokens.verify(secret, "invite", invite + "=") is None and tokens.verify(secret, "invite", invite)


def test_variants_of_a_rate_limited_token_get_no_fresh_bucket(tmp_path, database_url, monkeypatch):
    monkeypatch.setenv("HITKIT_RATE_LIMIT", "0.5/4")
    web, _ = serve(tmp_path, database_url, pairwise_study(tmp_path, database_url))
    try:
        task = arrive(web.url, "ab-demo", "W-variants", consent=False)
        token = token_of(task)
        codes = [requests.get(task + "state").status_code for _ in range(6)]
        assert codes[-1] == 429
        base = task[: -len(token) - 1]
        variant_codes = [requests.get(f"{base}/{quote(v, safe='')}/state").status_code for v in spellings(token)]
        assert 200 not in variant_codes and all(c < 500 for c in variant_codes), variant_codes
    finally:
        web.stop()
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Response)) == 0


def test_behind_a_trusted_proxy_each_client_address_has_its_own_entry_bucket(tmp_path, database_url, monkeypatch):
    from server import create_app

    # a burst of 3 refilled once a minute: a loaded machine taking seconds over five requests must not refill it
    monkeypatch.setenv("HITKIT_ENTRY_RATE_LIMIT", "0.017/3")
    monkeypatch.setenv("HITKIT_PROXY_HOPS", "1")
    config = load_study(pairwise_study(tmp_path, database_url))
    with session_scope(database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", resolve_secret(database_url))
        s.get(Study, ctx.study_id).status = "running"
    tick(database_url, config.study, "http://127.0.0.1:9")
    # The test client, not waitress: waitress drops X-Forwarded-For from proxies it was not told of.
    client = create_app(database_url).test_client()

    def preview(client_address: str) -> int:
        return client.get("/s/ab-demo/hit/1?hitId=h1", headers={"X-Forwarded-For": client_address}).status_code

    assert [preview("203.0.113.1") for _ in range(5)] == [200, 200, 200, 429, 429]
    assert preview("203.0.113.2") == 200
    monkeypatch.delenv("HITKIT_PROXY_HOPS")
    direct = create_app(database_url).test_client()  # no proxy trusted: the header changes nothing
    assert [
        direct.get("/s/ab-demo/hit/1?hitId=h1", headers={"X-Forwarded-For": f"198.51.100.{i}"}).status_code
        for i in range(5)
    ][-1] == 429


def test_token_buckets_refill_at_the_rate_and_stay_bounded():
    now = [0.0]
    buckets = security.TokenBuckets(security.RateLimit(2, 3), max_keys=2, clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [0.0] * 3
    assert buckets.take("a") == pytest.approx(0.5)
    now[0] += 0.5
    assert buckets.take("a") == 0.0 and buckets.take("a") > 0
    buckets.take("b"), buckets.take("c")
    assert len(buckets._buckets) == 2  # the least recently seen key was dropped
    assert security.RateLimit.parse("5/10", security.TOKEN_LIMIT, "X") == security.RateLimit(5, 10)
    assert security.RateLimit.parse(None, security.TOKEN_LIMIT, "X") == security.TOKEN_LIMIT
    for bad in ("fast", "0/10", "5/0", "5"):
        with pytest.raises(ConfigError, match="HITKIT_RATE_LIMIT"):
            security.RateLimit.parse(bad, security.TOKEN_LIMIT, "HITKIT_RATE_LIMIT")


# Logs ------------------------------------------------------------------------------------------------
def test_redact_path_removes_tokens_and_query_strings():
    assert security.redact_path("/a/ab-demo/eyJhYmMi.c2ln/chat/3/message") == "/a/ab-demo/<token>/chat/3/message"
    assert security.redact_path('"POST /a/s/T.k/submit?x=1 HTTP/1.1"') == '"POST /a/s/<token>/submit?<query> HTTP/1.1"'
    assert security.redact_path("https://eval.example.org/a/s/T.k/") == "https://eval.example.org/a/s/<token>/"
    assert security.redact_path("/s/s/enter?invite=SECRET") == "/s/s/enter?<query>"
    assert security.redact_path("/static/hitkit.js") == "/static/hitkit.js"


def test_gunicorn_access_log_holds_no_token_or_invite(ab, tmp_path):
    _, url, secret = ab
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path / "access.log"
    env = {
        **os.environ,
        "HITKIT_DATABASE_URL": url,
        "HITKIT_SECRET": secret,
        "HITKIT_BIND": f"127.0.0.1:{port}",
        "HITKIT_WEB_WORKERS": "1",
        "HITKIT_ACCESS_LOG": str(log),
    }
    errors = (tmp_path / "gunicorn.err").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "ops/gunicorn.conf.py", "server.wsgi:app"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=errors,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                time.sleep(0.2)
        task = arrive(base, "ab-demo", "W-log")
        requests.get(task + "state", headers={"Referer": task})
        requests.get(f"{base}/s/ab-demo/enter", params={"invite": "INVITE-SECRET"})
    except AssertionError:
        raise AssertionError((tmp_path / "gunicorn.err").read_text()[-3000:]) from None
    finally:
        proc.terminate()
        proc.wait(10)
        errors.close()
    text = log.read_text()
    assert token_of(task) not in text and "INVITE-SECRET" not in text and "W-log" not in text
    assert '"GET /a/ab-demo/<token>/state"' in text and '"POST /a/ab-demo/<token>/consent"' in text


def test_the_access_log_format_only_uses_redacted_atoms():
    config = (REPO / "ops" / "gunicorn.conf.py").read_text()
    atoms = set(re.findall(r"%\((\w+|\{[^}]+\}\w)\)s", re.search(r"access_log_format = (.+)", config).group(1)))
    assert atoms <= {"h", "m", "U", "s", "B", "M", "r", "f", "{referer}i", "T", "D", "L", "t", "p", "H", "b"}
    assert "logger_class = RedactingLogger" in config


def test_no_hitkit_module_imports_flask():
    for path in Path(REPO / "hitkit").rglob("*.py"):
        assert not re.search(r"^\s*(from|import) flask", path.read_text(), re.MULTILINE), path


def test_an_exception_is_logged_with_the_token_redacted(tmp_path, caplog):
    from server import create_app

    secret = "an-exception-test-secret-0123456789abcdef"
    app = create_app(f"sqlite:///{tmp_path / 'none.db'}", secret)

    @app.get("/a/<study>/<token>/boom")
    def boom(study: str, token: str):
        raise RuntimeError("boom")

    token = tokens.assignment_token(secret, 7, "abcdef0123456789")
    with caplog.at_level("ERROR"):
        assert app.test_client().get(f"/a/s/{token}/boom").status_code == 500
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "Exception on /a/s/<token>/boom [GET]" in logged and token not in logged
