"""Debian's chromium driven by Playwright (no browser download: ``executable_path``)."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("HITKIT_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts"))


def chromium_path() -> str:
    """Debian's chromium, or skip (fail under CI, where ops/test.sh installs it)."""
    path = os.environ.get("HITKIT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; ops/test.sh installs Debian's chromium under CI")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return path


def artifact(name: str) -> Path:
    """Where a test keeps a screenshot for a person to look at."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


@contextmanager
def chromium_on(database_url: str, config, height: int = 1100):
    """The study of ``config`` created, running, its first wave posted and its pages served on loopback,
    and a chromium page to visit them: yields (pages URL, page); stops both after."""
    from playwright.sync_api import sync_playwright

    from hitkit.db.models import Study
    from hitkit.db.session import session_scope
    from hitkit.running.scheduler import tick
    from hitkit.study.stored import create_study, resolve_secret
    from server.embedded import WebServer

    secret = resolve_secret(database_url)
    with session_scope(database_url) as s:
        ctx = create_study(s, config, None, secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    try:
        tick(database_url, config.study, web.url)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
            yield web.url, browser.new_page(viewport={"width": 1000, "height": height})
            browser.close()
    finally:
        web.stop()
