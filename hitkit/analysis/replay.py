"""Replaying a stopping rule over reordered HITs of a finished study: the observations each pair's
sequence takes (:class:`ReplayData`, made by each protocol's ``replay`` module from its tables) and the
rule after every unit of many orders (:func:`replay_orders`).

A *unit* is one counted assignment (a worker's HIT) that carries answers; the replay permutes units,
never rows within a unit, since a live study receives a HIT's answers together. For each order the rule
looks after every unit, as :mod:`hitkit.running.stopping` looks after every counted assignment, and
computes each pair's interval as :func:`hitkit.analysis.sequential.intervals` does:

* a *bounded* pair (pairwise, Spot The Bot, live chat, rating): each cluster's mean score, clusters in
  the order of their first observation, through the hedged betting sequence
  (:func:`~hitkit.analysis.betting.bounded_step`, the same arithmetic as
  :func:`~hitkit.analysis.betting.bounded_interval` at the null); a cluster that gets more observations
  later (a Spot The Bot conversation annotated again) changes its mean in place, as the live rule's
  :func:`~hitkit.analysis.sequential.cluster_means` does, and the sequence is recomputed over all clusters;
* an *exact* pair (the arena): every observation its own, Robbins' normal mixture with the known bound ¼.

Futility and ``undecided`` follow :func:`~hitkit.analysis.sequential.intervals` (the pair's horizon: its
planned size, or for rated HITs its observations plus the HITs still to hold it × the share passing QC so
far). Computing them incrementally, one pass per order and pair, keeps 200 orders of a few thousand HITs
within seconds, where calling the protocol's ``comparisons`` on every prefix would take hours;
:mod:`hitkit.running.replay` checks the replay against that slow path at a few looks of the first order.
Pure numpy, no database.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hitkit.analysis.betting import BET_CAP, _bets, bounded_excludes, bounded_radius  # _bets: the same bets
from hitkit.analysis.replay_data import PairData, ReplayData
from hitkit.analysis.sequential import MIN_UNDECIDED, radius, rho_for

DECISION_CHOICES = ("pair", "pairs", "clear", "best")
"""``--decision``: ``pair`` replays every pair as its own study with ``stop: decision: pair`` on it (α
each); the others replay the study-level decision over all watched pairs (α shared by Bonferroni)."""


PASS_PRIOR = 10
"""Passing pseudo-HITs in the horizon's QC share (live chat's ``PASS_PRIOR``, as its ``passed_share``)."""


@dataclass(frozen=True)
class PairTrace:
    """One pair's rule after every look of one order: winner (+1 a, −1 b, 0 none), settled (claimed or
    futile), undecided (``clear``'s relaxed futility), observations and estimate (on [0, 1])."""

    winner: np.ndarray
    settled: np.ndarray
    undecided: np.ndarray
    n: np.ndarray
    mean: np.ndarray


def _cluster_stream(
    pair: PairData, position: np.ndarray, limit: int | None = None
) -> tuple[np.ndarray, np.ndarray, bool, bool]:
    """The pair's clusters in arrival order for one order (``position[u]``: the look unit u arrives at):
    the look each cluster first arrives at, and a matrix of cluster means after each of the pair's own
    looks when clusters change later (else the fixed means), for its first ``limit`` looks only if given.
    Returns (looks, means, fixed, complete)."""
    at = position[pair.unit]
    first = np.full(pair.cluster.max() + 1, np.iinfo(np.int64).max)
    np.minimum.at(first, pair.cluster, at)
    # Clusters by first arrival, ties by their labels (cluster ids are in label order, see pair_data).
    rank = np.empty_like(first)
    rank[np.lexsort((np.arange(len(first)), first))] = np.arange(len(first))
    if bool(np.all(at == first[pair.cluster])):
        sums = np.bincount(rank[pair.cluster], weights=pair.value, minlength=len(first))
        counts = np.bincount(rank[pair.cluster], minlength=len(first))
        return np.sort(first), sums / counts, True, True
    looks = np.unique(at)
    li = np.searchsorted(looks, at)
    column = rank[pair.cluster]
    complete = limit is None or limit >= len(looks)
    if not complete:  # the first `limit` looks see only the clusters that arrived by then
        keep = li < limit
        looks, li, column, value = looks[:limit], li[keep], column[keep], pair.value[keep]
    else:
        value = pair.value
    shape = (len(looks), int(column.max()) + 1)
    cells = li * shape[1] + column
    sums = np.bincount(cells, weights=value, minlength=shape[0] * shape[1]).reshape(shape).cumsum(axis=0)
    counts = np.bincount(cells, minlength=shape[0] * shape[1]).reshape(shape).cumsum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return looks, means, False, complete


def _log_capital(x: np.ndarray, each: float, planned: float, m: float) -> tuple[np.ndarray, np.ndarray]:
    """log K⁺ and log K⁻ at the candidate mean ``m`` after each observation along the last axis of ``x``
    (NaN: no observation, which a sequence only has at its end): :func:`~hitkit.analysis.betting.bounded_step`'s recursion in
    closed form (running count, sum and Σ(x_i − μ̂_i)² are cumulative sums), as
    :func:`~hitkit.analysis.betting.bounded_interval` computes it."""
    valid = ~np.isnan(x)
    x = np.nan_to_num(x)
    t = np.cumsum(valid, axis=-1) - valid  # observations before this one
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 2)
    sq = np.where(valid, (x - mu) ** 2, 0.0)
    ss = np.cumsum(sq, axis=-1) - sq
    lam = _bets(t, None, ss, each, planned)
    kp = np.where(valid, np.log1p(np.minimum(lam, BET_CAP / m) * (x - m)), 0.0)
    km = np.where(valid, np.log1p(-np.minimum(lam, BET_CAP / (1 - m)) * (x - m)), 0.0)
    return np.cumsum(kp, axis=-1), np.cumsum(km, axis=-1)


