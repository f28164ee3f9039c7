"""How each simulated profile enters text: the signals a browser would send with it (:mod:`hitkit.worker.authenticity`).

The simulated crowd (:mod:`hitkit.simulation.crowd`) posts these with every chat message and free-text answer,
so the authenticity checks are exercised over real HTTP as a person's page would exercise them. No
one sleeps: the timings are what the page would have measured.

- ``diligent``, ``noisy``, ``always_tie``: an ordinary keyboard typist, 3–9 characters a second, a few
  corrections, now and then a short pasted quote.
- ``spammer``: types its short messages quickly.
- ``slow_typist``: honest, 1–2.5 characters a second, long and uneven pauses.
- ``phone``: honest, on a phone keyboard: most characters arrive by composition and suggestions
  (``insertCompositionText`` / ``insertReplacementText``), in bursts.
- ``llm_paster``: pastes bot-written messages (most of them; how many is the worker's own trait),
  after a wait for the chatbot it asked, switching away from the page to do so; its other messages it types.

After about a third of its HITs a worker leaves a comment on the whole HIT (:func:`hit_comment`), typed
or, by an llm_paster, pasted, so the comment's signals are exercised too.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_SPEED = {"slow_typist": (1.0, 2.5), "phone": (2.5, 5.0), "spammer": (6.0, 9.0)}
"""Characters per second while composing, per profile (others: :data:`_KEYBOARD`)."""
_KEYBOARD = (3.0, 9.0)

_LLM_OPENINGS = (
    "That's a fascinating question!",
    "Great point!",
    "Absolutely!",
    "I appreciate you sharing that.",
    "What a wonderful topic to explore.",
    "That's an interesting perspective.",
)
_LLM_BODIES = (
    "Many people find that exploring new hobbies can be incredibly rewarding, as it allows them to grow "
    "and connect with others who share similar interests.",
    "There are several factors to consider here, including personal preferences, available time, and the "
    "overall experience you are hoping to achieve.",
    "It's worth noting that everyone's journey is unique, and what works well for one person may not "
    "necessarily be the best fit for another.",
    "In my experience, striking a balance between curiosity and practicality often leads to the most "
    "fulfilling outcomes in situations like this.",
    "Research suggests that engaging in meaningful conversations can significantly enhance our sense of "
    "well-being and broaden our understanding of the world.",
)
_LLM_CLOSINGS = (
    "What are your thoughts on this?",
    "I'd love to hear more about your experience!",
    "Is there a particular aspect you'd like to dive deeper into?",
    "How do you usually approach it?",
)


@dataclass(frozen=True)
class Typist:
    """One simulated worker's way of typing, the same in every HIT (drawn from the worker's id)."""

    profile: str
    cps: float
    """Characters per second while composing."""
    paste_share: float
    """The share of chat messages this worker pastes (llm_paster) — 0 for honest profiles."""

    def pastes(self, rng: random.Random) -> bool:
        """Whether this worker pastes its next chat message."""
        return self.paste_share > 0 and rng.random() < self.paste_share


def typist(profile: str, worker_id: str) -> Typist:
    """The typing traits of simulated worker ``worker_id`` of ``profile``."""
    trait = random.Random(f"typist:{worker_id}")
    low, high = _SPEED.get(profile, _KEYBOARD)
    share = trait.uniform(0.6, 1.0) if profile == "llm_paster" else 0.0
    return Typist(profile, trait.uniform(low, high), share)


def bot_written_message(rng: random.Random) -> str:
    """A chat message in the voice of a general-purpose chatbot, as an llm_paster pastes it."""
    return " ".join((rng.choice(_LLM_OPENINGS), rng.choice(_LLM_BODIES), rng.choice(_LLM_CLOSINGS)))


_HONEST_COMMENTS = (
    "thanks, this was fun",
    "the second one was hard to judge",
    "nice task",
    "some answers were very similar",
    "ok",
    "one page loaded slowly but it worked",
    "interesting hit, thank you",
)
_LLM_COMMENTS = (
    "Thank you for the opportunity to participate in this study! The task was clear and well "
    "organized, and I found the responses thought-provoking.",
    "I appreciated the clear instructions. Overall, it was an engaging and insightful experience, "
    "and I hope my feedback is helpful for your research.",
)

COMMENT_SHARE = 0.3
"""The share of HITs after which a simulated worker leaves a comment on the whole HIT."""


def hit_comment(who: Typist, rng: random.Random) -> tuple[str, dict[str, int]] | None:
    """The comment ``who`` leaves on the whole HIT, with its signals, or None (most HITs): an llm_paster
    pastes one a chatbot wrote as often as it pastes chat messages, others type a short one."""
    if rng.random() >= COMMENT_SHARE:
        return None
    if who.pastes(rng):
        text = rng.choice(_LLM_COMMENTS)
        return text, pasted_signals(who, text, rng)
    text = rng.choice(_HONEST_COMMENTS)
    return text, typed_signals(who, text, rng)


def _intervals(rng: random.Random, median_ms: float, spread: float) -> tuple[int, int]:
    """Median and interquartile range of inter-key intervals around ``median_ms``."""
    median = median_ms * rng.uniform(0.85, 1.15)
    return round(median), round(median * spread * rng.uniform(0.8, 1.2))


def typed_signals(who: Typist, text: str, rng: random.Random) -> dict[str, int]:
    """The signals of ``text`` typed by ``who`` (honestly, whatever the profile)."""
    n = len(text)
    deletes = sum(rng.random() < 0.04 for _ in range(n))
    blurs = int(rng.random() < (0.15 if who.profile == "slow_typist" else 0.05))
    compose_ms = round(1000 * n / who.cps * rng.uniform(1.0, 1.6)) + 800 * blurs
    signals = {"deletes": deletes, "blurs": blurs, "compose_ms": compose_ms, "pastes": 0, "pasted_chars": 0}
    if who.profile == "phone":
        # Taps go through the keyboard's composition: a word arrives with its suggestion or correction.
        composed = round(n * rng.uniform(0.6, 0.9))
        taps = round(composed * rng.uniform(0.5, 0.8)) + (n - composed)
        median, iqr = _intervals(rng, 160, 3.0)
        signals.update(
            keys=taps, typed_chars=n - composed + deletes, composed_chars=composed, iki_median_ms=median, iki_iqr_ms=iqr
        )
    else:
        median, iqr = _intervals(rng, 1000 / who.cps * 0.8, 2.0 if who.profile == "slow_typist" else 0.9)
        signals.update(
            keys=n + deletes, typed_chars=n + deletes, composed_chars=0, iki_median_ms=median, iki_iqr_ms=iqr
        )
        if who.profile != "spammer" and n >= 40 and rng.random() < 0.03:
            # An honest worker now and then pastes a few words (a name, a quote) into a typed message.
            quoted = rng.randint(5, 15)
            signals.update(pastes=1, pasted_chars=quoted, keys=n - quoted + deletes, typed_chars=n - quoted + deletes)
    return signals


def pasted_signals(who: Typist, text: str, rng: random.Random) -> dict[str, int]:
    """The signals of ``text`` pasted by ``who`` after asking a chatbot elsewhere for it."""
    edits = rng.randint(0, 3)
    pastes = 1 + int(rng.random() < 0.15)
    return {
        "keys": edits,
        "typed_chars": edits,
        "composed_chars": 0,
        "pasted_chars": len(text),
        "pastes": pastes,
        "deletes": edits + int(rng.random() < 0.3),
        "iki_median_ms": round(rng.uniform(120, 400)) if edits > 1 else 0,
        "iki_iqr_ms": 0,
        "compose_ms": round(rng.uniform(4_000, 25_000)),
        "blurs": rng.randint(1, 2),
    }
