"""The answers ``hitkit replay`` takes from a finished study (:mod:`hitkit.analysis.replay` replays the
rule over them): a study's units and, per pair of systems, each answer's unit, worker, item, cluster and
score, as each protocol's ``replay`` module reads them from its tables, with the per-unit means the
per-worker rule (:func:`hitkit.analysis.contributions.worker_contributions`) takes its observations
from. Pure: numpy and pandas frames."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class PairData:
    """One pair's answers over the study: row i arrives with unit ``unit[i]``, belongs to cluster
    ``cluster[i]`` (0, 1, … in the order of the clusters' labels: a HIT, a conversation, a battle; what
    the full-data estimate averages over) and scores ``value[i]`` in [0, 1] (the pair's score rescaled
    from its bounds). ``worker[i]``: its worker's code (default: each unit its own worker); ``item[i]``:
    its conversation's code for Spot The Bot's sign-flip test (a conversation counts for the worker who
    reached it first), else None. ``planned``: what the finished study's design plans for the pair (the
    sequence's bets are tuned there). ``held``: for rated HITs, the units that hold both systems whether or not they give an
    observation (the horizon's HITs still to come); None: the horizon is projected from the pair's own
    HITs (:func:`hitkit.analysis.contributions.projected`).

    Derived (per unit holding the pair, in unit order): ``hit_unit``, ``hit_worker`` (the worker of its
    first row), ``hit_mean`` (its rows' mean), the per-worker rule's candidate observations."""

    a: str
    b: str
    unit: np.ndarray
    cluster: np.ndarray
    value: np.ndarray
    planned: float
    held: np.ndarray | None = None
    worker: np.ndarray | None = None
    item: np.ndarray | None = None
    hit_unit: np.ndarray = field(init=False, repr=False)
    hit_worker: np.ndarray = field(init=False, repr=False)
    hit_mean: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        unit = np.asarray(self.unit, dtype=int)
        worker = unit if self.worker is None else np.asarray(self.worker, dtype=int)
        hits, first, inverse = np.unique(unit, return_index=True, return_inverse=True)
        counts = np.bincount(inverse, minlength=len(hits))
        sums = np.bincount(inverse, weights=self.value, minlength=len(hits))
        setattr_ = object.__setattr__  # frozen: derived fields are set once, here
        setattr_(self, "hit_unit", hits)
        setattr_(self, "hit_worker", worker[first] if len(unit) else np.zeros(0, dtype=int))
        setattr_(self, "hit_mean", sums / np.maximum(counts, 1))


@dataclass(frozen=True)
class ReplayData:
    """A study's units and every pair's observations, as a protocol's ``replay`` module reads them.

    ``units``: the counted assignments that carry answers, in the order they were handed in (the
    ``assignments`` table's order). ``null`` and ``bounds``: the score's null and range in the
    protocol's own units (the summary reports estimates there). ``fresh_items``: the rule is Spot The
    Bot's sign-flip test (:mod:`hitkit.analysis.signflip`; each pair's rows name their conversations, and
    a conversation counts for the worker who reached it first), not the per-worker sequence (the name is
    the earlier rule's, whose observations took only conversations no earlier one used). ``holding``: for
    rated HITs, which units hold two or more systems (the share of them that gave an observation scales
    the horizon); None elsewhere. ``tables``: the tables the protocol's ``comparisons`` read, and ``plan``
    the plan they take (default: each pair's ``planned``), for the check against the live rule.
    ``unit_name``: what a unit is, in words."""

    task: str
    units: list[str]
    systems: list[str]
    pairs: list[PairData]
    null: float = 0.5
    bounds: tuple[float, float] = (0.0, 1.0)
    fresh_items: bool = False
    holding: np.ndarray | None = None
    tables: dict | None = None
    plan: dict | None = None
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
    rows_worker: np.ndarray | None = None,
    rows_item: np.ndarray | None = None,
) -> PairData:
    """:class:`PairData` from a pair's rows: ``rows_value`` in ``bounds`` is rescaled to [0, 1]; cluster
    labels become 0, 1, … in sorted order; ``planned`` defaults to the pair's clusters; ``rows_worker``
    and ``rows_item``: the rows' worker and conversation codes (None: each unit its own worker; no
    conversations, the per-worker sequence)."""
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
        rows_worker,
        rows_item,
    )


def all_pairs(systems: Sequence[str]) -> list[tuple[str, str]]:
    """Every pair of systems, the first before the second by name (the rule's orientation)."""
    return list(combinations(sorted(systems), 2))


def full_data_estimate(data: ReplayData, pair: PairData) -> float | None:
    """The pair's estimate on all its answers, in the protocol's units: the mean of its cluster means
    (every answer counts, whoever gave it: the data's own direction, not the rule's); None without answers."""
    if not len(pair.value):
        return None
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
    fresh_items: bool = False,
) -> list[PairData]:
    """Every pair of ``systems`` from a frame of answer rows (columns x, y with x before y by name, value
    in ``bounds``, cluster, unit: the assignment it arrives with, and worker: who gave it, missing = a
    worker of its own, as :func:`hitkit.analysis.contributions.worker_contributions` takes them; with
    ``fresh_items``, Spot The Bot's sign-flip test, an ``item`` column too: each row's conversation); a
    pair without rows has none. Rows whose unit is not among ``units`` (work that does not count) are left
    out."""
    from hitkit.analysis.contributions import _ids  # the live rule's reading of worker and item ids

    index = {u: i for i, u in enumerate(units)}
    at = rows["unit"].astype(str).map(index)
    rows = rows[at.notna()].assign(_at=at[at.notna()].astype(int))
    worker_ids = _ids(rows["worker"].to_numpy(), len(rows), "\0worker")
    rows = rows.assign(_worker=np.unique(worker_ids, return_inverse=True)[1] if len(rows) else [])
    if fresh_items:
        item_ids = _ids(rows["item"].to_numpy(), len(rows), "\0item")
        rows = rows.assign(_item=np.unique(item_ids, return_inverse=True)[1] if len(rows) else [])
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
                rows_worker=group["_worker"].to_numpy(int),
                rows_item=group["_item"].to_numpy(int) if fresh_items else None,
            )
        )
    return out
