"""Live chat's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`): within-HIT differences
of the slider scores, watched with the bounded (nonasymptotic) confidence sequence.

A HIT is one worker's six chats rated together (METHODS §2b). For the pair (x, y), a HIT that holds
both real systems gives one value: the mean of its x conversations' scores minus the mean of its y
conversations' scores, a conversation's score being the mean over criteria of the oriented slider value
(negative criteria reversed, METHODS §1 step 1) divided by 100, so the value lies in [−1, 1]; the null
is 0. The HIT takes part only if its own ratings pass the paper's QC test (METHODS §1 step 3: the QC bot
rated below the real systems, one-sided Mann–Whitney on the qc criteria at 0.05), decided on that HIT
alone, so that the value is fixed when the HIT arrives (a worker's z and QC verdict over all of their
HITs move as later HITs arrive, which no time-uniform guarantee allows; one worker's rank order within a
HIT is what standardisation keeps, so the within-HIT test is the paper's on that HIT).

The worker, not the HIT, carries the dependence: a worker's HITs share their scale and taste however
many they do. So the sequence takes one observation per worker, the value of their first HIT that holds
the pair and passes QC (:func:`hitkit.analysis.contributions.worker_contributions`); a returning
worker's later HITs add nothing. HITs come in submission order (the ``assignments`` table's, which
:mod:`hitkit.running.stopping` sorts). What is covered, exactly (finite samples, every look): the
crowd's average within-HIT difference between x and y over workers, whatever each worker's own scale,
taste, system preferences and number of HITs, when workers are drawn independently, their
conversations are their own, and who does which HIT when does not depend on the answers (a fixed
design). A within-HIT difference removes each worker's level; the estimand has the sign of the paper's
overall z difference whenever the systems' quality shows in every worker's rank order, not in general.
The rating protocol shares its rated texts between the workers of a block and takes them as fixed
material (as its default analysis does).

The earlier statistic (the paper's overall z on the HITs so far with a HIT-clustered variance and the
asymptotic sequence) is kept as :func:`asymptotic_comparisons` / :func:`from_hit_sums` for scores with no
bound; its measured false claims under skewed scores are in benchmarks/adaptive.py.

Free of scipy at import: the QC step (scipy's Mann–Whitney U) is imported when comparisons are made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from hitkit.analysis.contributions import PRIOR_HITS, worker_contributions
from hitkit.analysis.sequential import Comparison, from_means
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA, Criterion
from hitkit.tables.schema import HANDED_IN_STATUSES

UNIT = "workers"
"""What a comparison's n counts: workers, each one observation (their first counted HIT on the pair that passes QC)."""

Pair = tuple[str, str]


def planned(payloads: Sequence[Mapping], config) -> dict[Pair, float]:
    """HITs in the fixed design that hold both systems of each pair of real systems (the sequence's
    observations): the HITs (one QC slot each, so the count of control slots) × the chance that a HIT
    of k real slots drawn from S systems holds a given two, k(k − 1)/(S(S − 1)). Fixed before the study."""
    hits = float(sum(1 for p in payloads if p["is_control"]))
    real = sorted({p["system"] for p in payloads if not p["is_control"]})
    k = sum(1 for p in payloads if not p["is_control"]) / hits if hits else 0.0
    share = min(1.0, k * (k - 1) / (len(real) * (len(real) - 1))) if len(real) > 1 else 0.0
    return {pair: hits * share for pair in combinations(real, 2)}


def hit_pairs(payloads: Sequence[Mapping]) -> list[Pair]:
    """The pairs a HIT's answers inform: every two real systems it holds (one worker's ratings of both on
    one standardisation); the QC slot informs none."""
    held = sorted({p["system"] for p in payloads if not p["is_control"] and p.get("system") is not None})
    return list(combinations(held, 2))


def comparisons(
    tables: Mapping[str, pd.DataFrame],
    systems: Sequence[str],
    plan: Mapping[Pair, float],
    *,
    config=None,
    criteria: Sequence[Criterion] | None = None,
) -> list[Comparison]:
    """One comparison per pair of systems from the export's ``assignments`` and ``ratings`` so far, on the
    study file's criteria (``config``), else ``criteria``, else the defaults."""
    if criteria is None:
        criteria = config.live_chat.criterion_list() if config is not None and config.live_chat else DEFAULT_CRITERIA
    return rated_comparisons(tables.get("assignments"), tables.get("ratings"), systems, plan, criteria)


