"""Prompt sets: the study's (``arena.prompts``: each battle starts from one) and the simulated crowd's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hitkit.errors import InputError
from hitkit.material.jsonl import iter_jsonl

EXAMPLE_PROMPTS = Path(__file__).resolve().parents[3] / "examples" / "data" / "arena_prompts.jsonl"
"""The ~60 prompts hitkit ships in its examples (a source checkout only)."""
_FALLBACK = (
    "Explain why the sky is blue in two sentences.",
    "Write a haiku about autumn rain.",
    "What are three tips for a job interview?",
    "How do I reverse a list in Python?",
)


@dataclass(frozen=True)
class Prompt:
    """One prompt of a set: its id, text and category (may be empty)."""

    id: str
    text: str
    category: str = ""


def read_prompts(path: Path) -> list[Prompt]:
    """The prompts of a JSONL file (``{"id", "prompt", "category"}`` a line); InputError naming the line
    of anything else."""
    prompts, seen = [], set()
    for lineno, row in iter_jsonl(
        path,
        "no such prompt file; give arena.prompts as a JSONL file of "
        '{"id": ..., "prompt": ..., "category": ...} lines',
    ):
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str) or not row["prompt"].strip():
            raise InputError(
                path, 'each line needs "prompt" (non-empty text), with "id" and optionally "category"', lineno
            )
        pid = str(row.get("id", lineno))
        if pid in seen:
            raise InputError(path, f"prompt id {pid!r} repeats; give every prompt its own id", lineno)
        seen.add(pid)
        category = row.get("category") or ""
        if not isinstance(category, str):
            raise InputError(path, f"category must be text, got {type(category).__name__}", lineno)
        prompts.append(Prompt(pid, row["prompt"].strip(), category))
    if not prompts:
        raise InputError(path, "the prompt file is empty; give at least one prompt")
    return prompts


def crowd_prompts(path: Path | None) -> list[Prompt]:
    """What simulated workers write from: ``path``, else the shipped example set, else four built-in prompts."""
    if path is not None:
        return read_prompts(path)
    if EXAMPLE_PROMPTS.is_file():
        return read_prompts(EXAMPLE_PROMPTS)
    return [Prompt(f"builtin-{i}", text) for i, text in enumerate(_FALLBACK)]
