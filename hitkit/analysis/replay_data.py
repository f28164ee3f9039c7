"""The observations ``hitkit replay`` takes from a finished study (:mod:`hitkit.analysis.replay` replays
the rule over them): a study's units and, per pair of systems, each observation's unit, cluster and
score, as each protocol's ``replay`` module reads them from its tables. Pure: numpy and pandas frames."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class PairData:
    """One pair's observations over the study: row i arrives with unit ``unit[i]``, belongs to cluster
    ``cluster[i]`` (0, 1, … in the order of the clusters' labels) and scores
    ``value[i]`` in [0, 1] (the pair's score rescaled from its bounds). ``planned``: the observations
    the finished study's design gives it (the sequence's bets are tuned there). ``held``: for rated HITs,
    the units that hold both systems whether or not they pass QC (the horizon's HITs still to come);
    None: the horizon is ``planned``."""

    a: str
    b: str
    unit: np.ndarray
    cluster: np.ndarray
    value: np.ndarray
    planned: float
    held: np.ndarray | None = None


@dataclass(frozen=True)
class ReplayData:
    """A study's units and every pair's observations, as a protocol's ``replay`` module reads them.

    ``units``: the counted assignments that carry answers, in the order they were handed in (the
    ``assignments`` table's order). ``exact``: the pairs use the exact per-observation sequence (bound
    ¼), else the bounded one over cluster means. ``null`` and ``bounds``: the score's null and range in
    the protocol's own units (the summary reports estimates there). ``holding`` and ``passing``: for rated
    HITs, which units hold two or more systems and which of those pass their own QC test (the share
    that scales the horizon); None elsewhere. ``tables``: the tables the protocol's ``comparisons`` read
    (for the check against the live rule). ``unit_name``: what a unit is, in words."""

    task: str
    units: list[str]
    systems: list[str]
    pairs: list[PairData]
    null: float = 0.5
    bounds: tuple[float, float] = (0.0, 1.0)
    exact: bool = False
    holding: np.ndarray | None = None
    passing: np.ndarray | None = None
    tables: dict | None = None
    unit_name: str = "HITs"

    @property
    def watched(self) -> list[PairData]:
        """The pairs a study-level decision waits for: those the design gives observations (as
        :func:`hitkit.running.stopping.compute` leaves out pairs the material never compares)."""
        return [p for p in self.pairs if p.planned > 0]


def pair_data(
    a: str,
    b: str,
    rows_unit: np.ndarray,
    rows_cluster: Sequence,
    rows_value: np.ndarray,
    *,
    bounds: tuple[float, float],
    planned: float | None = None,
    held: np.ndarray | None = None,
) -> PairData:
    """:class:`PairData` from a pair's rows: ``rows_value`` in ``bounds`` is rescaled to [0, 1]; cluster
    labels become 0, 1, … in sorted order; ``planned`` defaults to the pair's clusters."""
    lo, hi = bounds
    value = (np.asarray(rows_value, dtype=float) - lo) / (hi - lo)
    if len(value) and (value.min() < -1e-9 or value.max() > 1 + 1e-9):
        raise ValueError(f"{a}–{b}: a score lies outside its bounds [{lo}, {hi}]")
    # ids in the labels' sorted order: clusters first seen in one unit keep that order in the sequence,
    # as the live rule's ordering of, e.g., a Spot The Bot assignment's conversations by name
    labels = {c: i for i, c in enumerate(sorted(set(rows_cluster)))}
    cluster = np.array([labels[c] for c in rows_cluster], dtype=int)
    return PairData(
        a,
        b,
        np.asarray(rows_unit, dtype=int),
        cluster,
        np.clip(value, 0.0, 1.0),
        float(len(labels)) if planned is None else float(planned),
        held,
    )


def all_pairs(systems: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of systems, the first before the second by name (the rule's orientation)."""
    return list(combinations(sorted(systems), 2))


def full_data_estimate(data: ReplayData, pair: PairData) -> float | None:
    """The pair's estimate on all its data, in the protocol's units: the mean of its cluster means
    (bounded) or of its observations (exact); None without observations."""
    if not len(pair.value):
        return None
    if data.exact:
        mean = float(pair.value.mean())
    else:
        sums = np.bincount(pair.cluster, weights=pair.value)
        mean = float((sums / np.bincount(pair.cluster)).mean())
    lo, hi = data.bounds
    return lo + (hi - lo) * mean


def direction(data: ReplayData, estimate: float | None) -> int:
    """+1 when the full data favour a (estimate above the null), −1 b, 0 neither or no data."""
    if estimate is None or math.isclose(estimate, data.null, abs_tol=1e-12):
        return 0
    return 1 if estimate > data.null else -1


def unit_order(in_dir, assignment_ids: Sequence[str]) -> list[str]:
    """The units of a study folder: the counted assignments of ``assignments.csv`` that carry answers
    (``assignment_ids``: the task table's), in the table's order, the order the work was handed in;
    without ``assignments.csv``, the assignments in order of their first answer."""
    from pathlib import Path

    from hitkit.analysis.tables import counted, read_assignments, table_path

    answered = dict.fromkeys(str(a) for a in assignment_ids)
    if not table_path(Path(in_dir) / "assignments.csv").exists():
        return list(answered)
    return [a for a in counted(read_assignments(in_dir))["assignment_id"].astype(str) if a in answered]


def pairs_from_rows(
    rows,
    systems: Sequence[str],
    units: Sequence[str],
    *,
    bounds: tuple[float, float],
    planned: dict | None = None,
    held: dict | None = None,
) -> list[PairData]:
    """Every pair of ``systems`` from a frame of observation rows (columns x, y with x before y by name,
    value in ``bounds``, cluster, unit: the assignment it arrives with); a pair without rows has none.
    Rows whose unit is not among ``units`` (work that does not count) are left out."""
    index = {u: i for i, u in enumerate(units)}
    at = rows["unit"].astype(str).map(index)
    rows = rows[at.notna()].assign(_at=at[at.notna()].astype(int))
    groups = {key: group for key, group in rows.groupby(["x", "y"], sort=False)}
    out = []
    for x, y in all_pairs(systems):
        group = groups.get((x, y))
        if group is None:
            group = rows.iloc[:0]
        out.append(
            pair_data(
                x,
                y,
                group["_at"].to_numpy(int),
                list(group["cluster"]),
                group["value"].to_numpy(float),
                bounds=bounds,
                planned=None if planned is None else planned.get((x, y), 0.0),
                held=None if held is None else held.get((x, y), np.zeros(0, dtype=int)),
            )
        )
    return out
