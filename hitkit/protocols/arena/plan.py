"""``hitkit plan`` for arena studies: simulated battles at each number of HITs, analysed by the arena's own
leaderboard (as :func:`~hitkit.protocols.arena.analysis.analyze_battles` fits it), and the decisions such a study makes.

A simulated study has the study file's HITs × battles per HIT, less its share of QC battles, on pairs of
real systems drawn uniformly (sides at random). The battles are the arena's simulated battles
(:mod:`hitkit.protocols.arena.simulation`, the generator ``benchmarks/arena.py`` uses too) with the
study's simulated crowd: ``simulated.quality`` as the strengths (a quality difference d is
``arena.crowd.scale`` × d logits, so θ = scale · q / ln 10), ``arena.crowd.length_bias`` and
``position_bias`` as the biases (the crowd's pull toward the longer reply per unit of log token ratio is
about twice that per unit of the normalised difference (a − b)/(a + b) the simulation uses), ties with
``arena.crowd.tie_share``, and the crowd's workers (``simulated.workers``: spammers vote at random,
every other profile votes from the strengths). How many HITs each worker takes follows
``simulated.activity`` (:mod:`hitkit.simulation.activity`): with ``zipf`` (the default) or ``lognormal``
each worker's HITs are the law's share within ``schedule.per_worker_cap``, over as many workers as the cap
needs (the crowd's own, or more where they are too few), and all the battles of a HIT are its worker's;
with ``uniform`` each battle's worker is drawn evenly from the crowd. Every system's
replies have the same typical length here: real lengths are unknown before the study, so the length
bias only adds noise. Two systems "differ" when their style-controlled 95 % intervals (workers
resampled) do not overlap: the claim the leaderboard's rank makes.
"""

from __future__ import annotations

import math

import numpy as np

from hitkit.analysis.base import AnalysisResult
from hitkit.protocols.arena.bradley_terry import FASTCHAT_BASELINE
from hitkit.protocols.arena.leaderboard import leaderboard
from hitkit.protocols.arena.reading import included
from hitkit.protocols.arena.settings import control_battles
from hitkit.protocols.arena.simulation import Crowd, Systems, battles, uniform_pairs
from hitkit.simulation import planning
from hitkit.simulation.activity import capped_quotas

UNIT = "hits"
DECISIONS = planning.DECISIONS
REPLICATES = 20
"""Simulated studies per size (each has a worker bootstrap of its leaderboard)."""
TYPICAL_TOKENS = 300.0


def size_of(config) -> int:
    """The study file's own size: its number of HITs."""
    return config.arena.hits


def sizes(config) -> list[int]:
    """HITs from a quarter to twice the study's, on a roughly doubling grid that includes the study's."""
    n = size_of(config)
    return sorted({max(1, round(n * f)) for f in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)})


def with_size(config, size: int):
    """The study file with ``size`` HITs."""
    return config.model_copy(update={"arena": config.arena.model_copy(update={"hits": size})})


def _quality(config) -> dict[str, float]:
    control = config.arena.control
    real = [s.name for s in config.systems if s.name != control]
    return {name: 0.5 for name in real} | {k: v for k, v in config.simulated.quality.items() if k in real}


def simulate(config, seed: int):
    """One simulated study's leaderboard battles (``battles.csv`` rows) and the true qualities."""
    arena, quality = config.arena, _quality(config)
    names = tuple(sorted(quality))
    crowd_cfg = arena.crowd
    theta = tuple(crowd_cfg.scale * quality[n] / math.log(10) for n in names)
    systems = Systems(names, theta, (TYPICAL_TOKENS,) * len(names))
    groups = list(config.simulated.workers)
    workers = sum(g.count for g in groups) or 1
    spammers = sum(g.count for g in groups if g.profile == "spammer") / workers
    rng = np.random.default_rng([seed, 5])
    n = arena.battle_count() - control_battles(config)  # gold: sets the QC battles where given
    worker_of = None
    if config.simulated.activity != "uniform":
        workers, worker_of = _battle_workers(config, workers, max(n, 1), rng)
    crowd = Crowd(
        workers=workers,
        activity_shape=1e6,
        taste=0.0,
        spammers=spammers,
        length_bias=2.0 * crowd_cfg.length_bias,
        position_bias=crowd_cfg.position_bias,
        tie_rate=crowd_cfg.tie_share,
    )
    frame = battles(
        systems, crowd, uniform_pairs(len(names), max(n, 1), rng), rng, study=config.study, worker_of=worker_of
    )
    return frame, quality


def _battle_workers(config, crowd: int, n: int, rng: np.random.Generator) -> tuple[int, np.ndarray]:
    """(workers, the worker of each of ``n`` battles): each HIT's battles go to one worker, HITs per worker the
    activity law's quotas within the per-worker cap over enough workers for the cap, in a seeded order."""
    arena, cap = config.arena, config.schedule.per_worker_cap
    workers = max(crowd, math.ceil(arena.hits / cap))
    quotas = capped_quotas(arena.hits, workers, config.simulated.activity, cap)
    hit_worker = rng.permutation(np.repeat(rng.permutation(workers), quotas))
    return workers, rng.permutation(np.repeat(hit_worker, arena.battles_per_hit))[:n]


def decide(config, result, profiles: dict[str, str] | None = None) -> dict[str, bool | None]:
    """Which of the plan's decisions one analysis gets right, given the true qualities: a system is called
    better than another when its style-controlled interval lies wholly above the other's."""
    board = result.tables["leaderboard"]
    styled = board["rating_style"].notna().all()
    point, low, high = (
        ("rating_style", "rating_style_lower", "rating_style_upper")
        if styled
        else ("rating", "rating_lower", "rating_upper")
    )
    intervals = {s: (lo, hi) for s, lo, hi in board[["system", low, high]].itertuples(index=False)}
    ranked = list(board.sort_values(point, ascending=False)["system"])

    def differs(a: str, b: str) -> bool:
        return a in intervals and b in intervals and intervals[a][0] > intervals[b][1]

    return planning.decide(_quality(config), differs, ranked, intervals)


def decision_tables(battles, n_boot: int, seed: int) -> AnalysisResult:
    """The leaderboard of :func:`~hitkit.protocols.arena.analysis.analyze_battles`, the one table
    :func:`decide` reads, made as it makes it with its defaults (QC battles and leaks left out, ties as half
    a win, workers resampled, anchored as FastChat's), without the categories, win rates, QC table and
    evidence a plan never reads."""
    board, _, _ = leaderboard(
        included(battles, leaks=False),
        n_boot=n_boot,
        seed=seed,
        ties="half",
        anchor=FASTCHAT_BASELINE,
        covariates=(),
        inverse_sampling=False,
    )
    return AnalysisResult(tables={"leaderboard": board})


def replicate(config, seed: int, n_boot: int) -> dict[str, bool | None]:
    """Simulate one study at the config's size, analyse it, and say which decisions came out right."""
    frame, _ = simulate(config, seed)
    return decide(config, decision_tables(frame, n_boot, seed))
