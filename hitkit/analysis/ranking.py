"""Ranking shared by the protocols: ranks of scores, 95 % rank ranges from bootstrap ranks, and
clusters of systems whose ranges overlap (Dušek et al. 2018), as Spot The Bot's TrueSkill and
win-rate rankings and its stability curve use them. Arrays in, arrays out."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

TAIL = 0.025
"""Share of bootstrap ranks dropped at each end of a system's rank range (a 95 % range)."""
RANK_DECIMALS = 9
"""Scores equal to this many decimals share a rank: symmetric data gives scores that differ only by float noise."""


def ranks(score: np.ndarray) -> np.ndarray:
    """Rank 1 = highest score along the last axis; equal scores share the lower rank."""
    return stats.rankdata(-np.round(score, RANK_DECIMALS), method="min", axis=-1).astype(int)


def rank_range(boot_ranks: np.ndarray, point_ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each system's 95 % rank range: drop ``floor(2.5 % · n_boot)`` bootstrap ranks at each end."""
    n_boot = boot_ranks.shape[0]
    if n_boot == 0:
        return point_ranks, point_ranks
    drop = math.floor(TAIL * n_boot)
    ordered = np.sort(boot_ranks, axis=0)
    return ordered[drop], ordered[n_boot - 1 - drop]


def clusters(low: np.ndarray, high: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Order of systems and cluster label per system: ranges that overlap merge, transitively.

    Systems are grouped into connected components of overlapping (closed) rank ranges; the
    components are ordered by their best rank, systems within one by score (highest first). The
    label is the ``(first,last)`` position of the system's component in that order, e.g.
    ``(2,3)``. Returns (order as indices into the inputs, labels in input order).
    """
    n = len(low)
    by_low = sorted(range(n), key=lambda i: (low[i], high[i], -score[i]))
    component = np.zeros(n, dtype=int)
    current, reach = -1, -math.inf
    for i in by_low:
        if low[i] > reach:
            current += 1
            reach = high[i]
        else:
            reach = max(reach, high[i])
        component[i] = current
    order = sorted(range(n), key=lambda i: (component[i], -score[i]))
    labels = [""] * n
    position = 0
    for c in range(current + 1):
        members = [i for i in order if component[i] == c]
        for i in members:
            labels[i] = f"({position + 1},{position + len(members)})"
        position += len(members)
    return np.array(order, dtype=int), labels


def compared_ranks(score: np.ndarray, compared: np.ndarray) -> np.ndarray:
    """Ranks that claim no order between systems never compared with each other.

    ``compared[i, j]``: systems i and j met directly (a vote, a game). System j is placed above i only
    where a chain of direct comparisons, each won on score, leads from j down to i (j beat k, k beat i);
    rank = 1 + the number of systems placed above. Two systems no such chain orders (an adaptive design
    that never paired them, each only beaten by the best) share a rank: tied, their order unknown. Where
    every pair met this is :func:`ranks`.
    """
    return (1 + ordered_above(score, compared).sum(axis=0)).astype(int)


def ordered_above(score: np.ndarray, compared: np.ndarray) -> np.ndarray:
    """[j, i] True where a chain of direct comparisons (``compared``), each won on score, places j above i."""
    score = np.round(np.asarray(score, dtype=float), RANK_DECIMALS)
    reach = np.asarray(compared, dtype=bool) & (score[:, None] > score[None, :])
    for k in range(len(score)):  # transitive closure (Warshall)
        reach |= reach[:, [k]] & reach[[k], :]
    return reach


def widen_unordered(
    low: np.ndarray, high: np.ndarray, score: np.ndarray, compared: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rank ranges where two systems no chain of direct comparisons orders (:func:`ordered_above`) both
    span the union of their ranges, so :func:`clusters` puts them in one cluster: no order claimed."""
    low, high = np.array(low, dtype=float), np.array(high, dtype=float)
    reach = ordered_above(score, compared)
    unordered = ~(reach | reach.T) & ~np.eye(len(low), dtype=bool)
    changed = True
    while changed:
        changed = False
        for i, j in zip(*np.nonzero(unordered)):
            lo, hi = min(low[i], low[j]), max(high[i], high[j])
            if (low[i], high[i]) != (lo, hi):
                low[i], high[i], changed = lo, hi, True
    return low, high
