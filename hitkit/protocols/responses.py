"""The material of the protocols that show prompts with systems' responses (pairwise, rating, ranking):
reading the prompts-and-responses file, degraded copies of responses for quality control, and two
systems' responses side by side for the dashboard.

Degraded responses are made as Graham et al. (2013, 2017) make "bad references". A phrase of the
original response is replaced by a phrase of the same length from another response (to another
prompt), so the result keeps most of the original's words but no longer reads as a sensible reply.
The phrase grows with the response, in the spirit of Graham et al.'s length-dependent degradation
(hitkit's table: 1 word for 1-word texts, 2 for 2–5, 3 for 6–8, 4 for 9–15, 5 for 16–20 and ⌊n/4⌋
above); responses of one or two words are replaced whole.
"""

from __future__ import annotations

import random
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


def phrase_length(words: int) -> int:
    """How many words of a ``words``-word response are replaced."""
    for upto, length in ((1, 1), (5, 2), (8, 3), (15, 4), (20, 5)):
        if words <= upto:
            return min(length, max(words, 1))
    return words // 4


def degrade(text: str, donor: str, rng: random.Random) -> str:
    """``text`` with a random phrase replaced by a random, different phrase of ``donor`` (seeded by ``rng``).

    When no phrase of ``donor`` differs from the one replaced (the same words), the phrase is cut to "…",
    so a copy never reads as its original.
    """
    words = text.split()
    spare = donor.split() or ["…"]
    length = phrase_length(len(words))
    while len(spare) < length:  # a short donor is repeated to the phrase's length
        spare = spare + spare
    start = rng.randrange(len(words) - length + 1) if words else 0
    starts = list(range(len(spare) - length + 1))
    rng.shuffle(starts)
    phrase = next(
        (spare[i : i + length] for i in starts if spare[i : i + length] != words[start : start + length]), ["…"]
    )
    return " ".join(words[:start] + phrase + words[start + length :])


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
