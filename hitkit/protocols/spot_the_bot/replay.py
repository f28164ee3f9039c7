"""Spot The Bot's observations for ``hitkit replay`` (:mod:`hitkit.analysis.replay`): each segment
annotation of bots x and y (x before y by name) an x-over-y score by METHODS §2's win function, with its
assignment, annotator and conversation: one observation per annotator, on one conversation no earlier
observation used, as the stopping rule's :func:`~hitkit.protocols.spot_the_bot.sequential.comparisons`
takes them (a pair's plan counts its conversations). Self-chat and human–human segments inform no pair."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.replay_data import ReplayData, pairs_from_rows, unit_order
from hitkit.protocols.spot_the_bot.annotations import HUMAN
from hitkit.protocols.spot_the_bot.reading import read_annotations, segment_annotations


def replay_data(in_dir: str | Path, config=None) -> ReplayData:
    """The study folder's units (assignments) and pairs of bots (``config`` unused)."""
    annotations = read_annotations(in_dir)
    seg = segment_annotations(annotations)
    seg = seg[(seg["system_0"] != seg["system_1"]) & (seg["system_0"] != HUMAN) & (seg["system_1"] != HUMAN)]
    first = (seg["system_0"] < seg["system_1"]).to_numpy()
    outcome = np.where(first, seg["outcome"], -seg["outcome"])
    rows = pd.DataFrame(
        {
            "x": np.where(first, seg["system_0"], seg["system_1"]),
            "y": np.where(first, seg["system_1"], seg["system_0"]),
            "value": (outcome + 1) / 2,
            "cluster": seg["conversation_id"].astype(str).to_numpy(),
            "unit": seg["assignment_id"].astype(str).to_numpy(),
            "worker": seg["worker_id"].to_numpy(),
            "item": seg["conversation_id"].astype(str).to_numpy(),
        }
    )
    units = unit_order(in_dir, annotations["assignment_id"])
    systems = sorted(s for s in set(annotations["system"]) if s != HUMAN)
    return ReplayData(
        "spot_the_bot",
        units,
        systems,
        pairs_from_rows(rows, systems, units, bounds=(0.0, 1.0), fresh_items=True),
        null=0.5,
        fresh_items=True,
        tables={"annotations": annotations},
        unit_name="assignments",
    )