def rated_comparisons(
    assignments: pd.DataFrame | None,
    ratings: pd.DataFrame | None,
    systems: Sequence[str],
    plan: Mapping[Pair, float],
    criteria: Sequence[Criterion],
) -> list[Comparison]:
    """:func:`comparisons` on ratings in live chat's columns (the rating protocol's included): the counted
    assignments' within-HIT differences (:func:`hit_differences`), one observation per worker (their first
    HIT on the pair that passes QC), HITs in the ``assignments`` table's order. Without an assignments
    table every rated assignment counts. A pair's horizon is what it has plus the HITs still planned to hold it times the share of its
    HITs so far that gave an observation."""
    order = None
    if ratings is not None and not ratings.empty and assignments is not None:
        counted = assignments[assignments["status"].astype(str).str.strip().str.lower().isin(HANDED_IN_STATUSES)]
        order = list(counted["assignment_id"].astype(str))
        ratings = ratings[ratings["assignment_id"].astype(str).isin(set(order))]
    found = hit_differences(ratings, systems, criteria)
    held = held_pairs(ratings, systems)
    owner: dict[str, object] = {}
    if ratings is not None and not ratings.empty and "worker_id" in ratings:
        owner = dict(zip(ratings["assignment_id"].astype(str), ratings["worker_id"]))
    pairs = list(combinations(sorted(systems), 2))
    contributions = {}
    for x, y in pairs:
        own = found[(found["x"] == x) & (found["y"] == y)] if len(found) else found
        hits = own["hit"].astype(str).to_numpy() if len(own) else np.zeros(0, dtype=object)
        contributions[(x, y)] = worker_contributions(
            own["difference"].to_numpy(float) if len(own) else np.zeros(0),
            np.array([owner.get(h, h) for h in hits], dtype=object),
            hits,
            order=order,
        )
    share = passed_share(ratings, systems, pd.DataFrame({"hit": [h for c in contributions.values() for h in c.hits]}))
    out = []
    for x, y in pairs:
        means = contributions[(x, y)].means
        planned_xy = plan.get((x, y), 0.0)
        # what it has, and the HITs still planned to hold the pair times the share of HITs that gave an observation
        expected = None if share is None else len(means) + max(planned_xy - held.get((x, y), 0), 0.0) * share
        out.append(from_means(x, y, means, planned_xy, null=0.0, bounds=(-1.0, 1.0), expected=expected))
    return out


def held_pairs(ratings: pd.DataFrame | None, systems: Sequence[str]) -> dict[Pair, int]:
    """Per pair of ``systems`` (x first by name), the rated HITs so far that hold both, whether or not they
    pass their own QC test: the HITs of its plan already spent."""
    if ratings is None or ratings.empty:
        return {}
    control = ratings["is_control"].astype(str).str.strip().str.lower().isin(["1", "true"])
    real = ratings[~control & ratings["system"].isin(list(systems))]
    counts: dict[Pair, int] = {}
    for held in real.groupby(real["assignment_id"].astype(str))["system"].unique():
        for pair in combinations(sorted(held), 2):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


PASS_PRIOR = PRIOR_HITS
"""Pseudo-HITs that pass QC added to :func:`passed_share`'s count: the share starts at 1 and moves to the
observed one as HITs arrive, so that three failing HITs early on do not shrink a pair's horizon to nothing
(a horizon too short would call a pair futile that the rest of the design could still settle)."""


def passed_share(ratings: pd.DataFrame | None, systems: Sequence[str], found: pd.DataFrame) -> float | None:
    """The share of the rated HITs so far holding two or more of ``systems`` that count (those whose ids are
    in ``found["hit"]``: that pass their own QC test, :func:`hit_differences`; the rule passes those that
    gave an observation, a returning worker's later HITs giving none), with :data:`PASS_PRIOR` counting
    pseudo-HITs added; None without ratings. A HIT that does not count adds no observation, so a pair can
    expect its observations so far plus this share of the HITs still planned to hold it
    (:func:`held_pairs`) by the end of the fixed design: the horizon of the rule's futility,
    :attr:`hitkit.analysis.sequential.Comparison.expected`."""
    if ratings is None or ratings.empty:
        return None
    control = ratings["is_control"].astype(str).str.strip().str.lower().isin(["1", "true"])
    real = ratings[~control & ratings["system"].isin(list(systems))]
    held = int((real.groupby(real["assignment_id"].astype(str))["system"].nunique() >= 2).sum())
    return min(1.0, (found["hit"].nunique() + PASS_PRIOR) / (held + PASS_PRIOR))


