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

from hitkit.material.gold import IS_GOLD

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


def split_gold(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the rows of real items, the rows of gold items) of an export table; every row is real in a table
    without :data:`IS_GOLD` (a study without gold items, or an older export)."""
    if IS_GOLD not in table.columns:
        return table, table.iloc[0:0]
    gold = pd.to_numeric(table[IS_GOLD], errors="coerce").fillna(0).astype(int).to_numpy() == 1
    real = table.loc[~gold].reset_index(drop=True)
    real.attrs = dict(table.attrs)
    return real, table.loc[gold].reset_index(drop=True)


def gold_verdicts(
    gold: pd.DataFrame, *, upper_below: float | None = None, misses: int | None = None, level: float = 0.95
) -> dict[str, bool]:
    """Each worker's QC verdict from their gold answers (:data:`GOLD_COLUMNS`): False when the upper end of
    the exact interval at ``level`` lies below ``upper_below``, or when ``misses`` or more answers are
    wrong; True otherwise. Without either rule nobody fails (gold is then only reported)."""
    if gold.empty:
        return {}
    items = gold["gold_items"].to_numpy(int)
    correct = gold["gold_correct"].to_numpy(int)
    failed = np.zeros(len(gold), dtype=bool)
    if upper_below is not None:
        _low, high = clopper_pearson(correct, items, level)
        failed |= high < upper_below
    if misses is not None:
        failed |= items - correct >= misses
    return {str(w): not bool(f) for w, f in zip(gold["worker_id"], failed)}


def verdict_rule(upper_below: float | None, misses: int | None, level: float = 0.95) -> str:
    """The gold QC rule in words, for the QC method's name and the report."""
    parts = []
    if upper_below is not None:
        parts.append(f"gold accuracy not surely below {upper_below:g} (upper end of the exact {level:.0%} interval)")
    if misses is not None:
        parts.append(f"fewer than {misses} gold items wrong")
    return " and ".join(parts)


def combine_verdicts(own: dict[str, bool | None], gold: dict[str, bool]) -> dict[str, bool | None]:
    """A worker's QC verdict from the protocol's own check and the gold rule: failed if either fails,
    passed if either passes and neither fails, None (not judged yet) where neither has a verdict."""
    out: dict[str, bool | None] = {}
    for worker in sorted(set(own) | set(gold)):
        verdicts = [v for v in (own.get(worker), gold.get(worker)) if v is not None]
        out[worker] = None if not verdicts else all(verdicts)
    return out
