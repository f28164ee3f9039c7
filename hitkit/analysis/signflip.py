"""Spot The Bot's stopping rule: a group-sequential worker sign-flip test over every annotation a worker
gives on conversations they reached first.

Why not the bounded betting sequence the other protocols use (:mod:`hitkit.analysis.contributions`)? It
needs each observation fixed when it arrives, so a worker counts once, with their first HIT: with a few
workers doing most of the HITs that is a few dozen observations, and on simulated Spot The Bot data with
clear differences and 30 workers a clear pair settled by 70 % of the units in as few as 13 % of orders
(benchmarks/replay_clear.py). A worker's later annotations carry most of the information, but their mean
keeps changing, which a betting sequence cannot take.

The rule, for one pair of bots x, y, with the null that x and y are **exchangeable** (swapping the two
names leaves the distribution of every worker's labels unchanged; equal bots in every conversation and
for every worker's taste, which makes the crowd's mean score ½):

* **Ownership** (two-way dependence): a conversation belongs to the worker of the first HIT that reaches
  it; only its owner's annotations of it count. So each conversation, and each worker, is in one
  worker's block: the blocks are independent whatever the conversations' and workers' effects.
* **Statistic** after each HIT (look) that brings the pair's annotations: T = Σ_w d_w, where d_w is
  worker w's sum of (score − ½) over their owned annotations so far; the estimate is ½ + T / n (n the
  annotations counted).
* **Null distribution**: under exchangeability, flipping the sign of one worker's d_w (swapping x and y
  in all their labels) leaves the law of the whole path unchanged. ``B`` seeded sign vectors (one sign per
  worker, the same vector at every look) give B flipped paths beside the observed one.
* **α spent over looks** (Lan–DeMets style spending t², t the share of the pair's planned conversations
  seen): after a look with spent share a(t), at most ⌊a(t)·(B + 1)⌋ of the B + 1 paths are rejected; a path
  still in play is rejected at this look when its |T| is among the largest that fit in what is left (ties
  kept out). The observed path is rejected at the first look it is; the winner is the sign of T then.

Guaranteed, exactly (finite samples, however many HITs each worker does, whatever their tastes and the
conversations' effects): P(a claim for either bot) ≤ α under the exchangeable null, provided workers are
independent, conversations are independent (no effect shared between conversations, such as a topic,
unless the material is taken as fixed: then the claim is about these conversations), and who annotates
which segments when does not depend on the labels (a fixed design). The B + 1 paths are exchangeable when
the flips are random: the level is α on average over the flips' draw, as for any Monte Carlo
randomisation test; for the one draw a pair's names seed, a design with very few workers can exceed it a
little (an independent referee, 2026-11-29: 5 workers of one HIT each, 2/32 for about 5 % of name pairs,
0 for the others; with 20 or more workers 0.037–0.049 ± 0.004 in every world tried). Outside the
guarantee, measured by the same referee: a crowd whose tastes are skewed but average to ½ (three in four
workers lean one way, one in four far the other), 0.07–0.08 when 5–8 workers do most HITs, 0.05 when
work is spread; conversations sharing a topic effect (3 topics of sd 1 logit), 0.19.

It is a test of the null, not a confidence sequence for the mean: the interval shown
(:func:`FlipPath.interval`) is the estimate ± the distance it would need from ½ to be rejected at that
look, so it excludes ½ exactly when the test rejects. Ownership costs data: about 60 % of annotations,
where segments of one conversation go to different workers.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

FLIPS = 999
"""Sign vectors for a pair at α = 0.05 (B + 1 = 1,000 paths); smaller α gets more (:func:`flip_count`)."""
SPENDING = 2.0
"""The spending function's power: α·t^2 spent when a share t of the pair's conversations is seen."""
CHUNK = 16
"""Looks whose flipped paths are computed at once."""
REFERENCE = (
    "worker sign-flip group-sequential test (Monte Carlo randomisation over workers' blocks of owned "
    "conversations, alpha spent as t^2 of the pair's conversations seen)"
)


def flip_count(alpha: float) -> int:
    """B for a pair tested at ``alpha``: at least 50 paths' worth of rejections at the end."""
    return max(FLIPS, int(np.ceil(50 / alpha)) - 1)


