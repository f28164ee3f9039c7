"""Arena (Chiang et al. 2024; LMArena/FastChat): two anonymous systems answer the worker side by side.

A unit is one *battle*: its payload names the two systems as shown, ``system_a`` on the left and
``system_b`` on the right (also as ``systems``, in that order), ``is_control`` (one of them is the
degraded QC bot), ``slot`` (the battle's number in the study) and, with a prompt set
(``arena.prompts``), the ``prompt_id``, ``prompt`` and ``category`` the battle starts from.

Pair sampling is fixed when the study is built (:func:`plan_battles`): the real battles go round the
pairs of real systems in seeded shuffled passes, so every pair gets the same number of battles (±1);
the k-th battle of a pair shows its first system on the left when k is even, so each pair's A/B
positions balance. ``control_share`` of the battles pit each real system in turn against the QC bot,
sides alternating likewise. HITs hold ``battles_per_hit`` battles in a seeded shuffled order; each HIT
is taken by one worker (its chats are live), within ``schedule.per_worker_cap``. With
``design: adaptive`` the stopping rule's order posts first the HITs that serve its open decision
(:mod:`hitkit.running.stopping`, over the pairs in ``systems``).

A battle holds two conversations, one per side (``a``, ``b``; :attr:`TaskType.chat_sides`): the page
sends each message to both (refused on one side if it differs from the other's message at that turn,
:meth:`ArenaTask.check_message`), and the replies stream side by side. The worker votes ``vote`` (a, b,
tie, both_bad) with an optional ``reason`` (with a judge, a battle not drawn for a vote ends with
``vote_done`` instead: the judge votes on every real battle, in both orders, :mod:`.judge`); the vote is refused until both sides have
``min_turns`` whole exchanges and neither owes a reply (:meth:`ArenaTask.check_answer`), and it closes
the battle's chats. With ``reveal`` the page may show the systems' names once the vote is stored.
"""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations
from typing import Any, Mapping, Sequence

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Conversation, Response, Study, Turn, Unit
from hitkit.errors import AnswerError, ConfigError, FlowError
from hitkit.i18n import N_
from hitkit.judges.human_subset import rated
from hitkit.material.gold import spread
from hitkit.protocols.arena import exports, simulated
from hitkit.protocols.arena.columns import SIDES, VOTES
from hitkit.protocols.arena.prompts import read_prompts
from hitkit.protocols.arena.settings import control_battles
from hitkit.protocols.base import HitSpec, Material, Question, TaskType, UnitSpec
from hitkit.protocols.kit.task import placed, shuffled_order
from hitkit.worker.validation import answer_text

VOTE, REASON = "vote", "reason"
DONE, DONE_VALUE = "vote_done", "yes"
"""A battle the worker is not asked to vote on (a judged study's share the judge alone votes): "Next battle".
Its name starts with ``vote`` because every answer whose question does closes the battle's chats."""


def plan_battles(
    real: Sequence[str], control: str | None, battles: int, controls: int, rng: random.Random
) -> list[tuple[str, str, bool]]:
    """(left system, right system, is_control) of every battle: uniform over pairs, sides balanced per pair."""
    pairs = list(combinations(sorted(real), 2))
    order: list[tuple[str, str]] = []
    while len(order) < battles - controls:
        cycle = pairs[:]
        rng.shuffle(cycle)
        order += cycle
    seen: Counter = Counter()
    plan: list[tuple[str, str, bool]] = []
    for pair in order[: battles - controls]:
        x, y = pair
        plan.append((x, y, False) if seen[pair] % 2 == 0 else (y, x, False))
        seen[pair] += 1
    if control is None:
        if controls:
            raise ValueError(f"{controls} QC battle(s) need a control system, and none was given")
        return plan
    systems: list[str] = []
    while len(systems) < controls:
        rotation = sorted(real)
        rng.shuffle(rotation)
        systems += rotation
    for system in systems[:controls]:
        left = seen[(system, control)] % 2 == 0
        plan.append((system, control, True) if left else (control, system, True))
        seen[(system, control)] += 1
    return plan


def is_voted(unit: Unit) -> bool:
    """Whether the worker votes on the battle: always without a judge and in QC battles; with a judge, as
    drawn when the study was built (the payload's ``voted``, probability ``judge.human_share``)."""
    return bool(unit.payload.get("voted", True))


