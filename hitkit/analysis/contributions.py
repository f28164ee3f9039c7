"""One observation per worker: what a stopping rule's bounded confidence sequence takes from a crowd in
which a few workers do most of the HITs.

A worker's answers share their taste, however many HITs they do. Counting each HIT as an independent
draw (as the per-HIT sequence did) lets a heavy worker's taste enter the sequence again and again:
with 5 workers doing 70 % of 300 pairwise HITs of two equal systems, that sequence claimed a difference
in a third to three fifths of simulated studies (benchmarks/adaptive.py). A returning worker never adds
a fresh draw of the crowd's taste, so here a worker gives the sequence one observation, fixed when it
arrives: the mean score of the worker's **first HIT that holds the pair** (their later HITs on the pair
are left out of the sequence: they would repeat what it already knows of that worker). Spot The Bot,
whose conversations are random draws shared between workers, runs a sign-flip test instead
(:mod:`hitkit.analysis.signflip`).

**What is guaranteed.** Which answers make an observation depends only on who did which HIT on which
items and when, never on the answers. Assume (i) workers are drawn independently from the crowd, and
(ii) who does which HIT when, and which items each HIT holds, do not depend on the answers (a fixed
design). Then, given every earlier observation, an observation's expected value is the crowd's expected
score on its HIT's items (over workers), and each observation is bounded, so the hedged betting
confidence sequence over them (:mod:`hitkit.analysis.betting`) is exactly valid, in finite samples and at
every look, whatever the workers' tastes and however the work is spread among them, under the null that
this expected score is the null value on every HIT (the crowd is even on each HIT's items). Where
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
    arrived (what :func:`tuning` projects the bets' horizon from)."""


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
) -> Contributions:
    """The sequence's observations from per-answer ``values`` with each answer's worker and HIT
    (assignment): one per worker, the mean of their first HIT's answers (the module's docstring says why
    this is exactly valid).

    HITs are taken in ``order`` (HIT ids, the arrival order; those it does not name follow in order of
    first appearance). A HIT is one worker's; if its rows name several workers, the first one counts.
    A missing worker id is a worker of their own (never a returning one)."""
    values = np.asarray(values, dtype=float)
    n = len(values)
    if not (len(workers) == len(hits) == n):
        raise ValueError(
            f"worker_contributions: {n} values, {len(workers)} workers, {len(hits)} HITs; each answer needs one of each"
        )
    if n == 0:
        return Contributions(np.zeros(0), [], [], 0)
    import pandas as pd

    hit_ids = _ids(hits, n, "\0hit")
    frame = pd.DataFrame({"value": values, "worker": _ids(workers, n, "\0worker"), "hit": hit_ids})
    first_seen = list(dict.fromkeys(hit_ids))
    if order is not None:
        rank = {str(h): i for i, h in enumerate(order)}
        first_seen.sort(key=lambda h: rank.get(h, len(rank)))  # stable: unnamed HITs keep their first appearance
    groups = dict(tuple(frame.groupby("hit", sort=False)))
    used_workers: set[str] = set()
    means: list[float] = []
    who: list[str] = []
    where: list[str] = []
    spent_at: list[int] = []
    for k, hit in enumerate(first_seen):
        group = groups[hit]
        worker = group["worker"].iloc[0]
        if worker in used_workers:
            continue
        means.append(float(group["value"].mean()))
        who.append(worker)
        where.append(hit)
        spent_at.append(k + 1)
        used_workers.add(worker)
    return Contributions(np.asarray(means, dtype=float), who, where, len(first_seen), np.asarray(spent_at, dtype=float))


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
    and what the pair's plan had spent when it arrived (``spent_at``: HITs). A returning worker adds no observation, so with a long-tailed crowd a pair ends with far
    fewer observations than its planned HITs; bets tuned to the planned HITs are then too timid to settle
    it (benchmarks/replay_clear.py). The horizon is computed from counts of earlier HITs and observations
    only, never from an answer's value, and is fixed when the observation arrives, so the bets stay
    predictable and the sequence's guarantee is unchanged."""
    spent_at = np.asarray(spent_at, dtype=float)
    before = np.arange(len(spent_at), dtype=float)
    share = np.minimum(1.0, (before + PRIOR_HITS) / (spent_at + PRIOR_HITS))
    return np.where(spent_at > 0, before + np.maximum(planned - spent_at, 0.0) * share, float(planned))


ADAPTIVE_CAVEAT = "the adaptive design chose HITs from the answers, so for this study the guarantee is approximate"
"""What an adaptive design does to a stopping rule's guarantee, as the report's methods paragraph says it."""


def guarantee(adaptive: bool = False) -> str:
    """What the rule's intervals guarantee, in one sentence for the report's methods paragraph (the module's
    docstring gives the reasoning)."""
    said = (
        "Each watched pair took one observation per worker (the first HIT of theirs that holds the pair; their "
        "later HITs on it added none), so with probability at least 1 − α no interval excluded a true null at any "
        "look, whatever the workers' tastes and however many HITs each did, provided workers were independent "
        "draws from the crowd and who did which HIT, and what it held, did not depend on the answers (the null: "
        "the crowd even on every HIT's items; on average over the material only, approximate)"
    )
    if adaptive:
        said += "; " + ADAPTIVE_CAVEAT
    return said + "."
