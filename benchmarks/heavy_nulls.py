"""The stopping rule's nulls in crowds where a few workers do most of the HITs (part of benchmarks/adaptive.py).

Two equal systems, 300 HITs of 10 votes (arena: 10 battles), α = 0.05, a look after every HIT. Each vote
is a tie with probability 0.1, else a win for x with probability logistic(taste_w + item), the worker's
taste ~ N(0, sd²) logits drawn once per worker and the item (prompt) effect ~ N(0, 0.5²) drawn per vote (a
prompt of its own: shared prompts are the item rule's business, tested in tests/test_sequential_workers.py).
The crowd's win rate is ½. Who does each HIT: :func:`hitkit.simulation.activity.heavy_hitters`, the worlds
of :data:`WORLDS` (a few heavy workers doing a share of the HITs, each other HIT a new worker) and, for the
arena, also a pool of 20 returning workers doing every HIT.

The sequences compared, each hitkit's bounded (hedged betting) one unless said otherwise, bets tuned at
the 300 planned HITs:

* **per worker** (hitkit now, pairwise and arena): one observation per worker, the mean score of their
  first HIT (:func:`hitkit.analysis.contributions.worker_contributions`; here every HIT holds the pair and
  items are never shared, so it is the first HIT of each worker);
* **per HIT** (the pairwise rule before): each HIT's mean score one observation;
* **per battle, exact** (the arena rule before): Robbins' normal-mixture sequence on the battles, variance
  bound ¼, ρ tuned at 3,000 battles.

A false claim is a study whose interval ever excluded ½. The adaptive pairwise design has its own null
(:func:`adaptive_best_null`: 3 equal systems, decision ``best``, the pair of each HIT picked by hitkit's
adaptive policy from the answers so far, which the exact guarantee excludes): a false claim is a study
that declared a best. Vectorised over studies; tests/test_adaptive_benchmark.py
checks :func:`per_worker_claims` against :func:`hitkit.protocols.pairwise.sequential.comparisons` and
:func:`hitkit.analysis.sequential.intervals` on simulated studies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hitkit.analysis.contributions import PRIOR_HITS
from hitkit.analysis.sequential import bounded_excludes, bounded_step, radius, rho_for
from hitkit.simulation.activity import heavy_hitters

HITS = 300
PER_HIT = 10  # votes (arena: battles) a HIT
TIE = 0.1
ITEM_SD = 0.5
ALPHA = 0.05


@dataclass(frozen=True)
class World:
    """Who does the HITs: ``n_heavy`` workers doing ``share`` of them at taste sd ``taste``; the rest new
    workers, or (``pool``) a pool of that many returning ones."""

    name: str
    n_heavy: int
    share: float
    taste: float
    pool: int | None = None


WORLDS = tuple(
    World(f"{k} workers do {share:.0%}, taste sd {sd}", k, share, sd)
    for k, share in ((5, 0.7), (20, 0.5))
    for sd in (0.3, 0.8, 1.13)
)
ARENA_WORLDS = (*WORLDS, World("a pool of 20 returning workers, taste sd 0.5", 0, 0.0, 0.5, 20))


def simulate(world: World, studies: int, rng: np.random.Generator, hits: int = HITS, per_hit: int = PER_HIT):
    """(scores, workers, wins): each HIT's mean x-over-y score, its worker and its x-wins-plus-half-ties
    count, [studies, hits] each, in arrival order."""
    workers = np.stack([heavy_hitters(hits, world.n_heavy, world.share, rng, world.pool) for _ in range(studies)])
    taste = rng.normal(0.0, world.taste, (studies, int(workers.max()) + 1))
    logit = np.take_along_axis(taste, workers, axis=1)[..., None] + rng.normal(0.0, ITEM_SD, (studies, hits, per_hit))
    tie = rng.random(logit.shape) < TIE
    win = rng.random(logit.shape) < 1 / (1 + np.exp(-logit))
    points = np.where(tie, 0.5, win.astype(float)).sum(axis=2)
    return points / per_hit, workers, points


def first_hits(workers: np.ndarray) -> np.ndarray:
    """[studies, hits]: whether each HIT is its worker's first in the study."""
    first = np.zeros(workers.shape, dtype=bool)
    for row, w in enumerate(workers):
        first[row, np.unique(w, return_index=True)[1]] = True
    return first


def bounded_claims(
    x: np.ndarray, counts: np.ndarray, planned: float, alpha: float = ALPHA, project: bool = False
) -> np.ndarray:
    """[studies, looks]: whether the bounded sequence at ½ excludes it after each look, the look taking the
    observation ``x`` where ``counts`` (else leaving the sequence as it was). With ``project`` each bet is
    tuned as hitkit's rule tunes it (:func:`hitkit.analysis.contributions.tuning`: the observations before
    it plus the HITs still planned × the share of HITs so far that gave one), else at ``planned``."""
    state = np.zeros((len(x), 5))
    out = np.zeros(x.shape, dtype=bool)
    for t in range(x.shape[1]):
        on = counts[:, t]
        horizon: float | np.ndarray = planned
        if project:
            before = state[on, 0]
            horizon = before + max(planned - (t + 1), 0.0) * np.minimum(
                1.0, (before + PRIOR_HITS) / (t + 1 + PRIOR_HITS)
            )
        state[on] = bounded_step(state[on], x[on, t], alpha, horizon)
        above, below = bounded_excludes(state, alpha)
        out[:, t] = (above | below) & (state[:, 0] > 0)
    return out