class ArenaTask(TaskType):
    name = "arena"
    template = "arena.html"
    instructions_template = "arena_instructions.html"
    has_chat = True
    chat_closing = VOTE
    chat_sides = SIDES
    free_text = frozenset({REASON})
    answer_profiles = TaskType.answer_profiles | {"judge_like"}

    @property
    def _cfg(self):
        return self.config.arena

    # Material ---------------------------------------------------------------------------------
    def build(self) -> Material:
        cfg = self._cfg
        rng = random.Random(f"{self.config.seed}:arena:battles")
        plan = plan_battles(self.real_systems(), cfg.control, cfg.battle_count(), control_battles(self.config), rng)
        prompts = read_prompts(self.config.path(cfg.prompts)) if cfg.prompts is not None else []
        drawn: list = []
        while prompts and len(drawn) < len(plan):
            cycle = prompts[:]
            rng.shuffle(cycle)
            drawn += cycle
        units = []
        for i, (a, b, control) in enumerate(plan):
            payload: dict[str, Any] = {
                "systems": [a, b],
                "system_a": a,
                "system_b": b,
                "is_control": control,
                "slot": i,
            }
            if drawn:
                payload.update(prompt_id=drawn[i].id, prompt=drawn[i].text, category=drawn[i].category)
            if self.config.judge is not None and not control:
                # With a judge, the worker votes on a random share of the real battles (the judge on all).
                payload["voted"] = rated(self.config, f"battle#{i}")
            units.append(UnitSpec(key=f"battle#{i}", payload=payload, required_answers=1))
        return Material(units=units)

    def pack(self, units: Sequence[UnitSpec], rng: random.Random) -> list[HitSpec]:
        per = self._cfg.battles_per_hit
        if len(units) % per:
            raise ConfigError(f"{len(units)} battles do not fill HITs of {per}; rebuild the study")
        keys = [u.key for u in units]
        rng.shuffle(keys)
        if self.config.gold is not None:
            # Gold (QC) battles spread over the HITs at the rate, not where the shuffle happens to put them.
            gold = [k for k in keys if k in {u.key for u in units if u.payload["is_control"]}]
            real = [k for k in keys if k not in set(gold)]
            counts = spread([per] * (len(keys) // per), len(gold))
            starts = [sum(per - c for c in counts[:i]) for i in range(len(counts))]
            golds = [sum(counts[:i]) for i in range(len(counts))]
            blocks = [real[s : s + per - c] + gold[g : g + c] for s, g, c in zip(starts, golds, counts)]
            for block in blocks:
                rng.shuffle(block)
            return [HitSpec(tuple(block), max_assignments=1) for block in blocks]
        return [HitSpec(tuple(keys[i : i + per]), max_assignments=1) for i in range(0, len(keys), per)]

    # Questions ---------------------------------------------------------------------------------
    def questions(self, unit: Unit) -> list[Question]:
        return [Question(VOTE, VOTES)] if is_voted(unit) else [Question(DONE, (DONE_VALUE,))]

    def optional_questions(self, unit: Unit) -> list[Question]:
        """The vote's reason, when the study offers it (it never blocks submission)."""
        return [Question(REASON)] if self._cfg.reason and is_voted(unit) else []

    def validate(self, unit: Unit, question: str, value: str) -> str:
        if question in {q.name for q in self.optional_questions(unit)}:
            value = answer_text(value).strip()
            limit = self.config.hit.max_answer_chars
            if len(value) > limit:
                raise AnswerError(
                    N_("the reason is %(length)s characters; the limit is %(limit)s", length=len(value), limit=limit)
                )
            return value
        return super().validate(unit, question, value)

    def _sides(self, session: Session, assignment_id: int, unit: Unit) -> dict[str, list[tuple[str, str]]]:
        """Each side's turns so far as (speaker, text), in order."""
        keys = {self.chat_key(assignment_id, unit.id, side): side for side in SIDES}
        rows = session.execute(
            select(Conversation.key, Turn.speaker, Turn.text)
            .join(Turn, Turn.conversation_id == Conversation.id)
            .where(Conversation.study_id == unit.study_id, Conversation.key.in_(list(keys)))
            .order_by(Turn.index)
        ).all()
        out: dict[str, list[tuple[str, str]]] = {side: [] for side in SIDES}
        for key, speaker, text in rows:
            out[keys[key]].append((speaker, text))
        return out

    def check_answer(self, session: Session, assignment: Any, unit: Unit, question: str) -> None:
        if question == VOTE and session.scalar(
            select(Response.id).where(
                Response.assignment_id == assignment.id, Response.unit_id == unit.id, Response.question == VOTE
            )
        ):
            # Final once given: the names may be shown after it, and a vote changed then would be a vote for a name.
            raise FlowError(N_("your vote on this battle is recorded and cannot change"), 409)
        if question not in (VOTE, DONE):
            return
        # Vote buttons stay disabled on the page until both replies are complete; this is the same rule.
        sides = self._sides(session, assignment.id, unit)
        asked = [sum(s == "worker" for s, _ in turns) for turns in sides.values()]
        owed = any(turns and turns[-1][0] == "worker" for turns in sides.values())
        if owed or min(asked) < self._cfg.min_turns:
            raise FlowError(
                N_("wait until both replies are complete before voting")
                if owed or min(asked) >= self._cfg.min_turns
                else N_(
                    "send your message to both systems first (%(sent)s of %(needed)s exchanges so far)",
                    sent=min(asked),
                    needed=self._cfg.min_turns,
                ),
                409,
            )

    def check_message(self, session: Session, assignment: Any, unit: Unit, side: str, text: str, inputs: int) -> None:
        if inputs >= self._cfg.max_turns:
            raise FlowError(N_("a battle holds at most %(most)s messages; vote now", most=self._cfg.max_turns), 409)
        other = self._sides(session, assignment.id, unit)["b" if side == "a" else "a"]
        sent = [t for s, t in other if s == "worker"]
        if len(sent) > inputs and sent[inputs] != text:
            raise FlowError(N_("both systems get the same message: send the message the other side got"), 409)

    def revealed(self, session: Session, assignment: Any, unit: Unit) -> dict[str, Any] | None:
        # A QC battle's names are never shown: the bot's is internal ("qc"), and naming it would teach
        # workers which battles are checks. The page then keeps "Assistant A" / "Assistant B".
        if not self._cfg.reveal or unit.payload.get("is_control"):
            return None
        voted = session.scalar(
            select(Response.id).where(
                Response.assignment_id == assignment.id, Response.unit_id == unit.id, Response.question == VOTE
            )
        )
        if not voted:
            return None
        public = self._cfg.display_names
        return {side: public.get(unit.payload["system_" + side], unit.payload["system_" + side]) for side in SIDES}

    # What a worker sees ------------------------------------------------------------------------
    def layout(self, units: Sequence[Unit], rng: random.Random) -> dict[str, Any]:
        return shuffled_order(units, rng)

    def view(self, unit: Unit, layout: Mapping[str, Any]) -> dict[str, Any]:
        return {
            **placed(unit, layout, lambda n: N_("Battle %(n)s", n=n), N_("Battle")),
            "prompt": unit.payload.get("prompt"),
            "min_turns": self._cfg.min_turns,
            "max_turns": self._cfg.max_turns,
            "votes": list(VOTES),
            "sides": list(SIDES),
            "optional": [q.name for q in self.optional_questions(unit)],
            "reveal": self._cfg.reveal,
            "voted": is_voted(unit),
        }

    # Chat -------------------------------------------------------------------------------------
    def chat_key(self, assignment_id: int, unit_id: int, side: str = "") -> str:
        return f"arena:a{assignment_id}:u{unit_id}:{side}" if side else f"arena:a{assignment_id}:u{unit_id}"

    def chat_system(self, unit: Unit, side: str = "") -> str:
        if side not in SIDES:
            raise AnswerError(f"a battle has sides a and b; the chat must name one ({unit.public_key}-a or -b)")
        return unit.payload["system_" + side]

    def control_systems(self) -> frozenset[str]:
        return frozenset({self._cfg.control}) if self._cfg.control else frozenset()

    def chat_turns_needed(self, units: int) -> int:
        # Each of the worker's messages is stored on both sides.
        return units * self._cfg.min_turns * len(SIDES)

    # Simulated workers -------------------------------------------------------------------------
    def simulation_context(self, session: Session, study: Study) -> dict[str, Any]:
        units = session.scalars(select(Unit).where(Unit.study_id == study.id))
        return {
            "quality": simulated.perceived_quality(self.config),
            "units": {u.public_key: (u.payload["system_a"], u.payload["system_b"]) for u in units},
        }

    def simulate(
        self, profile: str, view: Mapping[str, Any], rng: random.Random, context: Any, worker: str = ""
    ) -> dict[str, str]:
        return simulated.vote(self._cfg, profile, view, rng, context, worker)

    def simulate_message(self, profile: str, view: Mapping[str, Any], rng: random.Random, turn: int) -> str:
        return simulated.message(self._cfg, self.config, view, rng, turn)

    # Export ------------------------------------------------------------------------------------
    def export(self, session: Session, study: Study) -> dict[str, pd.DataFrame]:
        return {"battles": exports.battles_table(session, study, self)}

    def export_files(self, session: Session, study: Study, out) -> list:
        return [exports.write_preferences(session, study, self, out)]
