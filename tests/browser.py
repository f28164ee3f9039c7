"""Debian's chromium driven by Playwright (no browser download: ``executable_path``)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
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
