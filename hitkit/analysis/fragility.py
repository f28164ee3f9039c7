"""How fragile a ranking is: for each pair of adjacent systems, the fewest votes or ratings whose removal
would put the lower system level with or above the higher one (Broderick, Giordano and Meager's
"dropping a little data" question, asked of a leaderboard).

Two ways, by what a ranking's scores are:

- **Means** (live chat, rating: a system's mean z): exact. Removing ``a`` observations of the higher
  system and ``b`` of the lower one lowers the gap most by dropping the higher system's ``a`` largest
  values and the lower system's ``b`` smallest (any other choice leaves a larger mean above and a
  smaller one below), so the fewest removals is the least ``a + b`` over those choices, found with
  sorted cumulative sums. The other observations (and each worker's standardisation) are held fixed.
- **Fitted scores** (Bradley–Terry, win rates over games, where one vote moves several scores): the
  observations are ordered by their first-order effect on the gap (the influence function of a
  Bradley–Terry fit, or the derivative of a win rate), and the shortest prefix of that order whose
  removal flips the pair under the ranking's own fit is found by bisection, each candidate refitted.
  Where every smaller set can be tried (fewer than :data:`BRUTE_FORCE_SETS` subsets) they are, so the
  number is exact ("exact (all smaller sets tried)"); otherwise it is an upper bound ("first-order
  order, refitted: at most").

``fragility.csv`` has one row per adjacent pair: :data:`FRAGILITY_COLUMNS`.
"""

from __future__ import annotations

from itertools import combinations
from math import comb
from typing import Callable, Sequence

import numpy as np
import pandas as pd

FRAGILITY_COLUMNS = ("ranking", "higher", "lower", "gap", "removals", "observations", "method")
"""The ranking (its score), the adjacent pair, the gap in scores, the fewest removals that flip it (empty
when no removal can), the observations the ranking counts, and how the number was found."""

BRUTE_FORCE_SETS = 20_000
"""Up to this many smaller subsets are refitted to prove a refitted number exact."""

EXACT = "exact (sorted means)"
ALL_TRIED = "exact (all smaller sets tried)"
UPPER_BOUND = "first-order order, refitted: at most"
NO_FLIP = "no removal flips it"

Scores = Callable[[np.ndarray], np.ndarray]
"""Scores of every system (B × systems) for a batch of kept-observation masks (B × observations)."""


def mean_removals(higher: Sequence[float], lower: Sequence[float]) -> int | None:
    """The fewest observations to remove (at least one kept on each side) so that the higher group's
    mean is no longer above the lower group's; None when no removal can do it."""
    hi = np.sort(np.asarray(higher, dtype=float))[::-1]  # largest first: the ones to drop
    lo = np.sort(np.asarray(lower, dtype=float))  # smallest first
    n_hi, n_lo = len(hi), len(lo)
    if n_hi == 0 or n_lo == 0:
        return None
    a = np.arange(n_hi)  # removed from the top of the higher group
    mean_hi = (hi.sum() - np.r_[0.0, np.cumsum(hi)[:-1]]) / (n_hi - a)
    b = np.arange(n_lo)
    mean_lo = (lo.sum() - np.r_[0.0, np.cumsum(lo)[:-1]]) / (n_lo - b)  # non-decreasing in b
    # For each a, the least b whose mean reaches mean_hi[a] (a tiny tolerance: sums are rounded).
    need = np.searchsorted(mean_lo, mean_hi - 1e-12 * np.maximum(1.0, np.abs(mean_hi)), side="left")
    ok = need < n_lo
    if not ok.any():
        return None
    return int((a[ok] + need[ok]).min())


def mean_fragility(frame: pd.DataFrame, *, system: str, value: str, order: Sequence[str], ranking: str) -> pd.DataFrame:
    """:data:`FRAGILITY_COLUMNS` rows for a ranking by mean ``value`` per ``system``, adjacent pairs of
    ``order`` (best first)."""
    groups = {s: g[value].to_numpy(dtype=float) for s, g in frame.groupby(system)}
    rows = []
    for top, below in zip(order, order[1:]):
        hi, lo = groups.get(top, np.empty(0)), groups.get(below, np.empty(0))
        if len(hi) == 0 or len(lo) == 0:
            continue
        k = mean_removals(hi, lo)
        gap = float(hi.mean() - lo.mean())
        rows.append((ranking, top, below, gap, k, len(hi) + len(lo), EXACT if k is not None else NO_FLIP))
    return _frame(rows)


def _frame(rows: list) -> pd.DataFrame:
    out = pd.DataFrame(rows, columns=list(FRAGILITY_COLUMNS))
    out["removals"] = out["removals"].astype("Int64")
    return out


def flipped(scores: np.ndarray, higher: int, lower: int) -> np.ndarray:
    """Which rows of a B × systems score batch no longer put ``higher`` above ``lower``."""
    return scores[:, lower] >= scores[:, higher] - 1e-12


