"""The embedded server (waitress, as `hitkit serve` and `hitkit launch` run it) stays up while one
client holds hundreds of idle or half-sent connections (slowloris); loopback only, bounded loops."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import ExitStack

import pytest
import requests

from server.embedded import CONNECTION_LIMIT, PER_ADDRESS_CONNECTIONS, make_server
from tests.studies import pairwise_study
from tests.test_security import arrive, serve


def open_idle(host: str, port: int, count: int, stack: ExitStack) -> list[socket.socket]:
    """``count`` connections that never finish a request: half send nothing, half stop mid-headers."""
    socks = []
    for i in range(count):
        sock = stack.enter_context(socket.create_connection((host, port), timeout=5))
        if i % 2:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        socks.append(sock)
    return socks


def timed_get(url: str, **kwargs) -> tuple[int, float]:
    start = time.monotonic()
    response = requests.get(url, timeout=10, **kwargs)
    return response.status_code, time.monotonic() - start


def test_200_idle_connections_from_one_client_do_not_stop_real_requests(tmp_path, database_url):
    web, _ = serve(tmp_path, database_url, pairwise_study(tmp_path, database_url))
    host, port = "127.0.0.1", int(web.url.rsplit(":", 1)[1])
    try:
        with ExitStack() as stack:
            open_idle(host, port, 200, stack)
            time.sleep(0.5)  # let the server accept (and, over the per-address cap, shed) them
            results = [timed_get(f"{web.url}/health") for _ in range(10)]
            task = arrive(web.url, "ab-demo", "W-during-slowloris")
            state = requests.get(task + "state", timeout=10)
        assert [code for code, _ in results] == [200] * 10
        assert max(seconds for _, seconds in results) < 3, results
        assert state.status_code == 200 and state.json()["units"]
    finally:
        web.stop()


def test_a_client_over_its_connection_cap_loses_its_own_idle_connections_first(tmp_path):
    """With a cap of 20 per address, 200 idle sockets leave the server holding about 20 of them;
    the others are closed by the server (the client reads end-of-file), and requests still pass."""
    from flask import Flask

    app = Flask("probe")
    app.get("/health")(lambda: "ok")
    server = make_server(app, "127.0.0.1", 0, 4, per_address=20)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    port = server.effective_port
    try:
        with ExitStack() as stack:
            socks = open_idle("127.0.0.1", port, 200, stack)
            status, seconds = timed_get(f"http://127.0.0.1:{port}/health")
            assert status == 200 and seconds < 3
            deadline = time.monotonic() + 10
            while len(server.active_channels) > 21 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(server.active_channels) <= 21
            closed = 0
            for sock in socks:
                sock.settimeout(0.05)
                try:
                    closed += sock.recv(1) == b""
                except TimeoutError:
                    pass
                except OSError:
                    closed += 1
            assert closed >= 170
    finally:
        server.close()
        thread.join(5)


def test_the_embedded_server_settings_are_deliberate():
    from server.embedded import waitress_options

    options = waitress_options(16)
    assert options["connection_limit"] == CONNECTION_LIMIT >= 5 * PER_ADDRESS_CONNECTIONS
    assert options["asyncore_use_poll"] is True  # select() cannot watch descriptors above 1023
    assert options["channel_timeout"] <= 60 and options["cleanup_interval"] <= 10
    assert options["max_request_body_size"] == 64 * 1024


@pytest.mark.parametrize("hops, cleared", [("0", True), ("1", False)])
def test_waitress_leaves_forwarded_headers_to_the_app_only_behind_a_proxy(monkeypatch, hops, cleared):
    from server.embedded import waitress_options

    monkeypatch.setenv("HITKIT_PROXY_HOPS", hops)
    assert waitress_options(4)["clear_untrusted_proxy_headers"] is cleared


def test_gunicorn_binds_loopback_behind_nginx_which_times_out_slow_clients():
    import re
    import runpy

    from tests.studies import REPO

    config = runpy.run_path(str(REPO / "ops/gunicorn.conf.py"))
    assert config["bind"].startswith("127.0.0.1:") and config["worker_connections"] >= config["threads"]
    nginx = (REPO / "ops/nginx/hitkit.conf").read_text()
    for directive, most in (("client_header_timeout", 30), ("client_body_timeout", 30), ("send_timeout", 60)):
        seconds = re.search(rf"^\s*{directive} (\d+)s;", nginx, re.MULTILINE)
        assert seconds and int(seconds.group(1)) <= most, directive
    assert re.search(r"^\s*limit_conn hitkit_per_client \d+;", nginx, re.MULTILINE)
    assert re.search(r"^\s*proxy_request_buffering on;", nginx, re.MULTILINE)


def _open_from(addresses: list[str], per_address: int, port: int, stack: ExitStack) -> list[socket.socket]:
    """``per_address`` slow connections from each loopback address: half silent, half stopped mid-headers."""
    socks = []
    for n in range(per_address):
        for address in addresses:
            sock = socket.socket()
            stack.enter_context(sock)
            sock.settimeout(5)
            sock.bind((address, 0))
            sock.connect(("127.0.0.1", port))
            if n % 2:
                sock.sendall(b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nX-Slow: ")
            socks.append(sock)
    return socks


def test_1200_slow_connections_from_20_addresses_leave_real_requests_served(tmp_path, one_database_url):
    """20 loopback addresses, 60 slow connections each (under the per-address cap, over the overall
    limit): the server keeps accepting, sheds slow connections, and serves a worker's arrival and pages."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 4000:
        pytest.fail(f"the open-files limit ({hard}) is too low for 2,400 sockets in one process")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4000), hard))
    web, _ = serve(tmp_path, one_database_url, pairwise_study(tmp_path, one_database_url))
    port = int(web.url.rsplit(":", 1)[1])
    attackers = [f"127.0.0.{n}" for n in range(2, 22)]
    try:
        with ExitStack() as stack:
            _open_from(attackers, 60, port, stack)
            settled, seen = time.monotonic() + 15, -1
            while time.monotonic() < settled and seen != len(web._server.active_channels):
                seen = len(web._server.active_channels)  # the server is still taking the burst in
                time.sleep(0.5)
            results = [timed_get(f"{web.url}/health") for _ in range(10)]
            task = arrive(web.url, "ab-demo", "W-during-1200")
            state = requests.get(task + "state", timeout=10)
            held = len(web._server.active_channels)
        assert [code for code, _ in results] == [200] * 10
        assert max(seconds for _, seconds in results) < 3, results
        assert state.status_code == 200 and state.json()["units"]
        assert held <= CONNECTION_LIMIT - 50  # room kept for the crowd's new connections
    finally:
        web.stop()


