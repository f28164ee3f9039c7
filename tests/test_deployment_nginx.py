"""The documented production deployment, started for real: Debian's nginx with ``ops/nginx/hitkit.conf`` in
front of gunicorn with ``ops/gunicorn.conf.py`` and ``ops/systemd/env.example``, on PostgreSQL
(docs/howto/deployment.md). A whole simulated study runs through nginx, and the slow-connection test
(tests/test_slowloris.py) is run against nginx.

nginx runs unprivileged from a configuration generated into the test's folder: the shipped server blocks
verbatim except where a test machine must differ, each such line replaced exactly once (so a changed
recipe fails here instead of being tested in some other shape): the listening addresses (free loopback
ports instead of 80 and 443), the certificate (a self-signed one for 127.0.0.1 instead of Let's Encrypt's),
the static folder (this checkout instead of /opt/hitkit) and gunicorn's port (a free one instead of 8000).
The outer ``nginx.conf`` holds what Debian's would (``include``, mime types) with its pid, logs and
temporary folders in the test's folder.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import ssl
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
import requests
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Response, Study
from hitkit.db.session import session_scope
from tests.studies import REPO, pairwise_study
from tests.test_concurrency import free_port, running_study, serving
from tests.test_proxy import shipped_env
from tests.test_security import arrive

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

RECIPE = REPO / "ops" / "nginx" / "hitkit.conf"


def nginx_binary() -> str:
    """nginx as ops/test_skips.sh looks for it: HITKIT_NGINX, else on the PATH, else Debian's /usr/sbin/nginx.
    Missing: skipped, except under CI=true (ops/test.sh installs it there), where that is a failure."""
    found = os.environ.get("HITKIT_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(found, os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but there is no nginx at {found}: ops/test.sh installs Debian's nginx")
        pytest.skip("no nginx (apt-get install nginx, or set HITKIT_NGINX)")
    return found


def postgres_only(url: str) -> str:
    if not url.startswith("postgresql"):
        pytest.skip("the production recipe runs on PostgreSQL")
    return url


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with openssl (Debian's nginx depends on its library)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def site_config(folder: Path, https_port: int, http_port: int, upstream_port: int, cert: Path, key: Path) -> Path:
    """ops/nginx/hitkit.conf with the few lines a test machine needs changed, each found exactly once."""
    text = RECIPE.read_text()
    for old, new in (
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;"),
        ("/etc/letsencrypt/live/eval.example.org/fullchain.pem", str(cert)),
        ("/etc/letsencrypt/live/eval.example.org/privkey.pem", str(key)),
        ("/opt/hitkit/hit_templates/static/", f"{REPO}/hit_templates/static/"),
        ("proxy_pass http://127.0.0.1:8000;", f"proxy_pass http://127.0.0.1:{upstream_port};"),
    ):
        assert text.count(old) == 1, f"ops/nginx/hitkit.conf no longer has exactly one {old!r}: update this test"
        text = text.replace(old, new)
    site = folder / "hitkit.conf"
    site.write_text(text)
    mime = Path("/etc/nginx/mime.types")
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    main = folder / "nginx.conf"
    main.write_text(
        ("user root;\n" if os.geteuid() == 0 else "")  # as root, workers would drop to nobody, who cannot read tmp
        + f"worker_processes 1;\npid {folder / 'nginx.pid'};\nerror_log {folder / 'error.log'};\n"
        + "events { worker_connections 2048; }\n"
        + "http {\n"
        + (f"    include {mime};\n" if mime.is_file() else "")
        + f"    access_log {folder / 'access.log'};\n{temp}\n    include {site};\n}}\n"
    )
    return main


class Deployment:
    """gunicorn (the recipe's settings and env) on ``database_url`` behind nginx (the recipe's site): ``url``
    is nginx's https address. Also the :data:`hitkit.running.launch.WebFactory` ``launch`` takes."""

    def __init__(self, folder: Path, database_url: str, secret: str):
        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self._stack = folder, ExitStack()
        env = {**shipped_env(), "HITKIT_SECRET": secret, "HITKIT_WEB_WORKERS": "2", "HITKIT_WEB_THREADS": "16"}
        upstream = self._stack.enter_context(serving(database_url, secret, folder / "gunicorn.log", env=env))
        self.cert, key = self_signed(folder)
        port = free_port()
        conf = site_config(folder, port, free_port(), int(upstream.rsplit(":", 1)[1]), self.cert, key)
        nginx = nginx_binary()
        check = subprocess.run([nginx, "-t", "-e", str(folder / "error.log"), "-c", str(conf)], capture_output=True)
        assert check.returncode == 0, check.stderr.decode()[-2000:]
        self._nginx = subprocess.Popen(
            [nginx, "-e", str(folder / "error.log"), "-c", str(conf), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=(folder / "nginx.out").open("w"),
        )
        self.url = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"{self.url}/health", timeout=2, verify=str(self.cert)).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if self._nginx.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError((folder / "error.log").read_text()[-3000:])
            time.sleep(0.1)

    def stop(self) -> None:
        if self._nginx.poll() is None:
            self._nginx.terminate()  # SIGTERM: nginx's fast shutdown
            self._nginx.wait(20)
        self._stack.close()

    def nginx_requests(self) -> list[str]:
        return (self.folder / "access.log").read_text().splitlines()


