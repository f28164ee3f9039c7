"""Gold items' places and material: how many go into each HIT at the study file's ``gold.rate``, and the
coordinator's own gold items (``gold.file``). Pure functions over plain values; each protocol's task
type makes its units from them, so a gold item is a unit like any other on the page.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TypeVar

from hitkit.errors import InputError
from hitkit.material.degrade import degrade
from hitkit.material.jsonl import iter_jsonl

T = TypeVar("T")

IS_GOLD, GOLD_ANSWER = "is_gold", "gold_answer"
"""The export columns that mark a gold item's rows (1 / 0) and give its right answer, in the terms of the
table's own answer column; present only in the exports of a study with a ``gold:`` section."""
GOLD_BETTER, GOLD_WORSE = "gold:better", "gold:worse"
"""The names a pairwise gold item's two responses go by in the exports, in place of systems' names."""


def gold_total(items: int, rate: float) -> int:
    """Gold items to mix with ``items`` other items so that gold is a share ``rate`` of them all:
    g / (items + g) = rate, rounded (at least one when there are items)."""
    if items <= 0:
        return 0
    return max(1, round(items * rate / (1 - rate)))


def spread(sizes: Sequence[int], total: int) -> list[int]:
    """``total`` gold items spread over HITs of ``sizes`` other items in proportion to their sizes: the
    running total is rounded, so each HIT gets its share rounded down or up and the whole adds up."""
    whole = sum(sizes)
    if whole <= 0:
        return [0 for _ in sizes]
    out, before, seen = [], 0, 0
    for size in sizes:
        seen += size
        upto = round(total * seen / whole)
        out.append(upto - before)
        before = upto
    return out


def deal(blocks: Sequence[Sequence[T]], gold: Sequence[T], counts: Sequence[int], clash) -> list[list[T]]:
    """Each block with its ``counts`` of the ``gold`` items added, none where ``clash(gold_item, block)``
    says it may not go (a prompt the block already shows) while a block without a clash has room: the
    items with the fewest places go first, each to the place with the most room left (ties: the first)."""
    out = [list(b) for b in blocks]
    room = list(counts)

    def places(item: T) -> list[int]:
        return [i for i, block in enumerate(out) if room[i] > 0 and not clash(item, block)]

    order = sorted(range(len(gold)), key=lambda n: (len(places(gold[n])), n))
    for n in order:
        item, fits = gold[n], places(gold[n])
        if not fits and not _swap(out, room, item, {id(g) for g in gold}, clash):
            fits = [i for i in range(len(out)) if room[i] > 0]  # every place clashes: the roomiest
        if fits:
            best = max(fits, key=lambda i: (room[i], -i))
            out[best].append(item)
            room[best] -= 1
    return out


def _swap(out: list[list[T]], room: list[int], item: T, gold_ids: set[int], clash) -> bool:
    """Place ``item`` by moving an already placed gold item to a block with room that it fits, where
    ``item`` then fits in the block it leaves; True if it did."""
    for i in (i for i in range(len(out)) if room[i] > 0):
        for j, block in enumerate(out):
            for k, other in enumerate(block):
                if id(other) not in gold_ids or j == i:
                    continue
                rest = block[:k] + block[k + 1 :]
                if not clash(item, rest) and not clash(other, out[i]):
                    out[i].append(other)
                    block[k] = item
                    room[i] -= 1
                    return True
    return False


@dataclass(frozen=True)
class GoldPair:
    """One gold comparison: a prompt, a clearly better response and a worse one."""

    id: str
    prompt: str
    better: str
    worse: str


def read_gold_pairs(path: str | Path) -> list[GoldPair]:
    """Read ``gold.file``: one ``{"id", "prompt", "better", "worse"}`` a line; InputError naming file and line."""
    out: list[GoldPair] = []
    seen: set[str] = set()
    for lineno, row in iter_jsonl(path, "gold file not found — set gold.file in the study file"):
        if not isinstance(row, dict):
            raise InputError(path, 'each line must be {"id": ..., "prompt": ..., "better": ..., "worse": ...}', lineno)
        texts = {k: row.get(k) for k in ("prompt", "better", "worse")}
        wrong = [k for k, v in texts.items() if not isinstance(v, str) or (k != "prompt" and not v.strip())]
        if wrong:
            raise InputError(path, f"{' and '.join(wrong)} must be non-empty text", lineno)
        prompt, better, worse = str(texts["prompt"]), str(texts["better"]), str(texts["worse"])
        if better.strip() == worse.strip():
            raise InputError(path, "'better' and 'worse' are the same text; a gold item needs a clear answer", lineno)
        item_id = str(row.get("id", lineno))
        if item_id in seen:
            raise InputError(path, f"gold item id '{item_id}' appears twice", lineno)
        seen.add(item_id)
        out.append(GoldPair(item_id, prompt, better, worse))
    if not out:
        raise InputError(path, "the gold file holds no items")
    return out


def degraded_pairs(
    responses: Sequence[tuple[str, str, str, str]], count: int, rng: random.Random
) -> list[tuple[GoldPair, str, str]]:
    """``count`` gold comparisons made from ``responses`` (item id, prompt, system, text): a response
    against a degraded copy of it (:func:`~hitkit.material.degrade.degrade`, a phrase of another
    prompt's response in place of one of its own). Each with the item and system it degrades; the items
    are taken in a shuffled order, one response of each, before any item is taken again."""
    by_item: dict[str, list[tuple[str, str, str, str]]] = {}
    for response in responses:
        by_item.setdefault(response[0], []).append(response)
    out: list[tuple[GoldPair, str, str]] = []
    pool: list[str] = []
    for n in range(count):
        if not pool:
            pool = sorted(by_item)
            rng.shuffle(pool)
        item, prompt, system, text = rng.choice(by_item[pool.pop()])
        donors = [r[3] for r in responses if r[0] != item and r[3] != text] or [r[3] for r in responses]
        copy = degrade(text, rng.choice(donors), rng)
        out.append((GoldPair(f"gold#{n}", prompt, text, copy), item, system))
    return out
