"""Bounded requests over real HTTP (docs/THREAT_MODEL.md, "input bounds"): JSON nested deeper than the
limit, a NUL or a byte that is not UTF-8 in a path or query, and a malformed chunked body are each
refused with a 400 before any route parses them — never a 500 — and store nothing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import requests
from sqlalchemy import func, select

from hitkit.db.models import Conversation, Response, Turn
from hitkit.db.session import session_scope
from hitkit.worker.bounds import MAX_JSON_DEPTH, json_depth, json_refusal, text_refusal
from tests.studies import REPO
from tests.test_concurrency import arrive, free_port, running_study, serving
from tests.test_security import csrf_field

DEEP = "[" * 30_000 + "]" * 30_000  # 60 KB: under the 64 KiB body limit
JSON = {"Content-Type": "application/json", "Accept": "application/json"}


def _stored(database_url: str) -> tuple[int, int, int]:
    with session_scope(database_url) as s:
        return tuple(s.scalar(select(func.count()).select_from(m)) for m in (Response, Turn, Conversation))


def test_json_nested_30000_deep_is_400_on_every_json_route_and_stores_nothing(tmp_path, database_url):
    _, secret = running_study(tmp_path, database_url, "http://127.0.0.1")
    with serving(database_url, secret, tmp_path / "web.log") as base:
        http, task = arrive(base, "W-DEEP")
        http.post(task + "consent").raise_for_status()
        unit = http.get(task + "state").json()["units"][0]["unit_id"]
        before = _stored(database_url)
        bodies = {
            "answer": DEEP,
            "submit": DEEP,
            f"chat/{unit}/message": DEEP,
            f"chat/{unit}/topic": DEEP,
            "answer?x": '{"unit_id": ' + "[" * 20_000 + "]" * 20_000 + ', "question": "vote", "value": "a"}',
            "return": "{" * 1000 + "}" * 1000,
        }
        for route, body in bodies.items():
            sent = http.post(task + route.split("?")[0], data=body, headers=JSON)
            assert sent.status_code == 400, (route, sent.status_code, sent.text[:200])
            assert "nested more than" in sent.json()["error"]
        # A flat body still works, and nothing the refused ones carried was stored.
        ok = http.post(
            task + "answer",
            json={"unit_id": unit, "question": "vote", "value": "a"},
        )
        assert ok.status_code == 200
        assert _stored(database_url)[0] == before[0] + 1 and _stored(database_url)[1:] == before[1:]
        # The comment's signals in a form submit, nested deep, cost the worker nothing either.
        for view in http.get(task + "state").json()["units"]:
            http.post(task + "answer", json={"unit_id": view["unit_id"], "question": "vote", "value": "a"})
        csrf = csrf_field(http.get(task).text)
        form = http.post(
            task + "submit",
            data={"feedback": "fine", "feedback_signals": "[" * 2000 + "]" * 2000, "csrf": csrf},
            allow_redirects=False,
        )
        assert form.status_code in (200, 302), form.text[-600:]


def test_a_nul_or_a_byte_that_is_not_utf8_in_a_path_or_query_is_400(tmp_path, database_url):
    _, secret = running_study(tmp_path, database_url, "http://127.0.0.1")
    with serving(database_url, secret, tmp_path / "web.log") as base:
        http, task = arrive(base, "W-NUL")
        http.post(task + "consent").raise_for_status()
        before = _stored(database_url)
        for path in ("chat/ab%00cd", "chat/%FF%FE", "chat/%00/message", "chat/x%C3/retry"):
            method = http.post if path.endswith(("message", "retry")) else http.get
            got = method(
                task + path,
                headers={"Accept": "application/json"},
                **({"json": {"text": "hi"}} if method is http.post else {}),
            )
            assert got.status_code == 400, (path, got.status_code, got.text[:200])
            assert "NUL" in got.json()["error"] or "UTF-8" in got.json()["error"]
        for query in (
            "workerId=W%00X&assignmentId=A1&hitId=h",
            "workerId=%FF&assignmentId=A1&hitId=h",
            "workerId=W2&assignmentId=A1&hitId=h&%00=1",
        ):
            got = requests.get(f"{base}/s/ab-demo/enter?{query}")
            assert got.status_code == 400, (query, got.status_code)
        assert _stored(database_url) == before


def _gunicorn(database_url: str, secret: str, log):
    port = free_port()
    env = {
        **os.environ,
        "HITKIT_DATABASE_URL": database_url,
        "HITKIT_SECRET": secret,
        "HITKIT_BIND": f"127.0.0.1:{port}",
        "HITKIT_WEB_WORKERS": "1",
        "HITKIT_WEB_THREADS": "4",
        "HITKIT_ACCESS_LOG": str(log.with_suffix(".access")),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "ops/gunicorn.conf.py", "server.wsgi:app"],
        cwd=REPO,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc, port
        except requests.RequestException:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(log.read_text()[-3000:])
        time.sleep(0.1)


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


def test_a_malformed_chunked_body_straight_to_gunicorn_is_400(tmp_path, one_database_url):
    _, secret = running_study(tmp_path, one_database_url, "http://127.0.0.1")
    proc, port = _gunicorn(one_database_url, secret, tmp_path / "gunicorn.log")
    try:
        http, task = arrive(f"http://127.0.0.1:{port}", "W-CHUNK")
        path = task.split(f":{port}", 1)[1]
        http.post(task + "consent").raise_for_status()
        before = _stored(one_database_url)
        for body in (
            b"zz\r\n{}\r\n0\r\n\r\n",  # a chunk size that is not hex
            b"5\r\n{\"a\":1}\r\n0\r\n\r\n",  # a chunk longer than its size
            b"10\r\n{}",
        ):  # the body ends inside a chunk
            head = (
                f"POST {path}answer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )
            reply = _raw(port, head.encode() + body)
            status = reply.split(b"\r\n", 1)[0]
            assert status.startswith(b"HTTP/1.1 400"), (body, reply[:300])
        assert _stored(one_database_url) == before
        assert b"Traceback" not in (tmp_path / "gunicorn.log").read_bytes()
    finally:
        proc.terminate()
        proc.wait(20)


def test_the_bounds_on_plain_values():
    assert json_depth(b'{"a": [1, {"b": "[[[[["}]}') == 3
    assert json_depth('"\\"[[[["') == 0 and json_depth(b"]]]][[") == 2
    assert json_depth(DEEP, stop_after=MAX_JSON_DEPTH) == MAX_JSON_DEPTH + 1
    assert json_refusal("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) is None
    assert "nested more than 32" in json_refusal("[" * 33)
    assert text_refusal(b"/a/s/t/chat/abc", b"x=1&y=%20") is None
    assert "NUL" in text_refusal(b"/a/\x00", b"") and "UTF-8" in text_refusal(b"/a/\xff", b"")
    assert "NUL" in text_refusal(b"/", b"a=%00") and "UTF-8" in text_refusal(b"/", b"%ff=1")
    assert text_refusal("/é".encode(), b"q=%C3%A9") is None
