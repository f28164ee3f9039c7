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
* where the protocol treats items as random draws shared between workers (Spot The Bot's conversations,
  whose segments go to several annotators: its default analysis clusters on them), only the HIT's answers
  on items no earlier observation used count (Spot The Bot: conversations); a HIT with none of those adds nothing, and its worker may
  still contribute a later HIT that has some.

**What is guaranteed.** Which answers make an observation depends only on who did which HIT on which
items and when, never on the answers. Assume (i) workers are drawn independently from the crowd, and
(ii) who does which HIT when, and which items each HIT holds, do not depend on the answers (a fixed
design). Then, given every earlier observation, an observation's expected value is the crowd's expected
score on its HIT's items (over workers), and each observation is bounded, so the hedged betting
confidence sequence over them (:mod:`hitkit.analysis.betting`) is exactly valid, in finite samples and at
every look, whatever the workers' tastes and however the work is spread among them, under the null that
this expected score is the null value on every HIT (the crowd is even on each HIT's items). With fresh
items (drawn independently from the material and each in one observation) the expected value is the
same for every observation, the crowd's mean over workers and items, and the null is that mean. Where
items are shared and the crowd is even only on average over the material (pairwise prompts, arena
prompt sets, rating blocks: the material is taken as fixed, as the default analyses take it), the
guarantee is approximate. With an adaptive design the pair a HIT holds depends on the answers so far (a
worker's own earlier answers included), which (ii) excludes; benchmarks/adaptive.py measures the
adaptive design's false claims.

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
    spent_at: np.ndarray | None = None
    """Per observation, the HITs holding the pair up to and including its own: what the plan had spent when it
    arrived (with ``items_at``, what :func:`tuning` projects the bets' horizon from)."""
    items_at: np.ndarray | None = None
    """Per observation, the items seen up to and including its HIT (None where items are not shared)."""


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
    planned_items: float | None = None,
) -> Contributions:
    """The sequence's observations from per-answer ``values`` with each answer's worker, HIT (assignment)
    and, where items are shared between workers, item: one per worker, the mean of their first HIT's
    answers on items no earlier observation used (the module's docstring says why this is exactly valid).

    With ``planned_items`` (the items the pair's plan holds) an observation takes at most
    :func:`items_per_observation` of its HIT's fresh items (in row order), sharing the fresh items left out
    among the workers still expected.

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
    seen_items: set[str] = set()
    means: list[float] = []
    who: list[str] = []
    where: list[str] = []
    spent_at: list[int] = []
    items_at: list[int] = []
    for k, hit in enumerate(first_seen):
        group = groups[hit]
        worker = group["worker"].iloc[0]
        if items is not None:
            seen_items.update(group["item"])
        if worker in used_workers:
            continue
        fresh = group[~group["item"].isin(used_items)] if items is not None else group
        if fresh.empty:
            continue  # nothing new in this HIT; the worker may still bring fresh items later
        if items is not None and planned_items is not None:
            cap = items_per_observation(len(means), len(seen_items), len(used_items), planned_items)
            fresh = fresh[fresh["item"].isin(list(dict.fromkeys(fresh["item"]))[:cap])]
        means.append(float(fresh["value"].mean()))
        who.append(worker)
        where.append(hit)
        spent_at.append(k + 1)
        items_at.append(len(seen_items))
        used_workers.add(worker)
        used_items.update(fresh["item"])
    return Contributions(
        np.asarray(means, dtype=float),
        who,
        where,
        len(first_seen),
        np.asarray(spent_at, dtype=float),
        np.asarray(items_at, dtype=float) if items is not None else None,
    )


def items_per_observation(n: int, seen: int, used: int, planned: float) -> int:
    """How many of a HIT's fresh items its observation takes where items are shared (Spot The Bot's
    conversations): the fresh items the plan has left (``planned`` − ``used``) shared among the new workers
    the pair can still expect (:func:`projected` − ``n``, from the ``n`` observations and ``seen`` items so
    far), at least one. An observation's variance is the worker's plus the items' divided by the items it
    takes, and a pair has at most one observation per worker and per item: where workers are many and
    items few, one item each gives the most observations; where a few workers do most of the work, whole
    HITs of items give the least noisy ones. Counts only, never an answer: the choice is part of the fixed
    design, so the guarantee holds."""
    remaining = max(planned - seen, 0.0) * min(1.0, (n + PRIOR_HITS) / (seen + PRIOR_HITS))
    return max(1, int((planned - used) / max(remaining, 1.0) + 1e-9))  # floor, robust to rounding


def projected(n: int, spent: int, planned: float) -> float | None:
    """The observations a pair can expect by the end of its plan: those it has, plus the HITs still planned
    for it (``planned`` − ``spent``) times the share of its HITs so far that gave one (with
    :data:`PRIOR_HITS` contributing pseudo-HITs). None before any HIT (then the plan itself is the horizon).
    Computed from the data so far only; it sets futility's horizon, never the bets."""
    if spent <= 0:
        return None
    share = min(1.0, (n + PRIOR_HITS) / (spent + PRIOR_HITS))
    return n + max(planned - spent, 0.0) * share


def tuning(spent_at: np.ndarray, planned: float) -> np.ndarray:
    """The horizon each observation's bet is tuned to: :func:`projected` from the observations before it
    and what the pair's plan had spent when it arrived (``spent_at``: HITs, or items where the plan counts
    items). A returning worker adds no observation, so with a long-tailed crowd a pair ends with far
    fewer observations than its planned HITs; bets tuned to the planned HITs are then too timid to settle
    it (benchmarks/replay_clear.py). The horizon is computed from counts of earlier HITs and observations
    only, never from an answer's value, and is fixed when the observation arrives, so the bets stay
    predictable and the sequence's guarantee is unchanged."""
    spent_at = np.asarray(spent_at, dtype=float)
    before = np.arange(len(spent_at), dtype=float)
    share = np.minimum(1.0, (before + PRIOR_HITS) / (spent_at + PRIOR_HITS))
    return np.where(spent_at > 0, before + np.maximum(planned - spent_at, 0.0) * share, float(planned))


def guarantee(fresh_items: str | None = None, adaptive: bool = False) -> str:
    """What the rule's intervals guarantee, in one sentence for the report's methods paragraph (the module's
    docstring gives the reasoning). ``fresh_items`` names the items an observation must not share with an
    earlier one (Spot The Bot: "conversations"), None where the material is taken as fixed."""
    first = "the first HIT of theirs that holds the pair" + (
        f", on {fresh_items} no earlier observation used" if fresh_items else ""
    )
    said = (
        f"Each watched pair took one observation per worker ({first}; their later HITs on it added none), so "
        "with probability at least 1 − α no interval excluded a true null at any look, whatever the workers' "
        "tastes and however many HITs each did, provided workers were independent draws from the crowd and "
        "who did which HIT, and what it held, did not depend on the answers"
    )
    if fresh_items:
        said += f" (the null: the crowd's mean over workers and {fresh_items})"
    else:
        said += " (the null: the crowd even on every HIT's items; on average over the material only, approximate)"
    if adaptive:
        said += "; the adaptive design chose HITs from the answers, so for this study the guarantee is approximate"
    return said + "."
