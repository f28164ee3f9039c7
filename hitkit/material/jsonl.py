"""Reading the JSONL files coordinators give hitkit, with errors that name the file, line and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from hitkit.errors import InputError

_HINTS = {
    "Unterminated string starting at": "a string opened here is never closed: a missing '\"', or a line break inside it",
    "Expecting property name enclosed in double quotes": "keys need double quotes, and there may be no comma "
    "before a closing '}'",
    "Expecting value": "a value is missing or is not JSON (text needs double quotes; true/false/null are lower-case)",
    "Expecting ',' delimiter": "a ',' is missing here, or a bracket or brace is not closed",
    "Extra data": "something follows the end of the line's JSON object; one object per line",
    "Invalid control character at": "a tab or other control character inside a string; write it as \\t or \\n",
}


def describe_json_error(line: str, exc: json.JSONDecodeError) -> str:
    """'not valid JSON at column 78 (Expecting value — hint): …"beta": 'ok'}…' — where on the line, and why."""
    column = exc.colno
    start = max(0, exc.pos - 30)
    excerpt = line[start : exc.pos + 10].rstrip("\n")
    marker = ("…" if start else "") + excerpt + ("…" if exc.pos + 10 < len(line.rstrip("\n")) else "")
    hint = next((h for prefix, h in _HINTS.items() if exc.msg.startswith(prefix)), "")
    return f"not valid JSON at column {column} ({exc.msg}{' — ' + hint if hint else ''}); near: {marker}"


def iter_jsonl(path: str | Path, missing: str) -> Iterator[tuple[int, object]]:
    """Yield ``(line number, parsed value)`` for each non-blank line; InputError for a missing file
    (with the ``missing`` hint) or a line that is not JSON (with its column and the text around it).

    A byte-order mark at the start of the file (Windows editors write one) is accepted."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, missing)
    with path.open(encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(path, describe_json_error(line, exc), lineno) from None
