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
from hitkit.analysis.gold import GOLD_COLUMNS, below_chance, gold_verdicts, verdict_rule


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
    if workers is not None:
        _merge_workers(result, workers_table, workers, WORKER_COLUMNS, ("agreement_units",))
    if gold is not None:
        _merge_workers(result, workers_table, gold, GOLD_COLUMNS, ("gold_items", "gold_correct"))
        result.summary["gold"] = _gold_summary(gold, gold_items)
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


def _merge_workers(
    result: AnalysisResult, name: str, own: pd.DataFrame, columns: tuple[str, ...], counts: tuple[str, ...]
) -> None:
    """Put ``own``'s ``columns`` into the result's per-worker table ``name`` by worker_id (``own`` itself
    when the result has no such table); ``counts`` are 0 for a worker ``own`` does not list."""
    table = result.tables.get(name)
    if table is None:
        result.tables[name] = own.reset_index(drop=True)
        return
    own = own.reindex(columns=list(columns)).astype({"worker_id": str}).rename(columns={"worker_id": "_key"})
    keyed = table.drop(columns=[c for c in columns[1:] if c in table.columns]).assign(
        _key=table["worker_id"].astype(str)
    )
    merged = keyed.merge(own, on="_key", how="left").drop(columns="_key")
    for column in counts:
        merged[column] = merged[column].fillna(0).astype(int)
    result.tables[name] = merged


def _gold_summary(gold: pd.DataFrame, what: str) -> dict:
    return {
        "items": what,
        "workers": len(gold),
        "answers": int(gold["gold_items"].sum()),
        "correct": int(gold["gold_correct"].sum()),
        "below_half": below_chance(gold, 0.5),
        "interval": "Clopper–Pearson (exact) 95 %",
    }


def gold_qc(result: AnalysisResult, qc) -> None:
    """Apply the study file's gold QC rule (``gold.qc``: upper_below, misses, level) to ``result``: a
    ``gold_qc`` column (passed / failed; empty for a worker without gold items) in the table that holds
    the gold columns, and the rule and the failed workers in ``summary["gold"]``. Nothing without gold
    answers or without a rule."""
    summary = result.summary.get("gold")
    rule = verdict_rule(qc.upper_below, qc.misses, qc.level)
    name = next((n for n, t in result.tables.items() if "gold_items" in t.columns), None)
    if not summary or not rule or name is None:
        return
    table = result.tables[name]
    seen = table[table["gold_items"] > 0]
    verdicts = gold_verdicts(seen, upper_below=qc.upper_below, misses=qc.misses, level=qc.level)
    words = {True: "passed", False: "failed"}
    table["gold_qc"] = [words[verdicts[str(w)]] if str(w) in verdicts else "" for w in table["worker_id"]]
    summary["qc_rule"] = rule
    summary["qc_failed"] = sorted(w for w, ok in verdicts.items() if not ok)


def _finite(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