def _winner(kp: np.ndarray, km: np.ndarray, each: float) -> np.ndarray:
    state = np.zeros(kp.shape + (5,))
    state[..., 3], state[..., 4] = kp, km
    above, below = bounded_excludes(state, each)
    return np.where(above, 1, np.where(below, -1, 0)).astype(np.int8)


def _bounded_at_looks(pair: PairData, position: np.ndarray, each: float, m: float, limit: int | None = None):
    """(looks, winner, n, mean, var, complete) of the bounded sequence after each of the pair's own looks
    (its first ``limit`` looks where clusters change later; complete: all of them)."""
    looks, means, fixed, complete = _cluster_stream(pair, position, limit)
    if fixed:  # one pass: cluster k's observation is fixed when it arrives
        x = means
        kp, km = _log_capital(x, each, pair.planned, m)
        won = _winner(kp, km, each)
        count = np.arange(1, len(x) + 1, dtype=float)
        mean = np.cumsum(x) / count
        with np.errstate(invalid="ignore", divide="ignore"):
            var = np.where(count > 1, (np.cumsum(x**2) - count * mean**2) / np.maximum(count - 1, 1), 0.0)
        # several clusters may arrive at one look: the look's state is after its last cluster
        distinct = np.unique(looks)
        last = np.searchsorted(looks, distinct, side="right") - 1
        return distinct, won[last], count[last], mean[last], np.maximum(var[last], 0.0), True
    # every look's sequence over the clusters it has (a prefix: clusters are in arrival order), their means then
    arrived = ~np.isnan(means)
    n = arrived.sum(axis=1).astype(float)
    x = np.where(arrived, means, 0.0)
    kp, km = _final_log_capital(x, arrived, each, pair.planned, m)
    won = _winner(kp, km, each)
    mean = x.sum(axis=1) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(n > 1, ((x**2).sum(axis=1) - n * mean**2) / np.maximum(n - 1, 1), 0.0)
    return looks, won, n, mean, np.maximum(var, 0.0), complete


def _final_log_capital(x: np.ndarray, arrived: np.ndarray, each: float, planned: float, m: float):
    """:func:`_log_capital`'s last values for each row of ``x`` whose first ``arrived`` entries are its
    sequence (the rest zeros): the count before each observation is its column."""
    t = np.arange(x.shape[1], dtype=float)
    mu = (0.5 + np.cumsum(x, axis=1)) / (t + 2)
    sq = (x - mu) ** 2 * arrived
    ss = np.cumsum(sq, axis=1) - sq
    lam = _bets(t, None, ss, each, planned)
    d = x - m
    kp = (np.log1p(np.minimum(lam, BET_CAP / m) * d) * arrived).sum(axis=1)
    km = (np.log1p(-np.minimum(lam, BET_CAP / (1 - m)) * d) * arrived).sum(axis=1)
    return kp, km


