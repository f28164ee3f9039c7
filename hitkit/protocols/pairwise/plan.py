"""``hitkit plan`` for pairwise studies: simulated votes at each number of votes per prompt, analysed
as :func:`~hitkit.protocols.pairwise.analysis.analyze_votes` does (the tables the decisions read), and the decisions such a study makes.

A simulated study has the study file's prompts, pairs and packing; each HIT's places go to workers of
the simulated crowd (:func:`hitkit.simulation.staffing.staff`), each shown every pair in a random order and
answering as the task type's simulated worker does with ``simulated.quality`` as the systems'
strengths (identical responses are an automatic tie, as on the real page).
"""

from __future__ import annotations

import pandas as pd

from hitkit.analysis.base import AnalysisResult
from hitkit.analysis.inference import DEFAULT_CORRECTION
from hitkit.protocols import task_for
from hitkit.protocols.pairwise.analysis import pair_table
from hitkit.protocols.pairwise.bradley_terry import bradley_terry
from hitkit.protocols.pairwise.votes import VOTE_COLUMNS
from hitkit.simulation import planning
from hitkit.simulation.staffing import simulated_study
from hitkit.study.config import StudyConfig

UNIT = "votes_per_prompt"
DECISIONS = planning.DECISIONS
ALPHA = 0.05


def size_of(config: StudyConfig) -> int:
    """The study file's own size: its votes per prompt."""
    return config.pairwise.votes_per_prompt


def sizes(config: StudyConfig) -> list[int]:
    """Votes per prompt from 1 to twice the study's, on a roughly doubling grid that includes the study's."""
    configured = size_of(config)
    return sorted({1, 2, 3, 5, 8, 12, configured, 2 * configured} - {0})


def with_size(config: StudyConfig, size: int) -> StudyConfig:
    """The study file with ``size`` votes per prompt."""
    return config.model_copy(update={"pairwise": config.pairwise.model_copy(update={"votes_per_prompt": size})})


def simulate_votes(config: StudyConfig, seed: int) -> pd.DataFrame:
    """One simulated study's votes table (the export's columns)."""
    study = simulated_study(config, seed)
    rng, quality = study.rng, study.quality
    rows = []
    for hit, ids, profile in study.places:
        for key in hit.unit_keys:
            payload = study.units[key].payload
            first, second = payload["systems"]
            swapped = rng.random() < 0.5
            shown = (second, first) if swapped else (first, second)
            texts = dict(zip(payload["systems"], payload["responses"]))
            identical = texts[first].strip() == texts[second].strip()
            view = {"identical": identical, "a": texts[shown[0]], "b": texts[shown[1]]}
            context = {texts[first]: quality[first], texts[second]: quality[second]}
            answer = (
                {"vote": "tie"} if identical else study.task.simulate(profile, view, rng, context, ids["worker_id"])
            )
            rows.append(
                {
                    **ids,
                    "item_id": payload["item_id"],
                    "system_a": shown[0],
                    "system_b": shown[1],
                    "vote": answer["vote"],
                }
            )
    votes = pd.DataFrame(rows, columns=list(VOTE_COLUMNS))
    votes.attrs["duplicates"] = {}
    return votes


def decide(config: StudyConfig, result, profiles: dict[str, str] | None = None) -> dict[str, bool | None]:
    """Which of the plan's decisions one analysis gets right, given the true qualities: a pair differs
    when its two-sided sign test is significant after correction (``profiles`` play no part)."""
    pairs, ranking = result.tables["pairs"], result.tables["ranking"]
    significant = {
        frozenset((a, b))
        for a, b, p in pairs[["system_a", "system_b", "p_adjusted"]].itertuples(index=False)
        if p < ALPHA
    }
    intervals = {s: (lo, hi) for s, lo, hi in ranking[["system", "ci_low", "ci_high"]].itertuples(index=False)}
    return planning.decide(
        task_for(config).perceived_quality(),
        lambda a, b: frozenset((a, b)) in significant,
        list(ranking["system"]),
        intervals,
    )


def decision_tables(votes: pd.DataFrame, n_boot: int, seed: int) -> AnalysisResult:
    """The two tables of :func:`~hitkit.protocols.pairwise.analysis.analyze_votes` that :func:`decide` reads,
    made as it makes them with its defaults (``pairs``: worker-clustered tests, corrected; ``ranking``:
    Bradley–Terry, workers resampled), without the agreement, evidence and figures a plan never reads."""
    return AnalysisResult(
        tables={
            "pairs": pair_table(votes, correction=DEFAULT_CORRECTION, test="worker"),
            "ranking": bradley_terry(votes, n_boot=n_boot, seed=seed, resample="worker"),
        }
    )


def replicate(config: StudyConfig, seed: int, n_boot: int) -> dict[str, bool | None]:
    """Simulate one study at the config's size, analyse it, and say which decisions came out right."""
    votes = simulate_votes(config, seed)
    return decide(config, decision_tables(votes, n_boot, seed))
