"""Live chat's and rating's agreement and ranking fragility (:mod:`hitkit.analysis.evidence`).

Agreement is interval alpha of the 0–100 sliders (negative criteria reversed, the non-degraded texts,
every worker): per criterion and pooled over criteria (a unit is then a text × criterion). In rating a
unit is one response (item × system) that several workers rate; in live chat every conversation is
rated by the one worker who had it, so a unit is a system and a worker's value their mean rating of
it: alpha then says how far workers agree on which systems are better, not on single chats.
Fragility: the criterion ratings whose removal would flip adjacent systems of the ranking by mean z
(exact, each worker's standardisation held fixed).
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from hitkit.analysis.agreement import agreement_rows, scopes, worker_agreement
from hitkit.analysis.fragility import mean_fragility
from hitkit.analysis.gold import gold_accuracy

LEVEL = "interval"
RANKING = "mean z (criterion ratings)"


def evidence(
    z: pd.DataFrame,
    kept: pd.DataFrame,
    systems: pd.DataFrame,
    *,
    unit: Sequence[str] | None,
    n_boot: int,
    seed: int,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(agreement rows, fragility rows, per-worker agreement). ``z``: every scored rating (columns
    worker_id, system, is_control, criterion, oriented); ``kept``: the ratings the ranking counts (z);
    ``unit``: the columns naming a rated text (rating: item_id, system), None for live chat's systems."""
    intact = z[~z["is_control"].astype(bool)]
    if unit is None:
        rated = intact.groupby(["worker_id", "system", "criterion"], as_index=False)["oriented"].mean()
        unit = ["system"]
    else:
        rated = intact
    parts = scopes(rated, ["criterion"])
    if len(unit) > 1:  # a response's system is a scope only where several responses share it
        parts += [(f"system:{s}", rows) for s, rows in rated.groupby("system", sort=True)]
    keys = [*unit, "criterion"]
    agreement = agreement_rows(
        parts, measure="score", level=LEVEL, unit=keys, coder="worker_id", value="oriented", n_boot=n_boot, seed=seed
    )
    workers = worker_agreement(rated, level=LEVEL, unit=keys, coder="worker_id", value="oriented")
    fragility = mean_fragility(kept, system="system", value="z", order=list(systems["system"]), ranking=RANKING)
    return agreement, fragility, workers


def degraded_gold(z: pd.DataFrame) -> pd.DataFrame:
    """Each worker's gold accuracy (:func:`~hitkit.analysis.gold.gold_accuracy`) on the texts known to be
    worse, the QC bot's conversations (live chat) or the degraded copies (rating): one is answered right
    when the worker's mean rating of it (all criteria, negatives reversed) is below their mean rating of
    the intact texts."""
    return gold_accuracy(degraded_answers(z))


def degraded_answers(z: pd.DataFrame) -> pd.DataFrame:
    """One row per text known to be worse that a worker rated (worker_id, conversation_id, oriented,
    correct), right as :func:`degraded_gold` says."""
    control = z["is_control"].astype(bool)
    intact = z[~control].groupby("worker_id")["oriented"].mean()
    copies = z[control].groupby(["worker_id", "conversation_id"], as_index=False)["oriented"].mean()
    copies = copies[copies["worker_id"].isin(intact.index)]
    copies["correct"] = copies["oriented"].to_numpy() < intact.loc[copies["worker_id"]].to_numpy()
    return copies
