"""The protocols' stopping-rule comparisons with one observation per worker: answers in, a
:class:`~hitkit.analysis.sequential.Comparison` per pair of systems out (the bounded sequence over
:func:`hitkit.analysis.contributions.worker_contributions`, whose docstring states what is guaranteed).
Pure functions; pandas is imported when used (the scheduler loads the comparison modules cheaply)."""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from hitkit.analysis.contributions import projected, tuning, worker_contributions
from hitkit.analysis.sequential import Comparison, from_means

if TYPE_CHECKING:
    import pandas as pd


def worker_comparison(
    a: str,
    b: str,
    values: np.ndarray,
    workers: np.ndarray,
    hits: np.ndarray,
    planned: float,
    *,
    null: float,
    bounds: tuple[float, float],
    order: Sequence | None = None,
) -> Comparison:
    """The bounded sequence's comparison of a and b from per-answer scores with their workers and HITs: one
    observation per worker, their first HIT's mean (:func:`hitkit.analysis.contributions.worker_contributions`,
    which says what is guaranteed). ``planned`` counts the pair's HITs in the fixed design (the bets are tuned
    there); its horizon is projected from the share of its HITs so far that gave an observation, and so is each
    bet's horizon when its observation arrived (:func:`hitkit.analysis.contributions.tuning`)."""
    found = worker_contributions(values, workers, hits, order=order)
    expected = projected(len(found.means), found.spent, planned)
    # the bets' horizons, projected as each observation arrived from what the plan had spent by then
    tuned = tuning(found.spent_at, planned) if found.spent_at is not None else None
    return from_means(a, b, found.means, planned, null=null, bounds=bounds, expected=expected, tuning=tuned)


def pair_answers(
    system_a: "pd.Series", system_b: "pd.Series", score: "pd.Series", hit: "pd.Series", worker
) -> "pd.DataFrame":
    """:func:`worker_comparisons`' answers from a vote table's columns: each vote's pair sorted by name
    (x, y) and its ``score`` (a-over-b, in [0, 1]) turned x-over-y; votes without a score left out."""
    import pandas as pd

    first = system_a < system_b
    return pd.DataFrame(
        {
            "x": system_a.where(first, system_b),
            "y": system_b.where(first, system_a),
            "score": score.where(first, 1.0 - score),
            "hit": hit,
            "worker": worker,
        }
    ).dropna(subset=["score"])


def worker_comparisons(
    answers: "pd.DataFrame | None",
    systems: Sequence[str],
    plan: Mapping[tuple[str, str], float],
    *,
    null: float = 0.5,
    bounds: tuple[float, float] = (0.0, 1.0),
    order: Sequence | None = None,
    planned: Callable[[float], float] | None = None,
) -> list[Comparison]:
    """:func:`worker_comparison` for every pair (x, y) of ``systems`` (x before y by name) from ``answers``:
    one row per answer with columns ``x``, ``y`` (the pair, sorted), ``score`` (x over y), ``hit`` and
    ``worker``. ``planned`` turns the plan's number into the pair's planned HITs (default: as it is)."""
    import pandas as pd  # here, not at the top: the scheduler and sync load this module without needing pandas

    groups = {key: group for key, group in answers.groupby(["x", "y"])} if answers is not None and len(answers) else {}
    out = []
    for x, y in combinations(sorted(systems), 2):
        group = groups.get((x, y))
        if group is None:
            group = pd.DataFrame({"score": [], "hit": [], "worker": []})
        out.append(
            worker_comparison(
                x,
                y,
                group["score"].to_numpy(float),
                group["worker"].to_numpy(),
                group["hit"].to_numpy(),
                (planned or float)(plan.get((x, y), 0.0)),
                null=null,
                bounds=bounds,
                order=order,
            )
        )
    return out