def _exact_at_looks(pair: PairData, position: np.ndarray, each: float, m: float, limit: int | None = None):
    """(looks, winner, n, mean, var, complete) of the exact sequence (variance bound ¼) after the pair's
    looks (all of them: ``limit`` is for the bounded sequence's sake)."""
    at = position[pair.unit]
    order = np.argsort(at, kind="stable")
    x = pair.value[order]
    count = np.arange(1, len(x) + 1, dtype=float)
    mean = np.cumsum(x) / count
    r = radius(count, 0.25, each, rho_for(pair.planned, 0.25, each))
    won = np.where(mean - r > m, 1, np.where(mean + r < m, -1, 0)).astype(np.int8)
    looks = np.unique(at)
    last = np.searchsorted(at[order], looks, side="right") - 1
    return looks, won[last], count[last], mean[last], np.full(len(looks), 0.25), True


FIRST_LOOKS = 256
"""Looks a changing-cluster sequence first computes when only its first settled look is wanted: clear
pairs settle early, and every look costs one pass over the clusters so far (then 4×, 16×, …)."""


def trace(
    data: ReplayData,
    pair: PairData,
    position: np.ndarray,
    alpha_each: float,
    share: np.ndarray | None,
    *,
    until_settled: bool = False,
) -> PairTrace:
    """The pair's rule after every look of the order ``position`` (``position[u]``: unit u's look);
    ``share``: the QC share after each look (rated HITs), for the horizon. ``until_settled``: only the
    looks up to the first at which it is settled are computed (later looks read as not settled)."""
    limit = FIRST_LOOKS if until_settled else None
    while True:
        found, known = _trace(data, pair, position, alpha_each, share, limit)
        if known == len(position) - 1 or found.settled[: known + 1].any():
            return _known(found, known)
        limit = 4 * (limit or FIRST_LOOKS)


def _known(t: PairTrace, known: int) -> PairTrace:
    """``t`` with the looks after ``known`` (not computed) read as not settled, nothing claimed."""
    if known == len(t.winner) - 1:
        return t
    later = np.arange(len(t.winner)) > known
    return PairTrace(
        np.where(later, 0, t.winner).astype(np.int8), t.settled & ~later, t.undecided & ~later, t.n, t.mean
    )


def _trace(
    data: ReplayData, pair: PairData, position: np.ndarray, alpha_each: float, share, limit: int | None
) -> tuple[PairTrace, int]:
    """:func:`trace` from the pair's first ``limit`` looks (all when None), and the last look it is exact
    through (the last, when those are all the pair's looks)."""
    looks_total = len(position)
    m = (data.null - data.bounds[0]) / (data.bounds[1] - data.bounds[0])
    if not len(pair.unit):
        zero = np.zeros(looks_total)
        empty = PairTrace(zero.astype(np.int8), zero.astype(bool), zero.astype(bool), zero, np.full(looks_total, m))
        return empty, looks_total - 1
    step = _exact_at_looks if data.exact else _bounded_at_looks
    looks, won, n_at, mean_at, var_at, complete = step(pair, position, alpha_each, m, limit)
    # after look t the pair has what arrived at looks <= t
    seen = np.searchsorted(looks, np.arange(looks_total), side="right")
    idx = np.maximum(seen - 1, 0)
    has = seen > 0
    winner = np.where(has, won[idx], 0).astype(np.int8)
    n = np.where(has, n_at[idx], 0.0)
    mean = np.where(has, mean_at[idx], m)
    var = np.where(has, var_at[idx], 0.0)
    if pair.held is not None and share is not None:
        spent = np.cumsum(np.isin(np.argsort(position), pair.held))
        horizon = n + np.maximum(pair.planned - spent, 0.0) * share
    else:
        horizon = np.full(looks_total, pair.planned)
    big = np.maximum(horizon, n)
    if data.exact:
        r_plan = radius(big, 0.25, alpha_each, rho_for(pair.planned, 0.25, alpha_each))
    else:
        r_plan = bounded_radius(big, var, alpha_each, pair.planned, min(max(m, 0.01), 0.99))
    gap = np.abs(mean - m)
    inside = (winner == 0) & has
    sd = np.sqrt(var)
    with np.errstate(invalid="ignore", divide="ignore"):
        reach = 2 * sd * np.sqrt(big - n) / big + 2 * sd / np.sqrt(n) * (big - n) / big
    projected = inside & (var > 0) & np.isfinite(r_plan) & (gap + reach < r_plan)
    futile = projected if data.exact else np.where(n >= horizon, inside, projected)
    undecided = futile | (inside & (n >= MIN_UNDECIDED) & np.isfinite(r_plan) & (gap < r_plan))
    known = looks_total - 1 if complete else int(looks[-1])
    return PairTrace(winner, (winner != 0) | futile, undecided, n, mean), known


