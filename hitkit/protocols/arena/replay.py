"""The arena's observations for ``hitkit replay`` (:mod:`hitkit.analysis.replay`): each leaderboard
battle on systems x and y (x before y by name) an x-over-y score (:data:`hitkit.protocols.arena.sequential.SCORE`)
with its HIT and worker, one observation per worker (their first HIT's battles on the pair) in the bounded
sequence, as the stopping rule's :func:`~hitkit.protocols.arena.sequential.comparisons` takes them (no QC
battle, no identity leak); a pair plans the HITs expected to hold its battles
(:func:`~hitkit.protocols.arena.sequential.planned_hits`, with the study file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.replay_data import ReplayData, pairs_from_rows, unit_order
from hitkit.protocols.arena.reading import read_study_battles
from hitkit.protocols.arena.sequential import SCORE, leaderboard_battles, planned_hits


def replay_data(in_dir: str | Path, config=None) -> ReplayData:
    """The study folder's units (assignments) and pairs of systems; ``config`` (the study file), when
    given, turns each pair's battles into the HITs it plans, as the live rule does."""
    every = read_study_battles(in_dir)
    battles = leaderboard_battles({"battles": every}).reset_index(drop=True)
    score = battles["vote"].astype(str).str.strip().str.lower().map(SCORE)
    first = (battles["system_a"] < battles["system_b"]).to_numpy()
    rows = pd.DataFrame(
        {
            "x": np.where(first, battles["system_a"], battles["system_b"]),
            "y": np.where(first, battles["system_b"], battles["system_a"]),
            "value": np.where(first, score, 1.0 - score),
            "cluster": np.arange(len(battles)),
            "unit": battles["assignment_id"].astype(str),
            "worker": battles["worker_id"] if "worker_id" in battles else battles["assignment_id"].astype(str),
        }
    ).dropna(subset=["value"])
    units = unit_order(in_dir, battles["assignment_id"])
    systems = sorted(set(battles["system_a"]) | set(battles["system_b"]))
    counted = rows[rows["unit"].isin(set(units))]
    plan = {key: float(len(group)) for key, group in counted.groupby(["x", "y"])}  # battles, as the plan counts
    return ReplayData(
        "arena",
        units,
        systems,
        pairs_from_rows(
            rows,
            systems,
            units,
            bounds=(0.0, 1.0),
            planned={pair: planned_hits(battles, config) for pair, battles in plan.items()},
        ),
        null=0.5,
        tables={"battles": every},
        plan=plan,
        unit_name="assignments",
    )
