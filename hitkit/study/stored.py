"""A study in the database: created once from its config, then loaded by any process that needs it."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Conversation, Hit, HitUnit, Study, System, Turn, Unit
from hitkit.errors import HitkitError
from hitkit.events import add_event
from hitkit.protocols import task_for
from hitkit.protocols.base import HitSpec, Material, TaskType, UnitSpec
from hitkit.providers import CrowdProvider, make_provider
from hitkit.secret import resolve_secret as deployment_secret
from hitkit.study.config import StudyConfig
from hitkit.study.loading import STUDY_FILE


@dataclass
class StudyContext:
    """Everything a process needs to act on one study: its row id, typed config, task and provider."""

    study_id: int
    name: str
    config: StudyConfig
    task: TaskType
    provider: CrowdProvider
    secret: str

    @classmethod
    def load(cls, session: Session, name: str, secret: str) -> StudyContext:
        """The context of the study called ``name``; HitkitError if there is none."""
        study = session.scalar(select(Study).where(Study.name == name))
        if study is None:
            raise HitkitError(f"no study called '{name}' in this database")
        return cls.of(study, secret)

    @classmethod
    def of(cls, study: Study, secret: str) -> StudyContext:
        base_dir = Path(study.config_path).parent if study.config_path else Path(".")
        config = STUDY_FILE.model_validate({**study.config, "base_dir": base_dir})
        provider = make_provider(config, secret)
        provider.study_uid = study.uid  # per-database: what provider request tokens derive from
        return cls(study.id, study.name, config, task_for(config), provider, secret)

    def fee(self, reward: Decimal, max_assignments: int) -> Decimal:
        return self.provider.fee(reward, max_assignments)


def resolve_secret(db_url: str) -> str:
    """The server secret: HITKIT_SECRET, else the one kept in the database (see :mod:`hitkit.secret`)."""
    return deployment_secret(db_url)


def create_study(session: Session, config: StudyConfig, config_path: Path | None, secret: str) -> StudyContext:
    """Store a new study with its systems, material, units and HITs (not yet posted).

    The task's material is built (and every data file validated) before anything is written, so
    a bad input leaves the database untouched.
    """
    if session.scalar(select(Study).where(Study.name == config.study)) is not None:
        raise HitkitError(
            f"a study called '{config.study}' already exists in this database; "
            f"continue it with `hitkit launch --resume`, or choose another name in 'study:'"
        )
    task = task_for(config)
    material: Material = task.build()
    if config.judge is not None:
        # A judge of the material labels every unit (hitkit.judges.judging); only the crowd's random share become units
        # here (a judge that labels after the crowd keeps them all: hitkit.judges.human_subset.rated draws its share).
        from hitkit.judges.human_subset import crowd_units

        material = Material(units=crowd_units(config, material.units), conversations=material.conversations)
    rng = random.Random(config.seed)
    hit_specs = task.pack(material.units, rng)

    study = Study(
        name=config.study,
        task_type=config.task,
        provider=config.provider.kind,
        status="draft",
        config=config.model_dump(mode="json"),
        config_path=str(config_path) if config_path else None,
        budget=config.budget,
        currency=config.provider.currency,
        seed=config.seed,
    )
    session.add(study)
    session.flush()
    systems = {}
    control = task_for(config).control_systems()
    for s in config.systems:
        is_control = s.name in control
        systems[s.name] = System(
            study_id=study.id, name=s.name, is_control=is_control, config=s.model_dump(mode="json")
        )
        session.add(systems[s.name])
    session.flush()
    conversations = {}
    for conv in material.conversations:
        row = Conversation(study_id=study.id, key=conv.key, kind=conv.kind, meta=dict(conv.meta))
        row.turns = [
            Turn(
                index=i, speaker=t.speaker, text=t.text, system_id=systems[t.system].id if t.system in systems else None
            )
            for i, t in enumerate(conv.turns)
        ]
        session.add(row)
        conversations[conv.key] = row
    session.flush()
    store_work(session, study.id, config, material.units, hit_specs, {k: c.id for k, c in conversations.items()})
    add_event(session, study.id, "study_created", "cli", {"units": len(material.units), "hits": len(hit_specs)})
    session.flush()
    return StudyContext.of(study, secret)


def store_work(
    session: Session,
    study_id: int,
    config: StudyConfig,
    units: Sequence[UnitSpec],
    hit_specs: Sequence[HitSpec],
    conversation_ids: Mapping[str, int],
    first_index: int = 0,
) -> None:
    """Add ``units`` and the HITs that pack them (not yet posted, numbered from ``first_index``) to a
    study: at its creation, and for a second wave of work (:mod:`hitkit.judges.second_wave`)."""
    rows = {}
    for spec in units:
        rows[spec.key] = Unit(
            study_id=study_id,
            key=spec.key,
            payload=dict(spec.payload),
            required_answers=spec.required_answers,
            conversation_id=conversation_ids.get(spec.conversation_key) if spec.conversation_key else None,
        )
        session.add(rows[spec.key])
    session.flush()
    lifetime = config.hit.lifetime_hours * 3600
    for index, hit_spec in enumerate(hit_specs, start=first_index):
        hit = Hit(
            study_id=study_id,
            index=index,
            max_assignments=hit_spec.max_assignments,
            reward=config.hit.reward,
            lifetime_s=lifetime,
        )
        hit.units = [HitUnit(unit_id=rows[key].id, position=pos) for pos, key in enumerate(hit_spec.unit_keys)]
        session.add(hit)


def unit_answer_counts(session: Session, study_id: int) -> dict[int, int]:
    """For each unit, how many done assignments answered it (auto answers included)."""
    from hitkit.db.models import Assignment, Response
    from hitkit.tables.schema import DONE_STATUSES

    rows = session.execute(
        select(Response.unit_id, func.count(func.distinct(Response.assignment_id)))
        .join(Assignment, Response.assignment_id == Assignment.id)
        .join(Hit, Assignment.hit_id == Hit.id)
        .where(Hit.study_id == study_id, Assignment.status.in_(DONE_STATUSES))
        .group_by(Response.unit_id)
    ).all()
    return dict(rows)
