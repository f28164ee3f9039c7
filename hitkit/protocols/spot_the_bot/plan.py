"""``hitkit plan`` for Spot The Bot studies: simulated annotations at each number of bot–bot conversations
per pair |S_ij| (the size the paper's stability analysis varies), analysed as
:func:`~hitkit.protocols.spot_the_bot.analysis.analyze_annotations` does (its win rates and ranking), and the decisions such a study makes.

No bot is asked: the bot–bot material is placeholders of the generation plan's pairs and length
(:meth:`~hitkit.protocols.spot_the_bot.task.SpotTheBotTask.with_placeholder_material`, as ``launch
--dry-run`` packs them), mixed with the study's human–human material and packed as a launch packs
it. Each HIT's places go to workers of the simulated crowd (:func:`hitkit.simulation.staffing.staff`), at most
one HIT of a block each (as the task refuses a worker a second segment of a conversation), who label
each segment as the task type's simulated worker does, with ``simulated.quality`` as the systems'
human-likeness. A pair differs when its chi-square test on wins and losses is significant after
correction, in the direction of its win rate; the order is TrueSkill's; a system's interval is its
cluster's rank range.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from hitkit.analysis.base import AnalysisResult
from hitkit.analysis.inference import DEFAULT_CORRECTION
from hitkit.errors import ConfigError
from hitkit.protocols import task_for
from hitkit.protocols.base import TaskType
from hitkit.protocols.spot_the_bot.analysis import study_trueskill
from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS
from hitkit.protocols.spot_the_bot.packing import read_bot_bot
from hitkit.protocols.spot_the_bot.ranking import games, rank_with_bootstrap
from hitkit.protocols.spot_the_bot.settings import SpotTheBotConfig
from hitkit.protocols.spot_the_bot.task import FEATURES, LABEL_QUESTIONS, SpotTheBotTask, preference_score
from hitkit.protocols.spot_the_bot.win_rates import win_rates
from hitkit.simulation import planning
from hitkit.simulation.staffing import simulated_study
from hitkit.study.config import StudyConfig
from hitkit.study.sections import GenerationConfig

UNIT = "conversations_per_pair"
DECISIONS = planning.DECISIONS
ALPHA = 0.05
REPLICATES = 20
"""Simulated studies per size by default (the most a time budget runs): each needs a bootstrapped TrueSkill
ranking, so 40 a size would take the paper's grid past the budget on two cores."""
PAPER_SIZE = 45
"""|S_ij| in Deriu et al. (2020), the size of a study without a generation plan or material of its own."""

_placeholders: tempfile.TemporaryDirectory | None = None


def _section(config: StudyConfig) -> SpotTheBotConfig:
    return config.spot_the_bot or SpotTheBotConfig()


def _spot_the_bot(task: TaskType) -> SpotTheBotTask:
    """``task`` as the Spot The Bot task type it must be here; TypeError naming what it is otherwise."""
    if not isinstance(task, SpotTheBotTask):
        raise TypeError(f"the plan of Spot The Bot was given task '{task.name}', not Spot The Bot's")
    return task


def size_of(config: StudyConfig) -> int:
    """The study's own |S_ij|: its generation plan's, else the most conversations a pair has in its own
    bot–bot file, else the paper's."""
    if config.generation is not None:
        return config.generation.conversations_per_pair
    section = _section(config)
    if section.bot_conversations is not None and config.path(section.bot_conversations).is_file():
        material = read_bot_bot(
            config.path(section.bot_conversations), [s.name for s in config.systems], max(section.segment_lengths)
        )
        per_pair: dict[tuple[str, ...], int] = {}
        for c in material:
            per_pair[tuple(sorted(c["systems"]))] = per_pair.get(tuple(sorted(c["systems"])), 0) + 1
        return max(per_pair.values())
    return PAPER_SIZE


def packs(config: StudyConfig, size: int) -> bool:
    """Whether ``size`` conversations per pair pack with the study's human–human material."""
    try:
        with_size(config, size)
    except ConfigError:
        return False
    return True


def sizes(config: StudyConfig) -> list[int]:
    """|S_ij| on a roughly doubling grid from 3 (the smallest size of the paper's stability analysis) to the
    study's, each a size the human–human material packs (the default corpus stops short of the paper's 45)."""
    configured = size_of(config)
    grid = {k for k in (3, 6, 12, 24, 45) if k < configured} | {configured}
    return sorted(k for k in grid if packs(config, k))


