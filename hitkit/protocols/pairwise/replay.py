"""Pairwise A/B's observations for ``hitkit replay`` (:mod:`hitkit.analysis.replay`): each counted
vote an x-over-y score (:data:`hitkit.protocols.pairwise.sequential.SCORE`, x before y by name) with its
HIT and worker (the HIT its own worker's without a ``worker_id`` column), one observation per worker,
as the stopping rule's :func:`~hitkit.protocols.pairwise.sequential.comparisons` takes them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.replay_data import ReplayData, pairs_from_rows, unit_order
from hitkit.protocols.pairwise.reading import read_votes
from hitkit.protocols.pairwise.sequential import SCORE


def replay_data(in_dir: str | Path, config=None) -> ReplayData:
    """The study folder's units and pairs (``config`` unused: the votes carry everything)."""
    votes = read_votes(in_dir)
    units = unit_order(in_dir, votes["assignment_id"])
    score = votes["vote"].map(SCORE)
    first = (votes["system_a"] < votes["system_b"]).to_numpy()
    rows = pd.DataFrame(
        {
            "x": np.where(first, votes["system_a"], votes["system_b"]),
            "y": np.where(first, votes["system_b"], votes["system_a"]),
            "value": np.where(first, score, 1.0 - score),
            "cluster": votes["assignment_id"].astype(str),
            "unit": votes["assignment_id"].astype(str),
            "worker": votes["worker_id"] if "worker_id" in votes else votes["assignment_id"].astype(str),
        }
    ).dropna(subset=["value"])
    systems = sorted(set(votes["system_a"]) | set(votes["system_b"]))
    return ReplayData(
        "pairwise",
        units,
        systems,
        pairs_from_rows(rows, systems, units, bounds=(0.0, 1.0)),
        null=0.5,
        tables={"votes": votes},
        unit_name="assignments",
    )