def flips(a: str, b: str, workers: int, alpha: float) -> np.ndarray:
    """The pair's seeded sign vectors (B × ``workers``, ±1, worker j in column j by order of arrival), the
    same for the live rule and the replay."""
    seed, count = zlib.crc32(f"{a}\x00{b}".encode()), flip_count(alpha)
    # in blocks of 64 workers, each from its own seed: worker j's signs never depend on how many came after
    blocks = [
        np.random.default_rng([seed, block]).choice(np.array([-1.0, 1.0]), size=(count, 64))
        for block in range(max(workers - 1, 0) // 64 + 1)
    ]
    return np.hstack(blocks)[:, : max(workers, 1)]


def owned(look: np.ndarray, worker: np.ndarray, item: np.ndarray) -> np.ndarray:
    """Which rows count: those whose worker is the first to reach the row's conversation (rows arriving
    at ``look``; one look is one worker's HIT)."""
    if not len(look):
        return np.zeros(0, dtype=bool)
    _, item_code = np.unique(item, return_inverse=True)
    first = np.full(int(item_code.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(first, item_code, look)
    looks, lead = np.unique(look, return_index=True)  # a look's worker: its first row's
    owner = np.asarray(worker)[lead][np.searchsorted(looks, first)]
    return np.asarray(owner[item_code] == np.asarray(worker), dtype=bool)


@dataclass(frozen=True)
class FlipPath:
    """The rule at the looks where the pair got annotations (``looks``, increasing): the winner from that
    look on (+1 x, −1 y, 0 none; once rejected it stays), the estimate, the annotations counted, the
    contributing workers, the distance from ½ the estimate needs to be rejected there (``needed``; inf
    when no α is left to spend), and the share of planned conversations seen."""

    looks: np.ndarray
    winner: np.ndarray
    estimate: np.ndarray
    n: np.ndarray
    workers: np.ndarray
    needed: np.ndarray
    seen: np.ndarray

    def interval(self, k: int, null: float = 0.5) -> tuple[float, float]:
        """The interval at evaluated look ``k`` (frozen at the rejecting look once rejected), on [0, 1]."""
        first = int(np.argmax(self.winner != 0)) if (self.winner[: k + 1] != 0).any() else k
        est, need = float(self.estimate[first]), float(self.needed[first])
        if not np.isfinite(need) or (need == 0 and est == null):
            return 0.0, 1.0  # nothing to spend yet, or every path is flat (all ties): no bounds to show
        low, high = est - need, est + need
        if self.winner[first] > 0:  # exactly the test's verdict, whatever the rounding
            low = max(low, np.nextafter(null, 1.0))
        elif self.winner[first] < 0:
            high = min(high, np.nextafter(null, 0.0))
        elif low > null or high < null:
            low, high = min(low, null), max(high, null)
        return max(0.0, low), min(1.0, high)


def flip_path(
    a: str,
    b: str,
    look: np.ndarray,
    worker: np.ndarray,
    item: np.ndarray,
    score: np.ndarray,
    planned: float,
    alpha: float,
    *,
    null: float = 0.5,
    stop_at_claim: bool = False,
) -> FlipPath:
    """The rule (module docstring) over the pair's rows: each row's look, worker, conversation and score
    in [0, 1]. ``planned``: the pair's conversations in the fixed design. ``stop_at_claim``: stop computing
    at the first rejection (later looks read as the same)."""
    order = np.argsort(look, kind="stable")
    look, worker, item, score = look[order], worker[order], item[order], np.asarray(score, float)[order]
    keep = owned(look, worker, item)
    codes: dict = {}
    widx = np.array([codes.setdefault(w, len(codes)) if k else -1 for w, k in zip(worker, keep)], dtype=int)
    looks, ends = np.unique(look, return_index=True)
    ends = np.append(ends[1:], len(look))
    _, item_code = np.unique(item, return_inverse=True)
    first_seen = np.zeros(len(look), dtype=bool)
    first_seen[np.unique(item_code, return_index=True)[1]] = True
    seen = np.cumsum(first_seen)[ends - 1] / max(planned, 1.0) if len(look) else np.zeros(0)
    W = len(codes)
    signs = flips(a, b, W, alpha)
    contributions = np.zeros((len(looks), max(W, 1)))
    kept_rows = np.where(keep)[0]
    row_look = np.searchsorted(looks, look[kept_rows])
    np.add.at(contributions, (row_look, widx[kept_rows]), score[kept_rows] - null)
    d = np.cumsum(contributions, axis=0)
    n = np.cumsum(np.bincount(row_look, minlength=len(looks)))
    joined = np.full(max(W, 1), len(looks))
    np.minimum.at(joined, widx[kept_rows], row_look)
    used = np.cumsum(np.bincount(joined[:W], minlength=len(looks) + 1)[: len(looks)])
    observed = d.sum(axis=1)
    total = signs.shape[0] + 1
    active = np.ones(signs.shape[0], dtype=bool)
    rejected = 0
    winner = np.zeros(len(looks), dtype=np.int8)
    needed = np.full(len(looks), np.inf)
    paths = np.zeros((0, signs.shape[0]))
    for k in range(len(looks)):
        if k % CHUNK == 0:  # the flipped paths a few looks at a time: a clear pair stops early
            paths = np.abs(d[k : k + CHUNK] @ signs.T)
        room = int(np.floor(alpha * min(1.0, float(seen[k])) ** SPENDING * total + 1e-9)) - rejected
        if room <= 0 or n[k] == 0:
            continue
        # every path in play (the observed one among them) by one rule: rejected when at most ``room``
        # paths in play reach its |T| (itself included) and |T| > 0
        others = paths[k % CHUNK][active]
        critical, beaten = _rejections(others, abs(observed[k]), room)
        needed[k] = critical / n[k]
        if abs(observed[k]) > critical:
            winner[k:] = 1 if observed[k] > 0 else -1
            needed[k + 1 :] = needed[k]
            if stop_at_claim:
                break
            continue
        index = np.flatnonzero(active)[beaten]
        rejected += len(index)
        active[index] = False
    estimate = null + np.where(n > 0, observed / np.maximum(n, 1), 0.0)
    return FlipPath(looks, winner, estimate, n, used, needed, seen)


def _rejections(others: np.ndarray, observed: float, room: int) -> tuple[float, np.ndarray]:
    """One look's rule over the paths in play (the flipped ones' |T|, ``others``, and the observed |T|):
    a path is rejected when at most ``room`` paths reach its |T| (itself included) and |T| > 0. Returns the
    |T| the observed path must exceed (the ``room``-th largest flipped one; 0 when fewer are in play) and
    which flipped paths are rejected (meaningful when the observed one is not). Linear time: a flipped path
    above that value is reached by at most room − 1 others and itself; one equal to it only when exactly
    ``room`` flipped paths reach it and the observed one does not."""
    if room > len(others):
        return 0.0, others > 0
    critical = float(np.partition(others, len(others) - room)[len(others) - room])
    beaten = others > critical
    if critical > 0 and observed < critical and int((others >= critical).sum()) == room:
        beaten |= others == critical
    return critical, beaten


@dataclass(frozen=True, eq=False)
class FlipRows:
    """A pair's annotations for :func:`flip_path`, in any order: each row's look (its HIT's place in the
    order HITs were handed in), worker, conversation and score in [0, 1]."""

    look: np.ndarray
    worker: np.ndarray
    item: np.ndarray
    score: np.ndarray


@dataclass(frozen=True)
class FlipVerdict:
    """The rule now: the estimate, the interval (:meth:`FlipPath.interval`; frozen at the look that
    rejected), the contributing workers and whether every planned conversation has been seen with no claim
    (nothing left to wait for)."""

    estimate: float
    low: float
    high: float
    workers: int
    finished: bool


def verdict(a: str, b: str, rows: FlipRows, planned: float, alpha: float, null: float = 0.5) -> FlipVerdict:
    """:func:`flip_path` over ``rows``, read at its last look."""
    if not len(rows.look):
        return FlipVerdict(null, 0.0, 1.0, 0, False)
    path = flip_path(a, b, rows.look, rows.worker, rows.item, rows.score, planned, alpha, null=null, stop_at_claim=True)
    k = len(path.looks) - 1
    claimed = (path.winner != 0).any()
    at = int(np.argmax(path.winner != 0)) if claimed else k
    low, high = path.interval(k, null)
    return FlipVerdict(
        float(path.estimate[at]), low, high, int(path.workers[at]), bool(not claimed and path.seen[k] >= 1.0)
    )
