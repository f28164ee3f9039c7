"""The material of the protocols that show prompts with systems' responses (pairwise, rating, ranking):
reading the prompts-and-responses file and two systems' responses side by side for the dashboard
(degraded copies for quality control: :mod:`hitkit.material.degrade`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hitkit.errors import InputError
from hitkit.material.jsonl import iter_jsonl


def read_responses(path, systems: Sequence[str], section: str) -> list[dict]:
    """Read a prompts-and-responses JSONL: ``{"id", "prompt", "responses": {system: text}}`` a line (the
    study file's ``SECTION.responses``, named in the error for a missing file)."""
    items, seen = [], set()
    for lineno, row in iter_jsonl(path, f"responses file not found — set {section}.responses in the study file"):
        if not isinstance(row, dict) or not isinstance(row.get("responses"), dict):
            raise InputError(path, 'each line must be {"id": ..., "prompt": ..., "responses": {system: text}}', lineno)
        item_id = str(row.get("id", lineno))
        if item_id in seen:
            raise InputError(path, f"prompt id '{item_id}' appears twice", lineno)
        seen.add(item_id)
        missing = [s for s in systems if not isinstance(row["responses"].get(s), str)]
        if missing:
            raise InputError(path, f"no response text for system(s) {', '.join(missing)}", lineno)
        prompt = row.get("prompt", "")
        if not isinstance(prompt, str):
            raise InputError(path, "'prompt' must be text", lineno)
        items.append({"id": item_id, "prompt": prompt, "responses": {s: row["responses"][s] for s in systems}})
    if not items:
        raise InputError(path, "the responses file holds no prompts")
    return items


def side_by_side(
    convs: Sequence, a: str, b: str, ids: Mapping[str, int], turns_of: Callable[[Any], list[dict[str, Any]]], limit: int
) -> list[dict[str, Any]]:
    """The two systems' replies to the same prompts, one row per prompt both replied to."""
    by_id = {v: k for k, v in ids.items()}
    rows: list[dict[str, Any]] = []
    for conv in convs:
        if conv.kind != "prompt":
            continue
        texts = {by_id.get(t.system_id): t.text for t in conv.turns if t.system_id is not None}
        if a in texts and b in texts:
            prompt = next((t.text for t in conv.turns if t.system_id is None), "")
            rows.append(
                {
                    "title": conv.key.removeprefix("prompt:"),
                    "prompt": prompt,
                    "conversation": conv.id,
                    "left": [{"speaker": a, "text": texts[a], "own": True}],
                    "right": [{"speaker": b, "text": texts[b], "own": True}],
                }
            )
        if len(rows) >= limit:
            break
    return rows
