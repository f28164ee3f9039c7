"""How a simulated worker behaves in an arena: the prompt they write, the follow-ups, the vote.

Votes come from the systems' configured quality (``simulated.quality``, 0.5 where it names none, the
QC bot 0.1) through the model of :class:`~hitkit.protocols.arena.settings.ArenaCrowdConfig`, with its
length and position biases, so that style control has something real to remove. The profiles:

- ``diligent``: that model; ``noisy``: the quality difference counts a third as much;
- ``judge_like``: the model without length or position bias (what an unbiased judge would vote);
- ``spammer``: one kind for all their votes (drawn from the worker's id): half always vote for the left
  reply, half vote at random among a / b / tie / both bad — both fail the QC battles' test;
- ``always_tie``: a tie every time.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping
from typing import Any

from hitkit.protocols.arena.columns import VOTES
from hitkit.protocols.arena.prompts import Prompt, crowd_prompts
from hitkit.protocols.arena.style import count_tokens

CONTROL_QUALITY = 0.1
"""How the simulated crowd sees the QC bot when ``simulated.quality`` does not name it."""
FOLLOW_UPS = (
    "Can you make that shorter?",
    "Why is that?",
    "Can you give me an example?",
    "Thanks! And what would you do differently?",
    "Could you explain the second point in more detail?",
    "Is there anything I should be careful about?",
)
REASONS = {
    "a": "The left answer was more useful.",
    "b": "The right answer was more useful.",
    "tie": "Both answers were about as good.",
    "both_bad": "Neither answer helped me.",
}


def perceived_quality(config) -> dict[str, float]:
    """Each system's quality in [0, 1] as the simulated crowd perceives it."""
    control = config.arena.control
    seen = {s.name: 0.5 for s in config.systems}
    if control:
        seen[control] = CONTROL_QUALITY
    return seen | dict(config.simulated.quality)


@functools.cache
def _corpus(path) -> tuple[Prompt, ...]:
    return tuple(crowd_prompts(path))


def message(cfg, config, view: Mapping[str, Any], rng: random.Random, turn: int) -> str:
    """The worker's ``turn``-th message: the battle's prompt (drawn for them, or one they write from the
    crowd's corpus), then follow-ups."""
    if turn == 0:
        if view.get("prompt"):
            return view["prompt"]
        path = cfg.crowd.prompts or cfg.prompts
        return rng.choice(_corpus(config.path(path) if path is not None else None)).text
    return FOLLOW_UPS[(turn + rng.randrange(len(FOLLOW_UPS))) % len(FOLLOW_UPS)]


def vote(
    cfg, profile: str, view: Mapping[str, Any], rng: random.Random, context: Mapping[str, Any], worker: str = ""
) -> dict[str, str]:
    """The worker's vote (and now and then a reason) on a battle whose replies are ``view["replies"]``
    (side → reply texts); nothing before the worker has chatted (no ``replies`` yet)."""
    replies = view.get("replies")
    if replies is None:
        return {}
    if not view.get("voted", True):
        return {"vote_done": "yes"}
    if profile == "spammer":
        kind = random.Random(f"spammer:{worker}")
        choice = "a" if kind.random() < 0.5 else rng.choice(VOTES)
    elif profile == "always_tie":
        choice = "tie"
    else:
        crowd = cfg.crowd
        left, right = context["units"][view["unit_id"]]
        quality = context["quality"]
        qa, qb = quality.get(left, 0.5), quality.get(right, 0.5)
        unbiased = profile == "judge_like"
        scale = crowd.scale / 3 if profile == "noisy" else crowd.scale
        tokens_a = max(1, sum(count_tokens(t) for t in replies.get("a", [])))
        tokens_b = max(1, sum(count_tokens(t) for t in replies.get("b", [])))
        x = scale * (qa - qb)
        if not unbiased:
            x += crowd.length_bias * math.log(tokens_a / tokens_b) + crowd.position_bias
        if max(qa, qb) < crowd.both_bad_below:
            choice = "both_bad"
        elif rng.random() < crowd.tie_share * math.exp(-abs(x)):
            choice = "tie"
        else:
            choice = "a" if rng.random() < 1.0 / (1.0 + math.exp(-x)) else "b"
    answers = {"vote": choice}
    if cfg.reason and profile != "spammer" and rng.random() < 0.3:
        answers["reason"] = REASONS[choice]
    return answers
