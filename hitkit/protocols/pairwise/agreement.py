"""Agreement between the workers of a pairwise study: Cohen's weighted kappa on shared comparisons
and each worker's agreement with the other workers' majority, tested against chance."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.protocols.pairwise.reading import FIRST, SECOND, TIE, canonical, item_columns


def _ordered_pair_counts(categories: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """3×3 counts of ordered pairs of distinct votes within each group of ``keys``, summed."""
    c = (
        pd.crosstab([categories[k] for k in keys], categories["outcome"])
        .reindex(columns=[FIRST, TIE, SECOND], fill_value=0)
        .to_numpy()
        .astype(float)
    )
    # Σ over groups of c cᵀ counts every ordered pair of votes; the diagonal term removes
    # each vote paired with itself.
    return c.T @ c - np.diag(c.sum(axis=0))


def cohen_weighted_kappa(votes: pd.DataFrame) -> float:
    """Cohen's weighted kappa (linear weights, ties included) between workers on the same item/pair.

    Votes are put on the ordinal scale prefer-first-system / tie / prefer-second-system (systems
    sorted by name, whatever the display order). Every two votes by different workers on the same
    item and the same pair of systems make one pair of ratings, counted in both orders so the table
    is symmetric and no worker is arbitrarily "rater 1" (chance agreement then uses the pooled
    marginals). Weights 1 − |i − j| / 2. NaN without such pairs or when every vote is in one
    category (chance agreement 1).
    """
    keys = list(item_columns(votes)) + ["worker_id"]
    canon = canonical(votes, *keys)
    item = list(item_columns(votes)) + ["first", "second"]
    if canon.empty:
        return math.nan
    # Pairs of votes within an item/pair, less those where one worker voted twice.
    table = _ordered_pair_counts(canon, item) - _ordered_pair_counts(canon, item + ["worker_id"])
    total = table.sum()
    if total <= 0:
        return math.nan
    levels = np.arange(3)
    weight = 1.0 - np.abs(levels[:, None] - levels[None, :]) / 2
    observed = (weight * table).sum() / total
    marginal = table.sum(axis=1) / total
    expected = marginal @ weight @ marginal
    if np.isclose(expected, 1.0):
        return math.nan
    return float((observed - expected) / (1.0 - expected))


def worker_agreement(votes: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per worker: agreement with the other workers' majority and a test flagging low agreement.

    For each vote, the other workers' votes on the same item and pair (canonical orientation) have
    a majority when one outcome has more than half of them; ``compared`` counts the worker's votes
    that have one and ``agree_with_majority`` is the share of those the worker matched.

    Chance is the disagreement an ordinary worker shows by chance: ``expected_by_chance`` is the
    pooled agreement rate of all *other* workers (their agreed / their compared votes). A fixed
    1/3 would not do: a worker voting uniformly at random agrees with any majority 1/3 of the time,
    so they would never fall below it. ``p_value`` is the one-sided exact binomial test
    ``binomtest(agreed, compared, expected_by_chance, alternative="less")``; ``flagged`` is
    p_value < alpha. A worker with nothing to compare gets NaN and is not flagged. Among workers
    who all behave alike about ``alpha`` of them are flagged, so a flag asks for a look at the
    worker's votes rather than for rejection.
    """
    items = list(item_columns(votes))
    canon = canonical(votes, *items, "worker_id")
    group = items + ["first", "second"]
    one_hot = pd.get_dummies(canon["outcome"]).reindex(columns=[FIRST, TIE, SECOND], fill_value=False).astype(int)
    keyed = pd.concat([canon[group + ["worker_id"]], one_hot], axis=1)
    outcomes = [FIRST, TIE, SECOND]
    in_group = keyed.groupby(group)[outcomes].transform("sum").to_numpy()
    own = keyed.groupby(group + ["worker_id"])[outcomes].transform("sum").to_numpy()
    others = in_group - own
    n_others = others.sum(axis=1)
    has_majority = others.max(axis=1) * 2 > n_others
    agreed = has_majority & (others.argmax(axis=1) == canon["outcome"].to_numpy())
    per = (
        pd.DataFrame({"worker_id": canon["worker_id"], "compared": has_majority, "agreed": agreed})
        .groupby("worker_id", sort=True)
        .agg(votes=("compared", "size"), compared=("compared", "sum"), agreed=("agreed", "sum"))
        .reset_index()
    )
    total_compared, total_agreed = per["compared"].sum(), per["agreed"].sum()
    rows = []
    for worker, n_votes, compared, agreed_n in per.itertuples(index=False):
        rest = total_compared - compared
        expected = (total_agreed - agreed_n) / rest if rest else math.nan
        if compared and not math.isnan(expected):
            p = stats.binomtest(int(agreed_n), int(compared), expected, alternative="less").pvalue
        else:
            p = math.nan
        rows.append(
            {
                "worker_id": worker,
                "votes": int(n_votes),
                "compared": int(compared),
                "agree_with_majority": agreed_n / compared if compared else math.nan,
                "expected_by_chance": expected,
                "p_value": p,
                "flagged": bool(p < alpha),
            }
        )
    columns = ["worker_id", "votes", "compared", "agree_with_majority", "expected_by_chance", "p_value", "flagged"]
    return pd.DataFrame(rows, columns=columns)
