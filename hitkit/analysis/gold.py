"""Gold items: work whose right answer is known, scored per worker with an exact interval.

Each protocol knows its own gold (:mod:`hitkit.analysis.evidence` puts the columns in place): rating's
degraded copies (a copy should score below the worker's intact responses), the arena's control battles
(the real system should win), Spot The Bot's human–human conversations (a human speaker should be
labelled human). The accuracy's interval is the exact Clopper–Pearson interval (Clopper and Pearson
1934), which never claims more than the items show: for 3 of 3 it is [0.29, 1], not [1, 1].
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

GOLD_COLUMNS = ("worker_id", "gold_items", "gold_correct", "gold_accuracy", "gold_low", "gold_high")
"""Per worker: gold items answered, answered right, the share, and its exact 95 % interval."""


def clopper_pearson(correct: np.ndarray, items: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The exact (Clopper–Pearson) interval of ``correct`` of ``items`` (arrays), from the beta quantiles;
    0 of n starts at 0 and n of n ends at 1. NaN where ``items`` is 0."""
    k, n = np.asarray(correct, dtype=float), np.asarray(items, dtype=float)
    tail = (1 - level) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, stats.beta.ppf(tail, k, n - k + 1), 0.0)
        high = np.where(k < n, stats.beta.ppf(1 - tail, k + 1, n - k), 1.0)
    empty = n <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def gold_counts(workers, items, correct) -> pd.DataFrame:
    """:data:`GOLD_COLUMNS` from each worker's count of gold items and of right answers (workers without
    a gold item are left out)."""
    table = pd.DataFrame(
        {
            "worker_id": pd.Series(workers, dtype=object).astype(str).to_numpy(),
            "gold_items": np.asarray(items, dtype=int),
            "gold_correct": np.asarray(correct, dtype=int),
        }
    )
    table = table[table["gold_items"] > 0].sort_values("worker_id", ignore_index=True)
    table["gold_accuracy"] = table["gold_correct"] / table["gold_items"]
    table["gold_low"], table["gold_high"] = clopper_pearson(table["gold_correct"], table["gold_items"])
    return table[list(GOLD_COLUMNS)]


def gold_accuracy(answers: pd.DataFrame) -> pd.DataFrame:
    """:data:`GOLD_COLUMNS` from one row per gold item a worker answered (columns worker_id, correct)."""
    by_worker = answers.assign(correct=answers["correct"].astype(bool)).groupby(
        answers["worker_id"].astype(str), sort=True
    )["correct"]
    counts = by_worker.agg(["size", "sum"])
    return gold_counts(counts.index, counts["size"], counts["sum"])


def below_chance(gold: pd.DataFrame, chance: float) -> list[str]:
    """Workers whose whole interval lies below ``chance``: their gold answers are worse than guessing."""
    return sorted(gold.loc[gold["gold_high"] < chance, "worker_id"].astype(str))
