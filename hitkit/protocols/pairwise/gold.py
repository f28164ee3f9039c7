"""Pairwise A/B's gold items (:mod:`hitkit.study.gold_section`): which votes answer one, and whether right."""

from __future__ import annotations

import pandas as pd

from hitkit.analysis.gold import split_gold
from hitkit.material.gold import GOLD_ANSWER

ITEMS = "gold comparisons (a better response against a worse one), right when the better one is chosen (a tie is not)"
"""What the gold items are and when an answer is right, as the report says it."""


def answers(tables: dict[str, pd.DataFrame], config=None) -> pd.DataFrame:
    """One row per gold vote: worker_id, correct (the vote names the side the better response was on)."""
    _real, gold = split_gold(tables["votes"])
    return pd.DataFrame(
        {
            "worker_id": gold["worker_id"].astype(str),
            "correct": gold["vote"].astype(str).str.strip().str.lower() == gold[GOLD_ANSWER].astype(str),
        }
    )
