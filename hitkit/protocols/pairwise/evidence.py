"""Pairwise A/B's agreement and ranking fragility (:mod:`hitkit.analysis.evidence`).

Agreement: a unit is one item's pair of systems; a worker's value is the name of the preferred system
or "tie" (nominal alpha; "a" and "b" name different systems for workers who saw the sides swapped); per system over the units that involve it. Fragility: the votes whose removal would flip
adjacent systems of the Bradley–Terry ranking, refitted with the ranking's own fit (ties half a win,
one virtual tied game per pair).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.analysis.agreement import agreement_rows, scopes, worker_agreement
from hitkit.analysis.fragility import bt_influence, refit_fragility
from hitkit.protocols.pairwise.bradley_terry import _fit_bradley_terry
from hitkit.protocols.pairwise.reading import FIRST, SECOND, TIE, canonical, item_columns

MEASURE = "preference"
LEVEL = "nominal"
RANKING = "Bradley–Terry score"


def coded(votes: pd.DataFrame) -> pd.DataFrame:
    """One row per vote: unit columns (item keys, first, second), worker_id, the canonical outcome and
    ``answer``: the preferred system's name or "tie" (so a value means the same whichever side it was on,
    and the same in every pair: alpha's expected disagreement pools the answers of all units)."""
    canon = canonical(votes, *item_columns(votes), "worker_id")
    outcome = canon["outcome"].to_numpy()
    canon["answer"] = np.where(outcome == FIRST, canon["first"], np.where(outcome == SECOND, canon["second"], "tie"))
    return canon


def evidence(
    votes: pd.DataFrame, ranking: pd.DataFrame, *, n_boot: int, seed: int, prior: float = 1.0
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(agreement rows, fragility rows, per-worker agreement) of read votes and their ranking table."""
    canon = coded(votes)
    unit = [*item_columns(votes), "first", "second"]
    exploded = pd.concat([canon.assign(system=canon["first"]), canon.assign(system=canon["second"])])
    agreement = agreement_rows(
        scopes(canon, exploded=exploded),
        measure=MEASURE,
        level=LEVEL,
        unit=unit,
        coder="worker_id",
        value="answer",
        n_boot=n_boot,
        seed=seed,
    )
    workers = worker_agreement(canon, level=LEVEL, unit=unit, coder="worker_id", value="answer")
    return agreement, fragility(canon, list(ranking["system"]), prior=prior), workers


def fragility(canon: pd.DataFrame, order: list[str], *, prior: float = 1.0) -> pd.DataFrame:
    """Fragility rows of the Bradley–Terry ranking ``order`` (best first) of canonical votes."""
    systems = sorted(set(canon["first"]) | set(canon["second"]))
    index = {s: i for i, s in enumerate(systems)}
    k = len(systems)
    first = canon["first"].map(index).to_numpy()
    second = canon["second"].map(index).to_numpy()
    outcome = canon["outcome"].to_numpy()
    # What each vote adds to the win matrix, as in bradley_terry (ties half a win each way).
    effect = np.zeros((len(canon), k * k))
    rows = np.arange(len(canon))
    effect[rows, first * k + second] += np.select([outcome == FIRST, outcome == TIE], [1.0, 0.5])
    effect[rows, second * k + first] += np.select([outcome == SECOND, outcome == TIE], [1.0, 0.5])

    def scores(keep: np.ndarray) -> np.ndarray:
        return _fit_bradley_terry((keep.astype(float) @ effect).reshape(-1, k, k), prior)

    won_first = np.select([outcome == FIRST, outcome == TIE], [1.0, 0.5], 0.0)
    influence = bt_influence(first, second, won_first, k)
    return refit_fragility(systems, order, influence, scores, ranking=RANKING)
