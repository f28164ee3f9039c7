"""Choices every analysis shares: multiple comparisons, duplicate rows, clustered resampling.

METHODS §2 ("Real data has warts", "Multiple comparisons") and §2b ("Inference that respects who
produced the data") ask for one policy across modules, named in the output. This module holds
those policies as small pure functions so that every protocol applies them the same way:

- :func:`adjust` — family-wise corrections of a family of p-values: ``bonferroni`` (default; the
  one the Spot The Bot paper used for its survival tests), ``holm`` (Holm 1979: uniformly more
  powerful, same family-wise guarantee) or ``none``.
- :func:`apply_duplicate_policy` — what to do with rows that repeat a key (the same worker
  annotating the same thing twice): ``first`` (default: keep the first occurrence, which is what
  the annotator saw first), ``last``, ``drop`` (drop every copy) or ``error`` (refuse, as before).
- :func:`cluster_weights` — a bootstrap that resamples clusters (workers, conversations, items):
  each resample draws as many clusters as there are, with replacement, and every row of a drawn
  cluster comes along as often as its cluster was drawn.
- :func:`bootstrap_interval` — the 95 % interval read from such resamples: the *expanded*
  percentile interval (Hesterberg 2015), which widens the plain percentile interval by the
  small-sample factor √(C/(C − 1)) · t_{C−1} / z for C clusters. With 24 workers the plain one
  covers 92.7 % (``benchmarks/coverage.py``); a bootstrap of few clusters is too narrow.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from hitkit.errors import InputError

Correction = Literal["bonferroni", "holm", "none"]
CORRECTIONS: tuple[str, ...] = ("bonferroni", "holm", "none")
DEFAULT_CORRECTION: Correction = "bonferroni"

DuplicatePolicy = Literal["first", "last", "drop", "error"]
DUPLICATE_POLICIES: tuple[str, ...] = ("first", "last", "drop", "error")
DEFAULT_DUPLICATES: DuplicatePolicy = "first"


class DuplicateRowsWarning(UserWarning):
    """Rows that repeat a key were kept, dropped or merged by the duplicate policy."""


def check_correction(correction: str) -> Correction:
    """``correction`` if it is one of :data:`CORRECTIONS`, else ValueError naming the choices."""
    if correction not in CORRECTIONS:
        raise ValueError(f"correction={correction!r}; use one of {', '.join(CORRECTIONS)}")
    return correction  # type: ignore[return-value]


def adjust(p_values: Sequence[float] | np.ndarray, correction: Correction = DEFAULT_CORRECTION) -> np.ndarray:
    """Family-wise adjusted p-values, in input order; NaN stays NaN and is not counted.

    ``bonferroni``: min(1, m·p). ``holm``: step-down, min(1, max over j ≤ i of (m − j + 1)·p_(j))
    in sorted order. ``none``: p unchanged. m is the number of non-NaN p-values.
    """
    check_correction(correction)
    p = np.asarray(p_values, dtype=float)
    out = p.copy()
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0 or correction == "none":
        return out
    if correction == "bonferroni":
        out[ok] = np.minimum(1.0, m * p[ok])
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out


def correction_label(correction: str) -> str:
    """How a table or a sentence names the correction: e.g. "Bonferroni-corrected"."""
    return {
        "bonferroni": "Bonferroni-corrected",
        "holm": "Holm-corrected",
        "none": "not corrected for multiple comparisons",
    }[correction]


def check_duplicates_policy(policy: str) -> DuplicatePolicy:
    """``policy`` if it is one of :data:`DUPLICATE_POLICIES`, else ValueError naming the choices."""
    if policy not in DUPLICATE_POLICIES:
        raise ValueError(f"duplicates={policy!r}; use one of {', '.join(DUPLICATE_POLICIES)}")
    return policy  # type: ignore[return-value]


def apply_duplicate_policy(
    table: pd.DataFrame,
    key: Sequence[str],
    policy: DuplicatePolicy,
    *,
    what: str,
    source,
    unit: Sequence[str] | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Resolve rows whose ``unit`` columns repeat within one ``key``; returns (table, report).

    A *unit* is the group of rows that belong together (for Spot The Bot: one segment
    annotation, both entities; default: one row). Units that share ``key`` are duplicates:
    ``first`` keeps the earliest unit of each key, ``last`` the latest, ``drop`` removes every unit
    of a repeated key, ``error`` raises :class:`~hitkit.errors.InputError` at the first repeat
    (``source``: the file, for the message). The report says what happened:
    ``{"policy", "keys", "rows_removed"}`` — keys that repeated and rows taken out — and a
    :class:`DuplicateRowsWarning` names them, so that no repeat passes unnoticed.
    """
    check_duplicates_policy(policy)
    key = list(key)
    unit_cols = list(unit) if unit is not None else None
    frame = table.reset_index(drop=True)
    frame["_row"] = table.index.to_numpy()
    frame["_unit"] = frame.groupby(unit_cols, sort=False).ngroup() if unit_cols else np.arange(len(frame))
    units = frame.drop_duplicates("_unit")[key + ["_unit", "_row"]]
    repeated = units.duplicated(key, keep=False)
    report = {"policy": policy, "keys": int(units[repeated].drop_duplicates(key).shape[0]), "rows_removed": 0}
    if not repeated.any():
        return table, report
    if policy == "error":
        first = units[units.duplicated(key, keep="first")].iloc[0]
        row = first["_row"]
        row = row.item() if isinstance(row, np.generic) else row
        where = (
            {"path": source, "line": int(row) + 2} if hasattr(source, "suffix") else {"path": f"{source} row {row!r}"}
        )
        raise InputError(
            message=f"{what} repeats ({', '.join(f'{k}={first[k]!r}' for k in key)}); "
            "choose a duplicate policy (first, last or drop: `--duplicates`) to "
            "analyse the file anyway",
            **where,
        )
    if policy == "drop":
        keep_units = set(units.loc[~repeated, "_unit"])
    else:
        keep_units = set(units.drop_duplicates(key, keep=policy)["_unit"])
    keep = frame["_unit"].isin(keep_units).to_numpy()
    report["rows_removed"] = int((~keep).sum())
    warnings.warn(
        f"{report['keys']} {what} key(s) repeat; duplicate policy '{policy}' removed {report['rows_removed']} row(s)",
        DuplicateRowsWarning,
        stacklevel=2,
    )
    return table[keep], report


