"""One observation per worker: what a stopping rule's bounded confidence sequence takes from a crowd in
which a few workers do most of the HITs.

A worker's answers share their taste, however many HITs they do. Counting each HIT as an independent
draw (as the per-HIT sequence did) lets a heavy worker's taste enter the sequence again and again:
with 5 workers doing 70 % of 300 pairwise HITs of two equal systems, that sequence claimed a difference
in a third to three fifths of simulated studies (benchmarks/adaptive.py). A returning worker never adds
a fresh draw of the crowd's taste, so here a worker gives the sequence one observation, fixed when it
arrives:

* the observation is the mean score of the worker's **first HIT that holds the pair** (their later HITs
  on the pair are left out of the sequence: they would repeat what it already knows of that worker);
* where items are shared between workers (a prompt voted on by several workers, a Spot The Bot
  conversation whose segments go to several annotators, a rating block taken by several workers) only
  the HIT's answers on items no earlier observation used count; a HIT with none of those adds nothing,
  and its worker may still contribute a later HIT that has some.

Which answers make an observation depends only on who did which HIT on which items and when, never on
the answers. So when workers are drawn independently from the crowd, items independently from the
material, and who does which HIT when is independent of their tastes and answers (a fixed design: the
order and packing of HITs do not depend on the answers), each observation is a fresh worker on fresh
items: given every earlier observation its expected value is the crowd's mean score (the average over
workers and items of a worker's expected score on an item). Each observation is bounded, so the hedged
betting confidence sequence over them (:mod:`hitkit.analysis.betting`) is exactly valid, in finite
samples and at every look, whatever the workers' tastes and however the work is spread among them. With
an adaptive design the pair a HIT holds depends on the answers so far (a worker's own earlier answers
included), which the guarantee does not cover exactly; benchmarks/adaptive.py measures the adaptive
design's false claims.

Pure functions over numpy/pandas arrays; no database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

PRIOR_HITS = 10
"""Pseudo-HITs that each gave an observation, added when the share of a pair's HITs that do is projected
forward (:func:`projected`): the share starts at 1 and moves to the observed one as HITs arrive, so that
a few early repeats do not shrink a pair's horizon to nothing."""


@dataclass(frozen=True)
class Contributions:
    """The sequence's observations for one pair: each contributing worker's mean score, in arrival order."""

    means: np.ndarray
    workers: list[str]
    hits: list[str]
    """The HIT (assignment) each observation comes from."""
    spent: int
    """The HITs holding the pair so far, contributing or not: the part of the pair's plan already used."""


def _ids(column: np.ndarray | Sequence | None, n: int, prefix: str) -> np.ndarray:
    """Identifiers as strings; a missing one (None, NaN, empty) is unique to its row, shared with no other."""
    import pandas as pd  # here, not at the top: the scheduler loads this module without needing pandas

    if column is None:
        return np.array([f"{prefix}{i}" for i in range(n)], dtype=object)
    out = pd.Series(list(column), dtype=object)
    missing = out.isna() | (out.astype(str).str.strip() == "")
    out = out.astype(str)
    out[missing] = [f"{prefix}{i}" for i in np.flatnonzero(missing.to_numpy())]
    return out.to_numpy(dtype=object)


def worker_contributions(
    values: np.ndarray | Sequence[float],
    workers: np.ndarray | Sequence,
    hits: np.ndarray | Sequence,
    *,
    order: Sequence | None = None,
    items: np.ndarray | Sequence | None = None,
) -> Contributions:
    """The sequence's observations from per-answer ``values`` with each answer's worker, HIT (assignment)
    and, where items are shared between workers, item: one per worker, the mean of their first HIT's
    answers on items no earlier observation used (the module's docstring says why this is exactly valid).

    HITs are taken in ``order`` (HIT ids, the arrival order; those it does not name follow in order of
    first appearance). A HIT is one worker's; if its rows name several workers, the first one counts.
    A missing worker id is a worker of their own (never a returning one); a missing item id an item of its own."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if not (len(workers) == len(hits) == n) or (items is not None and len(items) != n):
        raise ValueError(
            f"worker_contributions: {n} values, {len(workers)} workers, {len(hits)} HITs"
            + ("" if items is None else f", {len(items)} items")
            + "; each answer needs one of each"
        )
    if n == 0:
        return Contributions(np.zeros(0), [], [], 0)
    import pandas as pd

    hit_ids = _ids(hits, n, "\0hit")
    frame = pd.DataFrame(
        {
            "value": values,
            "worker": _ids(workers, n, "\0worker"),
            "hit": hit_ids,
            "item": _ids(items, n, "\0item"),
        }
    )
    first_seen = list(dict.fromkeys(hit_ids))
    if order is not None:
        rank = {str(h): i for i, h in enumerate(order)}
        first_seen.sort(key=lambda h: rank.get(h, len(rank)))  # stable: unnamed HITs keep their first appearance
    groups = dict(tuple(frame.groupby("hit", sort=False)))
    used_workers: set[str] = set()
    used_items: set[str] = set()
    means: list[float] = []
    who: list[str] = []
    where: list[str] = []
    for hit in first_seen:
        group = groups[hit]
        worker = group["worker"].iloc[0]
        if worker in used_workers:
            continue
        fresh = group[~group["item"].isin(used_items)] if items is not None else group
        if fresh.empty:
            continue  # nothing new in this HIT; the worker may still bring fresh items later
        means.append(float(fresh["value"].mean()))
        who.append(worker)
        where.append(hit)
        used_workers.add(worker)
        used_items.update(fresh["item"])
    return Contributions(np.asarray(means, dtype=float), who, where, len(first_seen))


def projected(n: int, spent: int, planned: float) -> float | None:
    """The observations a pair can expect by the end of its plan: those it has, plus the HITs still planned
    for it (``planned`` − ``spent``) times the share of its HITs so far that gave one (with
    :data:`PRIOR_HITS` contributing pseudo-HITs). None before any HIT (then the plan itself is the horizon).
    Computed from the data so far only; it sets futility's horizon, never the bets."""
    if spent <= 0:
        return None
    share = min(1.0, (n + PRIOR_HITS) / (spent + PRIOR_HITS))
    return n + max(planned - spent, 0.0) * share
