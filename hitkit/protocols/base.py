"""The protocol seam: what differs between Spot The Bot, live chat, pairwise A/B and rating.

A :class:`Protocol` is the registry's entry for one protocol: its names, its tables and the modules
of its folder that the shared code calls (task type, analysis, report, dashboard views). Its
:class:`TaskType` is the part that runs a study:

A task type turns the study's data into units, packs units into HITs under its protocol's
constraints, decides how each assignment sees its units (order, sides — recorded), says which
questions each unit asks and what answers are valid, answers like a simulated worker, and turns
stored responses into its tidy export tables. Everything else — entry, tokens, saving, submitting,
paying, scheduling — is shared and lives outside the task type.
"""

from __future__ import annotations

import importlib
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from sqlalchemy.orm import Session

from hitkit.db.models import Study, Unit
from hitkit.worker.validation import answer_text

if TYPE_CHECKING:
    import pandas as pd

    from hitkit.study.config import StudyConfig


@dataclass(frozen=True)
class Protocol:
    """One protocol's entry in the registry (:mod:`hitkit.protocols`).

    Shared code asks this object, never compares protocol names. The modules of the protocol's
    folder are imported only when asked for, so that the web tier, which needs the task type and the
    vocabulary, never loads the statistics (scipy) of an analysis.
    """

    name: str
    """The study file's ``task:`` value and the ``hitkit analyze`` argument."""
    title: str
    """The protocol as a report's heading names it, with its source."""
    table: str
    """The export table of its answers (``votes``, ``ratings`` ...): it tells which protocol a folder holds."""
    columns: tuple[str, ...]
    """The columns of that table, in order (the protocol's vocabulary module holds them)."""
    analysis_marker: str
    """A table only this protocol's analysis writes: it tells which protocol an analysis folder holds."""
    cluster_units: tuple[str, ...]
    """The units a clustered bootstrap can resample (``hitkit analyze --cluster``); the first is the default."""
    analysis_options: frozenset[str] = frozenset()
    """``hitkit analyze`` options beyond the shared ones that apply to this protocol only."""
    significance_units: tuple[str, ...] = ()
    """The units its significance tests can take (``hitkit analyze --unit``); the first is the default (a
    clustered test, valid when workers differ), the published paper's test among the others."""
    needs_section: bool = True
    """True when a study file of this protocol must have a section of its name."""
    uses_generation: bool = False
    """True when the study's ``generation:`` section makes its material (bot–bot conversations)."""
    judged: bool = False
    """True when ``PACKAGE.judge`` says how an LLM judge labels its units (the study file's ``judge:``,
    :mod:`hitkit.judges.judging`) and its analysis combines the judge's labels with the crowd's."""
    mturk_rules: bool = False
    """True when ``PACKAGE.mturk`` holds rules (a ``Rules`` section and ``rows``) that import its table
    from MTurk batch results; a protocol without them imports with a mapping's ``function:``."""
    gold_sources: tuple[str, ...] = ()
    """The kinds of gold item (:mod:`hitkit.study.gold_section`) the study file's ``gold:`` may mix into its
    HITs, the default first; none: the protocol takes no ``gold:`` section (``gold_note`` says why)."""
    gold_note: str = ""
    """Why a protocol without ``gold_sources`` needs none (its own known-answer items), for the error."""

    @property
    def package(self) -> str:
        """The protocol's folder as a module path, ``hitkit.protocols.NAME``: ``task``, ``analysis``,
        ``report`` and ``views`` live in it."""
        return f"hitkit.protocols.{self.name}"

    @property
    def task_class(self) -> str:
        """The name of its :class:`TaskType` subclass in ``PACKAGE.task``: the protocol's name in
        CamelCase, then ``Task`` (``live_chat``: ``LiveChatTask``)."""
        return self.name.title().replace("_", "") + "Task"

    @property
    def settings_class(self) -> str:
        """The name of the pydantic model of its study-file section (named as the protocol) in
        ``PACKAGE.settings``: the protocol's name in CamelCase, then ``Config``."""
        return self.name.title().replace("_", "") + "Config"

    def module(self, name: str) -> ModuleType:
        """The module ``name`` of the protocol's folder (``task``, ``analysis``, ``report``, ``views``)."""
        return importlib.import_module(f"{self.package}.{name}")

    def task_type(self) -> type["TaskType"]:
        """The protocol's :class:`TaskType` subclass."""
        return getattr(self.module("task"), self.task_class)

    @property
    def has_chat(self) -> bool:
        """True when a worker chats with a bot in each unit (the study needs bot endpoints)."""
        return self.task_type().has_chat


@dataclass(frozen=True)
class TurnSpec:
    """One turn of a conversation to store."""

    speaker: str
    text: str
    system: str | None = None


