"""Spot The Bot (Deriu et al. 2020; METHODS.md §2): label the two speakers of conversation segments.

A unit is one *segment*: the first k exchanges of one conversation, for each k in
``segment_lengths``. Conversations are bot–bot (generated, :class:`~hitkit.study.sections.GenerationConfig`'s
JSONL) or human–human (mixed in so that workers do not conclude everyone is a bot); both are stored
with the study. A unit's payload holds the conversation key, its kind, k, the two entities' systems
(``human`` for people) and the first 2k turns.

**Packing** (:func:`pack_segments`, pure). The conversations are split into groups of at most
``segments_per_hit``, each with human–human and bot–bot material; a group of g conversations and
L segment lengths becomes a *block* of L HITs, a Latin square: HIT j of the block holds segment
``lengths[(i + j + offset) % L]`` of the group's i-th conversation. So every HIT holds each of its
group's conversations once (never two segments of one conversation), every length about g / L
times, and human–human and bot–bot material; each conversation's L segments lie in the L HITs of
its own block, and nowhere else. Each HIT is taken by ``annotations_per_segment`` workers. With an
LLM judge (``judge:``) the crowd gets a random share of the conversations (all their segments):
packed as above where the share has the balance of kinds the blocks need, else
:func:`~hitkit.protocols.spot_the_bot.packing.pack_share` fills blocks greedily.

**Worker exclusion** (:meth:`SpotTheBotTask.refuses`, checked at entry and when the simulated crowd
looks for work). A worker may not take a HIT holding a conversation of which they were shown a
segment in another HIT — in any assignment, returned and expired ones included, since they have
read it. With the block design that means at most one HIT per block per worker, so a block's
segments are each annotated by distinct workers and no worker sees two segments of one
conversation. Any new worker can take any HIT, so work never gets stuck in an open crowd; a
returned or expired place re-opens for everyone who has not seen the block.

**Questions** per segment: ``label_0`` and ``label_1`` (human / bot / unsure), then ``fluency``,
``sensibleness`` and ``specificity`` (``0`` / ``1`` = that entity did better, ``neither``).
Each assignment shows its segments in its own shuffled order, recorded as ``order`` (unit ids).
``annotations.csv`` (METHODS §4) has two rows per segment annotation; a segment's ``elapsed_s`` is
the largest ``elapsed_s`` sent with its answers (the page sends seconds since the segment appeared).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from hitkit.db.models import Assignment, HitUnit, Study, Unit
from hitkit.errors import ConfigError, InputError
from hitkit.protocols.base import (
    ConversationSpec,
    HitSpec,
    Material,
    Question,
    TaskType,
    TurnSpec,
    UnitSpec,
    done_responses,
)
from hitkit.protocols.kit.task import answer_ids, position, shuffled_order
from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS
from hitkit.protocols.spot_the_bot.features import FEATURES, Feature  # noqa: F401 - Feature: imported from here too
from hitkit.protocols.spot_the_bot.gold import GOLD_ANSWER, IS_GOLD, gold_columns
from hitkit.protocols.spot_the_bot.packing import (
    SourceConversation,
    human_count_for,
    pack_segments,
    pack_share,
    read_bot_bot,
    unit_key,
)
from hitkit.protocols.spot_the_bot.settings import SpotTheBotConfig, gold_human_count

HUMAN = "human"
LABELS = ("human", "bot", "unsure")
PREFERENCES = ("0", "1", "neither")
"""Answers to a preference question: entity 0 did better, entity 1 did, or neither."""


LABEL_QUESTIONS = ("label_0", "label_1")

# Simulated annotators. A human speaker is labelled (human, unsure, bot) with these chances; a bot
# with human-likeness q survives each exchange unspotted with chance (1 + q) / 2 for a diligent
# annotator, so the chance of spotting it grows with k and with 1 − q. Noisy annotators see less.
_HUMAN_LABELS = {"diligent": (0.85, 0.10, 0.05), "noisy": (0.6, 0.2, 0.2)}
_UNSURE_WHEN_MISSED = 0.25
_NOISY_SPOT = (0.5, 0.2)  # noisy P(spot) = 0.5 × diligent P(spot) + 0.2
_PREFERENCE = {"diligent": (6.0, 0.15), "noisy": (2.0, 0.3)}  # (sharpness, share of "neither")
_HUMAN_QUALITY = 1.0


class SpotTheBotTask(TaskType):
    name = "spot_the_bot"
    template = "spot_the_bot.html"
    instructions_template = "spot_the_bot_instructions.html"

    @property
    def _cfg(self):
        return self.config.spot_the_bot or SpotTheBotConfig()

    # Material ---------------------------------------------------------------------------------
    def _human_source(self) -> tuple[str, list]:
        """(name of the human–human material, its dialogues): the study's file, or chatterbot-corpus."""
        from hitkit.bots.corpus import CorpusError, load_chatterbot_english, load_jsonl

        cfg = self._cfg
        source = self.config.path(cfg.human_conversations) if cfg.human_conversations else "chatterbot-corpus"
        try:
            dialogues = load_jsonl(source) if cfg.human_conversations else load_chatterbot_english()
        except CorpusError as exc:
            raise InputError(source, str(exc)) from None
        return str(source), dialogues

    def with_placeholder_material(self, path: Path):
        # Packing depends on how many conversations there are, not on their text: placeholders of the
        # generation plan's ids, pairs and length stand in for what is not generated yet.
        import itertools
        import json

        gen = self.config.generation
        if gen is None:
            raise ConfigError(
                "the study file has no 'generation:' section, so there is no generated material to "
                "stand in for; add one or give spot_the_bot.bot_conversations"
            )
        systems = gen.systems or [s.name for s in self.config.systems]
        pairs = list(itertools.combinations(systems, 2)) + ([(s, s) for s in systems] if gen.self_chat else [])
        with path.open("w", encoding="utf-8") as fh:
            for a, b in pairs:
                for k in range(gen.conversations_per_pair):
                    turns = [
                        {"speaker": i % 2, "system": (a, b)[i % 2], "text": "(to be generated)"}
                        for i in range(2 * gen.exchanges)
                    ]
                    fh.write(json.dumps({"id": f"{a}~{b}#{k:03d}", "systems": [a, b], "turns": turns}) + "\n")
        spot = (self.config.spot_the_bot or SpotTheBotConfig()).model_copy(update={"bot_conversations": path})
        return self.config.model_copy(update={"spot_the_bot": spot})

    def check_generation_plan(self, conversations: int, pairs: int) -> None:
        if self._cfg.bot_conversations is not None:
            return  # the study packs a file of its own, not what generation writes
        self.human_plan(conversations, pairs)

    def human_plan(self, bot_bot: int, pairs: int) -> int:
        """How many human–human conversations to mix in with ``bot_bot`` bot–bot conversations over
        ``pairs`` pairs of systems; ConfigError (one message, every fix with its numbers) when the
        material cannot pack. Needs no bot: ``launch --dry-run`` and ``launch`` check it before generating."""
        cfg = self._cfg
        source, dialogues = self._human_source()
        longest = max(cfg.segment_lengths)
        available = sum(1 for d in dialogues if len(d.turns) // 2 >= longest)
        return human_count_for(
            bot_bot,
            pairs,
            gold_human_count(self.config, bot_bot),
            available,
            cfg.segments_per_hit,
            cfg.segment_lengths,
            source,
            {k: sum(1 for d in dialogues if len(d.turns) // 2 >= k) for k in range(1, longest + 1)},
        )

    def _human_dialogues(self, needed_exchanges: int, count: int) -> list:
        _source, dialogues = self._human_source()
        long_enough = [d for d in dialogues if len(d.turns) // 2 >= needed_exchanges]
        # Seeded apart from packing, so the same study file draws the same human material.
        return random.Random(f"{self.config.seed}:human-human").sample(long_enough, count)

    def build(self) -> Material:
        cfg = self._cfg
        systems = [s.name for s in self.config.systems]
        longest = max(cfg.segment_lengths)
        path = self.config.path(cfg.bot_conversations) if cfg.bot_conversations else self.config.bot_bot_path
        bot_bot = read_bot_bot(path, systems, longest)
        pairs = {tuple(sorted(c["systems"])) for c in bot_bot}
        humans = self._human_dialogues(longest, self.human_plan(len(bot_bot), len(pairs)))
        conversations, units = [], []

        def add(key: str, kind: str, pair: list[str], texts: Sequence[str], meta: dict) -> None:
            turns = tuple(
                TurnSpec(str(i % 2), text, system=None if pair[i % 2] == HUMAN else pair[i % 2])
                for i, text in enumerate(texts)
            )
            conversations.append(ConversationSpec(key, kind, turns, {"systems": pair, **meta}))
            for k in cfg.segment_lengths:
                units.append(
                    UnitSpec(
                        key=unit_key(key, k),
                        payload={
                            "conversation": key,
                            "kind": kind,
                            "k": k,
                            "systems": pair,
                            "turns": [{"entity": i % 2, "text": t} for i, t in enumerate(texts[: 2 * k])],
                        },
                        required_answers=cfg.annotations_per_segment,
                        conversation_key=key,
                    )
                )

        for c in bot_bot:
            add(
                f"bb:{c['id']}",
                "bot_bot",
                c["systems"],
                c["turns"],
                {"source_id": c["id"], "seed_dialogue": c["seed_dialogue"]},
            )
        for d in humans:
            add(f"hh:{d.id}", "human_human", [HUMAN, HUMAN], d.turns, {"source_id": d.id})
        return Material(units=units, conversations=conversations)

    def pack(self, units: Sequence[UnitSpec], rng: random.Random) -> list[HitSpec]:
        cfg = self._cfg
        kinds: dict[str, bool] = {}
        keys: dict[tuple[str, int], str] = {}
        for u in units:
            kinds[u.payload["conversation"]] = u.payload["kind"] == "human_human"
            keys[(u.payload["conversation"], u.payload["k"])] = u.key
        sources = [SourceConversation(c, hh) for c, hh in kinds.items()]
        available: dict[str, list[int]] = defaultdict(list)
        for conversation, k in keys:
            available[conversation].append(k)
        hits = None
        if all(len(ks) == len(cfg.segment_lengths) for ks in available.values()):
            try:
                hits = pack_segments(sources, cfg.segment_lengths, cfg.segments_per_hit, rng)
            except ConfigError:
                if self.config.judge is None:
                    raise
        if hits is None:
            # A judged study's crowd share (hitkit.judges.human_subset: whole conversations, drawn at random within
            # each pair) may lack the full design's balance of kinds: greedy blocks.
            hits = pack_share(sources, available, cfg.segment_lengths, cfg.segments_per_hit, rng)
        return [HitSpec(tuple(keys[(s.conversation, s.k)] for s in hit), cfg.annotations_per_segment) for hit in hits]

    # The refusal rule ----------------------------------------------------------------------------
    def refuses(self, session: Session, hit: Any, worker: Any) -> str | None:
        this, other = aliased(HitUnit), aliased(HitUnit)
        this_unit, other_unit = aliased(Unit), aliased(Unit)
        hit_conversations = (
            select(this_unit.conversation_id).join(this, this.unit_id == this_unit.id).where(this.hit_id == hit.id)
        )
        shown = session.scalar(
            select(func.count(func.distinct(other_unit.conversation_id)))
            .select_from(Assignment)
            .join(other, other.hit_id == Assignment.hit_id)
            .join(other_unit, other_unit.id == other.unit_id)
            .where(
                Assignment.worker_id == worker.id,
                Assignment.hit_id != hit.id,
                other_unit.conversation_id.in_(hit_conversations),
            )
        )
        if shown:
            return (
                f"you have already seen part of {shown} of this HIT's conversations in another HIT, and each "
                f"conversation may be shown to you only once — please choose another HIT"
            )
        return None

    # Questions ----------------------------------------------------------------------------------
    def questions(self, unit: Unit) -> list[Question]:
        return [Question(q, LABELS) for q in LABEL_QUESTIONS] + [Question(f.name, PREFERENCES) for f in FEATURES]

    def layout(self, units: Sequence[Unit], rng: random.Random) -> dict[str, Any]:
        return shuffled_order(units, rng)

    def view(self, unit: Unit, layout: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "unit_id": unit.public_key,
            "position": position(unit, layout),
            "k": unit.payload["k"],
            "turns": [{"entity": t["entity"], "text": t["text"]} for t in unit.payload["turns"]],
            "features": [
                {"question": f.name, "title": f.question, "definition": f.definition, "label": f.label}
                for f in FEATURES
            ],
        }

    # Simulated workers -------------------------------------------------------------------------
    def perceived_quality(self) -> dict[str, float]:
        """Each system's human-likeness in [0, 1] as the simulated crowd perceives it (``simulated.quality``,
        else 0.5)."""
        return {s.name: 0.5 for s in self.config.systems} | dict(self.config.simulated.quality)

    def entities(self, systems: Sequence[str], quality: Mapping[str, float]) -> tuple[tuple[bool, float], ...]:
        """A segment's two entities as :meth:`simulate` takes them: (is human, human-likeness)."""
        return tuple((s == HUMAN, _HUMAN_QUALITY if s == HUMAN else quality[s]) for s in systems)

    def simulation_context(self, session: Session, study: Study) -> dict[str, tuple[tuple[bool, float], ...]]:
        """Per unit public key, each entity's (is human, human-likeness in [0, 1]) as the simulated crowd sees it."""
        quality = self.perceived_quality()
        units = session.scalars(select(Unit).where(Unit.study_id == study.id))
        return {u.public_key: self.entities(u.payload["systems"], quality) for u in units}

    def simulate(
        self, profile: str, view: Mapping[str, Any], rng: random.Random, context: Any, worker: str = ""
    ) -> dict[str, str]:
        if profile == "always_tie":
            return {**{q: "unsure" for q in LABEL_QUESTIONS}, **{f.name: "neither" for f in FEATURES}}
        if profile == "spammer":
            return {
                **{q: rng.choice(LABELS) for q in LABEL_QUESTIONS},
                **{f.name: rng.choice(PREFERENCES) for f in FEATURES},
            }
        entities = context[view["unit_id"]]
        k = view["k"]
        answers = {}
        for question, (is_human, quality) in zip(LABEL_QUESTIONS, entities, strict=True):
            if is_human:
                answers[question] = rng.choices(("human", "unsure", "bot"), _HUMAN_LABELS[profile])[0]
                continue
            spot = 1.0 - ((1.0 + quality) / 2.0) ** k
            if profile == "noisy":
                spot = _NOISY_SPOT[0] * spot + _NOISY_SPOT[1]
            if rng.random() < spot:
                answers[question] = "bot"
            else:
                answers[question] = "unsure" if rng.random() < _UNSURE_WHEN_MISSED else "human"
        sharpness, neither = _PREFERENCE[profile]
        diff = entities[0][1] - entities[1][1]
        for f in FEATURES:
            if rng.random() < neither:
                answers[f.name] = "neither"
            else:
                answers[f.name] = "0" if rng.random() < 1.0 / (1.0 + math.exp(-sharpness * diff)) else "1"
        return answers

    # Export ------------------------------------------------------------------------------------
    def export(self, session: Session, study: Study) -> dict[str, pd.DataFrame]:
        rows = done_responses(session, study)
        segments: dict[tuple[int, int], dict] = defaultdict(dict)
        context: dict[tuple[int, int], tuple] = {}
        for resp, asg, hit, worker, unit in rows:
            key = (asg.id, unit.id)
            segments[key][resp.question] = resp
            context[key] = (asg, hit, worker, unit)
        keyed = []
        for key, answers in segments.items():
            asg, hit, worker, unit = context[key]
            elapsed = [r.elapsed_s for r in answers.values() if r.elapsed_s is not None]
            position = asg.layout["order"].index(unit.id)
            for entity in (0, 1):
                row = {
                    **answer_ids(study, hit, asg, worker),
                    "conversation_id": unit.payload["conversation"],
                    "segment_exchanges": unit.payload["k"],
                    "entity": entity,
                    "system": unit.payload["systems"][entity],
                    "label": answers[LABEL_QUESTIONS[entity]].value,
                    "elapsed_s": round(max(elapsed), 3) if elapsed else None,
                }
                for f in FEATURES:
                    row[f.name] = preference_score(answers[f.name].value, entity)
                keyed.append(((hit.index, asg.id, position, entity), row))
        table = [row for _, row in sorted(keyed, key=lambda pair: pair[0])]
        if self.config.gold is None:
            return {"annotations": pd.DataFrame(table, columns=list(ANNOTATION_COLUMNS))}
        for row in table:  # a human speaker is a gold item, right when labelled human
            row.update(gold_columns(row["system"] == HUMAN))
        return {"annotations": pd.DataFrame(table, columns=[*ANNOTATION_COLUMNS, IS_GOLD, GOLD_ANSWER])}


def preference_score(answer: str, entity: int) -> str:
    """A preference answer from ``entity``'s side: ``+1`` it did better, ``-1`` the other did, ``0`` neither."""
    if answer == str(entity):
        return "+1"
    if answer == str(1 - entity):
        return "-1"
    return "0"
