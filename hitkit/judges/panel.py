"""Several judges of one study (``judge.also``): each asked about every item as the first judge is, its
labels stored apart (the variant of a label names its judge) and exported together in the judge-labels
file format (``judge_labels.csv``: :mod:`hitkit.analysis.judge_labels`), which the analysis reads to
measure each judge's calibration against people and combine them
(:mod:`hitkit.analysis.judges_combined`). The first judge's labels stay ``judge.csv``, as with one judge.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pandas as pd
from sqlalchemy import select

from hitkit.db.models import JudgeLabel, Study
from hitkit.errors import ConfigError
from hitkit.judges.section import judge_section
from hitkit.protocols import PROTOCOLS
from hitkit.protocols.base import JudgeRequest

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from hitkit.study.config import StudyConfig
    from hitkit.study.judge_config import JudgeConfig

SEPARATOR = "~"
"""Between a label's variant (pairwise: its display order) and its judge's number, for every judge but the first."""


@dataclass(frozen=True)
class Panelist:
    """One judge of the study: its number (0: the first), name and settings (the first judge's, with this
    judge's model, server and prompts where it gives them)."""

    index: int
    name: str
    section: JudgeConfig


def panel(config: StudyConfig) -> list[Panelist]:
    """The study's judges, the first first."""
    first = judge_section(config)
    out = [Panelist(0, first.first_name, first)]
    for i, other in enumerate(first.also, start=1):
        given = {k: v for k, v in other.model_dump(exclude={"name"}).items() if v is not None}
        out.append(Panelist(i, other.name, first.model_copy(update={**given, "also": [], "name": other.name})))
    return out


def variant(base: str, index: int) -> str:
    """The stored variant of judge ``index``'s label asked as ``base``."""
    return base if index == 0 else f"{base}{SEPARATOR}{index}"


def first_judges(variant_column):
    """A SQL condition on a label's variant column selecting the first judge's labels."""
    return ~variant_column.contains(SEPARATOR, autoescape=True)


def requests_of(requests: list[JudgeRequest], judge: Panelist) -> list[JudgeRequest]:
    """The requests as judge ``judge`` is asked them: its variant, and its name in each label's meta."""
    if judge.index == 0:
        return requests
    return [replace(r, variant=variant(r.variant, judge.index), meta={**r.meta, "judge": judge.name}) for r in requests]


def check_panel(config: StudyConfig) -> None:
    """ConfigError where ``judge.also`` names judges for a protocol whose labels cannot yet be exported in the
    judge-labels format (pairwise can; the others take several judges' labels with ``--judge-labels``)."""
    if config.judge is None or not config.judge.also:
        return
    if not hasattr(PROTOCOLS[config.task].module("judge"), "labels_file_row"):
        raise ConfigError(
            f"judge.also: several judges in the study are available for pairwise in this version, not for "
            f"{config.task}; label the items with each judge and give the labels to `hitkit analyze "
            f"{config.task} DIR --judge-labels FILE` (docs/COLUMNS.md)"
        )


def labels_table(session: Session, study: Study, config: StudyConfig, probability=None) -> pd.DataFrame:
    """Every judge's done labels in the judge-labels file format (unit, judge, label, system_a, system_b,
    confidence; ``human_probability`` where ``probability`` maps each unit key to it), the first judge first."""
    module = PROTOCOLS[config.task].module("judge")
    names = {j.index: j.name for j in panel(config)}
    rows = session.scalars(
        select(JudgeLabel)
        .where(JudgeLabel.study_id == study.id, JudgeLabel.status == "done")
        .order_by(JudgeLabel.unit_key, JudgeLabel.variant)
    ).all()
    out = []
    for r in rows:
        index = int(r.variant.split(SEPARATOR)[1]) if SEPARATOR in r.variant else 0
        if index not in names:
            continue  # a judge the study file no longer names
        row = {**module.labels_file_row(r.meta, r.label), "judge": names[index]}
        if probability is not None:
            row["human_probability"] = probability[r.unit_key]
        out.append(row)
    columns = ["unit", "judge", "label", "system_a", "system_b", "confidence"]
    frame = pd.DataFrame(out, columns=columns + (["human_probability"] if probability is not None else []))
    return frame.sort_values("judge", kind="stable", key=lambda s: s.map({n: i for i, n in names.items()}.get))