@dataclass(frozen=True)
class ConversationSpec:
    """A conversation to store with the study (prompt, bot–bot, human–human material)."""

    key: str
    kind: str
    turns: tuple[TurnSpec, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UnitSpec:
    """A unit to create: its study-unique key, its payload and how many answers it needs."""

    key: str
    payload: Mapping[str, Any]
    required_answers: int
    conversation_key: str | None = None


@dataclass(frozen=True)
class Material:
    """What a task type builds from the study's data before anything is posted."""

    units: list[UnitSpec]
    conversations: list[ConversationSpec] = field(default_factory=list)


@dataclass(frozen=True)
class JudgeRequest:
    """One label an LLM judge is asked for (:mod:`hitkit.judges.judging`): a unit of the material, asked one way.

    ``fields`` fill the judge's prompt; ``meta`` is stored with the label for the protocol's export;
    ``auto`` is a label given without asking (identical pairwise responses are a tie).
    """

    unit_key: str
    variant: str
    fields: Mapping[str, str]
    meta: Mapping[str, Any] = field(default_factory=dict)
    auto: str | None = None


@dataclass(frozen=True)
class HitSpec:
    """One HIT to create: the keys of its units, in order, and how many workers take it."""

    unit_keys: tuple[str, ...]
    max_assignments: int


@dataclass(frozen=True)
class Question:
    """A question a unit asks; ``choices`` None means free text up to the study's length limit."""

    name: str
    choices: tuple[str, ...] | None = None


def done_responses(session: Session, study: Study, *conditions) -> list:
    """(response, assignment, hit, worker, unit) rows of the study's confirmed handed-in work (submitted,
    approved or rejected: a rejection is an outcome, and the analysis counts it, METHODS §2b).

    The one query behind every task's export; ``conditions`` narrow it (e.g. to some questions).
    """
    from sqlalchemy import select

    from hitkit.db.models import Assignment, Hit, Response, Worker
    from hitkit.tables.schema import HANDED_IN_STATUSES

    return list(
        session.execute(
            select(Response, Assignment, Hit, Worker, Unit)
            .join(Assignment, Response.assignment_id == Assignment.id)
            .join(Hit, Assignment.hit_id == Hit.id)
            .join(Worker, Assignment.worker_id == Worker.id)
            .join(Unit, Response.unit_id == Unit.id)
            # Only confirmed work: what no platform has confirmed is never exported as answers.
            .where(
                Hit.study_id == study.id,
                Assignment.status.in_(HANDED_IN_STATUSES),
                Assignment.confirmed_at.is_not(None),
                *conditions,
            )
            .order_by(Hit.index, Assignment.id, Unit.id)
        ).all()
    )


class TaskType(ABC):
    """The part of a protocol that runs a study; one instance per study configuration."""

    name: ClassVar[str]
    template: ClassVar[str]
    """Jinja2 template (in hit_templates/) of the task page."""
    instructions_template: ClassVar[str]
    """Jinja2 template of the instructions and consent page."""
    has_chat: ClassVar[bool] = False
    answer_profiles: ClassVar[frozenset[str]] = frozenset({"diligent", "noisy", "spammer", "always_tie"})
    """The simulated crowd's answering profiles :meth:`simulate` knows; any other answers as ``diligent``."""
    """True when a worker chats with a bot in each unit before answering its remaining questions."""
    chat_opening: ClassVar[tuple[str, ...]] = ()
    """Questions a chat unit needs answered before its chat starts."""
    free_text: ClassVar[frozenset[str]] = frozenset()
    """Questions answered in the worker's own words, whose pages send how the text was typed
    (:mod:`hitkit.worker.authenticity`); chat messages always are."""

    def __init__(self, config: StudyConfig):
        self.config = config

    @abstractmethod
    def build(self) -> Material:
        """Read the study's data files and return the units (and conversations) to store.

        Raise :class:`~hitkit.errors.InputError` naming the file and line of anything unreadable;
        nothing is written to the database before this succeeds.
        """

    @abstractmethod
    def pack(self, units: Sequence[UnitSpec], rng: random.Random) -> list[HitSpec]:
        """Group units into HITs under the protocol's constraints (a pure, seeded function)."""

    @abstractmethod
    def questions(self, unit: Unit) -> list[Question]:
        """The questions a worker must answer for ``unit`` (those not answered automatically)."""

    def auto_answers(self, unit: Unit) -> dict[str, str]:
        """Answers recorded without asking (e.g. a tie between identical responses)."""
        return {}

    def check_answer(self, session: Session, assignment: Any, unit: Unit, question: str) -> None:
        """Raise FlowError if the protocol does not allow this answer yet (most tasks allow any)."""

    def check_submit(self, session: Session, assignment: Any) -> None:
        """Raise FlowError if the protocol does not allow submitting yet, beyond answering every question."""

    def refuses(self, session: Session, hit: Any, worker: Any) -> str | None:
        """Why the protocol bars ``worker`` from taking ``hit`` (beyond places and caps), or None if it does not."""
        return None

    @abstractmethod
    def layout(self, units: Sequence[Unit], rng: random.Random) -> dict[str, Any]:
        """How one assignment presents its units (order, sides); stored with the assignment."""

    @abstractmethod
    def view(self, unit: Unit, layout: Mapping[str, Any]) -> dict[str, Any]:
        """What the worker sees of ``unit`` under ``layout``: JSON-able, blind to system names."""

    @abstractmethod
    def simulation_context(self, session: Session, study: Study) -> Any:
        """What the simulated crowd may know about the material (e.g. which text came from which system)."""

    @abstractmethod
    def simulate(
        self, profile: str, view: Mapping[str, Any], rng: random.Random, context: Any, worker: str = ""
    ) -> dict[str, str]:
        """A simulated worker's answers to one unit's questions; ``worker`` seeds traits a worker keeps."""

    def chat_turns_needed(self, units: int) -> int:
        """How many worker messages ``units`` chat units need before they can be answered (0 without chat)."""
        return 0

    def check_generation_plan(self, conversations: int, pairs: int) -> None:
        """Raise ConfigError, before any bot is asked, when ``conversations`` generated over ``pairs``
        pairs of systems would not pack under the study (protocols that use ``generation:`` only)."""

    def with_placeholder_material(self, path: Path) -> "StudyConfig":
        """The study's config for ``launch --dry-run`` before its generated material exists: one that
        packs placeholders written to ``path`` (protocols that pack generated material only)."""
        return self.config

    def answering_as(self, profile: str) -> str:
        """The profile a simulated worker of ``profile`` answers this task as (:attr:`answer_profiles`)."""
        return profile if profile in self.answer_profiles else "diligent"

    def control_systems(self) -> frozenset[str]:
        """The study's quality-control systems (a degraded bot), which no ranking includes."""
        return frozenset()

    def real_systems(self) -> list[str]:
        """The study's systems in the file's order but its :meth:`control_systems`: those a ranking includes."""
        control = self.control_systems()
        return [s.name for s in self.config.systems if s.name not in control]

    def perceived_quality(self) -> dict[str, float]:
        """Each system's quality in [0, 1] as the simulated crowd perceives it (the simulated crowd and
        :mod:`hitkit.simulation.staffing` ask it of every protocol that plans or simulates)."""
        raise NotImplementedError(f"task '{self.name}' does not say how the simulated crowd perceives its systems")

    def simulate_message(self, profile: str, view: Mapping[str, Any], rng: random.Random, turn: int) -> str:
        """A simulated worker's ``turn``-th message in a chat unit (chat task types only)."""
        raise TypeError(f"task '{self.name}' has no chat")

    chat_closing: ClassVar[str] = "\x00"
    """Prefix of the questions whose answer closes a chat unit's chat (live chat's ratings, the arena's vote)."""
    chat_sides: ClassVar[tuple[str, ...]] = ("",)
    """A chat unit's conversations: one (``""``), or one per side (the arena's ``a`` and ``b``), each with its
    own system; the page names a side's chat ``PUBLICKEY-SIDE`` (:func:`hitkit.worker.chat_turns.split_side`)."""

    def chat_key(self, assignment_id: int, unit_id: int, side: str = "") -> str | None:
        """The key of the conversation one assignment holds in one chat unit (on ``side``); None without chat."""
        return None

    def chat_system(self, unit: Unit, side: str = "") -> str:
        """The system a chat unit's conversation on ``side`` talks to; AnswerError for a side it lacks."""
        if side:
            from hitkit.errors import AnswerError

            raise AnswerError(f"unit {unit.public_key} has one chat; there is no side {side[:20]!r}")
        return unit.payload["system"]

    def check_message(self, session: Session, assignment: Any, unit: Unit, side: str, text: str, inputs: int) -> None:
        """Raise FlowError if the protocol refuses the worker's message (``inputs`` typed so far on ``side``)."""

    def revealed(self, session: Session, assignment: Any, unit: Unit) -> dict[str, Any] | None:
        """What the page may show of ``unit`` once the worker has answered it (the arena's identities), or None."""
        return None

    def export_files(self, session: Session, study: Study, out: Path) -> list[Path]:
        """Files beyond the tidy tables that the protocol exports (the arena's ``preferences.jsonl``)."""
        return []

    @abstractmethod
    def export(self, session: Session, study: Study) -> dict[str, pd.DataFrame]:
        """The task's tidy tables (METHODS.md §4), keyed by file stem, from the database."""

    def validate(self, unit: Unit, question: str, value: str) -> str:
        """Check one answer; return it normalised or raise AnswerError saying what is accepted."""
        from hitkit.errors import AnswerError
        from hitkit.i18n import N_

        asked = {q.name: q for q in self.questions(unit)}
        if question not in asked:
            raise AnswerError(
                f"unit {unit.public_key} has no question '{question}'; it asks: {', '.join(asked) or 'nothing'}"
            )
        value = answer_text(value)  # JSON for objects and numbers, never Python's repr
        limit = self.config.hit.max_answer_chars
        if len(value) > limit:
            raise AnswerError(
                N_(
                    "the answer to '%(question)s' is %(length)s characters; the limit is %(limit)s",
                    question=question,
                    length=len(value),
                    limit=limit,
                )
            )
        choices = asked[question].choices
        if choices is not None and value not in choices:
            raise AnswerError(f"'{value}' is not an answer to '{question}'; choose one of {', '.join(choices)}")
        return value
