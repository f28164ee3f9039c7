"""Degraded responses for quality control, as Graham et al. (2013, 2017) make "bad references".

A phrase of the original response is replaced by a phrase of the same length from another response
(to another prompt), so the result keeps most of the original's words but no longer reads as a
sensible reply. The phrase grows with the response, in the spirit of Graham et al.'s length-dependent
degradation (hitkit's table: 1 word for 1-word texts, 2 for 2–5, 3 for 6–8, 4 for 9–15, 5 for 16–20
and ⌊n/4⌋ above); responses of one or two words are replaced whole.
"""

from __future__ import annotations

import random


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
