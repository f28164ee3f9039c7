"""Live chat + Direct Assessment (Ji et al. 2022; METHODS.md §1): six blind chats per HIT, rated.

A unit is one chat slot: one conversation a worker will hold with one system. Its payload is
``system``, ``is_control`` and ``slot`` (the system's n-th chat slot in the study, 0-based; the
position a worker sees it at is the assignment's, below). :func:`balanced_hits` packs the slots
into HITs of ``slots_per_hit``: ``slots_per_hit`` − 1 distinct real systems and one control slot,
every real system the same number of times across the study. A HIT is taken by one worker (each
HIT's conversations are created live, so a second worker would hold different conversations). Each
assignment shows its slots in its own shuffled order, recorded in its layout as ``order`` (unit
ids); ``ratings.csv``'s ``slot`` is the 0-based position in that order.

Questions per slot, by name:

- ``topic`` (free text, not empty): the topic the worker chose; with ``icebreaker`` the topic is
  prescribed, recorded as an automatic answer and not asked.
- ``topic_sentiment``: like / ambivalent / dislike.
- ``score_<criterion>`` for each configured criterion: an integer 0–100, as the slider gave it.
- ``chat_done`` (``yes``) instead of the sliders in a slot the worker is not asked to rate: with an LLM
  judge (``judge:``) each real system's slot is rated with probability ``judge.human_share``
  (:func:`hitkit.judges.human_subset.rated`, drawn when the study is built and stored as the payload's
  ``rated``); the QC bot's slot always is. Such a slot ends with "Next chatbot" alone, and its
  ratings are refused.
- ``feedback`` (free text) when enabled: *optional*, in rated slots. :meth:`TaskType.questions` lists what a worker
  must answer, which is what :func:`hitkit.worker.flow.missing_answers` checks before submission, so
  ``feedback`` is not among them; :meth:`LiveChatTask.optional_questions` names it, ``view`` shows it
  under ``optional``, and :meth:`LiveChatTask.validate` accepts it (an empty comment included).

A slot's ratings and comment are refused until the worker has typed ``min_inputs`` messages in it
(:meth:`LiveChatTask.check_answer`), and so is submission (:meth:`LiveChatTask.check_submit`); the
shared answer and submit flow applies both. Chatting itself — turns, the bot's replies, topic
changes — lives in :mod:`hitkit.worker.chat`.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from typing import Any, Mapping, Sequence

import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Conversation, Response, Study, Turn, Unit
from hitkit.errors import AnswerError, ConfigError, FlowError
from hitkit.i18n import N_, own
from hitkit.judges.human_subset import MIN_PER_STRATUM, rated
from hitkit.protocols.base import HitSpec, Material, Question, TaskType, UnitSpec, done_responses
from hitkit.protocols.kit.task import answer_ids, placed, shuffled_order
from hitkit.protocols.live_chat.criteria import RATING_COLUMNS
from hitkit.worker.validation import answer_text

SCORE_PREFIX = "score_"
"""Question name of a criterion's slider: ``score_`` + criterion name."""
SENTIMENTS = ("like", "ambivalent", "dislike")

# How a simulated worker sees the control bot when simulated.quality does not name it.
_CONTROL_QUALITY = 0.1
# Standard deviation of a simulated worker's slider noise, in slider points.
_NOISE = {"diligent": 10.0, "noisy": 30.0}
_SIMULATED_TOPICS = tuple(
    "cooking|football|travelling in Japan|my dog|films|the weather|learning to play the guitar|video games".split("|")
)
_SIMULATED_MESSAGES = (
    "Hi! How are you doing today?",
    "What do you like to do at the weekend?",
    "I went for a long walk yesterday and it was lovely.",
    "Have you ever been to the seaside?",
    "What kind of music do you listen to?",
    "I think I should cook more often.",
    "That's interesting, tell me more about it.",
    "Do you have any pets?",
    "I'm reading a book about the history of maps.",
    "What's the best film you have seen recently?",
    "I'd like to learn a new language this year.",
    "Why do you think that is?",
)
_INTEGER = re.compile(r"^\s*[0-9]{1,3}\s*$")
DONE, DONE_VALUE = "chat_done", "yes"
"""The question that ends a slot the worker is not asked to rate ("Next chatbot"), and its one answer."""


def is_rated(unit: Unit) -> bool:
    """Whether the worker rates the slot's conversation: always without a judge and for the QC bot; with
    a judge, as drawn when the study was built (the payload's ``rated``)."""
    return bool(unit.payload.get("rated", True))


