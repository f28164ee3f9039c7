"""Live chat's observations for ``hitkit replay`` (:mod:`hitkit.analysis.replay`): for each pair, each
counted HIT that passes its own QC test and holds both systems has a within-HIT difference
(:func:`hitkit.protocols.live_chat.sequential.hit_differences`, in [−1, 1]), and each worker gives one
observation, their first such HIT's; the pair's planned size is the HITs that hold both systems, pass or
fail, and its horizon scales the HITs still to hold it by the share of rated HITs so far that gave an
observation, as the stopping rule's :func:`~hitkit.protocols.live_chat.sequential.comparisons` computes
them. The rating protocol's rated responses go through :func:`rated_replay` too."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.replay_data import ReplayData, all_pairs, pairs_from_rows, unit_order
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA, Criterion
from hitkit.protocols.live_chat.reading import read_tables
from hitkit.protocols.live_chat.sequential import hit_differences


def replay_data(in_dir: str | Path, config=None) -> ReplayData:
    """The study folder's rated HITs and pairs, on the study file's criteria (``config``) or the defaults."""
    criteria = config.live_chat.criterion_list() if config is not None and config.live_chat else DEFAULT_CRITERIA
    _, ratings = read_tables(in_dir, criteria)
    return rated_replay("live_chat", in_dir, ratings, criteria, {"ratings": ratings})


def rated_replay(
    task: str, in_dir: str | Path, ratings: pd.DataFrame, criteria: Sequence[Criterion], tables: dict
) -> ReplayData:
    """:class:`ReplayData` of ratings in live chat's columns (``tables``: what the protocol's
    ``comparisons`` read, for the check against the live rule)."""
    units = unit_order(in_dir, ratings["assignment_id"])
    ratings = ratings[ratings["assignment_id"].astype(str).isin(set(units))]
    control = ratings["is_control"].astype(str).str.strip().str.lower().isin(["1", "true"])
    systems = sorted(set(ratings.loc[~control, "system"].astype(str)))
    found = hit_differences(ratings, systems, criteria)
    index = {u: i for i, u in enumerate(units)}
    holds = ratings[~control].groupby(ratings.loc[~control, "assignment_id"].astype(str))["system"].unique()
    held: dict[tuple[str, str], list[int]] = {pair: [] for pair in all_pairs(systems)}
    for unit, names in holds.items():
        for pair in all_pairs([str(n) for n in names]):
            held[pair].append(index[unit])
    holding = np.zeros(len(units), dtype=bool)
    holding[[index[u] for u, names in holds.items() if len(set(names)) >= 2]] = True
    keys = ratings["assignment_id"].astype(str)
    owner = dict(zip(keys, ratings["worker_id"])) if "worker_id" in ratings else {}
    rows = pd.DataFrame(
        {
            "x": found["x"],
            "y": found["y"],
            "value": found["difference"].astype(float),
            "cluster": found["hit"].astype(str),
            "unit": found["hit"].astype(str),
            "worker": [owner.get(h, h) for h in found["hit"].astype(str)],  # without worker ids, a HIT its own worker's
        }
    )
    return ReplayData(
        task,
        units,
        systems,
        pairs_from_rows(
            rows,
            systems,
            units,
            bounds=(-1.0, 1.0),
            planned={pair: float(len(h)) for pair, h in held.items()},
            held={pair: np.array(h, dtype=int) for pair, h in held.items()},
        ),
        null=0.0,
        bounds=(-1.0, 1.0),
        holding=holding,
        tables=tables,
    )