@pytest.fixture
def trusting(monkeypatch):
    """Makes every requests session (the simulated crowd's, the tests') trust a deployment's certificate."""
    return lambda cert: monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(cert))


def status_of(line: str) -> int:
    """The status of one line of nginx's access log (the combined format: ``"METHOD PATH HTTP/1.1" STATUS``)."""
    found = re.search(r'" (\d{3}) ', line)
    assert found, line
    return int(found.group(1))


def ended_by_server(sock: ssl.SSLSocket) -> bool:
    """Whether the server ended this connection (its 408 and end of stream, or a reset) within 3 s."""
    sock.settimeout(3)
    try:
        while sock.recv(4096):
            pass
        return True
    except TimeoutError:
        return False
    except OSError:  # reset, or TLS closed without its alert: ended all the same
        return True


def test_a_whole_simulated_study_runs_through_nginx_and_gunicorn_on_postgresql(tmp_path, one_database_url, trusting):
    from hitkit.running.launch import launch
    from hitkit.study.stored import resolve_secret

    database_url = postgres_only(one_database_url)
    nginx_binary()
    study_file = pairwise_study(tmp_path, database_url, pairwise={"votes_per_prompt": 1})
    secret = resolve_secret(database_url)
    made: list[Deployment] = []

    def deployed(url, host, port, threads, given_secret) -> Deployment:
        assert given_secret == secret
        made.append(Deployment(tmp_path / f"deploy{len(made)}", url, given_secret))
        trusting(made[-1].cert)
        return made[-1]

    started = time.monotonic()
    result = launch(study_file, web=deployed, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=400)
    seconds = time.monotonic() - started
    assert result.crowd_errors == [] and result.status == "completed", (result.status, result.crowd_errors)
    [deployment] = made
    with session_scope(database_url) as s:
        answers = s.scalar(select(func.count()).select_from(Response))
        assignments = s.scalar(select(func.count()).select_from(Assignment).where(Assignment.status == "approved"))
        assert s.scalar(select(Study.status)) == "completed"
    served = deployment.nginx_requests()
    posts = [line for line in served if '"POST ' in line]
    assert answers > 0 and assignments > 0 and len(posts) >= answers  # every answer came through nginx
    assert [line for line in served if status_of(line) >= 500] == []
    for log in ("gunicorn.log", "error.log"):
        assert "Traceback" not in (deployment.folder / log).read_text()
    assert (result.out_dir / "export" / "votes.csv").is_file()
    print(f"RESULT nginx_study seconds={seconds:.1f} answers={answers} approved={assignments} via_nginx={len(served)}")


def open_idle_tls(port: int, cert: Path, count: int, stack: ExitStack) -> list[ssl.SSLSocket]:
    """``count`` TLS connections to nginx that never finish a request: half send nothing, half stop mid-headers."""
    context = ssl.create_default_context(cafile=str(cert))
    socks = []
    for i in range(count):
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock = stack.enter_context(context.wrap_socket(raw, server_hostname="127.0.0.1"))
        if i % 2:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        socks.append(sock)
    return socks


def test_200_slow_connections_to_nginx_leave_real_requests_served_and_are_cut_by_its_timeouts(
    tmp_path, one_database_url, trusting
):
    """tests/test_slowloris.py's slow-connection test, against the recipe: 200 idle or half-sent connections
    from one client; real requests and a worker's arrival are served through nginx meanwhile, and nginx closes
    the half-sent ones after its client_header_timeout (10 s in ops/nginx/hitkit.conf), not gunicorn."""
    from tests.test_slowloris import timed_get

    database_url = postgres_only(one_database_url)
    nginx_binary()
    _, secret = running_study(tmp_path, database_url, "https://127.0.0.1")
    deployment = Deployment(tmp_path / "deploy", database_url, secret)
    trusting(deployment.cert)
    port = int(deployment.url.rsplit(":", 1)[1])
    try:
        with ExitStack() as stack:
            socks = open_idle_tls(port, deployment.cert, 200, stack)
            opened = time.monotonic()
            results = [timed_get(f"{deployment.url}/health") for _ in range(10)]
            task = arrive(deployment.url, "ab-demo", "W-during-slow-clients")
            state = requests.get(task + "state", timeout=10)
            assert [code for code, _ in results] == [200] * 10
            assert max(seconds for _, seconds in results) < 3, results
            assert state.status_code == 200 and state.json()["units"]
            # nginx cuts the half-sent requests at client_header_timeout (408, then closed): wait past it.
            time.sleep(max(0.0, 12.5 - (time.monotonic() - opened)))
            cut = sum(ended_by_server(sock) for sock in socks[1::2])
            assert cut == len(socks[1::2])
        with session_scope(database_url) as s:  # the arrival reached the database through nginx
            assert s.scalar(select(func.count()).select_from(Assignment)) >= 1
        print(f"RESULT nginx_slowloris max_get_s={max(seconds for _, seconds in results):.2f} cut={cut}/100")
    finally:
        deployment.stop()