def with_size(config: StudyConfig, size: int) -> StudyConfig:
    """The study file with ``size`` conversations per pair, its bot–bot material placeholders (in a folder
    removed when the process ends) and no generation plan left, so nothing built from it asks a bot.
    ConfigError when the human–human material cannot pack that many."""
    global _placeholders
    from hitkit.material.generation import planned_pairs

    section = _section(config)
    generation = (config.generation or GenerationConfig(exchanges=max(2, *section.segment_lengths))).model_copy(
        update={"conversations_per_pair": size}
    )
    planned = config.model_copy(update={"generation": generation})
    task = _spot_the_bot(task_for(planned))
    task.human_plan(*planned_pairs(planned))
    if _placeholders is None:
        _placeholders = tempfile.TemporaryDirectory(prefix="hitkit-plan-")
    return task.with_placeholder_material(Path(_placeholders.name) / f"bot_bot-{size}.jsonl").model_copy(
        update={"generation": None}
    )


def simulate_annotations(config: StudyConfig, seed: int) -> pd.DataFrame:
    """One simulated study's annotations table (the export's columns, typed as the analysis reads them)."""
    # HITs of one block hold the same conversations: a worker takes one of them at most.
    study = simulated_study(
        config, seed, apart=lambda hit, units: min(units[k].payload["conversation"] for k in hit.unit_keys)
    )
    task = _spot_the_bot(study.task)
    rows = []
    for hit, ids, profile in study.places:
        for key in hit.unit_keys:
            payload = study.units[key].payload
            answers = study.task.simulate(
                profile,
                {"unit_id": key, "k": payload["k"]},
                study.rng,
                {key: task.entities(payload["systems"], study.quality)},
                ids["worker_id"],
            )
            rows += [
                {
                    **ids,
                    "conversation_id": payload["conversation"],
                    "segment_exchanges": payload["k"],
                    "entity": entity,
                    "system": payload["systems"][entity],
                    "label": answers[LABEL_QUESTIONS[entity]],
                    **{f.name: int(preference_score(answers[f.name], entity)) for f in FEATURES},
                    "elapsed_s": float("nan"),
                }
                for entity in (0, 1)
            ]
    return pd.DataFrame(rows, columns=list(ANNOTATION_COLUMNS))


def _rank_interval(cluster: str) -> tuple[float, float]:
    """A cluster's rank range "(low,high)" as an interval on the negated rank, widened by a quarter rank:
    two systems' intervals separate exactly when they are in different clusters."""
    low, high = (int(x) for x in cluster.strip("()").split(","))
    return -high - 0.25, -low + 0.25


def decide(config: StudyConfig, result, profiles: dict[str, str] | None = None) -> dict[str, bool | None]:
    """Which of the plan's decisions one analysis gets right, given the true qualities (``profiles`` play
    no part)."""
    pairs, ranking = result.tables["win_rates"], result.tables["ranking"]
    better = {
        (a, b)
        for a, b, rate, p in pairs[["system_a", "system_b", "win_rate", "p_adjusted"]].itertuples(index=False)
        if a != b and p < ALPHA and rate > 0.5
    }
    quality = {s: q for s, q in task_for(config).perceived_quality().items() if s in set(ranking["system"])}
    intervals = {s: _rank_interval(c) for s, c in ranking[["system", "cluster"]].itertuples(index=False)}
    return planning.decide(quality, lambda a, b: (a, b) in better, list(ranking["system"]), intervals)


def decision_tables(annotations: pd.DataFrame, config: StudyConfig, n_boot: int, seed: int) -> AnalysisResult:
    """The two tables of :func:`~hitkit.protocols.spot_the_bot.analysis.analyze_annotations` that
    :func:`decide` reads, made as it makes them with its defaults and the study's TrueSkill settings
    (``win_rates``: chi-square per pair, corrected, conversations resampled; ``ranking``: TrueSkill by μ,
    games resampled), without the feature, annotator and evidence tables a plan never reads."""
    played = games(annotations)
    env = study_trueskill(config).env_for(played)
    return AnalysisResult(
        tables={
            "win_rates": win_rates(
                annotations, correction=DEFAULT_CORRECTION, cluster="conversation", n_boot=n_boot, seed=seed
            ),
            "ranking": rank_with_bootstrap(played, n_boot=n_boot, seed=seed, by="mu", env=env, resample="game"),
        }
    )


def replicate(config: StudyConfig, seed: int, n_boot: int) -> dict[str, bool | None]:
    """Simulate one study at the config's size, analyse it, and say which decisions came out right."""
    return decide(config, decision_tables(simulate_annotations(config, seed), config, n_boot, seed))
