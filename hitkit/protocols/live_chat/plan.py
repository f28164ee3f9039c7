"""``hitkit plan`` for live-chat studies: simulated ratings at each number of HITs, analysed as
:func:`~hitkit.protocols.live_chat.analysis.analyze_ratings` does (quality control included), and the
decisions such a study makes.

A simulated study has the study file's balanced HITs (the real systems and the QC bot's slot);
each HIT goes to a worker of the simulated crowd (:func:`hitkit.simulation.staffing.staff`), who rates each
chat as the task type's simulated worker does, with ``simulated.quality`` as the systems' strengths
and the degraded bot far below. The chats themselves are not simulated: the analysis reads only the
ratings.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from hitkit.analysis.base import AnalysisResult
from hitkit.analysis.tables import counted
from hitkit.protocols import task_for
from hitkit.protocols.live_chat.criteria import RATING_COLUMNS, Criterion
from hitkit.protocols.live_chat.scores import score_intervals
from hitkit.protocols.live_chat.steps import RatingChoices
from hitkit.protocols.live_chat.task import SCORE_PREFIX
from hitkit.simulation import planning
from hitkit.simulation.staffing import simulated_study
from hitkit.study.config import StudyConfig

UNIT = "hits"
DECISIONS = planning.DECISIONS | {"spammers_fail_qc": "every spammer fails quality control"}
ALPHA = 0.05


def _step(config: StudyConfig) -> int:
    """The smallest number of HITs whose slots the real systems can share equally."""
    real = len(config.systems) - 1
    per_hit = config.live_chat.slots_per_hit - 1
    return real // math.gcd(real, per_hit)


def size_of(config: StudyConfig) -> int:
    """The study file's own size: its number of HITs."""
    return config.live_chat.hit_count(len(config.systems) - 1)


def sizes(config: StudyConfig) -> list[int]:
    """HIT counts on a roughly doubling grid up to twice the study's, each a multiple that packs."""
    step = _step(config)
    configured = size_of(config)
    grid = {step * k for k in (1, 2, 4, 8, 16, 32) if step * k <= 2 * configured} | {configured, 2 * configured}
    return sorted(grid)


def with_size(config: StudyConfig, size: int) -> StudyConfig:
    """The study file with ``size`` HITs (a multiple of :func:`_step`)."""
    if size % _step(config):
        raise ValueError(f"{size} HITs do not share the real systems' chats equally; use a multiple of {_step(config)}")
    return config.model_copy(
        update={"live_chat": config.live_chat.model_copy(update={"hits": size, "conversations_per_system": None})}
    )


def simulate_tables(config: StudyConfig, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """One simulated study's assignments and ratings tables (the export's columns), and each worker's profile;
    the ratings' ``attrs["units"]`` maps each conversation to the unit (chat slot) it was made in."""
    study = simulated_study(config, seed)
    ratings, units = [], {}
    for hit, ids, profile in study.places:
        for slot, key in enumerate(hit.unit_keys):
            payload = study.units[key].payload
            units[f"{ids['assignment_id']}-{slot}"] = key
            answers = study.task.simulate(
                profile,
                {"unit_id": key, "topic": "planned"},
                study.rng,
                {key: study.quality[payload["system"]]},
                ids["worker_id"],
            )
            for c in config.live_chat.criteria:
                ratings.append(
                    {
                        **ids,
                        "conversation_id": f"{ids['assignment_id']}-{slot}",
                        "slot": slot,
                        "system": payload["system"],
                        "is_control": bool(payload["is_control"]),
                        "criterion": c.name,
                        "score": float(answers[SCORE_PREFIX + c.name]),
                    }
                )
    ratings = pd.DataFrame(ratings, columns=list(RATING_COLUMNS))
    ratings.attrs["duplicates"] = {}
    ratings.attrs["units"] = units
    return study.assignments, ratings, study.profiles


def decide(config: StudyConfig, result, profiles: dict[str, str]) -> dict[str, bool | None]:
    """Which of :data:`DECISIONS` one analysis of scored ratings (live chat's tables: ``significance``,
    ``score_intervals``, ``systems``, ``workers``; the rating protocol's too) gets right, given the true
    qualities of the ranked systems (the control left out) and each worker's profile: a pair differs when
    its one-sided test is significant after correction."""
    task = task_for(config)
    quality = {s: q for s, q in task.perceived_quality().items() if s not in task.control_systems()}
    significant = {
        (a, b)
        for a, b, p in result.tables["significance"][["system_a", "system_b", "p_adjusted"]].itertuples(index=False)
        if p < ALPHA
    }
    overall = result.tables["score_intervals"]
    overall = overall[overall["criterion"] == "overall"]
    intervals = {s: (lo, hi) for s, lo, hi in overall[["system", "low", "high"]].itertuples(index=False)}
    ranked = list(result.tables["systems"]["system"])
    if set(quality) - set(intervals):
        outcome = planning.ranked_nothing(quality)  # some system has no score: the study ranked nothing
    else:
        outcome = planning.decide(quality, lambda a, b: (a, b) in significant, ranked, intervals)
    workers = result.tables["workers"].set_index("worker_id")["passed"]
    spammers = [w for w in workers.index if profiles.get(w) == "spammer"]
    outcome["spammers_fail_qc"] = (not workers[spammers].astype(bool).any()) if spammers else None
    return outcome


def decision_tables(
    assignments: pd.DataFrame, ratings: pd.DataFrame, criteria: Sequence[Criterion], n_boot: int, seed: int
) -> AnalysisResult:
    """The four tables of live chat's analysis (:func:`~hitkit.protocols.live_chat.analysis.analyze_ratings`;
    the rating protocol's :func:`~hitkit.protocols.rating.analysis.analyze_da` makes them the same way) that
    :func:`decide` reads, made as they make them with their defaults (QC at α = 0.05, worker-clustered tests
    and intervals), without the agreement, evidence and figures a plan never reads."""
    steps = RatingChoices().scored(assignments, ratings, criteria)
    return AnalysisResult(
        tables={
            "workers": steps.workers,
            "systems": steps.systems,
            "significance": steps.significance,
            "score_intervals": score_intervals(steps.kept, criteria, unit="worker", n_boot=n_boot, seed=seed),
        }
    )


def replicate(config: StudyConfig, seed: int, n_boot: int) -> dict[str, bool | None]:
    """Simulate one study at the config's size, analyse it, and say which decisions came out right."""
    every, ratings, profiles = simulate_tables(config, seed)
    assignments = counted(every)  # as analyze_ratings keeps them: the work handed in
    ratings = ratings[ratings["assignment_id"].isin(set(assignments["assignment_id"]))]
    return decide(
        config, decision_tables(assignments, ratings, config.live_chat.criterion_list(), n_boot, seed), profiles
    )
