"""Pairwise analysis with judge labels from a file (``hitkit analyze pairwise DIR --judge-labels FILE``).

The file's ``unit`` is votes.csv's ``item_id``; ``label`` a, b or tie for the first system (or its
probability of winning), ``system_a``/``system_b`` the pair it reads. The analysis is the arena's too:
:mod:`hitkit.analysis.judge_file_pairs` (several judges combined, each one's calibration, uniform or
inverse-probability-weighted PPI++ win rates and Bradley–Terry strengths). A label naming a unit neither
voted on nor given a pair is left out with a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd


def _human(votes: pd.DataFrame) -> pd.DataFrame:
    """Per voted item: unit, system_a < system_b, the people's mean score for system_a and the votes."""
    from hitkit.protocols.pairwise.reading import FIRST, TIE, canonical

    c = canonical(votes, "item_id")
    c["human"] = pd.Series(c["outcome"]).map({FIRST: 1.0, TIE: 0.5}).fillna(0.0).to_numpy()
    return (
        c.rename(columns={"first": "system_a", "second": "system_b", "item_id": "unit"})
        .groupby(["unit", "system_a", "system_b"], as_index=False)
        .agg(human=("human", "mean"), votes=("human", "size"))
    )


def analysis_tables_from_file(
    votes: pd.DataFrame, path: str | Path, *, level: float = 0.95, seed: int = 0
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]]:
    """The judge's part of a pairwise analysis from a judge-labels file: (tables, summary, warnings)."""
    from hitkit.analysis.judge_file_pairs import pair_tables

    return pair_tables(_human(votes), path, level=level, seed=seed)
