"""A worker does a HIT inside a cross-site iframe, as on MTurk and Prolific: the page of another site
(``localhost``) frames our pages (``127.0.0.1``). The CSP's frame-ancestors lets that site frame us
and no other; the consent, answer, submit and return posts work with no cookie at all."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Response, Study
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from server.embedded import WebServer
from tests.browser import CHROMIUM_ARGS, artifact, chromium_path
from tests.studies import pairwise_study

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser


class _Parent(BaseHTTPRequestHandler):
    """The crowd site: a page that frames the URL in its query string."""

    def do_GET(self):
        src = self.path.split("?src=", 1)[1] if "?src=" in self.path else ""
        from urllib.parse import unquote

        body = (
            f'<!doctype html><title>crowd site</title><h1>Crowd site</h1>'
            f'<iframe id="hit" src="{unquote(src)}" width="1000" height="1400"></iframe>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _parent_site() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Parent)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


@pytest.fixture
def framed(tmp_path, one_database_url, monkeypatch):
    """(crowd site URL, stranger site URL, worker pages URL, database URL); only the crowd site may frame."""
    crowd, stranger = _parent_site(), _parent_site()
    crowd_url = f"http://localhost:{crowd.server_address[1]}"
    monkeypatch.setenv("HITKIT_FRAME_ANCESTORS", crowd_url)
    config = load_study(pairwise_study(tmp_path, one_database_url))
    secret = resolve_secret(one_database_url)
    with session_scope(one_database_url) as s:
        ctx = create_study(s, config, tmp_path / "study.yaml", secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(one_database_url, "127.0.0.1", 0, 8, secret).start()
    tick(one_database_url, config.study, web.url)
    yield crowd_url, f"http://localhost:{stranger.server_address[1]}", web.url, one_database_url
    web.stop()
    for server in (crowd, stranger):
        server.shutdown()


def test_a_worker_completes_a_hit_inside_a_cross_site_iframe_without_cookies(framed):
    crowd, stranger, base, url = framed
    from urllib.parse import quote

    def hit_url(worker: str, hit: int) -> str:
        return quote(f"{base}/s/ab-demo/hit/{hit}?assignmentId={worker}-{hit}&hitId=h{hit}&workerId={worker}", safe="")

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1100, "height": 1600})
        page = context.new_page()
        blocked: list[str] = []
        page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)

        page.goto(f"{crowd}/?src={hit_url('W-frame', 1)}")
        frame = page.frame_locator("#hit")
        frame.get_by_role("button", name="I agree").click()  # a form post with the CSRF field
        units = frame.locator("fieldset.unit")
        units.first.wait_for()
        n = units.count()
        choices = ["A is better", "Tie", "B is better"]
        for i in range(n):
            unit = units.nth(i)
            if unit.locator(".note").count() == 0:
                unit.get_by_label(choices[i % 3]).check()  # saved by the page's JSON fetch
                unit.locator(".saved", has_text="saved").wait_for()
        page.screenshot(path=str(artifact("iframe-task.png")), full_page=True)
        frame.get_by_role("button", name="Submit").click()  # the form post again, answers with it
        frame.get_by_text("your work is submitted").wait_for()
        assert context.cookies() == []
        assert blocked == []

        # A site that is not a crowd site gets no page in its frame.
        page.goto(f"{stranger}/?src={hit_url('W-stranger', 2)}")
        page.wait_for_timeout(1500)
        inner = page.frame_locator("#hit")
        assert inner.get_by_role("button", name="I agree").count() == 0
        assert any("frame-ancestors" in text for text in blocked)
        browser.close()
    with session_scope(url) as s:
        rows = dict(s.execute(select(Assignment.provider_assignment_id, Assignment.status)).all())
        assert rows["W-frame-1"] == "submitted"
        assert (
            s.scalar(select(Assignment.consented_at).where(Assignment.provider_assignment_id == "W-stranger-2")) is None
        )
        assert s.scalar(select(func.count()).select_from(Response)) >= n - 1
