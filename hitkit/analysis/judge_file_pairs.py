"""Pairwise-shaped analyses (pairwise A/B, the arena) with judge labels from a file
(``hitkit analyze pairwise|arena DIR --judge-labels FILE``).

The file (:mod:`hitkit.analysis.judge_labels`) may hold several judges; each judge's calibration against
the people's votes is its own table (``judge_calibration``), and the judges are combined into one
predictor, chosen on held-out human labels (:func:`~hitkit.analysis.judges_combined.cross_fitted_best`).
With that predictor the tables are those of hitkit's own pairwise judging (``judge_win_rates``,
``judge_bias``, ``judge_strengths``: :func:`hitkit.analysis.ppi.win_rates`,
:func:`hitkit.analysis.ppi_bradley_terry.strengths`) when every item had the same chance to go to
people; when the file gives each unit's ``human_probability`` (the uncertainty rule), the win rates
and the Bradley–Terry strengths are the inverse-probability-weighted PPI++ of
:mod:`hitkit.analysis.ppi_weighted`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd


def pair_tables(
    human: pd.DataFrame,
    path: str | Path,
    *,
    level: float = 0.95,
    seed: int = 0,
    unit_name: str = "votes.csv's item_id",
    refuse: str | None = None,
    raw: pd.DataFrame | None = None,
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]]:
    """The judge's part of a pairwise-shaped analysis (pairwise, arena) from a judge-labels file: (tables,
    summary, warnings). ``human``: per labelled comparison (a unit and a pair of its systems: a pairwise
    item holds one per pair of the systems that answered it, an arena battle one), unit, system_a <
    system_b, ``human`` (the people's mean score for system_a) and ``votes``; ``unit_name`` says what a unit is in an error; ``refuse``: a
    label naming a unit neither in ``human`` nor given a pair is refused (file, line, column) with this
    hint, else left out with a warning; ``raw``: the file already read (:func:`read_judge_labels`)."""
    from hitkit.analysis import ppi, ppi_bradley_terry, ppi_weighted
    from hitkit.analysis.judge_file_kit import refuse_unknown
    from hitkit.analysis.judge_labels import (
        comparison_key,
        comparisons,
        per_judge,
        read_judge_labels,
        unit_probability,
    )
    from hitkit.analysis.judges_combined import calibration, cross_fitted_best
    from hitkit.analysis.ppi_active import REFERENCE as ACTIVE
    from hitkit.errors import InputError

    raw = read_judge_labels(path) if raw is None else raw
    human = human.assign(key=comparison_key(human["unit"], human["system_a"], human["system_b"]))
    if refuse is not None:
        # a row naming no systems must name a unit the export (or another row naming systems) knows
        known = set(human["unit"]) | set(raw.loc[raw["system_a"] != "", "unit"])
        refuse_unknown(path, raw, (raw["system_a"] == "") & ~raw["unit"].isin(known), refuse)
    labels = comparisons(raw, human, path)
    if labels.empty:
        raise InputError(path, f"names no unit of the export (unit = {unit_name}) and no pair of systems")
    # every comparison (a unit and a pair of its systems): the voted ones and those only the file names
    pairs = pd.concat([human[["key", "unit", "system_a", "system_b"]], labels[["key", "unit", "system_a", "system_b"]]])
    pairs = pairs.drop_duplicates("key").set_index("key")
    table = per_judge(labels, key="key")
    scores = table.pivot(index="key", columns="judge", values="score")
    complete = scores.notna().all(axis=1)
    scores = scores[complete]
    units = scores.index.to_numpy()
    frame = pairs.loc[units].reset_index()
    frame = frame.merge(human[["key", "human", "votes"]], on="key", how="left")
    frame["votes"] = frame["votes"].fillna(0).astype(int)
    human_series = pd.Series(frame["human"].to_numpy(float), index=units)
    combined, chosen = cross_fitted_best(scores, human_series, units, seed=seed)
    frame["judge"] = combined
    calib = calibration(scores, human_series, chosen)
    try:
        probability = unit_probability(labels, units, key="key")
    except ValueError as exc:
        raise InputError(path, f"column human_probability: {exc}") from None
    lines = []
    dropped = int((~complete).sum())
    if dropped:
        lines.append(f"{dropped} unit(s) lack a label from some judge and are left out of the judge's tables")
    if labels.attrs.get("unknown_units"):
        lines.append(
            f"{labels.attrs['unknown_units']} judge label(s) name units neither voted on nor given a pair; left out"
        )
    unjudged = len(set(human["key"]) - set(units))
    if unjudged:
        lines.append(f"{unjudged} voted item(s) have no judge label and are left out of the judge's tables")
    only_judged = sorted(set(frame["unit"]) - set(human["unit"]))
    if only_judged:
        lines.append(
            f"{len(only_judged)} unit(s) of the judge labels appear in no vote (first: {only_judged[0]!r}): judged "
            "only, which is expected where people labelled a share; check for a mistyped unit otherwise"
        )
    thin = frame[frame["human"].notna()].groupby(["system_a", "system_b"]).size()
    pairs_seen = frame.groupby(["system_a", "system_b"]).size()
    few = [f"{a} vs {b}" for a, b in pairs_seen.index if thin.get((a, b), 0) < 2]
    if few:
        lines.append(
            f"{len(few)} pair(s) have fewer than two items people labelled ({', '.join(few[:3])}"
            f"{' …' if len(few) > 3 else ''}): no people-only or prediction-powered estimate for them"
        )
    items = frame[["unit", "system_a", "system_b", "human", "judge", "votes"]].rename(columns={"unit": "item_id"})
    tables = {"judge_calibration": calib, "judge_bias": ppi.judge_bias(items, level=level)}
    if isinstance(probability, float):
        tables["judge_win_rates"] = ppi.win_rates(items, level=level)
        voted = items["votes"] > 0
        prior = float(voted.sum() / items.loc[voted, "votes"].sum()) if voted.any() else 1.0
        tables["judge_strengths"] = ppi_bradley_terry.strengths(items, level=level, prior=prior)
        estimator, rule = ppi.REFERENCE, "uniform"
    else:
        weighted = items.assign(human_probability=probability)
        tables["judge_win_rates"] = ppi_weighted.ipw_win_rates(weighted, level=level)
        voted = items["votes"] > 0
        prior = float(voted.sum() / items.loc[voted, "votes"].sum()) if voted.any() else 1.0
        tables["judge_strengths"] = ppi_weighted.ipw_strengths(weighted, level=level, prior=prior)
        estimator, rule = ACTIVE, "uncertainty (the file's human_probability)"
    fallback = [
        f"{a} vs {b}"
        for a, b, f in tables["judge_win_rates"][["system_a", "system_b", "fallback"]].itertuples(index=False)
        if f
    ]
    summary = {
        "labels": len(raw),
        "source": str(path),
        "judges": sorted(scores.columns.astype(str)),
        "combined": "each judge and their mean, the best on held-out human labels per fold (cross-fitted)",
        "chosen": chosen,
        "items": len(items),
        "human_items": int(items["human"].notna().sum()),
        "selection": rule,
        "level": level,
        "estimator": estimator,
        "interval": "jackknife t (λ re-estimated)" if rule == "uniform" else "plug-in linearised variance, t_{n−1}",
        "fallback_pairs": fallback,
        "strengths_estimator": ppi_bradley_terry.REFERENCE if rule == "uniform" else ppi_weighted.REFERENCE,
        "strengths_interval": ppi_bradley_terry.INTERVAL if rule == "uniform" else ppi_weighted.INTERVAL,
    }
    return tables, summary, lines
