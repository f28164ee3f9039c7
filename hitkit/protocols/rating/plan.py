"""``hitkit plan`` for rating (Direct Assessment) studies: simulated ratings at each number of ratings per
response, analysed as :func:`~hitkit.protocols.rating.analysis.analyze_da` does (quality control included),
and the decisions such a study makes: live chat's (:mod:`hitkit.protocols.live_chat.plan`), whose
scoring steps this protocol shares.

A simulated study has the study file's responses and packing: each HIT's places go to workers of the
simulated crowd (:func:`hitkit.simulation.staffing.staff`), who rate its responses as the task type's simulated
worker does, with ``simulated.quality`` as the systems' strengths, and its degraded places as copies
of distinct responses of the same HIT (as :meth:`~hitkit.protocols.rating.task.RatingTask.layout`
makes them for each worker), perceived far below. The texts are not degraded: the analysis reads
only the ratings.
"""

from __future__ import annotations

import pandas as pd

from hitkit.protocols.live_chat import plan as live_chat_plan
from hitkit.protocols.live_chat.plan import decide, decision_tables  # the same tables, the same decisions
from hitkit.protocols.rating.analysis import as_chat_ratings
from hitkit.protocols.rating.scores import DA_COLUMNS, SCORE_PREFIX
from hitkit.protocols.rating.task import DEGRADED_QUALITY
from hitkit.simulation.staffing import simulated_study
from hitkit.study.config import StudyConfig

UNIT = "ratings_per_item"
DECISIONS = live_chat_plan.DECISIONS


def size_of(config: StudyConfig) -> int:
    """The study file's own size: its ratings per response."""
    return config.rating.ratings_per_item


def sizes(config: StudyConfig) -> list[int]:
    """Ratings per response from 1 to twice the study's, on a roughly doubling grid that includes the study's."""
    configured = size_of(config)
    return sorted({1, 2, 3, 5, 8, 12, configured, 2 * configured})


def with_size(config: StudyConfig, size: int) -> StudyConfig:
    """The study file with ``size`` ratings per response (workers per HIT)."""
    return config.model_copy(update={"rating": config.rating.model_copy(update={"ratings_per_item": size})})


def simulate_tables(config: StudyConfig, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """One simulated study's assignments and ratings (the export's ``da_ratings`` in
    :func:`~hitkit.protocols.rating.analysis.as_chat_ratings`' shape), and each worker's profile."""
    study = simulated_study(config, seed)
    rng, units = study.rng, study.units
    rows = []
    for hit, ids, profile in study.places:
        real = [units[k].payload for k in hit.unit_keys if not units[k].payload["is_control"]]
        copies = rng.sample(real, sum(units[k].payload["is_control"] for k in hit.unit_keys))
        shown = [(p, False) for p in real] + [(p, True) for p in copies]
        rng.shuffle(shown)
        for position, (payload, degraded) in enumerate(shown):
            perceived = DEGRADED_QUALITY if degraded else study.quality[payload["system"]]
            answers = study.task.simulate(profile, {"unit_id": "shown"}, rng, {"shown": perceived}, ids["worker_id"])
            rows += [
                {
                    **ids,
                    "item_id": payload["item_id"],
                    "system": payload["system"],
                    "is_control": int(degraded),
                    "position": position,
                    "criterion": c.name,
                    "score": int(answers[SCORE_PREFIX + c.name]),
                }
                for c in config.rating.criteria
            ]
    ratings = as_chat_ratings(pd.DataFrame(rows, columns=list(DA_COLUMNS)))
    ratings.attrs["duplicates"] = {}
    return study.assignments, ratings, study.profiles


def replicate(config: StudyConfig, seed: int, n_boot: int) -> dict[str, bool | None]:
    """Simulate one study at the config's size, analyse it (the tables of
    :func:`~hitkit.protocols.rating.analysis.analyze_da` its decisions read), and say which came out right."""
    assignments, ratings, profiles = simulate_tables(config, seed)
    return decide(config, decision_tables(assignments, ratings, config.rating.criterion_list(), n_boot, seed), profiles)
