"""Live chat's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`): differences in overall z.

The statistic is the paper's own (METHODS §1 steps 1–5, Ji et al. 2022) on the HITs so far: negative
criteria reversed, each worker standardised over all of their ratings, the per-worker Wilcoxon QC
(:func:`hitkit.protocols.live_chat.analysis.screened`, the analysis's own steps), then the passed
workers' ratings of the real systems. A conversation scores the mean z over its criteria; system x's
estimate is the mean over its conversations (equal to the paper's overall z when every conversation
has every criterion) and the comparison (x, y) is mean_x − mean_y, null 0.

The time index n counts the counted HITs with ratings (one assignment each), every worker's: HITs
arrive one by one and each is an observation, a failed worker's contributing nothing to the
estimate (its influence is 0). So n ends at the study's number of HITs, which is what
:func:`planned` gives the rule (ρ is tuned there and futility judged there) without guessing the
pass rate (counting only the passed workers' HITs would leave n short of the posted HITs, 215 of 304 in
Ji et al.'s run, so futility, judged at the planned size, could never settle a pair and the rule would
never stop before the end). The variance per HIT is n × the HIT-clustered sandwich (delta-method) variance of
mean_x − mean_y: each HIT's influence on the difference is
(S_hx − mean_x·C_hx)/N_x − (S_hy − mean_y·C_hy)/N_y (S: the HIT's summed conversation scores of a
system, C: their count, N: the system's conversations), squared and summed, times n/(n − 1) as
:func:`hitkit.analysis.sequential.mean_and_variance`. A HIT is one worker's six chats rated together,
so it is the cluster (METHODS §2b) and the unit the sequence counts; a worker's several HITs share one
standardisation, which HIT clusters leave out (worker clusters would be the more conservative choice;
28 of Ji et al.'s 249 workers took more than one HIT). The score is a ratio estimator whose scale is
learnt from the data, so the sequence is the asymptotic one (``exact=False``: Waudby-Smith, Arbour,
Sinha, Kennedy & Ramdas, "Time-uniform central limit theory and asymptotic confidence sequences",
Annals of Statistics 2024). A worker's z and QC verdict move as their own later HITs arrive, so past
observations are not fixed as the theorem assumes: the estimate at each look is the analysis of the
data so far, a heuristic use of the sequence (tests/test_stopping.py measures its false claims under
a null).

Free of scipy at import: the QC step (scipy's Mann–Whitney U) is imported when comparisons are made.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from hitkit.analysis.sequential import Comparison
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA, Criterion
from hitkit.tables.schema import DONE_STATUSES

UNIT = "hits"
"""What a comparison's n counts: counted HITs with ratings (each one worker's assignment)."""

Pair = tuple[str, str]


def planned(payloads: Sequence[Mapping], config) -> dict[Pair, float]:
    """HITs in the fixed design, for every pair of real systems: one QC slot per HIT, so the count of
    control slots (n counts HITs, whichever systems they hold)."""
    hits = float(sum(1 for p in payloads if p["is_control"]))
    real = sorted({p["system"] for p in payloads if not p["is_control"]})
    return {pair: hits for pair in combinations(real, 2)}


def hit_pairs(payloads: Sequence[Mapping]) -> list[Pair]:
    """The pairs a HIT's answers inform: every two real systems it holds (one worker's ratings of both on
    one standardisation); the QC slot informs none."""
    held = sorted({p["system"] for p in payloads if not p["is_control"] and p.get("system") is not None})
    return list(combinations(held, 2))


def comparisons(tables: Mapping[str, pd.DataFrame], systems: Sequence[str], plan: Mapping[Pair, float], *,
                config=None, criteria: Sequence[Criterion] | None = None) -> list[Comparison]:
    """One comparison per pair of systems from the export's ``assignments`` and ``ratings`` so far, on the
    study file's criteria (``config``), else ``criteria``, else the defaults."""
    if criteria is None:
        criteria = config.live_chat.criterion_list() if config is not None and config.live_chat else DEFAULT_CRITERIA
    return rated_comparisons(tables.get("assignments"), tables.get("ratings"), systems, plan, criteria)


def rated_comparisons(assignments: pd.DataFrame | None, ratings: pd.DataFrame | None, systems: Sequence[str],
                      plan: Mapping[Pair, float], criteria: Sequence[Criterion]) -> list[Comparison]:
    """:func:`comparisons` on ratings in live chat's columns (the rating protocol's included): the counted
    assignments' ratings screened by METHODS §1 steps 1–4, then :func:`from_hit_sums`. Without an
    assignments table every rated assignment counts."""
    from hitkit.protocols.live_chat.analysis import screened  # scipy: imported only when used

    if ratings is None or ratings.empty:
        return from_hit_sums(np.zeros((0, len(systems))), np.zeros((0, len(systems))), 0, systems, plan)
    ratings = ratings.copy()
    ratings["score"] = pd.to_numeric(ratings["score"]).astype(float)
    ratings["is_control"] = ratings["is_control"].astype(str).str.strip().str.lower().isin(["1", "true"])
    if assignments is None:
        done = ratings[["assignment_id", "worker_id"]].drop_duplicates()
    else:
        done = assignments[assignments["status"].str.strip().str.lower().isin(DONE_STATUSES)]
        ratings = ratings[ratings["assignment_id"].isin(set(done["assignment_id"]))]
    _, _, _, kept = screened(done, ratings, criteria)
    sums, counts = hit_sums(kept, systems)
    return from_hit_sums(sums, counts, ratings["assignment_id"].nunique(), systems, plan)


def hit_sums(kept: pd.DataFrame, systems: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per HIT (assignment) of ``kept`` and system: the sum of its conversations' scores (mean z over
    criteria) and their count, as two [HIT, system] arrays; systems not named are left out."""
    if kept.empty:
        return np.zeros((0, len(systems))), np.zeros((0, len(systems)))
    conv = kept.groupby(["assignment_id", "conversation_id"], sort=False).agg(system=("system", "first"),
                                                                               z=("z", "mean"))
    hits, row = np.unique(conv.index.get_level_values("assignment_id").astype(str), return_inverse=True)
    column = pd.Index(list(systems)).get_indexer(conv["system"])
    known = column >= 0
    sums, counts = np.zeros((len(hits), len(systems))), np.zeros((len(hits), len(systems)))
    np.add.at(sums, (row[known], column[known]), conv["z"].to_numpy(float)[known])
    np.add.at(counts, (row[known], column[known]), 1.0)
    return sums, counts


def from_hit_sums(sums: np.ndarray, counts: np.ndarray, n: int, systems: Sequence[str],
                  plan: Mapping[Pair, float]) -> list[Comparison]:
    """The comparisons of every pair of ``systems`` (sorted) from per-HIT sums and counts (:func:`hit_sums`,
    columns in ``systems``' order) after ``n`` HITs (those without rows add no influence)."""
    order = {s: i for i, s in enumerate(systems)}
    totals = counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums.sum(axis=0) / totals
        influence = (sums - means * counts) / totals
    correction = n / (n - 1) if n > 1 else 0.0
    out = []
    for x, y in combinations(sorted(systems), 2):
        i, j = order[x], order[y]
        if not (totals[i] > 0 and totals[j] > 0):
            out.append(Comparison(x, y, 0, 0.0, 0.0, plan.get((x, y), 0.0)))
            continue
        variance = n * correction * float(((influence[:, i] - influence[:, j]) ** 2).sum())
        out.append(Comparison(x, y, int(n), float(means[i] - means[j]), variance, plan.get((x, y), 0.0)))
    return out
