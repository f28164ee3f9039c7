"""Direct Assessment of responses (METHODS.md §1's standardisation and QC on static outputs): a
prompt and one system's response, rated alone on the study's 0–100 sliders.

Units are of two kinds. A *response* unit is one system's response to one prompt (payload
``item_id``, ``prompt``, ``system``, ``response``, ``is_control`` false). A *degraded* unit is a
quality-control place (``is_control`` true, ``slot``): what it shows is made for each assignment
when the worker accepts the HIT (:meth:`RatingTask.layout`): a degraded copy (:mod:`hitkit.material.degrade`) of
one of that HIT's responses, with the original's prompt. So, as in Graham et al.'s DA, every worker
rates degraded copies of responses they also rate intact, made afresh for them; the layout records
which response each copy degrades (``degraded``: unit id → item_id, system, prompt, text) and the
order the units are shown in (``order``).

:func:`rotation_blocks` packs the responses into HITs of ``items_per_hit``: no prompt twice in a HIT
while ``items_per_hit`` ≤ the number of prompts, and the systems taken in turn so each HIT mixes
them (the per-worker standardisation needs every worker to see several systems). Each HIT gets
``degraded_per_hit`` degraded places and is taken by ``ratings_per_item`` workers.

Each unit asks ``score_<criterion>`` for every criterion: a whole number 0–100. The export table
``da_ratings`` has one row per rated unit × criterion; a degraded copy's row names the system and
item it degrades, with ``is_control`` 1.
"""

from __future__ import annotations

import random
import re
from typing import Any, Mapping, Sequence

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Response, Study, Unit
from hitkit.errors import AnswerError, ConfigError, InputError
from hitkit.i18n import N_, own
from hitkit.material.degrade import degrade
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
from hitkit.protocols.kit.task import answer_ids, placed, shuffled_order
from hitkit.protocols.rating.gold import GOLD_ANSWER, IS_GOLD, gold_columns
from hitkit.protocols.rating.scores import DA_COLUMNS, SCORE_PREFIX, TABLE
from hitkit.protocols.rating.settings import degraded_counts
from hitkit.protocols.responses import read_responses

_WHOLE_NUMBER = re.compile(r"\d{1,3}")  # fullmatch: `$` passes a final newline
DEGRADED_QUALITY = 0.05
"""How a simulated worker perceives a degraded copy, whatever it degrades."""
# Standard deviation of a simulated worker's slider noise, in slider points.
_NOISE = {"diligent": 10.0, "noisy": 30.0}


