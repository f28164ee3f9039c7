"""The arena with judge labels from a file (``hitkit analyze arena DIR --judge-labels FILE``).

The file (:mod:`hitkit.analysis.judge_labels`): ``unit`` a battle (battles.csv's ``battle_id``, as
hitkit's own judge.csv names it), ``label`` a, b or tie for the battle's left system (or its probability
of winning, e.g. from log-probabilities), ``system_a``/``system_b`` the pair as the judge read it (either
way round; needed for a battle nobody voted on, which battles.csv does not hold), optional ``confidence``
and ``human_probability``. A worker's vote is Y = 1 for the left system, 0 for the right, ½ for a tie or
both bad; the battles counted are the leaderboard's (no QC battle, no leak unless ``--include-leaks``).
The analysis is pairwise's (:mod:`hitkit.analysis.judge_file_pairs`): per pair of systems the win rate
human-only, judge-only and PPI++ (``judge_win_rates``), the judge's bias per system, PPI++ Bradley–Terry
strengths (``judge_strengths``), with inverse-probability weights where the file gives
``human_probability``; several judges combined on held-out votes, each one's calibration
(``judge_calibration``). A label naming a battle neither counted nor given a pair is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

VOTE_SCORES = {"a": 1.0, "b": 0.0, "tie": 0.5, "both_bad": 0.5}
"""A worker's vote as the left system's score."""


def human(battles: pd.DataFrame) -> pd.DataFrame:
    """Per voted battle: unit (battle_id), system_a < system_b, the people's score for system_a, votes."""
    vote = battles["vote"].astype(str).str.strip().str.lower().map(VOTE_SCORES)
    a, b = battles["system_a"].astype(str), battles["system_b"].astype(str)
    swap = (a > b).to_numpy()
    frame = pd.DataFrame(
        {
            "unit": battles["battle_id"].astype(str).str.strip(),
            "system_a": np.where(swap, b, a),
            "system_b": np.where(swap, a, b),
            "human": np.where(swap, 1 - vote, vote),
        }
    )[vote.notna().to_numpy()]
    return frame.groupby(["unit", "system_a", "system_b"], as_index=False).agg(
        human=("human", "mean"), votes=("human", "size")
    )


def analysis_tables_from_file(
    battles: pd.DataFrame, counted: pd.DataFrame, path: str | Path, *, level: float = 0.95, seed: int = 0
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]]:
    """The judge's part of an arena analysis from a judge-labels file: (tables, summary, warnings).
    ``battles``: every battle read; ``counted``: the leaderboard's. Labels of battles read but not counted
    (QC battles, leaks, capped prompts) are left out with a warning."""
    from hitkit.analysis.judge_file_pairs import pair_tables
    from hitkit.analysis.judge_labels import read_judge_labels

    raw = read_judge_labels(path)
    left_out = set(battles["battle_id"].astype(str).str.strip()) - set(counted["battle_id"].astype(str).str.strip())
    skipped = raw["unit"].isin(left_out)
    tables, summary, lines = pair_tables(
        human(counted),
        path,
        level=level,
        seed=seed,
        unit_name="battles.csv's battle_id",
        refuse="a battle of battles.csv; give the pair of a battle nobody voted on (columns system_a, system_b)",
        raw=raw[~skipped].reset_index(drop=True),
    )
    if skipped.any():
        lines.append(
            f"{int(skipped.sum())} judge label(s) of battles the leaderboard does not count (QC, leaks, capped "
            "prompts) are left out"
        )
    return tables, summary, lines


def add_judge_file(result, battles: pd.DataFrame, counted: pd.DataFrame, path: str | Path, *, seed: int = 0) -> None:
    """Add :func:`analysis_tables_from_file`'s tables, summary (``judge``), warnings and pairwise's judge
    figures to an arena analysis's ``result``."""
    from hitkit.analysis.base import add_judge, png
    from hitkit.protocols.pairwise import figures

    add_judge(result, analysis_tables_from_file(battles, counted, path, seed=seed), figures.judge_win_rates)
    if "judge_strengths" in result.tables:
        result.figures["judge_strengths"] = png(lambda: figures.judge_strengths(result.tables["judge_strengths"]))
