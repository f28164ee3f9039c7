"""What the judged protocols' judges (``hitkit/protocols/NAME/judge.py``) share: the last columns of a
``judge.csv`` row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def judged(row: Mapping[str, Any], human_subset: Any) -> dict[str, Any]:
    """The last columns of a ``judge.csv`` row made from a stored label (``row``): whether its reply
    parsed, whether people label the unit too (``human_subset``), the judge's model and its reply."""
    return {
        "parsed": bool(row["parsed"]),
        "human_subset": bool(human_subset),
        "model": row["model"],
        "reply": row["reply"] or "",
    }