def rotation_blocks(units: Sequence[UnitSpec], size: int, rng: random.Random) -> list[list[UnitSpec]]:
    """Blocks of ``size`` response units: prompts in a random order, the k-th pass over them giving
    prompt i the system (i + k) mod |systems|, cut into consecutive blocks (the last one shorter).

    Consecutive units have consecutive prompts, so a block repeats no prompt while ``size`` ≤ the
    number of prompts, and the systems rotate within every block.
    """
    by_key = {(u.payload["item_id"], u.payload["system"]): u for u in units}
    items = sorted({item for item, _ in by_key})
    systems = sorted({system for _, system in by_key})
    rng.shuffle(items)
    rng.shuffle(systems)
    found = [
        by_key.get((items[m % len(items)], systems[(m % len(items) + m // len(items)) % len(systems)]))
        for m in range(len(items) * len(systems))
    ]
    sequence = [u for u in found if u is not None]
    return [sequence[i : i + size] for i in range(0, len(sequence), size)]


class RatingTask(TaskType):
    name = "rating"
    template = "rating.html"
    instructions_template = "rating_instructions.html"

    @property
    def _cfg(self):
        return self.config.rating

    # Material ---------------------------------------------------------------------------------
    def build(self) -> Material:
        cfg = self._cfg
        path = self.config.path(cfg.responses)
        if not path.is_file():
            raise InputError(path, "responses file not found — set rating.responses in the study file")
        systems = [s.name for s in self.config.systems]
        units, conversations = [], []
        for item in read_responses(path, systems, "rating"):
            key = f"prompt:{item['id']}"
            conversations.append(
                ConversationSpec(
                    key,
                    "prompt",
                    (
                        TurnSpec("prompt", item["prompt"]),
                        *(TurnSpec(s, item["responses"][s], system=s) for s in systems),
                    ),
                )
            )
            units += [
                UnitSpec(
                    key=f"{item['id']}:{s}",
                    required_answers=cfg.ratings_per_item,
                    conversation_key=key,
                    payload={
                        "item_id": item["id"],
                        "prompt": item["prompt"],
                        "system": s,
                        "response": item["responses"][s],
                        "is_control": False,
                    },
                )
                for s in systems
            ]
        places = sum(degraded_counts(self.config, cfg.hit_sizes(len(units))))
        units += [
            UnitSpec(
                key=f"degraded#{n}", payload={"is_control": True, "slot": n}, required_answers=cfg.ratings_per_item
            )
            for n in range(places)
        ]
        return Material(units=units, conversations=conversations)

    def pack(self, units: Sequence[UnitSpec], rng: random.Random) -> list[HitSpec]:
        cfg = self._cfg
        degraded = [u for u in units if u.payload["is_control"]]
        blocks = rotation_blocks([u for u in units if not u.payload["is_control"]], cfg.items_per_hit, rng)
        places = degraded_counts(self.config, [len(block) for block in blocks])
        if len(degraded) != sum(places):
            raise ConfigError(
                f"{len(blocks)} HITs need {sum(places)} degraded places; the material has {len(degraded)}"
            )
        starts = [sum(places[:i]) for i in range(len(blocks))]
        return [
            HitSpec(
                tuple(u.key for u in block) + tuple(u.key for u in degraded[start : start + n]), cfg.ratings_per_item
            )
            for block, start, n in zip(blocks, starts, places)
        ]

    # Questions ---------------------------------------------------------------------------------
    def questions(self, unit: Unit) -> list[Question]:
        return [Question(SCORE_PREFIX + c.name) for c in self._cfg.criteria]

    def validate(self, unit: Unit, question: str, value: str) -> str:
        value = super().validate(unit, question, value)
        if not _WHOLE_NUMBER.fullmatch(value) or int(value) > 100:
            raise AnswerError(f"'{value}' is not a rating for '{question}'; give a whole number from 0 to 100")
        return str(int(value))

    # What a worker sees ------------------------------------------------------------------------
    def layout(self, units: Sequence[Unit], rng: random.Random) -> dict[str, Any]:
        """The shuffled order, and for each degraded place a degraded copy of a distinct response of
        the HIT, a phrase of it replaced by one of a response to another prompt of the HIT."""
        real = [u for u in units if not u.payload["is_control"]]
        places = [u for u in units if u.payload["is_control"]]
        sources = rng.sample(real, len(places))  # packing gives a HIT no more places than responses
        made = {}
        for place, source in zip(places, sources):
            item, own = source.payload["item_id"], source.payload["response"]
            # A response to another prompt, in other words (generic replies repeat across prompts).
            donors = (
                [u for u in real if u.payload["item_id"] != item and u.payload["response"] != own]
                or [u for u in real if u.payload["response"] != own]
                or real
            )
            text = degrade(source.payload["response"], rng.choice(donors).payload["response"], rng)
            made[str(place.id)] = {
                "item_id": item,
                "system": source.payload["system"],
                "prompt": source.payload["prompt"],
                "text": text,
            }
        return {**shuffled_order(units, rng), "degraded": made}

    @staticmethod
    def _shown(unit: Unit, layout: Mapping[str, Any]) -> Mapping[str, Any]:
        """The prompt, response, item and system a unit shows under ``layout``; a degraded place shows
        nothing before an assignment has made its copy (a preview)."""
        if not unit.payload["is_control"]:
            return unit.payload
        made = layout.get("degraded", {}).get(str(unit.id))
        if made is None:
            return {"item_id": None, "system": None, "prompt": None, "response": None}
        return {**made, "response": made["text"]}

    def view(self, unit: Unit, layout: Mapping[str, Any]) -> dict[str, Any]:
        shown = self._shown(unit, layout)
        return {
            **placed(unit, layout, lambda n: N_("Response %(n)s", n=n), N_("Response")),
            "prompt": shown["prompt"],
            "response": shown["response"],
            "criteria": [
                {"question": SCORE_PREFIX + c.name, "statement": own(c.statement)} for c in self._cfg.criteria
            ],
        }

    # Simulated workers -------------------------------------------------------------------------
    def perceived_quality(self) -> dict[str, float]:
        """Each system's quality in [0, 1] as the simulated crowd perceives it (``simulated.quality``, else 0.5)."""
        return {s.name: 0.5 for s in self.config.systems} | dict(self.config.simulated.quality)

    def simulation_context(self, session: Session, study: Study) -> dict[str, float]:
        """Each unit's quality as the simulated crowd perceives it (unit public key → quality in [0, 1])."""
        quality = self.perceived_quality()
        units = session.scalars(select(Unit).where(Unit.study_id == study.id))
        return {
            u.public_key: DEGRADED_QUALITY if u.payload["is_control"] else quality[u.payload["system"]] for u in units
        }

    def simulate(
        self, profile: str, view: Mapping[str, Any], rng: random.Random, context: Any, worker: str = ""
    ) -> dict[str, str]:
        criteria = self._cfg.criteria
        if profile == "always_tie":
            agree = {c.name: 50.0 for c in criteria}
        elif profile == "spammer":
            # One kind per worker, drawn from their id: half leave every slider at one value, half click
            # at random without reading.
            kind = random.Random(f"spammer:{worker}")
            constant = kind.choice((0, 50, 100)) if kind.random() < 0.5 else None
            agree = {c.name: rng.randint(0, 100) if constant is None else constant for c in criteria}
        else:
            quality = context[view["unit_id"]]
            agree = {c.name: min(100.0, max(0.0, 100 * quality + rng.gauss(0, _NOISE[profile]))) for c in criteria}
            agree = {c.name: agree[c.name] if c.polarity == "positive" else 100 - agree[c.name] for c in criteria}
        return {SCORE_PREFIX + name: str(round(value)) for name, value in agree.items()}

    # Export ------------------------------------------------------------------------------------
    def export(self, session: Session, study: Study) -> dict[str, pd.DataFrame]:
        rows = done_responses(session, study, Response.question.startswith(SCORE_PREFIX, autoescape=True))
        rank = {SCORE_PREFIX + c.name: i for i, c in enumerate(self._cfg.criteria)}
        marked = self.config.gold is not None  # the gold columns only where the study file asks for gold
        keyed = []
        for resp, asg, hit, worker, unit in rows:
            shown = self._shown(unit, asg.layout)
            at = asg.layout["order"].index(unit.id)
            keyed.append(
                (
                    (hit.index, asg.id, at, rank.get(resp.question, len(rank))),
                    {
                        **answer_ids(study, hit, asg, worker),
                        "item_id": shown["item_id"],
                        "system": shown["system"],
                        "is_control": int(bool(unit.payload["is_control"])),
                        "position": at,
                        "criterion": resp.question[len(SCORE_PREFIX) :],
                        "score": int(resp.value),
                        **(gold_columns(bool(unit.payload["is_control"])) if marked else {}),
                    },
                )
            )
        table = [row for _, row in sorted(keyed, key=lambda pair: pair[0])]
        columns = list(DA_COLUMNS) + ([IS_GOLD, GOLD_ANSWER] if marked else [])
        return {TABLE: pd.DataFrame(table, columns=columns)}