def per_worker_claims(scores: np.ndarray, workers: np.ndarray, planned: float = HITS) -> np.ndarray:
    """hitkit's rule now: one observation per worker, their first HIT's mean score, each bet tuned to the
    projected horizon."""
    return bounded_claims(scores, first_hits(workers), planned, project=True)


def per_hit_claims(scores: np.ndarray, planned: float = HITS) -> np.ndarray:
    """The pairwise rule before: every HIT one observation."""
    return bounded_claims(scores, np.ones(scores.shape, dtype=bool), planned)


def per_battle_claims(points: np.ndarray, per_hit: int = PER_HIT) -> np.ndarray:
    """The arena rule before: the exact per-battle sequence (variance ¼), a look after every HIT."""
    n = per_hit * np.arange(1, points.shape[1] + 1)
    bound = radius(n, 0.25, ALPHA, rho_for(per_hit * points.shape[1], 0.25, ALPHA))
    return np.abs(np.cumsum(points, axis=1) / n - 0.5) > bound


def run(studies: int, seed: int) -> dict[str, dict[str, tuple[float, float]]]:
    """Per world, (earlier rule's false-claim share, hitkit's now): pairwise, the arena, and the adaptive
    pairwise design of :data:`ADAPTIVE_SYSTEMS` equal systems with decision ``best``."""
    out: dict[str, dict[str, tuple[float, float]]] = {"pairwise": {}, "arena": {}, "adaptive": {}}
    for k, world in enumerate(ARENA_WORLDS):
        if world in WORLDS:
            scores, workers, _ = simulate(world, studies, np.random.default_rng([seed, 11, k]))
            out["pairwise"][world.name] = (
                float(per_hit_claims(scores).any(axis=1).mean()),
                float(per_worker_claims(scores, workers).any(axis=1).mean()),
            )
            out["adaptive"][world.name] = (
                adaptive_best_null(world, studies, seed, per_worker=False),
                adaptive_best_null(world, studies, seed),
            )
        scores, workers, points = simulate(world, studies, np.random.default_rng([seed, 12, k]))
        out["arena"][world.name] = (
            float(per_battle_claims(points).any(axis=1).mean()),
            float(per_worker_claims(scores, workers).any(axis=1).mean()),
        )
    return out


ADAPTIVE_SYSTEMS = 3


def adaptive_best_null(world: World, studies: int, seed: int, per_worker: bool = True) -> float:
    """The adaptive design's own null: :data:`ADAPTIVE_SYSTEMS` equal systems, decision ``best``, each HIT
    posted to the pair hitkit's adaptive policy picks (:func:`benchmarks.adaptive.best_rule`), 300 HITs
    of 10 votes by ``world``'s crowd; a worker's taste is one logit per system, N(0, sd²/2) (so a pair's
    taste difference has sd ``world.taste``). The pair a worker's HIT holds depends on the answers so far,
    which the exact guarantee excludes: the share of studies that declared a best measures it. With
    ``per_worker`` False, every HIT counts (the earlier rule)."""
    from benchmarks.adaptive import best_rule  # here: adaptive.py imports this module

    rng = np.random.default_rng([seed, 13, int(world.taste * 100), world.n_heavy, int(per_worker)])
    k = ADAPTIVE_SYSTEMS
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    a, b = np.array([i for i, _ in pairs]), np.array([j for _, j in pairs])
    workers = np.stack([heavy_hitters(HITS, world.n_heavy, world.share, rng, world.pool) for _ in range(studies)])
    taste = rng.normal(0.0, world.taste / np.sqrt(2), (studies, int(workers.max()) + 1, k))
    seen = np.zeros((studies, len(pairs), int(workers.max()) + 1), dtype=bool)
    n = np.zeros((studies, len(pairs)), dtype=np.int64)
    state = np.zeros((studies, len(pairs), 5))
    each = ALPHA / len(pairs)
    planned = HITS / len(pairs)
    claimed = np.zeros(studies, dtype=bool)
    live = np.arange(studies)
    nxt = best_rule(n, state, systems=k)[2]
    for h in range(HITS):
        pair, who = nxt[live], workers[live, h]
        logit = (taste[live, who, a[pair]] - taste[live, who, b[pair]])[:, None] + rng.normal(
            0.0, ITEM_SD, (len(live), PER_HIT)
        )
        tie = rng.random(logit.shape) < TIE
        win = rng.random(logit.shape) < 1 / (1 + np.exp(-logit))
        score = np.where(tie, 0.5, win.astype(float)).mean(axis=1)
        fresh = ~seen[live, pair, who] if per_worker else np.ones(len(live), dtype=bool)
        seen[live, pair, who] = True
        rows, cols = live[fresh], pair[fresh]
        n[rows, cols] += 1
        state[rows, cols] = bounded_step(state[rows, cols], score[fresh], each, planned)
        fired, _, nxt_live = best_rule(n[live], state[live], systems=k)
        claimed[live[fired]] = True
        nxt[live] = nxt_live
        live = live[~fired & (nxt_live >= 0)]
        if not len(live):
            break
    return float(claimed.mean())
