"""How much of the work each simulated worker does.

Real crowds are long-tailed: on Prolific and MTurk a handful of workers do most of the HITs (on ChatEval's
NCM–Cakechat run one worker did half of them). A guarantee that holds only when every worker does about the
same amount of work is not a guarantee, so the simulated crowd, ``hitkit plan`` and every benchmark null draw
who does each HIT from a heavy-tailed law by default, with ``uniform`` as an option.

Laws (:data:`ACTIVITY_LAWS`):

* ``zipf`` (the default): worker ``i`` (0-based) takes a share proportional to ``1 / (i + 1) ** exponent``
  (exponent 1.1 by default: with 30 workers the busiest 3 do about half of the HITs);
* ``lognormal``: shares proportional to independent lognormal draws, ``log`` sd ``sigma`` (1.5 by default),
  sorted largest first;
* ``uniform``: every worker the same share.

Pure numpy functions, seeded by the caller's generator.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

ActivityLaw = Literal["zipf", "lognormal", "uniform"]
ACTIVITY_LAWS: tuple[str, ...] = ("zipf", "lognormal", "uniform")
DEFAULT_ACTIVITY: ActivityLaw = "zipf"
"""The simulated crowd's law unless the study file or the command says otherwise."""
ZIPF_EXPONENT = 1.1
"""Zipf's exponent: the busiest workers' share grows with it."""
LOGNORMAL_SIGMA = 1.5
"""The lognormal law's sd of log activity."""


def worker_shares(
    n_workers: int,
    law: str = DEFAULT_ACTIVITY,
    *,
    rng: np.random.Generator | None = None,
    exponent: float = ZIPF_EXPONENT,
    sigma: float = LOGNORMAL_SIGMA,
) -> np.ndarray:
    """Each worker's share of the HITs (summing to 1, busiest first) under ``law``."""
    if n_workers < 1:
        raise ValueError(f"activity: need at least one worker (got {n_workers})")
    w: np.ndarray
    if law == "uniform":
        w = np.ones(n_workers)
    elif law == "zipf":
        w = 1.0 / np.arange(1, n_workers + 1) ** exponent
    elif law == "lognormal":
        gen = rng if rng is not None else np.random.default_rng(0)
        w = np.sort(gen.lognormal(0.0, sigma, n_workers))[::-1]
    else:
        raise ValueError(f"activity: unknown law {law!r}; use one of {', '.join(ACTIVITY_LAWS)}")
    return w / w.sum()


def hit_workers(
    n_hits: int,
    n_workers: int,
    law: str,
    rng: np.random.Generator,
    *,
    exponent: float = ZIPF_EXPONENT,
    sigma: float = LOGNORMAL_SIGMA,
) -> np.ndarray:
    """The worker (0 … n_workers − 1) of each of ``n_hits`` HITs in arrival order, drawn by :func:`worker_shares`."""
    shares = worker_shares(n_workers, law, rng=rng, exponent=exponent, sigma=sigma)
    return rng.choice(n_workers, size=n_hits, p=shares)


def hit_quotas(
    n_hits: int,
    n_workers: int,
    law: str = DEFAULT_ACTIVITY,
    *,
    exponent: float = ZIPF_EXPONENT,
    sigma: float = LOGNORMAL_SIGMA,
) -> list[int]:
    """How many of ``n_hits`` HITs each worker does (busiest first), the shares rounded so they sum to ``n_hits``.

    Largest-remainder rounding, deterministic for the deterministic laws; every worker gets at least one HIT
    while there are at least as many HITs as workers.
    """
    shares = worker_shares(n_workers, law, exponent=exponent, sigma=sigma)
    floor_min = 1 if n_hits >= n_workers else 0
    raw = shares * (n_hits - floor_min * n_workers)
    quotas = np.floor(raw).astype(int) + floor_min
    short = n_hits - int(quotas.sum())
    order = np.argsort(-(raw - np.floor(raw)), kind="stable")
    quotas[order[:short]] += 1
    return [int(q) for q in quotas]


def heavy_hitters(
    n_hits: int, n_heavy: int, heavy_share: float, rng: np.random.Generator, light_pool: int | None = None
) -> np.ndarray:
    """A crowd where ``n_heavy`` workers do ``heavy_share`` of the HITs: each HIT's worker, in arrival order.

    Heavy workers are ids 0 … n_heavy − 1, each HIT of theirs drawn evenly among them; every other HIT is
    done by a new worker (``light_pool`` None) or by one of ``light_pool`` returning light workers, drawn
    evenly. HITs are shuffled, so heavy workers come and go through the whole study as on a real platform.
    """
    if not 0.0 <= heavy_share <= 1.0:
        raise ValueError(f"activity: heavy_share must be in [0, 1] (got {heavy_share})")
    n_heavy_hits = int(round(heavy_share * n_hits)) if n_heavy else 0
    heavy = rng.integers(0, n_heavy, n_heavy_hits) if n_heavy else np.empty(0, dtype=int)
    n_light = n_hits - n_heavy_hits
    if light_pool is None:
        light = n_heavy + np.arange(n_light)
    else:
        light = n_heavy + rng.integers(0, light_pool, n_light)
    workers = np.concatenate([heavy, light]).astype(int)
    rng.shuffle(workers)
    return workers


def top_share(workers: np.ndarray, k: int) -> float:
    """The share of HITs done by the ``k`` busiest workers of a per-HIT worker array."""
    if len(workers) == 0:
        return 0.0
    counts = np.sort(np.bincount(np.asarray(workers)))[::-1]
    return float(counts[:k].sum() / counts.sum())


def capped_quotas(n_hits: int, n_workers: int, law: str = DEFAULT_ACTIVITY, cap: int | None = None) -> list[int]:
    """:func:`hit_quotas` with no worker above ``cap`` (a study's per-worker cap): what the law gives a capped
    worker beyond the cap goes, one at a time, to the busiest workers still below it. The cap flattens the
    law's tail (with 12 workers, a cap of 20 and 200 HITs, zipf's busiest worker would do 63); where the
    workers' caps together are fewer than ``n_hits`` the quotas sum to less (the crowd cannot do it all)."""
    quotas = hit_quotas(n_hits, n_workers, law)
    if cap is None:
        return quotas
    excess = sum(max(0, q - cap) for q in quotas)
    quotas = [min(q, cap) for q in quotas]
    while excess > 0 and any(q < cap for q in quotas):
        for i, q in enumerate(quotas):
            if excess > 0 and q < cap:
                quotas[i] += 1
                excess -= 1
    return quotas


def activity_weights(count: int, law: str, rng) -> list[float]:
    """Weights of ``count`` new workers' chances to take each HIT (staffing a simulated study one HIT at a time):
    the law's shares in an order shuffled by ``rng`` (a ``random.Random``), so that who is busy does not follow
    the crowd's profiles (the diligent group, listed first, would otherwise do most of the work). The
    lognormal law draws its weights from ``rng`` too."""
    if law == "lognormal":
        weights = [rng.lognormvariate(0.0, LOGNORMAL_SIGMA) for _ in range(count)]
    else:
        weights = [float(w) for w in worker_shares(count, law)]
    rng.shuffle(weights)
    return weights
