"""Training dialogues for the degraded quality-control bot.

Two sources: a JSONL file of dialogues, one per line, either
``{"id": "d1", "turns": ["Hi!", "Hello, how are you?"]}`` or with speaker-tagged turns
``{"id": "d1", "turns": [{"speaker": "A", "text": "Hi!"}, ...]}``; or, by default, the
human-written English conversations shipped by the ``chatterbot-corpus`` package (YAML files with a
``conversations:`` list), so the QC bot works with no data of one's own.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class CorpusError(ValueError):
    """A corpus that cannot be used, with the file (and line) at fault."""


@dataclass(frozen=True)
class Dialogue:
    """One training dialogue: an identifier and its utterances in order."""

    id: str
    turns: tuple[str, ...]


def _turn_text(turn: Any, where: str, index: int) -> str:
    if isinstance(turn, str):
        return turn
    if isinstance(turn, dict) and isinstance(turn.get("text"), str):
        return turn["text"]
    raise CorpusError(
        f"{where}: turn {index} must be a string or an object with a string 'text' "
        f"(and a 'speaker'), got {json.dumps(turn)[:80]}"
    )


def parse_dialogue(obj: Any, where: str, default_id: str) -> Dialogue:
    """Validate one JSON dialogue object; ``where`` (file:line) prefixes every error."""
    if not isinstance(obj, dict):
        raise CorpusError(f"{where}: expected a JSON object with 'turns', got {type(obj).__name__}")
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise CorpusError(
            f"{where}: 'turns' must be a non-empty list of strings or of {{\"speaker\", \"text\"}} objects"
        )
    texts = tuple(_turn_text(t, where, i) for i, t in enumerate(turns))
    ident = obj.get("id", default_id)
    if not isinstance(ident, (str, int)):
        raise CorpusError(f"{where}: 'id' must be a string or an integer, got {json.dumps(ident)[:80]}")
    return Dialogue(id=str(ident), turns=texts)


def load_jsonl(path: str | Path) -> list[Dialogue]:
    """Read dialogues from a JSONL file; errors name the file and the 1-based line."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"corpus file {path} does not exist")
    dialogues: list[Dialogue] = []
    seen: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            dialogue = parse_dialogue(obj, where, default_id=f"{path.name}:{lineno}")
            # Duplicate ids would let a "different dialogue" donor be the same dialogue.
            if dialogue.id in seen:
                raise CorpusError(
                    f"{where}: dialogue id {dialogue.id!r} already used on line {seen[dialogue.id]}; ids must be unique"
                )
            seen[dialogue.id] = lineno
            dialogues.append(dialogue)
    if not dialogues:
        raise CorpusError(f"corpus file {path} holds no dialogues")
    return dialogues


def load_chatterbot_english() -> list[Dialogue]:
    """Load the English conversations of the ``chatterbot-corpus`` package (ids ``file:index``)."""
    return list(_chatterbot_english())


@functools.cache
def _chatterbot_english() -> tuple[Dialogue, ...]:
    # Parsed once per process: a study often serves several QC bots over the same default corpus.
    try:
        root = importlib.resources.files("chatterbot_corpus") / "data" / "english"
    except ModuleNotFoundError:
        raise CorpusError(
            "the default QC-bot corpus needs the chatterbot-corpus package "
            "(pip install chatterbot-corpus), or pass a JSONL corpus file"
        ) from None
    dialogues: list[Dialogue] = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith((".yml", ".yaml")):
            continue
        data = yaml.safe_load(entry.read_text(encoding="utf-8")) or {}
        for index, conversation in enumerate(data.get("conversations") or []):
            # One entry in the package is a bare string rather than a list; it is a one-turn dialogue.
            turns = [conversation] if isinstance(conversation, str) else conversation
            texts = tuple(str(t) for t in turns if t is not None and str(t).strip())
            if texts:
                dialogues.append(Dialogue(id=f"{entry.name.rsplit('.', 1)[0]}:{index}", turns=texts))
    if not dialogues:
        raise CorpusError(f"no conversations found under {root}")
    return tuple(dialogues)
