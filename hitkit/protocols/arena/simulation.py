"""Simulated arena battles with known strengths, for ``hitkit plan`` and ``benchmarks/arena.py``.

A battle pits two systems, sides drawn at random. Each reply's length (tokens) is log-normal around its
system's typical length, its markdown counts Poisson around the system's habits. A worker votes from

    logit P(left wins) = ln 10 · (θ_left + u_w,left − θ_right − u_w,right)
                         + length_bias · (L_left − L_right) / (L_left + L_right + 1) + position_bias

where θ is the system's true strength (log10 units, rating = 1000 + 400·θ), u_w,s ~ N(0, taste²) the
worker's own taste (fixed per worker and system: a worker's votes are correlated), and ``length_bias``
the pull of the longer reply (what style control removes); with probability
``tie_rate · 4·p·(1 − p)`` the vote is a tie instead (most likely between equals). Spammers vote a or b
at random. Workers' activity is heterogeneous: each battle's worker is drawn with probability
proportional to a Pareto weight (a few workers cast many votes). Seeded and pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hitkit.protocols.arena.reading import BATTLE_COLUMNS


@dataclass(frozen=True)
class Crowd:
    """The simulated voters: how many, how active (Pareto shape; smaller = more unequal), how much
    their tastes differ (``taste``, log10 units), what share are spammers, and their biases."""

    workers: int = 100
    activity_shape: float = 1.5
    taste: float = 0.05
    spammers: float = 0.0
    length_bias: float = 0.0
    position_bias: float = 0.0
    tie_rate: float = 0.2


@dataclass(frozen=True)
class Systems:
    """The systems' true strengths (log10 units), typical reply lengths (tokens) and markdown habits
    (mean headers, list items, bold spans per reply)."""

    names: tuple[str, ...]
    theta: tuple[float, ...]
    length: tuple[float, ...]
    markdown: tuple[float, ...] = field(default=())

    def __post_init__(self):
        k = len(self.names)
        if len(self.theta) != k or len(self.length) != k or (self.markdown and len(self.markdown) != k):
            raise ValueError("names, theta, length (and markdown) need one entry per system")


def crowd_of(crowd: Crowd, rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(activity probabilities [W], spammer flags [W], tastes [W, k]) of a drawn crowd."""
    activity = rng.pareto(crowd.activity_shape, crowd.workers) + 1.0
    spam = rng.random(crowd.workers) < crowd.spammers
    taste = rng.normal(0.0, crowd.taste, (crowd.workers, k))
    return activity / activity.sum(), spam, taste


def battles(
    systems: Systems,
    crowd: Crowd,
    pairs: np.ndarray,
    rng: np.random.Generator,
    drawn: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    start: int = 0,
    study: str = "simulated",
    worker_of: np.ndarray | None = None,
) -> pd.DataFrame:
    """One battle per row of ``pairs`` [n, 2] (system indices; sides shuffled here) as ``battles.csv`` rows;
    ``drawn`` is a crowd from :func:`crowd_of` (drawn here when None), ``start`` numbers the battles;
    ``worker_of`` [n], when given, is each battle's worker (else drawn by the crowd's activity)."""
    k = len(systems.names)
    activity, spam, taste = drawn if drawn is not None else crowd_of(crowd, rng, k)
    pairs = np.asarray(pairs, dtype=int).reshape(-1, 2)
    n = len(pairs)
    swap = rng.random(n) < 0.5
    left = np.where(swap, pairs[:, 1], pairs[:, 0])
    right = np.where(swap, pairs[:, 0], pairs[:, 1])
    worker = rng.choice(len(activity), size=n, p=activity) if worker_of is None else np.asarray(worker_of, dtype=int)
    mean_len = np.asarray(systems.length, dtype=float)
    len_l = np.maximum(1, np.rint(mean_len[left] * rng.lognormal(-0.125, 0.5, n)))
    len_r = np.maximum(1, np.rint(mean_len[right] * rng.lognormal(-0.125, 0.5, n)))
    md = np.asarray(systems.markdown or (1.0,) * k, dtype=float)
    marks_l = rng.poisson(md[left][:, None], (n, 3))
    marks_r = rng.poisson(md[right][:, None], (n, 3))
    theta = np.asarray(systems.theta, dtype=float)
    logit = (
        math.log(10) * (theta[left] + taste[worker, left] - theta[right] - taste[worker, right])
        + crowd.length_bias * (len_l - len_r) / (len_l + len_r + 1)
        + crowd.position_bias
    )
    p = 1.0 / (1.0 + np.exp(-logit))
    u, v = rng.random(n), rng.random(n)
    vote = np.where(v < crowd.tie_rate * 4 * p * (1 - p), "tie", np.where(u < p, "a", "b"))
    vote = np.where(spam[worker], np.where(u < 0.5, "a", "b"), vote)
    ids = np.arange(start, start + n)
    frame = pd.DataFrame(
        {
            "study": study,
            "hit_id": "",
            "assignment_id": "",
            "worker_id": [f"w{w}" for w in worker],
            "battle_id": [f"b{i}" for i in ids],
            "prompt_id": [f"p{i % 500}" for i in ids],
            "category": "",
            "turns": 1.0,
            "system_a": np.asarray(systems.names)[left],
            "system_b": np.asarray(systems.names)[right],
            "vote": vote,
            "reason": "",
            "tokens_a": len_l,
            "tokens_b": len_r,
            "header_count_a": marks_l[:, 0],
            "list_count_a": marks_l[:, 1],
            "bold_count_a": marks_l[:, 2],
            "header_count_b": marks_r[:, 0],
            "list_count_b": marks_r[:, 1],
            "bold_count_b": marks_r[:, 2],
            "is_control": 0,
            "leak": 0,
        },
        columns=list(BATTLE_COLUMNS),
    )
    for column in (
        "tokens_a",
        "tokens_b",
        "header_count_a",
        "list_count_a",
        "bold_count_a",
        "header_count_b",
        "list_count_b",
        "bold_count_b",
    ):
        frame[column] = frame[column].astype(float)
    frame["source"] = study
    return frame


def uniform_pairs(k: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` pairs drawn uniformly over the k·(k − 1)/2 pairs of systems."""
    first = rng.integers(0, k, n)
    second = (first + rng.integers(1, k, n)) % k
    return np.stack([first, second], axis=1)
