"""Replaying a stopping rule over reordered HITs of a finished study: the answers each pair's sequence
takes (:class:`ReplayData`, made by each protocol's ``replay`` module from its tables) and the rule after
every unit of many orders (:func:`replay_orders`).

A *unit* is one counted assignment (a worker's HIT) that carries answers; the replay permutes units,
never rows within a unit, since a live study receives a HIT's answers together. For each order the rule
looks after every unit, as :mod:`hitkit.running.stopping` looks after every counted assignment, and
computes each pair's interval as the protocols' ``sequential`` modules and
:func:`hitkit.analysis.sequential.intervals` do, with one observation per worker
(:func:`hitkit.analysis.contributions.worker_contributions` with the order's units as its ``order``):

* a worker's observation is the mean of their first unit in the order that holds the pair; it is fixed
  when it arrives, so the hedged betting sequence (:func:`~hitkit.analysis.betting.bounded_step`, the
  same arithmetic as :func:`~hitkit.analysis.betting.bounded_interval` at the null) runs once over the
  order's observations (:func:`observations`, vectorised: the first unit of each worker);
* Spot The Bot (``ReplayData.fresh_items``) runs its sign-flip test instead
  (:func:`hitkit.analysis.signflip.flip_path` over the order's looks, with the live rule's seeded flips),
  stopped at its claim;
* each bet is tuned to the horizon projected when its observation arrived
  (:func:`hitkit.analysis.contributions.tuning`), as the live rule tunes it; for rated HITs (live chat,
  rating) at the pair's plan.

Futility and ``undecided`` follow :func:`~hitkit.analysis.sequential.intervals` with the live rule's
horizon: :func:`~hitkit.analysis.contributions.projected` from the pair's HITs seen so far, or for rated
HITs the observations plus the HITs still to hold the pair × the share of rated HITs so far that gave
an observation (:func:`observed_share`); Spot The Bot's test is futile, and undecided, once every
planned conversation is seen with no claim. Computing them incrementally, one pass per order and pair,
keeps 200 orders of a few thousand HITs within seconds, where calling the protocol's ``comparisons``
on every prefix would take hours; :mod:`hitkit.running.replay` checks the replay against that slow path
at a few looks of the first order. Pure numpy, no database.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hitkit.analysis.betting import BET_CAP, _bets, bounded_excludes, bounded_radius  # _bets: the same bets
from hitkit.analysis.contributions import PRIOR_HITS, tuning
from hitkit.analysis.replay_data import PairData, ReplayData
from hitkit.analysis.sequential import MIN_UNDECIDED

DECISION_CHOICES = ("pair", "pairs", "clear", "best")
"""``--decision``: ``pair`` replays every pair as its own study with ``stop: decision: pair`` on it (α
each); the others replay the study-level decision over all watched pairs (α shared by Bonferroni)."""


@dataclass(frozen=True)
class PairTrace:
    """One pair's rule after every look of one order: winner (+1 a, −1 b, 0 none), settled (claimed or
    futile), undecided (``clear``'s relaxed futility), observations and estimate (on [0, 1])."""

    winner: np.ndarray
    settled: np.ndarray
    undecided: np.ndarray
    n: np.ndarray
    mean: np.ndarray


@dataclass(frozen=True)
class Observations:
    """A pair's observations in one order: the look each arrives at (increasing), its value, the unit
    it comes from; and the pair's spent plan after every look (its HITs seen so far)."""

    looks: np.ndarray
    values: np.ndarray
    units: np.ndarray
    spent: np.ndarray

    def tuning(self, planned: float) -> np.ndarray:
        """Each observation's bet horizon, as :func:`hitkit.analysis.contributions.tuning` projects it from
        what the pair's plan had spent when it arrived."""
        return tuning(self.spent[self.looks] if len(self.looks) else np.zeros(0), planned)


def observations(pair: PairData, position: np.ndarray) -> Observations:
    """The per-worker rule's observations of ``pair`` in the order ``position`` (``position[u]``: unit u's
    look), as :func:`~hitkit.analysis.contributions.worker_contributions` takes them with the order's units
    as its ``order``."""
    at = position[pair.hit_unit]
    # each worker's first unit holding the pair: sort by worker, then arrival
    by = np.lexsort((at, pair.hit_worker))
    lead = np.ones(len(by), dtype=bool)
    lead[1:] = pair.hit_worker[by][1:] != pair.hit_worker[by][:-1]
    chosen = by[lead]
    chosen = chosen[np.argsort(at[chosen])]
    spent = np.searchsorted(np.sort(at), np.arange(len(position)), side="right")
    return Observations(at[chosen], pair.hit_mean[chosen], pair.hit_unit[chosen], spent)


def _items(pair: PairData) -> np.ndarray:
    """The pair's rows' conversation codes, which Spot The Bot's sign-flip test needs."""
    if pair.item is None:
        raise ValueError(f"{pair.a}–{pair.b}: the sign-flip replay needs the rows' conversations; they name none")
    return pair.item


def _log_capital(x: np.ndarray, each: float, planned: float | np.ndarray, m: float) -> tuple[np.ndarray, np.ndarray]:
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


def trace(
    data: ReplayData, pair: PairData, position: np.ndarray, alpha_each: float, share: np.ndarray | None
) -> PairTrace:
    """The pair's rule after every look of the order ``position`` (``position[u]``: unit u's look);
    ``share``: :func:`observed_share` after each look (rated HITs), for the horizon."""
    looks_total = len(position)
    m = (data.null - data.bounds[0]) / (data.bounds[1] - data.bounds[0])
    if data.fresh_items:  # Spot The Bot: the sign-flip test (hitkit.analysis.signflip)
        return _flip_trace(pair, position, alpha_each, m)
    found = observations(pair, position)
    x = found.values
    # the bounded sequence after each observation: each is fixed when it arrives, so one pass
    tuned = found.tuning(pair.planned) if pair.held is None else pair.planned
    kp, km = _log_capital(x, alpha_each, tuned, m)
    won = _winner(kp, km, alpha_each)
    count = np.arange(1, len(x) + 1, dtype=float)
    running = np.cumsum(x) / np.maximum(count, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = np.where(count > 1, (np.cumsum(x**2) - count * running**2) / np.maximum(count - 1, 1), 0.0)
    # after look t the pair has the observations that arrived at looks <= t
    seen = np.searchsorted(found.looks, np.arange(looks_total), side="right")
    idx = np.maximum(seen - 1, 0)
    has = seen > 0
    winner = np.where(has, won[idx], 0).astype(np.int8) if len(x) else np.zeros(looks_total, dtype=np.int8)
    n = seen.astype(float)
    mean = np.where(has, running[idx], m) if len(x) else np.full(looks_total, m)
    var = np.maximum(np.where(has, spread[idx], 0.0), 0.0) if len(x) else np.zeros(looks_total)
    horizon = _horizon(pair, position, n, found.spent, share)
    big = np.maximum(horizon, n)
    # the radius the bets will give at the horizon, tuned as they are: to the projected horizon (rated HITs: the plan)
    r_plan = bounded_radius(
        big, var, alpha_each, pair.planned if pair.held is not None else big, min(max(m, 0.01), 0.99)
    )
    gap = np.abs(mean - m)
    inside = (winner == 0) & has
    sd = np.sqrt(var)
    with np.errstate(invalid="ignore", divide="ignore"):
        reach = 2 * sd * np.sqrt(big - n) / big + 2 * sd / np.sqrt(n) * (big - n) / big
    projected = inside & (var > 0) & np.isfinite(r_plan) & (gap + reach < r_plan)
    futile = np.where(n >= horizon, inside, projected)
    undecided = futile | (inside & (n >= MIN_UNDECIDED) & np.isfinite(r_plan) & (gap < r_plan))
    return PairTrace(winner, (winner != 0) | futile, undecided, n, mean)


def observation_count(data: ReplayData, pair: PairData) -> int:
    """What the rule counts on all the data in the study's order: workers with owned annotations (Spot The
    Bot's sign-flip test) or the per-worker sequence's observations."""
    own = np.arange(len(data.units))
    if not data.fresh_items:
        return len(observations(pair, own).values)
    if not len(pair.unit):
        return 0
    from hitkit.analysis.signflip import owned

    worker = pair.unit if pair.worker is None else pair.worker
    keep = owned(own[pair.unit], worker, _items(pair))
    return len(np.unique(np.asarray(worker)[keep]))


def _flip_trace(pair: PairData, position: np.ndarray, alpha_each: float, m: float) -> PairTrace:
    """The sign-flip rule after every look (:func:`hitkit.analysis.signflip.flip_path`, stopped at its
    claim): futile, and undecided, once every planned conversation is seen with no claim."""
    from hitkit.analysis.signflip import flip_path

    worker = pair.unit if pair.worker is None else pair.worker
    path = flip_path(
        pair.a,
        pair.b,
        position[pair.unit],
        worker,
        _items(pair),
        pair.value,
        pair.planned,
        alpha_each,
        null=m,
        stop_at_claim=True,
    )
    if not len(path.looks):
        none = np.zeros(len(position), dtype=bool)
        return PairTrace(
            np.zeros(len(position), np.int8), none, none, np.zeros(len(position)), np.full(len(position), m)
        )
    idx = np.searchsorted(path.looks, np.arange(len(position)), side="right") - 1
    has = idx >= 0
    at = np.maximum(idx, 0)
    winner = np.where(has, path.winner[at], 0).astype(np.int8)
    finished = has & (path.seen[at] >= 1.0) & (winner == 0)
    n = np.where(has, path.workers[at], 0).astype(float)
    return PairTrace(winner, (winner != 0) | finished, finished, n, np.where(has, path.estimate[at], m))


def _horizon(pair: PairData, position: np.ndarray, n: np.ndarray, spent: np.ndarray, share) -> np.ndarray:
    """The observations the pair can expect by the end of its plan, after each look, as the live rule
    sets :attr:`~hitkit.analysis.sequential.Comparison.expected`: for rated HITs (``share``), those it has
    plus the HITs still planned to hold it × the share of rated HITs that gave an observation; else
    :func:`~hitkit.analysis.contributions.projected` from its own HITs so far, the plan itself
    before any."""
    if pair.held is not None and share is not None:
        held = np.cumsum(np.isin(np.argsort(position), pair.held))
        return n + np.maximum(pair.planned - held, 0.0) * share
    # projected(n, spent, planned), vectorised over looks
    ratio = np.minimum(1.0, (n + PRIOR_HITS) / (spent + PRIOR_HITS))
    return np.where(spent > 0, n + np.maximum(pair.planned - spent, 0.0) * ratio, pair.planned)


def observed_share(data: ReplayData, position: np.ndarray) -> np.ndarray | None:
    """For rated HITs, after each look: the share of the units so far holding two systems that gave some
    pair an observation (with :data:`~hitkit.analysis.contributions.PRIOR_HITS` giving pseudo-units), as
    :func:`hitkit.protocols.live_chat.sequential.passed_share`; None elsewhere (no such horizon)."""
    if data.holding is None:
        return None
    gave = np.zeros(len(position), dtype=bool)
    for pair in data.pairs:
        gave[observations(pair, position).units] = True
    arrival = np.argsort(position)
    return np.minimum((np.cumsum(gave[arrival]) + PRIOR_HITS) / (np.cumsum(data.holding[arrival]) + PRIOR_HITS), 1.0)


def first(flags: np.ndarray) -> int | None:
    """The first look at which ``flags`` holds, or None."""
    return int(np.argmax(flags)) if flags.any() else None


def replay_order(data: ReplayData, position: np.ndarray, decision: str, alpha: float) -> list[tuple[int | None, int]]:
    """Per pair of ``data.pairs``: (the look at which it settled, or None; its winner then, +1 a, −1 b, 0
    none) in the order ``position``, under ``decision`` (:data:`DECISION_CHOICES`)."""
    share = observed_share(data, position)
    if decision == "pair":  # each pair its own study: stop: decision: pair on it, α its own
        out = []
        for pair in data.pairs:
            t = trace(data, pair, position, alpha, share) if pair.planned > 0 else None
            look = first(t.settled) if t is not None else None
            out.append((look, int(t.winner[look]) if t is not None and look is not None else 0))
        return out
    watched = data.watched
    if not watched:
        return [(None, 0) for _ in data.pairs]
    each = alpha / max(len(watched), 1)
    traces = {id(p): trace(data, p, position, each, share) for p in watched}
    look = first(_fired(traces, watched, decision, len(position)))
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
