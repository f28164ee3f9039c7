"""Simulated arena crowds with bad voters mixed in: the ground truth the voter test (:mod:`voters`) is measured on.

Honest workers vote as :mod:`hitkit.protocols.arena.simulation` has them (strengths, tastes, length bias,
ties), their activity long-tailed (:func:`hitkit.simulation.activity.worker_shares`, Zipf by default).
Bad voters each cast ``votes_each`` votes on battles drawn the same way, voting one way whatever the
replies say (:data:`KINDS`): ``random`` (a or b at a coin flip), ``left``/``right`` (that side),
``tie`` and ``longer`` (the reply with more tokens; the left one when equal). Their worker ids say
their kind (``bad-left-3``), so a benchmark knows whom the test should flag. Seeded and pure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.protocols.arena.simulation import Crowd, Systems, battles, uniform_pairs
from hitkit.simulation.activity import DEFAULT_ACTIVITY, worker_shares

KINDS = ("random", "left", "right", "tie", "longer")


def bad_votes(kind: str, frame: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    """The votes a ``kind`` voter casts on the battles of ``frame``."""
    n = len(frame)
    if kind == "random":
        return np.where(rng.random(n) < 0.5, "a", "b")
    if kind in ("left", "right", "tie"):
        return np.full(n, {"left": "a", "right": "b", "tie": "tie"}[kind])
    if kind == "longer":
        return np.where(frame["tokens_a"].to_numpy() >= frame["tokens_b"].to_numpy(), "a", "b")
    raise ValueError(f"unknown bad voter kind {kind!r}; use one of {', '.join(KINDS)}")


def mixed_crowd(
    systems: Systems,
    crowd: Crowd,
    honest_battles: int,
    bad: dict[str, int],
    votes_each: int,
    rng: np.random.Generator,
    activity: str = DEFAULT_ACTIVITY,
) -> pd.DataFrame:
    """``honest_battles`` battles of ``crowd.workers`` honest workers (activity law ``activity``; the crowd's
    own ``spammers`` share is ignored) and, for each kind in ``bad``, that many bad voters casting
    ``votes_each`` votes, shuffled together; pairs drawn uniformly."""
    k = len(systems.names)
    shares = worker_shares(crowd.workers, activity, rng=rng)
    drawn = (shares, np.zeros(crowd.workers, dtype=bool), rng.normal(0.0, crowd.taste, (crowd.workers, k)))
    frames = [battles(systems, crowd, uniform_pairs(k, honest_battles, rng), rng, drawn)]
    start = honest_battles
    for kind, count in bad.items():
        for j in range(count):
            one = (np.ones(1), np.zeros(1, dtype=bool), np.zeros((1, k)))
            frame = battles(systems, crowd, uniform_pairs(k, votes_each, rng), rng, one, start=start)
            frame["vote"] = bad_votes(kind, frame, rng)
            frame["worker_id"] = f"bad-{kind}-{j}"
            frames.append(frame)
            start += votes_each
    out = pd.concat(frames, ignore_index=True)
    return out.iloc[rng.permutation(len(out))].reset_index(drop=True)


def bad_kind(worker_id: str) -> str | None:
    """The kind of a bad voter from their id (``bad-left-3`` → ``left``), None for an honest worker."""
    parts = str(worker_id).split("-")
    return parts[1] if len(parts) == 3 and parts[0] == "bad" else None
