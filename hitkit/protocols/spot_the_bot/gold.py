"""Spot The Bot's gold items (:mod:`hitkit.study.gold_section`): the speakers of its human–human
conversations, whose share ``gold.rate`` sets; right when labelled human. Free of scipy at import, so the
task type (the web tier) can mark the export's rows."""

from __future__ import annotations

import pandas as pd

from hitkit.material.gold import GOLD_ANSWER, IS_GOLD

HUMAN = "human"
ITEMS = "speakers of human–human conversations, right when labelled human"
"""What the gold items are and when an answer is right, as the report says it."""


def gold_columns(is_human: bool) -> dict[str, object]:
    """An ``annotations`` row's gold columns in a study with a ``gold:`` section."""
    return {IS_GOLD: int(is_human), GOLD_ANSWER: HUMAN if is_human else ""}


def answers(tables: dict[str, pd.DataFrame], config=None) -> pd.DataFrame:
    """One row per human speaker a worker labelled: worker_id, correct (labelled human), as the
    annotators table counts ``hh_correct``."""
    rows = tables["annotations"]
    human = rows[rows["system"].astype(str) == HUMAN]
    return pd.DataFrame({"worker_id": human["worker_id"].astype(str), "correct": human["label"].astype(str) == HUMAN})