def qc_share(data: ReplayData, position: np.ndarray) -> np.ndarray | None:
    """The share of the units so far holding two systems that pass QC, after each look (with
    :data:`PASS_PRIOR` passing pseudo-units), or None where there is no QC to scale the horizon."""
    if data.holding is None or data.passing is None:
        return None
    arrival = np.argsort(position)
    return np.minimum(
        (np.cumsum(data.passing[arrival]) + PASS_PRIOR) / (np.cumsum(data.holding[arrival]) + PASS_PRIOR), 1.0
    )


def first(flags: np.ndarray) -> int | None:
    """The first look at which ``flags`` holds, or None."""
    return int(np.argmax(flags)) if flags.any() else None


def replay_order(data: ReplayData, position: np.ndarray, decision: str, alpha: float) -> list[tuple[int | None, int]]:
    """Per pair of ``data.pairs``: (the look at which it settled, or None; its winner then, +1 a, −1 b, 0
    none) in the order ``position``, under ``decision`` (:data:`DECISION_CHOICES`)."""
    share = qc_share(data, position)
    if decision == "pair":  # each pair its own study: stop: decision: pair on it, α its own
        out = []
        for pair in data.pairs:
            t = trace(data, pair, position, alpha, share, until_settled=True) if pair.planned > 0 else None
            look = first(t.settled) if t is not None else None
            out.append((look, int(t.winner[look]) if t is not None and look is not None else 0))
        return out
    watched = data.watched
    if not watched:
        return [(None, 0) for _ in data.pairs]
    each = alpha / max(len(watched), 1)
    limit: int | None = FIRST_LOOKS
    while True:  # the sequences up to a window of looks, grown until the rule fires in it or it is all
        found = {id(p): _trace(data, p, position, each, share, limit) for p in watched}
        known = min(k for _, k in found.values())
        traces = {key: _known(t, known) for key, (t, _) in found.items()}
        fired = _fired(traces, watched, decision, len(position))
        if fired.any() or known == len(position) - 1:
            break
        limit = 4 * (limit or FIRST_LOOKS)
    look = first(fired)
    return [
        (look, int(traces[id(p)].winner[look])) if look is not None and id(p) in traces else (None, 0)
        for p in data.pairs
    ]


def _fired(traces: dict, watched: list[PairData], decision: str, looks: int) -> np.ndarray:
    """After each look, whether the study-level ``decision`` is made by the watched pairs' traces."""
    if decision in ("pairs", "clear"):
        key = "settled" if decision == "pairs" else "undecided"
        return np.all([getattr(t, key) | t.settled for t in traces.values()], axis=0)
    if decision == "best":
        systems = sorted({s for p in watched for s in (p.a, p.b)})
        wins = np.zeros((looks, len(systems)), dtype=int)
        for p in watched:
            w = traces[id(p)].winner
            wins[:, systems.index(p.a)] += w > 0
            wins[:, systems.index(p.b)] += w < 0
        # a system that beats every other is the leader (all others are beaten), so the rule fires
        return (wins == len(systems) - 1).any(axis=1)
    raise ValueError(f"decision {decision!r} is not one of {', '.join(DECISION_CHOICES)}")


def orders(units: int, count: int, seed: int) -> np.ndarray:
    """``count`` seeded random orders of ``units`` units: row r gives each unit's look (0-based)."""
    rng = np.random.default_rng(seed)
    out = np.empty((count, units), dtype=int)
    for r in range(count):
        out[r, rng.permutation(units)] = np.arange(units)
    return out


def share_of(look: int | None, units: int) -> float | None:
    """The share of the study's units seen at a look (None: never)."""
    return None if look is None else (look + 1) / units