def refit_removals(
    n: int, scores: Scores, higher: int, lower: int, order: np.ndarray, *, limit: int = BRUTE_FORCE_SETS
) -> tuple[int | None, str]:
    """(fewest removals that flip ``higher`` over ``lower``, how it was found): bisection over prefixes of
    ``order`` (the observations that help most first) under ``scores``, then every smaller subset
    when there are at most ``limit`` of them."""
    order = np.asarray(order, dtype=np.int64)

    def flips(m: int) -> bool:
        keep = np.ones((1, n), dtype=bool)
        keep[0, order[:m]] = False
        return bool(flipped(scores(keep), higher, lower)[0])

    if flips(0):
        return 0, ALL_TRIED
    if len(order) == 0 or not flips(len(order)):
        return None, NO_FLIP
    lo, hi = 0, len(order)  # flips(hi) holds; flips(lo) does not (the data as they are rank higher first)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if flips(mid) else (mid, hi)
    if sum(comb(n, j) for j in range(1, hi)) > limit:
        return hi, UPPER_BOUND
    for size in range(1, hi):
        subsets = np.array(list(combinations(range(n), size)), dtype=np.int64)
        for start in range(0, len(subsets), 512):
            part = subsets[start : start + 512]
            keep = np.ones((len(part), n), dtype=bool)
            keep[np.arange(len(part))[:, None], part] = False
            if flipped(scores(keep), higher, lower).any():
                return size, ALL_TRIED
    return hi, ALL_TRIED


def bt_influence(first: np.ndarray, second: np.ndarray, outcome: np.ndarray, k: int) -> np.ndarray:
    """Each observation's first-order effect of its removal on every Bradley–Terry score (n × k): the
    influence ``H⁻¹ g_i`` of a logistic fit (ties half a win, a small ridge) at the full data's optimum."""
    first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    y = np.asarray(outcome, dtype=float)
    x = np.zeros((len(y), k))
    x[np.arange(len(y)), first] += 1.0
    x[np.arange(len(y)), second] -= 1.0
    theta = np.zeros(k)
    ridge = 1e-3
    for _ in range(100):  # Newton's method on the ridge-penalised log-likelihood
        p = 1.0 / (1.0 + np.exp(-(x @ theta)))
        grad = x.T @ (y - p) - ridge * theta
        hess = -(x.T * (p * (1 - p))) @ x - ridge * np.eye(k)
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    p = 1.0 / (1.0 + np.exp(-(x @ theta)))
    hess = -(x.T * (p * (1 - p))) @ x - ridge * np.eye(k)
    per = x * (y - p)[:, None]  # each observation's gradient
    return np.linalg.solve(hess, per.T).T


def rate_influence(winner: np.ndarray, loser: np.ndarray, decisive: np.ndarray, k: int) -> np.ndarray:
    """Each game's first-order effect of its removal on every system's win rate, wins / (wins +
    losses) over decisive games (n × k): removing one decisive game moves its two systems' rates by
    (rate − its result) / (games − 1)."""
    winner, loser = np.asarray(winner, dtype=np.int64), np.asarray(loser, dtype=np.int64)
    d = np.asarray(decisive, dtype=bool)
    wins = np.bincount(winner[d], minlength=k).astype(float)
    played = wins + np.bincount(loser[d], minlength=k)
    rate = np.divide(wins, played, out=np.full(k, 0.5), where=played > 0)
    spare = np.maximum(played - 1, 1)
    out = np.zeros((len(winner), k))
    rows = np.flatnonzero(d)
    out[rows, winner[d]] = (rate[winner[d]] - 1.0) / spare[winner[d]]
    out[rows, loser[d]] = rate[loser[d]] / spare[loser[d]]
    return out


def refit_fragility(
    systems: Sequence[str],
    order: Sequence[str],
    influence: np.ndarray,
    scores: Scores,
    *,
    ranking: str,
    limit: int = BRUTE_FORCE_SETS,
) -> pd.DataFrame:
    """:data:`FRAGILITY_COLUMNS` rows for a fitted ranking: ``systems`` index ``scores``' columns and
    ``influence``'s (observations × systems), ``order`` is the ranking, best first."""
    index = {s: i for i, s in enumerate(systems)}
    n = influence.shape[0]
    full = scores(np.ones((1, n), dtype=bool))[0]
    rows = []
    for top, below in zip(order, order[1:]):
        h, lo = index[top], index[below]
        effect = influence[:, h] - influence[:, lo]
        helpful = np.flatnonzero(effect < 0)
        helpful = helpful[np.argsort(effect[helpful], kind="stable")]
        k, method = refit_removals(n, scores, h, lo, helpful, limit=limit)
        rows.append((ranking, top, below, float(full[h] - full[lo]), k, n, method))
    return _frame(rows)
