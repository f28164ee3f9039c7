"""Where the crowd's share of a judged study stands: which rule drew it and each unit's probability of going
to the crowd (``judge.select: uncertainty``; the second wave itself is :mod:`hitkit.judges.second_wave`'s).
Read by the export (``judge.csv``'s ``human_probability``) and by the second wave.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Event, JudgeLabel, Study, Unit
from hitkit.protocols import PROTOCOLS, task_for
from hitkit.protocols.base import UnitSpec
from hitkit.study.config import StudyConfig

EVENT = "judge_second_wave"
"""The event that records the second wave: every unit's π, the pilot and the units drawn."""


def clusters(config: StudyConfig, units: Sequence[UnitSpec]) -> dict[str, list[UnitSpec]]:
    """The sampling units of the crowd's share, in the material's order: each cluster's key (the protocol's
    judge module's ``cluster(unit)``: Spot The Bot's conversation; a unit its own, by its key, where the
    module has none) → its units, in order. Every unit of a cluster goes to the crowd or none does."""
    cluster = getattr(PROTOCOLS[config.task].module("judge"), "cluster", None)
    out: dict[str, list[UnitSpec]] = {}
    for unit in units:
        out.setdefault(unit.key if cluster is None else cluster(unit), []).append(unit)
    return out


def uncertain(config: StudyConfig) -> bool:
    """Whether the study draws its crowd's share where the judge is unsure."""
    return config.judge is not None and config.judge.select == "uncertainty"


def recorded(session: Session, study_id: int) -> dict | None:
    """The second wave's event data, once drawn."""
    return session.scalar(
        select(Event.data).where(Event.study_id == study_id, Event.kind == EVENT).order_by(Event.id).limit(1)
    )


def half(seed: int, key: str) -> bool:
    """The unit's half for cross-fitting the second wave: a seeded hash of its key."""
    return int(hashlib.sha256(f"{seed}:judge:half:{key}".encode()).hexdigest()[:8], 16) % 2 == 0


def judged_units(session: Session, study: Study, config: StudyConfig) -> list[UnitSpec]:
    """The units of the material the judge labelled (not, say, gold comparisons that only check workers)."""
    judged = set(session.scalars(select(JudgeLabel.unit_key).where(JudgeLabel.study_id == study.id)))
    return [u for u in task_for(config).build().units if u.key in judged]


def probabilities(session: Session, study: Study, config: StudyConfig) -> dict[str, float] | None:
    """Each judged unit's probability of going to the crowd (its key → π, its cluster's: :func:`clusters`):
    None for a uniform share; the recorded π once the second wave is drawn; before it, the pilot's fraction
    of the clusters of the unit's stratum (the design so far is a uniform sample of clusters within each
    stratum)."""
    if not uncertain(config):
        return None
    drawn = recorded(session, study.id)
    if drawn is not None:
        return {k: float(v) for k, v in drawn["pi"].items()}
    module = PROTOCOLS[config.task].module("judge")
    pilot = set(session.scalars(select(Unit.key).where(Unit.study_id == study.id)))
    strata: dict[str, list[list[str]]] = {}
    for members in clusters(config, judged_units(session, study, config)).values():
        strata.setdefault(module.stratum(members[0]), []).append([u.key for u in members])
    return {
        k: sum(any(u in pilot for u in keys) for keys in groups) / len(groups)
        for groups in strata.values()
        for keys in groups
        for k in keys
    }