def duplicate_warnings(reports: Sequence[tuple[str, dict | None]]) -> list[str]:
    """One warning line per duplicate report that removed rows: ``(what repeated, report)`` pairs,
    e.g. ``("rating key(s) (assignment, conversation, criterion)", report)``."""
    return [
        f"{report['keys']} {what} repeat; duplicate policy '{report['policy']}' removed {report['rows_removed']} row(s)"
        for what, report in reports
        if report and report.get("rows_removed")
    ]


def cluster_codes(labels: Sequence | np.ndarray) -> tuple[np.ndarray, int]:
    """Integer cluster index per row (0 … C−1, in sorted label order) and the number of clusters.

    Sorted, so that a seeded bootstrap draws the same clusters whatever the order of the rows (a
    table read from CSV, Parquet or the database gives the same intervals).
    """
    codes, uniques = pd.factorize(pd.Series(np.asarray(labels)), sort=True)
    return codes.astype(np.int64), len(uniques)


def cluster_weights(cluster: np.ndarray, n_clusters: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """How often each row is in each cluster-bootstrap resample: [n_boot, n_rows] integers.

    Each resample draws ``n_clusters`` clusters uniformly with replacement; a row's weight is the
    number of times its cluster was drawn. With one row per cluster this is the ordinary
    bootstrap of rows.
    """
    counts = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot)
    return counts[:, cluster]


INTERVAL_METHOD = "expanded percentile"
"""How :func:`bootstrap_interval` reads an interval, as summary.json records it (``interval_method``)."""


def expanded_tail(n_clusters: int, level: float = 0.95) -> float:
    """The tail share each end of an expanded percentile interval drops, for ``n_clusters`` clusters.

    Hesterberg (2015, "What teachers should know about the bootstrap", The American Statistician
    69:371–386): the bootstrap distribution of a mean over n units has the spread of the
    ddof-0 standard error, so percentile intervals are too narrow for small n. The expanded
    interval reads the percentiles at α′/2 = Φ(−√(n/(n − 1)) · t_{1−α/2, n−1}) instead of α/2;
    n is the number of clusters resampled. At n = 24 that is 1.7 % instead of 2.5 %; it tends to
    α/2 as n grows. With fewer than 2 clusters, α/2.
    """
    from scipy import special  # t quantile and normal tail as scipy.stats computes them, without its import

    half = (1 - level) / 2
    if n_clusters < 2:
        return half
    z = math.sqrt(n_clusters / (n_clusters - 1)) * special.stdtrit(n_clusters - 1, 1 - half)
    return float(special.ndtr(-z))


def bootstrap_interval(
    boot: np.ndarray, n_clusters: Sequence[int] | np.ndarray | int, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) per column of ``boot`` [n_boot, statistics]: the expanded percentile interval.

    ``n_clusters`` is, per statistic (or one for all), the number of clusters that hold rows of
    that statistic (the workers who rated that system, the conversations of that pair): the
    sample size the small-sample expansion of :func:`expanded_tail` is for. NaN resamples (a
    statistic undefined in a resample) are left out; a column without any is NaN.
    """
    boot = np.asarray(boot, dtype=float)
    counts = np.broadcast_to(np.asarray(n_clusters), boot.shape[1:])
    low, high = np.full(boot.shape[1:], math.nan), np.full(boot.shape[1:], math.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: NaN interval
        for index in np.ndindex(*boot.shape[1:]):
            tail = 100 * expanded_tail(int(counts[index]), level)
            column = boot[(slice(None),) + index]
            low[index], high[index] = np.nanpercentile(column, [tail, 100 - tail])
    return low, high


def clusters_per_column(codes: np.ndarray, member: np.ndarray) -> np.ndarray:
    """How many distinct clusters (``codes``, one per row) hold a row of each column of ``member``
    [rows, columns] (non-zero = the row belongs to that column's statistic)."""
    member = np.asarray(member) != 0
    return np.array([np.unique(codes[member[:, j]]).size for j in range(member.shape[1])], dtype=int)


def fisher_interval(r: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """Fisher-z interval for a Pearson r over ``n`` pairs: tanh(atanh r ± z/√(n − 3)); NaN if n ≤ 3."""
    from scipy import stats

    if n <= 3 or math.isnan(r) or abs(r) >= 1:
        return (r, r) if abs(r) == 1 and n > 3 else (math.nan, math.nan)
    half = stats.norm.ppf(0.5 + level / 2) / math.sqrt(n - 3)
    z = math.atanh(r)
    return math.tanh(z - half), math.tanh(z + half)
