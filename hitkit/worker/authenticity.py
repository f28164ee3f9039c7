"""Was an answer typed by the worker? Signals from the page, checked at the edge.

The worker pages (``hit_templates/static/authenticity.js``) watch the chat input and the free-text
fields and send, with each message or answer, a small object of counts and timings: never a key's
content. :func:`clean_signals` is the only way such an object reaches the database: unknown keys are
dropped, numbers clamped to :data:`SIGNALS`' bounds, anything else (a string, a list, a huge object)
is dropped, and the worker's text is saved whatever the signals were. A worker can send anything, so
the signals are evidence for a person's review, never a reason to reject anyone automatically.

The scores of these signals, for a person's review, are :mod:`hitkit.analysis.authenticity`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

COUNT_MAX = 100_000
MS_MAX = 86_400_000

SIGNALS: dict[str, tuple[int, str]] = {
    "keys": (COUNT_MAX, "input events from a key or a tap that inserted characters"),
    "typed_chars": (COUNT_MAX, "characters inserted one keystroke at a time (inputType insertText)"),
    "composed_chars": (
        COUNT_MAX,
        "characters inserted by composition, replacement or several at once "
        "(phone keyboards, autocorrect, suggestions, input methods)",
    ),
    "pasted_chars": (COUNT_MAX, "characters inserted by paste or drop"),
    "pastes": (COUNT_MAX, "paste and drop events"),
    "deletes": (COUNT_MAX, "input events that deleted text"),
    "iki_median_ms": (MS_MAX, "median interval between keystrokes, in ms"),
    "iki_iqr_ms": (MS_MAX, "interquartile range of the intervals between keystrokes, in ms"),
    "compose_ms": (MS_MAX, "time from the first input to sending, in ms"),
    "blurs": (COUNT_MAX, "times the page lost focus or was hidden while the answer was being written"),
}
"""Every signal a page may send: name → (largest value kept, what it counts). All are whole numbers ≥ 0."""


def clean_signals(raw: Any) -> dict[str, int] | None:
    """The known signals of ``raw``, as whole numbers clamped to their bounds; None when none is usable.

    Never raises: a malformed signals object must not cost the worker the message it came with.
    """
    if not isinstance(raw, Mapping):
        return None
    clean = {}
    for name, (top, _) in SIGNALS.items():
        value = raw.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if isinstance(value, float) and not math.isfinite(value):
            continue
        clean[name] = int(min(max(value, 0), top))
    return clean or None
