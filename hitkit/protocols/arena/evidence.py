"""The arena's agreement and leaderboard fragility (:mod:`hitkit.analysis.evidence`).

Agreement: a unit is one prompt answered by one pair of systems (sides put in one order); a worker's
value is the preferred system, a tie or both bad (nominal alpha), per system over the units that
involve it. Most arena prompts are met by one worker, so alpha often rests on few units: the table
says how many. Fragility: the leaderboard battles whose removal would flip adjacent systems of the
plain Bradley–Terry rating (ties and both-bad half a win, as the leaderboard counts them), each
candidate refitted with the leaderboard's own fit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.analysis.agreement import agreement_rows, scopes, worker_agreement
from hitkit.analysis.fragility import bt_influence, refit_fragility
from hitkit.protocols.arena import bradley_terry as bt

RANKING = "Bradley–Terry rating"


def evidence(
    counted: pd.DataFrame, board: pd.DataFrame, *, n_boot: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(agreement rows, fragility rows, per-worker agreement) of the leaderboard's battles and board."""
    a, b = counted["system_a"].astype(str), counted["system_b"].astype(str)
    swapped = (a > b).to_numpy()
    vote = counted["vote"].astype(str).to_numpy()
    # The same answer whichever side a system was shown on: the preferred system's name.
    preferred = np.where(vote == "a", a, np.where(vote == "b", b, vote))
    coded = pd.DataFrame(
        {
            "prompt_id": counted["prompt_id"].astype(str).to_numpy(),
            "first": np.where(swapped, b, a),
            "second": np.where(swapped, a, b),
            "worker_id": counted["worker_id"].astype(str).to_numpy(),
            "value": preferred,
        }
    )
    unit = ["prompt_id", "first", "second"]
    exploded = pd.concat([coded.assign(system=coded["first"]), coded.assign(system=coded["second"])])
    agreement = agreement_rows(
        scopes(coded, exploded=exploded),
        measure="preference",
        level="nominal",
        unit=unit,
        coder="worker_id",
        value="value",
        n_boot=n_boot,
        seed=seed,
    )
    workers = worker_agreement(coded, level="nominal", unit=unit, coder="worker_id", value="value")
    battles = counted.groupby("worker_id").size().rename("battles").reset_index().astype({"worker_id": str})
    workers = battles.merge(workers, on="worker_id", how="left")
    return agreement, fragility(counted, board), workers


def fragility(counted: pd.DataFrame, board: pd.DataFrame) -> pd.DataFrame:
    """Fragility rows of the plain rating's order (best first) over the leaderboard's battles."""
    systems = sorted(set(counted["system_a"]) | set(counted["system_b"]))
    index = {s: i for i, s in enumerate(systems)}
    first = counted["system_a"].map(index).to_numpy(int)
    second = counted["system_b"].map(index).to_numpy(int)
    outcome = counted["vote"].map(bt.OUTCOME).to_numpy(float)
    k = len(systems)

    def scores(keep: np.ndarray) -> np.ndarray:
        return bt.bradley_terry(first, second, outcome, k, keep.astype(float)).theta

    order = list(board.sort_values("rating", ascending=False, kind="stable")["system"])
    return refit_fragility(systems, order, bt_influence(first, second, outcome, k), scores, ranking=RANKING)
