"""The evidence every protocol's analysis adds to its result: agreement (``agreement.csv``), ranking
fragility (``fragility.csv``) and each worker's agreement with the crowd (columns of the workers table).

Each protocol's folder says what its coded units and its ranking's observations are (``evidence.py``);
this module only puts the three tables in place, so that every protocol's result has the same shape.
"""

from __future__ import annotations

import math

import pandas as pd

from hitkit.analysis.agreement import AGREEMENT_COLUMNS, WORKER_COLUMNS
from hitkit.analysis.base import AnalysisResult
from hitkit.analysis.fragility import FRAGILITY_COLUMNS
from hitkit.analysis.gold import GOLD_COLUMNS, below_chance


def attach(
    result: AnalysisResult,
    agreement: pd.DataFrame,
    fragility: pd.DataFrame,
    workers: pd.DataFrame | None = None,
    *,
    workers_table: str = "workers",
    gold: pd.DataFrame | None = None,
    gold_items: str = "",
) -> None:
    """Add ``agreement`` and ``fragility`` to ``result``'s tables, ``workers``' agreement columns to its
    workers table (by worker_id; empty for a worker without a pairable unit; ``workers`` itself when the
    result has no such table) and a short account of
    both to its summary (``agreement``: the overall alpha of each measure; ``fragility``: the pair
    that the fewest removals flip). ``gold`` (:data:`~hitkit.analysis.gold.GOLD_COLUMNS`) adds each
    worker's accuracy on the protocol's known-answer items, ``gold_items`` says what they are, and
    ``summary["gold"]`` counts them."""
    result.tables["agreement"] = agreement.reindex(columns=list(AGREEMENT_COLUMNS))
    result.tables["fragility"] = fragility.reindex(columns=list(FRAGILITY_COLUMNS))
    if workers is not None and workers_table not in result.tables:  # a protocol without a workers table
        result.tables[workers_table] = workers.reset_index(drop=True)
    elif workers is not None:
        table = result.tables[workers_table]
        own = workers.reindex(columns=list(WORKER_COLUMNS)).astype({"worker_id": str})
        merged = table.drop(columns=[c for c in WORKER_COLUMNS[1:] if c in table.columns]).merge(
            own, how="left", left_on=table["worker_id"].astype(str), right_on="worker_id", suffixes=("", "_alpha")
        )
        merged = merged.drop(columns=[c for c in ("key_0", "worker_id_alpha") if c in merged.columns])
        merged["agreement_units"] = merged["agreement_units"].fillna(0).astype(int)
        result.tables[workers_table] = merged
    if gold is not None:
        _add_gold(result, gold, gold_items, workers_table)
    overall = agreement[agreement["scope"] == "all"]
    result.summary["agreement"] = [
        {
            "measure": row.measure,
            "level": row.level,
            "alpha": _finite(row.alpha),
            "lower": _finite(row.lower),
            "upper": _finite(row.upper),
            "units": int(row.units),
            "coders": int(row.coders),
        }
        for row in overall.itertuples()
    ]
    counted = fragility.dropna(subset=["removals"])
    if len(counted):
        weakest = counted.sort_values("removals", kind="stable").iloc[0]
        result.summary["fragility"] = {
            "ranking": str(weakest["ranking"]),
            "higher": str(weakest["higher"]),
            "lower": str(weakest["lower"]),
            "removals": int(weakest["removals"]),
            "observations": int(weakest["observations"]),
            "method": str(weakest["method"]),
        }


def _add_gold(result: AnalysisResult, gold: pd.DataFrame, what: str, workers_table: str) -> None:
    own = gold.reindex(columns=list(GOLD_COLUMNS)).astype({"worker_id": str})
    table = result.tables.get(workers_table)
    if table is None:
        result.tables[workers_table] = own
    else:
        table = table.drop(columns=[c for c in GOLD_COLUMNS[1:] if c in table.columns])
        keyed = table.assign(_key=table["worker_id"].astype(str))
        merged = keyed.merge(own.rename(columns={"worker_id": "_key"}), on="_key", how="left").drop(columns="_key")
        for column in ("gold_items", "gold_correct"):
            merged[column] = merged[column].fillna(0).astype(int)
        result.tables[workers_table] = merged
    result.summary["gold"] = {
        "items": what,
        "workers": len(own),
        "answers": int(own["gold_items"].sum()),
        "correct": int(own["gold_correct"].sum()),
        "below_half": below_chance(own, 0.5),
        "interval": "Clopper–Pearson (exact) 95 %",
    }


def _finite(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
