"""axe-core run inside a chromium page: the WCAG 2.2 AA audit every worker page must pass.

axe.min.js comes from npm's ``axe-core`` package, installed by ops/test.sh into ``.cache/npm`` (no download
at run time); ``HITKIT_AXE_JS`` names another copy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# WCAG 2.0, 2.1 and 2.2, levels A and AA (axe-core's rule tags).
WCAG_22_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]
BLOCKING = ("serious", "critical")


def axe_js() -> Path:
    """axe.min.js, or skip (fail under CI, where ops/test.sh installs it)."""
    candidates = [
        os.environ.get("HITKIT_AXE_JS"),
        ROOT / ".cache/npm/node_modules/axe-core/axe.min.js",
        ROOT / "node_modules/axe-core/axe.min.js",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    message = (
        "axe-core is not installed: `npm install --no-save --no-package-lock --prefix .cache/npm "
        "axe-core@4.10` (ops/test.sh does it)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def violations(page) -> list[dict]:
    """The serious and critical WCAG 2.2 AA violations on ``page`` as it is now."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        # Evaluated through the DevTools protocol: the pages' CSP (script-src 'self') stays as it is.
        page.evaluate(axe_js().read_text(encoding="utf-8") + "\n;true")
    result = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})", WCAG_22_AA
    )
    return [v for v in result["violations"] if v["impact"] in BLOCKING]


def assert_accessible(page, where: str) -> None:
    """Fail naming the page state, the rule and the elements for every serious or critical violation."""
    found = violations(page)
    lines = [
        f"{v['impact']} {v['id']} ({v['help']}): "
        + "; ".join(
            " ".join(n["target"]) if isinstance(n["target"][0], str) else str(n["target"]) for n in v["nodes"][:5]
        )
        for v in found
    ]
    assert not found, f"accessibility audit of {where}:\n" + "\n".join(lines)


def tab_to(page, selector: str, limit: int = 60, key: str = "Tab") -> None:
    """Press Tab (only the key) until the focused element matches ``selector``; fail after ``limit`` presses."""
    for _ in range(limit):
        if page.evaluate("s => !!document.activeElement && document.activeElement.matches(s)", selector):
            return
        page.keyboard.press(key)
    raise AssertionError(f"{limit} presses of {key} never focused {selector}")
