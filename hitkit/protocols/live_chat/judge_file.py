"""Live chat (and rating) with judge labels from a file (``hitkit analyze live_chat DIR --judge-labels FILE``).

The file (:mod:`hitkit.analysis.judge_labels`): ``unit`` a conversation of the export (ratings.csv's
``conversation_id``; rating: its response, :mod:`hitkit.protocols.rating.judge_file`), ``criterion`` one
of the study's criteria, ``label`` the judge's rating on the slider's scale, 0–100 (as stated, before
negative criteria are reversed); optional ``system`` and ``worker_id`` for a conversation nobody rated
(it is not in ratings.csv; without ``system`` it is refused), ``confidence`` and ``human_probability``.

Each judge is read as hitkit's own judge is (:func:`hitkit.protocols.live_chat.judge.conversations`:
reversed for negative criteria, standardised over its ratings as one more worker); the human label Y is
the rating worker's z, as ever. Several judges are combined into one predictor chosen on held-out human
labels (:func:`~hitkit.analysis.judges_combined.cross_fitted_best`, folds by conversation), and each
judge's calibration is a table (``judge_calibration``: agreement = the judge's z on the people's side of
their mean; ECE of the file's confidence). The tables are then those of the built-in judge
(``judge_scores``, ``judge_bias``) when every conversation had the same chance to be rated; with the
file's ``human_probability`` (one per conversation) each cell is the inverse-probability-weighted PPI++
mean (:func:`ipw_scores`, :func:`~hitkit.analysis.ppi_active.ipw_ppi_mean`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hitkit.analysis.judge_labels import LabelScale

SCALE = LabelScale(words={}, low=0.0, high=100.0, text="a number in [0, 100] (the slider's scale)")
"""A rating on the slider, as a worker gives it."""


def judge_tables(
    z: pd.DataFrame, path: str | Path, criteria, *, unit_of=None
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """(the file's labels, read; one ``judge.csv``-shaped table per judge): conversation_id, worker_id,
    system, criterion, score (the mean of its calls), confidence, human_subset (the conversation has a
    rating in ``z``), human_probability, parsed, model. ``unit_of``: the file's unit → conversation_id
    (rating names responses as item/system)."""
    from hitkit.analysis.judge_file_kit import refuse_unknown
    from hitkit.analysis.judge_labels import read_judge_labels
    from hitkit.errors import InputError

    raw = read_judge_labels(path, SCALE, required=("criterion",), optional=("system", "worker_id"))
    if unit_of is not None:
        raw["unit"] = unit_of(raw)
    known = {c.name for c in criteria}
    bad = ~raw["criterion"].isin(known)
    if bad.any():
        row = raw[bad].iloc[0]
        raise InputError(
            path, f"criterion {row['criterion']!r} is not one of the study's {sorted(known)}", line=int(row["line"])
        )
    rated = z[~z["is_control"]].drop_duplicates("conversation_id").set_index("conversation_id")
    controls = set(z.loc[z["is_control"], "conversation_id"])
    qc = raw["unit"].isin(controls)  # the QC bot's conversations are not ranked: their labels are left out
    raw = raw[~qc].copy()
    raw.attrs["qc_labels"] = int(qc.sum())
    refuse_unknown(
        path,
        raw,
        ~raw["unit"].isin(rated.index) & (raw["system"] == ""),
        "a conversation of ratings.csv; give the system of a conversation nobody rated (column system)",
    )
    system = raw["unit"].map(rated["system"]).fillna(raw["system"])
    worker = raw["unit"].map(rated["worker_id"].astype(str)).fillna(raw["worker_id"])
    raw = raw.assign(system=system, worker_id=worker)
    grouped = raw.groupby(["judge", "unit", "criterion"], sort=True).agg(
        system=("system", "first"),
        worker_id=("worker_id", "first"),
        score=("score", "mean"),
        confidence=("confidence", "mean"),
        human_probability=("human_probability", "first"),
    )
    tables = {}
    for judge, own in grouped.reset_index().groupby("judge", sort=True):
        tables[str(judge)] = own.rename(columns={"unit": "conversation_id"}).assign(
            human_subset=lambda t: t["conversation_id"].isin(rated.index), parsed=True, model=str(judge)
        )
    return raw, tables


def ipw_scores(per: pd.DataFrame, criteria, probability: pd.Series, *, level: float = 0.95) -> pd.DataFrame:
    """:func:`hitkit.protocols.live_chat.judge.scores`' table with every cell the inverse-probability-weighted
    PPI++ mean (:func:`~hitkit.analysis.ppi_active.ipw_ppi_mean`); ``probability``: each conversation's
    probability of having been rated (indexed by conversation_id); the human-only columns are its λ = 0
    estimate, the judge-only ones the plain mean over every conversation."""
    from hitkit.analysis import ppi
    from hitkit.analysis.ppi_active import ipw_ppi_mean
    from hitkit.protocols.live_chat.judge import SCORE_COLUMNS, _cells

    rank = {"overall": -1, **{c.name: i for i, c in enumerate(criteria)}}
    rows = []
    for system, criterion, cell in _cells(per):
        labelled = cell["human"].notna().to_numpy()
        y, f = cell["human"].fillna(0.0).to_numpy(float), cell["judge"].to_numpy(float)
        est = ipw_ppi_mean(y, f, labelled, cell["conversation_id"].map(probability).to_numpy(float), level=level)
        judge = ppi.mean_interval(f, level=level)
        h = est.human
        rows.append(
            (system, criterion, int(labelled.sum()), len(cell), h.estimate, h.low, h.high)
            + (judge.estimate, judge.low, judge.high, est.estimate, est.low, est.high)
            + (est.lam, est.n_effective, est.fallback)
        )
    table = pd.DataFrame(rows, columns=list(SCORE_COLUMNS))
    order = table["criterion"].map(rank)
    return table.assign(_o=order).sort_values(["system", "_o"]).drop(columns="_o").reset_index(drop=True)


def _agree(f: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The judge's z and the worker's on the same side of their means (0 counts as above)."""
    return (f >= 0) == (y >= 0)


def analysis_tables_from_file(
    z: pd.DataFrame,
    path: str | Path,
    criteria,
    passed: set[str],
    *,
    level: float = 0.95,
    seed: int = 0,
    unit_of=None,
    what: str = "rated conversation(s)",
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]]:
    """The judge's part of a live-chat (or rating) analysis from a judge-labels file: (tables, summary,
    warnings), the tables of :func:`hitkit.protocols.live_chat.judge.analysis_tables` and
    ``judge_calibration``. ``z``: every counted rating standardised per worker; ``passed``: the workers
    who passed QC (a conversation nobody rated counts unless the file names a worker who failed)."""
    from hitkit.analysis import ppi
    from hitkit.analysis.judge_file_kit import agreement_calibration, combine, probability, warnings_for
    from hitkit.analysis.ppi_active import REFERENCE as ACTIVE
    from hitkit.protocols.live_chat.judge import bias, conversations, scores

    raw, tables = judge_tables(z, path, criteria, unit_of=unit_of)
    keys = ["conversation_id", "criterion"]
    per_judge = {
        judge: conversations(z, table, criteria, passed | {""}).set_index(keys) for judge, table in tables.items()
    }
    frames = pd.concat({j: p["judge"] for j, p in per_judge.items()}, axis=1)
    first = next(iter(per_judge.values()))
    base = pd.concat([p.drop(columns="judge") for p in per_judge.values()])
    base = base[~base.index.duplicated()].reindex(frames.index)
    human = base["human"]
    kept, combined, chosen, dropped = combine(frames, human, frames.index.get_level_values(0), seed=seed)
    confidence = pd.concat({j: t.set_index(keys)["confidence"].reindex(kept.index) for j, t in tables.items()}, axis=1)
    calib = agreement_calibration(kept, human.reindex(kept.index), confidence, _agree, chosen)
    per = base.loc[kept.index].assign(judge=combined).reset_index()
    per = per[list(first.reset_index().columns)]
    pi = probability(path, raw, per["conversation_id"].unique())
    if isinstance(pi, float):
        table, estimator, rule = scores(per, criteria, level=level), ppi.REFERENCE, "uniform"
    else:
        by_unit = pd.Series(pi, index=per["conversation_id"].unique())
        table, estimator = ipw_scores(per, criteria, by_unit, level=level), ACTIVE
        rule = "uncertainty (the file's human_probability)"
    rated = set(z.loc[~z["is_control"] & z["worker_id"].astype(str).isin(passed), "conversation_id"])
    lines = warnings_for(dropped, len(rated - set(per["conversation_id"])), what)
    if raw.attrs.get("qc_labels"):
        lines.append(f"{raw.attrs['qc_labels']} judge label(s) of the QC bot's conversations are left out (not ranked)")
    fallback = [f"{s} {c}" for s, c, f in table[["system", "criterion", "fallback"]].itertuples(index=False) if f]
    summary = {
        "labels": len(raw),
        "source": str(path),
        "judges": sorted(tables),
        "combined": "each judge and their mean, the best on held-out human labels per fold (cross-fitted)",
        "chosen": chosen,
        "conversations": int(per["conversation_id"].nunique()),
        "human_conversations": int(per.loc[per["human"].notna(), "conversation_id"].nunique()),
        "selection": rule,
        "level": level,
        "estimator": estimator,
        "interval": "jackknife t (λ re-estimated)" if rule == "uniform" else "plug-in linearised variance, t_{n−1}",
        "fallback_cells": fallback,
    }
    out = {"judge_calibration": calib, "judge_scores": table, "judge_bias": bias(per, level=level)}
    return out, summary, lines


def add_judge_file(result, z: pd.DataFrame, path: str | Path, criteria, *, seed: int = 0, **options) -> None:
    """Add :func:`analysis_tables_from_file`'s tables, its summary (``judge``) and warnings to ``result``."""
    workers = result.tables["workers"]
    passed = set(workers.loc[workers["passed"], "worker_id"].astype(str))
    tables, summary, lines = analysis_tables_from_file(z, path, criteria, passed, seed=seed, **options)
    result.tables.update(tables)
    result.summary["judge"] = summary
    result.summary["warnings"] = list(result.summary.get("warnings", [])) + lines
