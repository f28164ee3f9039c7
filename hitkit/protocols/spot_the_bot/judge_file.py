"""Spot The Bot with judge labels from a file (``hitkit analyze spot_the_bot DIR --judge-labels FILE``).

The file (:mod:`hitkit.analysis.judge_labels`): ``unit`` a conversation (annotations.csv's
``conversation_id``), ``segment_exchanges`` the segment (its first k exchanges), ``speaker`` A or B
(or the entity, 0 or 1) and ``label`` human, unsure or bot, one row per speaker; optional ``system``
(the speaker's system, needed for a conversation nobody annotated), ``study`` (where the export holds
several), ``confidence`` and ``human_probability`` (one per conversation: the crowd's share is drawn by
whole conversations).

A conversation counts as drawn for the crowd when people annotated it (hitkit's own judge.csv says
which were drawn; a file cannot). With one judge the tables are those of hitkit's own judge
(:func:`hitkit.protocols.spot_the_bot.judge_analysis.analysis_tables`: ``judge_win_rates`` by PPI++ for a
ratio of means, ``judge_bias``). Several judges are combined on each speaker's P(human) (bot 0, unsure
½, human 1) into one predictor chosen on held-out annotations, folds by conversation
(:func:`~hitkit.analysis.judges_combined.cross_fitted_best`), read back as a label (human above ½, bot
below, unsure at ½); each judge's calibration is ``judge_calibration`` (agreement: the judge's label
on the people's side of ½). With the file's ``human_probability`` the win rates are the
inverse-probability-weighted PPI++ ratio (:func:`hitkit.analysis.ppi_weighted_ratio.ipw_ratio`, by conversation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hitkit.analysis.judge_labels import LabelScale

SCALE = LabelScale(words={"bot": 0.0, "unsure": 0.5, "human": 1.0}, low=None, text="human, unsure or bot")
"""A speaker's label as its probability of being a person."""
SPEAKER = {"a": 0, "b": 1, "0": 0, "1": 1}
KEYS = ["study", "conversation_id", "segment_exchanges", "entity"]


def _label(score: np.ndarray) -> np.ndarray:
    return np.where(score > 0.5, "human", np.where(score < 0.5, "bot", "unsure"))


def read_labels(annotations: pd.DataFrame, path: str | Path) -> pd.DataFrame:
    """The file's labels keyed as the annotations are (:data:`KEYS`, system, score, confidence,
    human_probability, judge, line), every unit, speaker and system checked (file, line, column)."""
    from hitkit.analysis.judge_file_kit import refuse_unknown
    from hitkit.analysis.judge_labels import read_judge_labels
    from hitkit.errors import InputError

    raw = read_judge_labels(path, SCALE, required=("segment_exchanges", "speaker"), optional=("system", "study"))
    entity = raw["speaker"].str.lower().map(SPEAKER)
    if entity.isna().any():
        row = raw[entity.isna()].iloc[0]
        raise InputError(path, f"speaker {row['speaker']!r} is not A or B (or 0 or 1)", line=int(row["line"]))
    ann = annotations.assign(
        **{k: annotations[k].astype(str).str.strip() for k in ("study", "conversation_id", "segment_exchanges")},
        entity=annotations["entity"].astype(int),
    )
    studies = ann.drop_duplicates("conversation_id").set_index("conversation_id")["study"]
    only = ann["study"].iloc[0] if ann["study"].nunique() == 1 else ""
    study = raw["study"].where(raw["study"] != "", raw["unit"].map(studies)).fillna(only)
    refuse_unknown(path, raw, study == "", "a conversation of annotations.csv; give its study (column study)")
    systems = ann.drop_duplicates(["study", "conversation_id", "entity"]).set_index(
        ["study", "conversation_id", "entity"]
    )["system"]
    known = pd.Series(list(zip(study, raw["unit"], entity.astype(int)))).map(systems).to_numpy()
    system = np.where(pd.isna(known), raw["system"], known)
    refuse_unknown(
        path,
        raw,
        pd.Series(system == ""),
        "a conversation of annotations.csv; give the speaker's system for one nobody annotated (column system)",
    )
    return pd.DataFrame(
        {
            "study": study,
            "conversation_id": raw["unit"],
            "segment_exchanges": raw["segment_exchanges"],
            "entity": entity.astype(int),
            "system": system,
            "judge": raw["judge"],
            "score": raw["score"],
            "confidence": raw["confidence"],
            "human_probability": raw["human_probability"],
            "unit": raw["unit"],
            "line": raw["line"],
        }
    )


