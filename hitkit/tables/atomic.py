"""Files written whole or not at all: a table, a JSON file or a JSON-lines file goes to a temporary
file beside its target, is flushed to disk, and replaces the target in one rename (``os.replace``).

An export that fails half-way (a full disk, a killed process, a bug) therefore leaves the previous
file, or none — never a truncated one that parses as a valid, shorter table. A write the system
refuses (``OSError``: a full disk, no permission) becomes :class:`~hitkit.errors.WriteError`, one line
naming the target, which the command line prints instead of a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hitkit.errors import WriteError


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; it becomes ``path`` when the block ends
    without error, and is removed when it raises (``path`` itself is then untouched)."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        with open(temporary, "rb+") as fh:  # on disk before the rename, so a crash cannot expose an empty file
            os.fsync(fh.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise WriteError(target, exc) from exc
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """``path.write_text(text)``, whole or not at all."""
    with replacing(path) as temporary:
        temporary.write_text(text, encoding=encoding)