def test_a_request_trickled_byte_by_byte_is_cut_after_the_request_timeout():
    """A client sending one header byte every 0.2 s keeps its connection busy for waitress's idle
    timeout forever; the request timeout (2 s here) closes it, and a whole request is still served."""
    from flask import Flask

    app = Flask("probe")
    app.get("/health")(lambda: "ok")
    server = make_server(app, "127.0.0.1", 0, 4, request_timeout_s=2, cleanup_interval_s=0.5)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    port = server.effective_port
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            began, closed_after = time.monotonic(), None
            while time.monotonic() - began < 8:
                try:
                    sock.sendall(b"X")
                except OSError:
                    closed_after = time.monotonic() - began
                    break
                sock.settimeout(0.2)
                try:
                    if sock.recv(1) == b"":
                        closed_after = time.monotonic() - began
                        break
                except TimeoutError:
                    pass
            assert closed_after is not None and 1.5 < closed_after < 5, closed_after
        status, _ = timed_get(f"http://127.0.0.1:{port}/health")
        assert status == 200
    finally:
        server.close()
        thread.join(5)


@pytest.mark.parametrize(
    "held, room, closed",
    [
        ([], 5, []),
        # Busy connections are never closed; never-served ones go before served ones.
        ([("a", True, False, 1.0), ("a", False, True, 0.0), ("b", False, False, 9.0)], 2, [2]),
        # Among the never-served, the address holding the most loses first, its longest-idle first.
        (
            [("a", False, False, 5.0), ("a", False, False, 1.0), ("a", False, False, 3.0), ("b", False, False, 0.0)],
            2,
            [1, 2],
        ),
        ([("a", True, False, 0.0), ("a", True, False, 0.0)], 1, []),
    ],
)
def test_the_shedding_policy(held, room, closed):
    from server.embedded import Held, shed

    rows = [Held(i, host, busy, served, last) for i, (host, busy, served, last) in enumerate(held)]
    assert shed(rows, room) == closed
