"""Rating's gold items (:mod:`hitkit.study.gold_section`): its degraded copies, made for each worker from
responses of their own HIT (:mod:`hitkit.protocols.rating.task`), whose share ``gold.rate`` sets. Free of
scipy at import, so the task type (the web tier) can mark the export's rows."""

from __future__ import annotations

import pandas as pd

from hitkit.material.gold import GOLD_ANSWER, IS_GOLD

ANSWER = "below_intact"
"""A degraded copy's right answer: rated below the worker's intact responses (mean over the criteria,
negative criteria reversed)."""
ITEMS = "degraded copies, right when rated below the worker's intact responses"
"""What the gold items are and when an answer is right, as the report says it."""


def gold_columns(is_copy: bool) -> dict[str, object]:
    """A ``da_ratings`` row's gold columns in a study with a ``gold:`` section."""
    return {IS_GOLD: int(is_copy), GOLD_ANSWER: ANSWER if is_copy else ""}


def answers(tables: dict[str, pd.DataFrame], config=None) -> pd.DataFrame:
    """One row per degraded copy a worker rated: worker_id, correct (the analysis's own rule,
    :func:`~hitkit.protocols.live_chat.evidence.degraded_answers`)."""
    from hitkit.protocols.live_chat.evidence import degraded_answers
    from hitkit.protocols.live_chat.quality import reverse_negative
    from hitkit.protocols.rating.analysis import as_chat_ratings
    from hitkit.protocols.rating.scores import DEFAULT_CRITERIA, TABLE

    ratings = tables[TABLE]
    if ratings.empty:
        return pd.DataFrame({"worker_id": pd.Series(dtype=str), "correct": pd.Series(dtype=bool)})
    criteria = config.rating.criterion_list() if config is not None and config.rating else DEFAULT_CRITERIA
    oriented = reverse_negative(as_chat_ratings(ratings), criteria)
    return degraded_answers(oriented)[["worker_id", "correct"]].astype({"worker_id": str})