def analysis_tables_from_file(
    annotations: pd.DataFrame, path: str | Path, *, level: float = 0.95, seed: int = 0
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]]:
    """The judge's part of a Spot The Bot analysis from a judge-labels file: (tables, summary, warnings),
    the tables of :func:`hitkit.protocols.spot_the_bot.judge_analysis.analysis_tables` and ``judge_calibration``."""
    from hitkit.analysis.judge_file_kit import agreement_calibration, combine, probability
    from hitkit.analysis.ppi_active import REFERENCE as ACTIVE
    from hitkit.analysis.ppi_weighted_ratio import INTERVAL
    from hitkit.protocols.spot_the_bot.judge_analysis import analysis_tables

    labels = read_labels(annotations, path)
    grouped = labels.groupby([*KEYS, "judge"], sort=True).agg(
        system=("system", "first"), score=("score", "mean"), confidence=("confidence", "mean")
    )
    scores = grouped["score"].unstack("judge")
    confidence = grouped["confidence"].unstack("judge")
    ann = annotations.assign(
        **{k: annotations[k].astype(str).str.strip() for k in ("study", "conversation_id", "segment_exchanges")},
        entity=annotations["entity"].astype(int),
        is_human=(annotations["label"].astype(str).str.strip().str.lower() == "human").astype(float)
        + 0.5 * (annotations["label"].astype(str).str.strip().str.lower() == "unsure"),
    )
    human = ann.groupby(KEYS)["is_human"].mean().reindex(scores.index)
    kept, combined, chosen, dropped = combine(
        scores, human, scores.index.get_level_values("conversation_id"), seed=seed
    )
    agree = lambda f, y: np.sign(np.round(f - 0.5, 9)) == np.sign(np.round(y - 0.5, 9))  # noqa: E731
    calib = agreement_calibration(kept, human.reindex(kept.index), confidence.reindex(kept.index), agree, chosen)
    system = grouped["system"].groupby(level=KEYS).first().reindex(kept.index)
    annotated = set(ann["conversation_id"])
    judge = kept.index.to_frame(index=False).assign(
        system=system.to_numpy(),
        label=_label(combined),
        parsed=True,
        human_subset=lambda t: t["conversation_id"].isin(annotated),
        model=", ".join(sorted(map(str, scores.columns))),
    )
    segments = judge.groupby(["study", "conversation_id", "segment_exchanges"])["entity"].agg(
        lambda e: sorted(e) == [0, 1]
    )
    one_sided = int((~segments).sum())
    judge = judge.merge(segments.rename("both").reset_index(), on=["study", "conversation_id", "segment_exchanges"])
    judge = judge[judge["both"]].drop(columns="both")
    tables, summary, lines = analysis_tables(annotations, judge, level=level)
    pi = probability(path, labels, judge["conversation_id"].unique())
    if not isinstance(pi, float):
        from hitkit.protocols.spot_the_bot.judge_analysis import items, win_rates

        by_unit = pd.Series(pi, index=judge["conversation_id"].unique())
        tables["judge_win_rates"] = win_rates(items(annotations, judge), level=level, probability=by_unit)
        summary.update(estimator=ACTIVE + ", as a ratio of means with one λ", interval=INTERVAL)
        flags = tables["judge_win_rates"][["system_a", "system_b", "fallback"]].itertuples(index=False)
        summary["fallback_pairs"] = [f"{a} vs {b}" for a, b, f in flags if f]
    if dropped:
        lines.append(f"{dropped} speaker label(s) lack a label from some judge and are left out of the judge's tables")
    if one_sided:
        lines.append(f"{one_sided} segment(s) have a judge label for one speaker only and are left out")
    summary.update(
        labels=len(labels),
        source=str(path),
        judges=sorted(map(str, scores.columns)),
        combined="each judge and their mean, the best on held-out annotations per fold (cross-fitted)",
        chosen=chosen,
        selection="uniform" if isinstance(pi, float) else "uncertainty (the file's human_probability)",
        models=sorted(map(str, scores.columns)),
    )
    return {"judge_calibration": calib, **tables}, summary, lines
