"""The arena's gold items (:mod:`hitkit.study.gold_section`): its battles against the QC bot
(``arena.control``), whose share ``gold.rate`` sets; right when the real system's side wins."""

from __future__ import annotations

import pandas as pd

ITEMS = "control battles, right when the real system wins (a tie or both bad is not right)"
"""What the gold items are and when an answer is right, as the report says it."""


def answers(tables: dict[str, pd.DataFrame], config=None) -> pd.DataFrame:
    """One row per vote in a QC battle whose bot can be told: worker_id, correct (a vote for the real
    system), as the analysis's QC table counts them (:func:`~hitkit.protocols.arena.analysis.qc_table`)."""
    from hitkit.protocols.arena.analysis import control_systems

    battles = tables["battles"]
    qc = battles[pd.to_numeric(battles["is_control"], errors="coerce").fillna(0).astype(int) == 1]
    control = control_systems(battles, config)
    left, right = qc["system_a"].isin(control), qc["system_b"].isin(control)
    qc = qc[left ^ right]
    real_side = qc["system_a"].isin(control).map({True: "b", False: "a"})
    return pd.DataFrame({"worker_id": qc["worker_id"].astype(str), "correct": qc["vote"] == real_side})
