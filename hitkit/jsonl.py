"""Reading the JSONL files coordinators give hitkit, with errors that name the file and line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from hitkit.errors import InputError


def iter_jsonl(path: str | Path, missing: str) -> Iterator[tuple[int, object]]:
    """Yield ``(line number, parsed value)`` for each non-blank line; InputError for a missing file
    (with the ``missing`` hint) or a line that is not JSON."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, missing)
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(path, f"not valid JSON ({exc.msg} at column {exc.colno})", lineno) from None
