"""Prompt hygiene: near-duplicate prompts workers write, grouped and capped per study (pure functions).

LMArena deduplicates its prompts before fitting: a prompt sent very often (a greeting, a riddle passed
around) is kept only a limited number of times, so that one prompt cannot decide a rating. hitkit does
the same per study: two prompts are *one prompt* when their normalised texts are equal or their word
3-shingle sets have Jaccard similarity at least ``similarity`` (connected groups of such pairs are one
prompt); the leaderboard counts at most ``cap`` battles of each, the first ones voted.

Normalising: Unicode NFKC, case folded, every run of characters other than letters and digits one
space. Similar pairs are found with MinHash (:data:`HASHES` seeded hashes in :data:`BANDS` bands, so
a pair at Jaccard 0.8 becomes a candidate with probability 0.985) and then checked exactly, so no pair
below the threshold is ever merged. Battles that start from the study's own prompt set (a
``prompt_id``) repeat their prompt by design and are never capped.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

HASHES, BANDS = 32, 8
NON_WORD = re.compile(r"[\W_]+")


def normalise(text: str) -> str:
    """``text`` as compared for duplicates: NFKC, case folded, punctuation and spacing as one space."""
    return NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def shingles(norm: str) -> frozenset[str]:
    """Word 3-shingles of a normalised text (the whole text where it has fewer than three words)."""
    words = norm.split()
    if len(words) < 3:
        return frozenset([norm])
    return frozenset(" ".join(words[i : i + 3]) for i in range(len(words) - 2))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b| (1 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def signatures(sets: Sequence[frozenset[str]], a: np.ndarray, b: np.ndarray, chunk: int = 200_000) -> np.ndarray:
    """MinHash signatures [len(sets), HASHES]: per hash, the minimum over a set's shingles of the
    multiply-shift hash (a·x + b mod 2⁶⁴) >> 32 (x the shingle's CRC-32; a odd), a universal family that
    needs no modulo, so all shingles are hashed at once (in chunks) and reduced per set."""
    codes = np.array([zlib.crc32(s.encode("utf-8")) for items in sets for s in items], dtype=np.uint64)
    sizes = np.array([len(items) for items in sets])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    hashed = np.empty((len(codes), len(a)), dtype=np.uint32)
    for i in range(0, len(codes), chunk):
        hashed[i : i + chunk] = (codes[i : i + chunk, None] * a[None, :] + b[None, :]) >> np.uint64(32)
    return np.minimum.reduceat(hashed, starts, axis=0)


def _buckets(sigs: np.ndarray) -> list[np.ndarray]:
    """The sets sharing all rows of a band, per band, where two or more do (the candidate groups)."""
    rows = HASHES // BANDS
    out = []
    for band in range(BANDS):
        keys = np.ascontiguousarray(sigs[:, band * rows : (band + 1) * rows]).view(np.dtype((np.void, 4 * rows)))
        _, inverse, counts = np.unique(keys.ravel(), return_inverse=True, return_counts=True)
        shared = counts[inverse.reshape(-1)] > 1
        members = np.flatnonzero(shared)
        order = np.argsort(inverse.reshape(-1)[members], kind="stable")
        members, labels = members[order], inverse.reshape(-1)[members][order]
        out += np.split(members, np.flatnonzero(np.diff(labels)) + 1) if len(members) else []
    return out


def prompt_groups(texts: Sequence[str], similarity: float, seed: int = 0) -> list[int]:
    """A group number per text: texts in one group are one prompt (module docstring). Empty texts get −1."""
    norms = [normalise(t) for t in texts]
    distinct = sorted({n for n in norms if n})
    index = {n: i for i, n in enumerate(distinct)}
    parent = list(range(len(distinct)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if similarity < 1.0 and len(distinct) > 1:
        rng = np.random.default_rng([seed, 41])
        a = rng.integers(0, 1 << 63, HASHES, dtype=np.uint64) * np.uint64(2) + np.uint64(1)  # odd multipliers
        b = rng.integers(0, 1 << 63, HASHES, dtype=np.uint64)
        sets = [shingles(n) for n in distinct]
        buckets = _buckets(signatures(sets, a, b))
        checked: set[tuple[int, int]] = set()
        for members in buckets:
            ids = members.tolist()
            for j, x in enumerate(ids):
                for y in ids[j + 1 :]:
                    if (x, y) in checked or root(x) == root(y):
                        continue
                    checked.add((x, y))
                    if jaccard(sets[x], sets[y]) >= similarity:
                        parent[root(x)] = root(y)
    return [root(index[n]) if n else -1 for n in norms]


def capped(groups: Sequence[int], exempt: Sequence[bool], cap: int) -> np.ndarray:
    """Which battles the cap leaves out (True): in order, every battle of a group after its first ``cap``;
    exempt battles and those without a prompt (group −1) are never left out."""
    seen: dict[int, int] = defaultdict(int)
    out = np.zeros(len(groups), dtype=bool)
    for i, (group, free) in enumerate(zip(groups, exempt)):
        if free or group < 0:
            continue
        seen[group] += 1
        out[i] = seen[group] > cap
    return out