def conversation_key(assignment_id: int, unit_id: int) -> str:
    """The study-unique key of the conversation one assignment holds in one chat slot."""
    return f"chat:a{assignment_id}:u{unit_id}"


def balanced_hits(systems: Sequence[str], hits: int, per_hit: int, rng: random.Random) -> list[tuple[str, ...]]:
    """``hits`` tuples of ``per_hit`` distinct systems, each system in exactly hits × per_hit / len(systems).

    Each HIT takes the ``per_hit`` systems with the most conversations still to place, ties broken
    at random. That never gets stuck: a system still owed as many conversations as there are HITs
    left is always among those taken, so no system ends up owed more than the HITs that remain.
    """
    if len(set(systems)) != len(systems):
        raise ConfigError(f"systems repeat in {list(systems)}; name each system once")
    if per_hit < 1 or hits < 0:
        raise ConfigError(f"cannot pack {hits} HITs of {per_hit} systems; both must be positive")
    if len(systems) < per_hit:
        raise ConfigError(
            f"a HIT of {per_hit} distinct systems needs at least {per_hit} systems; there are {len(systems)}"
        )
    if hits * per_hit % len(systems):
        raise ConfigError(
            f"{hits} HITs × {per_hit} systems = {hits * per_hit} conversations cannot be "
            f"shared equally by {len(systems)} systems; change the number of HITs"
        )
    owed = {s: hits * per_hit // len(systems) for s in systems}
    plan = []
    for _ in range(hits):
        chosen = sorted(systems, key=lambda s: (-owed[s], rng.random()))[:per_hit]
        for s in chosen:
            owed[s] -= 1
        plan.append(tuple(chosen))
    return plan


class LiveChatTask(TaskType):
    name = "live_chat"
    template = "live_chat.html"
    instructions_template = "live_chat_instructions.html"
    has_chat = True
    chat_opening = ("topic", "topic_sentiment")
    free_text = frozenset({"topic", "feedback"})

    @property
    def _cfg(self):
        return self.config.live_chat

    # Material ---------------------------------------------------------------------------------
    def build(self) -> Material:
        cfg = self._cfg
        real = self.real_systems()
        hits = cfg.hit_count(len(real))
        per_system = {s: hits * (cfg.slots_per_hit - 1) // len(real) for s in real} | {cfg.control: hits}
        units = []
        for system, count in per_system.items():
            for n in range(count):
                payload: dict[str, Any] = {"system": system, "is_control": system == cfg.control, "slot": n}
                if self.config.judge is not None and system != cfg.control:
                    payload["rated"] = rated(self.config, f"{system}#{n}")
                if cfg.icebreaker:
                    # Seeded per slot, so rebuilding the study draws the same prescribed topics.
                    pick = random.Random(f"{self.config.seed}:icebreaker:{system}:{n}")
                    payload["icebreaker"] = pick.choice(cfg.personas[system])
                units.append(UnitSpec(key=f"{system}#{n}", payload=payload, required_answers=1))
        if self.config.judge is not None:
            short = {
                s: n
                for s in real
                if (n := sum(u.payload["rated"] for u in units if u.payload["system"] == s)) < MIN_PER_STRATUM
            }
            if short:
                s = sorted(short)[0]
                raise ConfigError(
                    f"judge.human_share {self.config.judge.human_share:g} drew {short[s]} of "
                    f"{per_system[s]} conversations of {s} for rating; each system needs at least "
                    f"{MIN_PER_STRATUM} rated for an interval: raise judge.human_share or the study's size"
                )
        return Material(units=units)

    def pack(self, units: Sequence[UnitSpec], rng: random.Random) -> list[HitSpec]:
        cfg = self._cfg
        by_system: dict[str, list[UnitSpec]] = defaultdict(list)
        for unit in units:
            by_system[unit.payload["system"]].append(unit)
        controls = by_system.pop(cfg.control, [])
        real = sorted(by_system)
        per_hit = cfg.slots_per_hit - 1
        expected = len(controls) * per_hit // max(len(real), 1)
        uneven = {s: len(u) for s, u in by_system.items() if len(u) != expected}
        if uneven:
            raise ConfigError(
                f"live chat slots per system must be equal ({expected} for {len(controls)} HITs); got {uneven}"
            )
        queues = {s: list(u) for s, u in by_system.items()}
        specs = []
        for systems, control in zip(balanced_hits(real, len(controls), per_hit, rng), controls):
            keys = [queues[s].pop(0).key for s in systems]
            keys.insert(rng.randrange(len(keys) + 1), control.key)
            specs.append(HitSpec(tuple(keys), max_assignments=1))
        return specs

    # Questions ---------------------------------------------------------------------------------
    def criterion_questions(self) -> list[Question]:
        """One slider question per configured criterion, in the configured order."""
        return [Question(SCORE_PREFIX + c.name) for c in self._cfg.criteria]

    def questions(self, unit: Unit) -> list[Question]:
        asked = [] if "icebreaker" in unit.payload else [Question("topic")]
        closing = self.criterion_questions() if is_rated(unit) else [Question(DONE, (DONE_VALUE,))]
        return asked + [Question("topic_sentiment", SENTIMENTS)] + closing

    def optional_questions(self, unit: Unit) -> list[Question]:
        """Questions a worker may answer or leave out (they do not block submission)."""
        return [Question("feedback")] if self._cfg.feedback and is_rated(unit) else []

    def auto_answers(self, unit: Unit) -> dict[str, str]:
        if "icebreaker" in unit.payload:
            return {"topic": unit.payload["icebreaker"]}
        return {}

    def validate(self, unit: Unit, question: str, value: str) -> str:
        if question in {q.name for q in self.optional_questions(unit)}:
            value = answer_text(value)
            limit = self.config.hit.max_answer_chars
            if len(value) > limit:
                raise AnswerError(f"the answer to '{question}' is {len(value)} characters; the limit is {limit}")
            return value
        if question.startswith(SCORE_PREFIX) and not is_rated(unit):
            raise AnswerError(
                f"unit {unit.public_key} is not rated: this conversation ends with 'Next chatbot' "
                f"(answer '{DONE}'), without ratings"
            )
        value = super().validate(unit, question, value)
        if question.startswith(SCORE_PREFIX):
            if not _INTEGER.match(value) or int(value) > 100:
                raise AnswerError(f"'{value}' is not a rating for '{question}'; give a whole number from 0 to 100")
            return str(int(value))
        if question == "topic":
            if not value.strip():
                raise AnswerError(N_("the topic is empty; type what you would like to talk about"))
            return value.strip()
        return value

    def worker_inputs(self, session: Session, assignment_id: int, unit_id: int) -> int:
        """How many messages the worker has typed in one chat slot."""
        return session.execute(
            select(func.count())
            .select_from(Turn)
            .join(Conversation, Turn.conversation_id == Conversation.id)
            .where(
                Conversation.study_id == session.get_one(Unit, unit_id).study_id,
                Conversation.key == conversation_key(assignment_id, unit_id),
                Turn.speaker == "worker",
            )
        ).scalar_one()

    def check_answer(self, session: Session, assignment: Assignment, unit: Unit, question: str) -> None:
        # "Next chatbot" is refused until the worker has typed min_inputs messages: the ratings
        # (and the comment) of a slot are its "next chatbot" step.
        if question in ("topic", "topic_sentiment"):
            return
        inputs = self.worker_inputs(session, assignment.id, unit.id)
        if inputs < self._cfg.min_inputs:
            raise FlowError(
                N_(
                    "chat a little longer before rating this chatbot: %(inputs)s of %(needed)s messages so far",
                    inputs=inputs,
                    needed=self._cfg.min_inputs,
                ),
                409,
            )

    def check_submit(self, session: Session, assignment: Assignment) -> None:
        short = [
            hu.unit_id
            for hu in assignment.hit.units
            if self.worker_inputs(session, assignment.id, hu.unit_id) < self._cfg.min_inputs
        ]
        if short:
            raise FlowError(
                N_(
                    "%(count)s chat(s) have fewer than %(needed)s of your messages; finish them, then submit",
                    count=len(short),
                    needed=self._cfg.min_inputs,
                ),
                400,
            )

    # What a worker sees ------------------------------------------------------------------------
    def layout(self, units: Sequence[Unit], rng: random.Random) -> dict[str, Any]:
        return shuffled_order(units, rng)

    def view(self, unit: Unit, layout: Mapping[str, Any]) -> dict[str, Any]:
        return {
            **placed(unit, layout, lambda n: N_("Chatbot %(n)s", n=n), N_("Chatbot")),
            "topic": unit.payload.get("icebreaker"),
            "min_inputs": self._cfg.min_inputs,
            "sentiments": list(SENTIMENTS),
            "criteria": [{"question": SCORE_PREFIX + c.name, "statement": own(c.statement)} for c in self._cfg.criteria]
            if is_rated(unit)
            else [],
            "rated": is_rated(unit),
            "optional": [q.name for q in self.optional_questions(unit)],
        }

    # Simulated workers -------------------------------------------------------------------------
    def perceived_quality(self) -> dict[str, float]:
        """Each system's quality in [0, 1] as the simulated crowd perceives it: ``simulated.quality``,
        0.5 where it names none, and the degraded control bot far below."""
        return (
            {s.name: 0.5 for s in self.config.systems}
            | {self._cfg.control: _CONTROL_QUALITY}
            | dict(self.config.simulated.quality)
        )

    def simulation_context(self, session: Session, study: Study) -> dict[str, float]:
        """Each unit's quality as the simulated crowd perceives it (unit public key → quality in [0, 1])."""
        quality = self.perceived_quality()
        units = session.scalars(select(Unit).where(Unit.study_id == study.id))
        return {u.public_key: quality[u.payload["system"]] for u in units}

    def simulate(
        self, profile: str, view: Mapping[str, Any], rng: random.Random, context: Any, worker: str = ""
    ) -> dict[str, str]:
        answers = {} if view["topic"] is not None else {"topic": rng.choice(_SIMULATED_TOPICS)}
        answers["topic_sentiment"] = rng.choice(SENTIMENTS)
        if not view.get("rated", True):
            return answers | {DONE: DONE_VALUE}
        criteria = self._cfg.criteria
        if profile == "always_tie":
            scores = {c.name: 50 for c in criteria}
        elif profile == "spammer":
            # A spammer is one kind throughout: half leave every slider at one value, half click at
            # random. Drawn from the worker's id, so the kind holds across all their slots and HITs.
            kind = random.Random(f"spammer:{worker}")
            if kind.random() < 0.5:
                constant = kind.choice((0, 50, 100))
                scores = {c.name: constant for c in criteria}
            else:
                scores = {c.name: rng.randint(0, 100) for c in criteria}
        else:
            quality = context[view["unit_id"]]
            scores = {}
            for c in criteria:
                agree = min(100.0, max(0.0, 100 * quality + rng.gauss(0, _NOISE[profile])))
                scores[c.name] = round(agree if c.polarity == "positive" else 100 - agree)
        answers.update({SCORE_PREFIX + name: str(score) for name, score in scores.items()})
        return answers

    def control_systems(self) -> frozenset[str]:
        return frozenset({self._cfg.control})

    def chat_turns_needed(self, units: int) -> int:
        # Every chat slot to be rated needs min_inputs worker messages first.
        return units * self._cfg.min_inputs

    chat_closing = SCORE_PREFIX

    def chat_key(self, assignment_id: int, unit_id: int, side: str = "") -> str:
        return conversation_key(assignment_id, unit_id)

    def simulate_message(self, profile: str, view: Mapping[str, Any], rng: random.Random, turn: int) -> str:
        # Spammers repeat themselves, the thing Ji et al.'s instructions ask workers not to do.
        if profile == "spammer":
            return "ok"
        return _SIMULATED_MESSAGES[(turn + rng.randrange(len(_SIMULATED_MESSAGES))) % len(_SIMULATED_MESSAGES)]

    # Export ------------------------------------------------------------------------------------
    def export(self, session: Session, study: Study) -> dict[str, pd.DataFrame]:
        rows = done_responses(session, study, Response.question.startswith(SCORE_PREFIX, autoescape=True))
        rank = {SCORE_PREFIX + c.name: i for i, c in enumerate(self._cfg.criteria)}
        keyed = []
        for resp, asg, hit, worker, unit in rows:
            slot = asg.layout["order"].index(unit.id)
            keyed.append(
                (
                    (hit.index, asg.id, slot, rank.get(resp.question, len(rank))),
                    {
                        **answer_ids(study, hit, asg, worker),
                        "conversation_id": conversation_key(asg.id, unit.id),
                        "slot": slot,
                        "system": unit.payload["system"],
                        "is_control": int(bool(unit.payload["is_control"])),
                        "criterion": resp.question[len(SCORE_PREFIX) :],
                        "score": int(resp.value),
                    },
                )
            )
        ratings = [row for _, row in sorted(keyed, key=lambda pair: pair[0])]
        return {"ratings": pd.DataFrame(ratings, columns=list(RATING_COLUMNS))}