def hit_differences(
    ratings: pd.DataFrame | None, systems: Sequence[str], criteria: Sequence[Criterion]
) -> pd.DataFrame:
    """Per HIT (assignment) that passes its own QC test and pair (x, y) of ``systems`` it holds (x first by
    name): x's mean conversation score minus y's, oriented sliders / 100. Columns hit, x, y, difference."""
    from hitkit.protocols.live_chat.quality import reverse_negative, wilcoxon_qc  # scipy: imported only when used

    columns = ["hit", "x", "y", "difference"]
    if ratings is None or ratings.empty:
        return pd.DataFrame(columns=columns)
    ratings = ratings.copy()
    ratings["score"] = pd.to_numeric(ratings["score"]).astype(float)
    ratings["is_control"] = ratings["is_control"].astype(str).str.strip().str.lower().isin(["1", "true"])
    ratings["assignment_id"] = ratings["assignment_id"].astype(str)
    oriented = reverse_negative(ratings, criteria)
    # The paper's QC test on each HIT alone: the rank order of a HIT's own ratings is all it uses.
    own = oriented.assign(worker_id=oriented["assignment_id"], z=oriented["oriented"])
    passed = wilcoxon_qc(own, criteria)
    ok = set(passed.loc[passed["passed"], "worker_id"])
    real = oriented[~oriented["is_control"] & oriented["assignment_id"].isin(ok) & oriented["system"].isin(systems)]
    if real.empty:
        return pd.DataFrame(columns=columns)
    conv = real.groupby(["assignment_id", "conversation_id"], sort=False).agg(
        system=("system", "first"), score=("oriented", "mean")
    )
    per = conv.groupby(["assignment_id", "system"], sort=False)["score"].mean().unstack() / 100.0
    rows = []
    for x, y in combinations(sorted(systems), 2):
        if x in per and y in per:
            both = per[[x, y]].dropna()
            rows.append(
                pd.DataFrame(
                    {"hit": both.index.astype(str), "x": x, "y": y, "difference": (both[x] - both[y]).to_numpy()}
                )
            )
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns)


def asymptotic_comparisons(
    assignments: pd.DataFrame | None,
    ratings: pd.DataFrame | None,
    systems: Sequence[str],
    plan: Mapping[Pair, float],
    criteria: Sequence[Criterion],
) -> list[Comparison]:
    """The earlier statistic, for scores without a bound: the counted assignments' ratings screened by
    METHODS §1 steps 1–4 (the paper's overall z, QC over each worker's HITs so far), then
    :func:`from_hit_sums` (asymptotic sequence, HIT-clustered variance; n counts every rated HIT and
    ``plan`` should count HITs too). Without an assignments table every rated assignment counts."""
    from hitkit.protocols.live_chat.steps import screened  # scipy: imported only when used

    if ratings is None or ratings.empty:
        return from_hit_sums(np.zeros((0, len(systems))), np.zeros((0, len(systems))), 0, systems, plan)
    ratings = ratings.copy()
    ratings["score"] = pd.to_numeric(ratings["score"]).astype(float)
    ratings["is_control"] = ratings["is_control"].astype(str).str.strip().str.lower().isin(["1", "true"])
    if assignments is None:
        done = ratings[["assignment_id", "worker_id"]].drop_duplicates()
    else:
        done = assignments[assignments["status"].str.strip().str.lower().isin(HANDED_IN_STATUSES)]
        ratings = ratings[ratings["assignment_id"].isin(set(done["assignment_id"]))]
    _, _, _, kept = screened(done, ratings, criteria)
    sums, counts = hit_sums(kept, systems)
    return from_hit_sums(sums, counts, ratings["assignment_id"].nunique(), systems, plan)


def hit_sums(kept: pd.DataFrame, systems: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per HIT (assignment) of ``kept`` and system: the sum of its conversations' scores (mean z over
    criteria) and their count, as two [HIT, system] arrays; systems not named are left out."""
    if kept.empty:
        return np.zeros((0, len(systems))), np.zeros((0, len(systems)))
    conv = kept.groupby(["assignment_id", "conversation_id"], sort=False).agg(
        system=("system", "first"), z=("z", "mean")
    )
    hits, row = np.unique(conv.index.get_level_values("assignment_id").astype(str), return_inverse=True)
    column = pd.Index(list(systems)).get_indexer(conv["system"])
    known = column >= 0
    sums, counts = np.zeros((len(hits), len(systems))), np.zeros((len(hits), len(systems)))
    np.add.at(sums, (row[known], column[known]), conv["z"].to_numpy(float)[known])
    np.add.at(counts, (row[known], column[known]), 1.0)
    return sums, counts


def from_hit_sums(
    sums: np.ndarray, counts: np.ndarray, n: int, systems: Sequence[str], plan: Mapping[Pair, float]
) -> list[Comparison]:
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
