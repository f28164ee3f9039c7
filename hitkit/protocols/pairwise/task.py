"""Pairwise A/B (ChatEval; METHODS.md §3): a prompt and two systems' responses, pick one or tie.

Units are (prompt, pair of systems). Each assignment sees the two responses of every unit in its
own random order, recorded in the assignment's layout; identical responses are recorded as a tie
without asking. Blocks of ``prompts_per_hit`` comparisons form a HIT, no prompt twice in a block
where the material allows; each HIT is taken by ``votes_per_prompt`` workers.

With a ``gold:`` section, gold comparisons (a clearly better response against a worse one: a response
and a degraded copy of it, or the coordinator's ``gold.file``) join each block at ``gold.rate``, shown
and shuffled like any other unit; their responses go by ``gold:better`` and ``gold:worse`` in the
votes table, whose ``is_gold`` and ``gold_answer`` (the side the better one was shown on) mark them.
"""

from __future__ import annotations

import itertools
import math
import random
from typing import Any, Mapping, Sequence

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Response, Study, Unit
from hitkit.material.gold import (
    GOLD_BETTER,
    GOLD_WORSE,
    GoldPair,
    deal,
    degraded_pairs,
    gold_total,
    read_gold_pairs,
    spread,
)
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
from hitkit.protocols.kit.task import answer_ids
from hitkit.protocols.pairwise.votes import VOTE_COLUMNS, VOTES
from hitkit.protocols.responses import read_responses

VOTE = Question("vote", VOTES)

# How sharply each simulated profile tells a better system from a worse one: P(prefer the better)
# = logistic(sharpness × quality difference); and how often it says "tie" anyway.
_PROFILE = {"diligent": (10.0, 0.05), "noisy": (3.0, 0.15), "judge_like": (10.0, 0.02)}
_VERBOSITY, _POSITION = 1.0, 0.4
"""A judge-like worker's pull toward the longer response and toward response A, in logits."""
GOLD_QUALITY = {GOLD_BETTER: 0.95, GOLD_WORSE: 0.05}
"""How the simulated crowd perceives a gold file item's better and worse response."""
_DEGRADED_DROP = 0.5
"""How much worse than its original the simulated crowd perceives a degraded copy (the original keeps its system's)."""


def _source(unit: UnitSpec) -> str:
    """The material a unit shows: its item (a gold item: the item it degrades, else its prompt)."""
    gold = unit.payload.get("gold")
    if gold is None:
        return unit.payload["item_id"]
    return gold["item_id"] or "\x00" + unit.payload["prompt"]


class PairwiseTask(TaskType):
    name = "pairwise"
    answer_profiles = TaskType.answer_profiles | {"judge_like"}
    template = "pairwise.html"
    instructions_template = "pairwise_instructions.html"

    def build(self) -> Material:
        cfg = self.config.pairwise
        systems = [s.name for s in self.config.systems]
        items = read_responses(self.config.path(cfg.responses), systems, "pairwise")
        units, conversations = [], []
        for item in items:
            turns = [TurnSpec("prompt", item["prompt"])] + [
                TurnSpec(s, item["responses"][s], system=s) for s in systems
            ]
            conversations.append(ConversationSpec(f"prompt:{item['id']}", "prompt", tuple(turns)))
            for a, b in itertools.combinations(systems, 2):
                units.append(
                    UnitSpec(
                        key=f"{item['id']}:{a}~{b}",
                        payload={
                            "item_id": item["id"],
                            "prompt": item["prompt"],
                            "systems": [a, b],
                            "responses": [item["responses"][a], item["responses"][b]],
                        },
                        required_answers=cfg.votes_per_prompt,
                        conversation_key=f"prompt:{item['id']}",
                    )
                )
        if self.config.gold is not None:
            units += self._gold_units(items, systems, len(units))
        return Material(units=units, conversations=conversations)

    def _gold_units(self, items: list[dict], systems: list[str], real: int) -> list[UnitSpec]:
        """Gold comparisons for ``real`` real ones at ``gold.rate``: each a better and a worse response."""
        gold, cfg = self.config.gold, self.config.pairwise
        if gold is None:
            return []
        count = gold_total(real, gold.rate)
        rng = random.Random(f"{self.config.seed}:gold")
        made: list[tuple[GoldPair, str | None, str | None]]
        if gold.source_for(("degraded", "file")) == "file" and gold.file is not None:
            pairs = read_gold_pairs(self.config.path(gold.file))
            made = [(pairs[n % len(pairs)], None, None) for n in range(count)]  # reused when the file is short
        else:
            texts = [(i["id"], i["prompt"], s, i["responses"][s]) for i in items for s in systems]
            made = list(degraded_pairs(texts, count, rng))
        return [
            UnitSpec(
                key=f"gold#{n}",
                payload={
                    "item_id": f"gold#{n}",
                    "prompt": pair.prompt,
                    "systems": [GOLD_BETTER, GOLD_WORSE],
                    "responses": [pair.better, pair.worse],
                    "gold": {"id": pair.id, "item_id": item, "system": system},
                },
                required_answers=cfg.votes_per_prompt,
            )
            for n, (pair, item, system) in enumerate(made)
        ]

    def pack(self, units: Sequence[UnitSpec], rng: random.Random) -> list[HitSpec]:
        cfg = self.config.pairwise
        order = [u for u in units if "gold" not in u.payload]
        gold = [u for u in units if "gold" in u.payload]
        rng.shuffle(order)
        if self.config.design == "adaptive":
            # One pair per HIT where the prompts allow: then choosing a HIT chooses the comparison.
            order.sort(key=lambda u: tuple(u.payload["systems"]))
        blocks: list[list[UnitSpec]] = []
        for unit in order:
            # First block with room that does not already show this prompt; else a new block.
            for block in blocks:
                if len(block) < cfg.prompts_per_hit and all(
                    u.payload["item_id"] != unit.payload["item_id"] for u in block
                ):
                    block.append(unit)
                    break
            else:
                blocks.append([unit])
        if gold:
            rng.shuffle(gold)
            # A gold item never shares a block with its own prompt, where another block can take it.
            blocks = deal(
                blocks,
                gold,
                spread([len(b) for b in blocks], len(gold)),
                lambda g, block: any(_source(u) == _source(g) for u in block),
            )
        return [HitSpec(tuple(u.key for u in block), cfg.votes_per_prompt) for block in blocks]

    @staticmethod
    def _identical(unit: Unit) -> bool:
        first, second = unit.payload["responses"]
        return first.strip() == second.strip()

    def questions(self, unit: Unit) -> list[Question]:
        return [] if self._identical(unit) else [VOTE]

    def auto_answers(self, unit: Unit) -> dict[str, str]:
        return {"vote": "tie"} if self._identical(unit) else {}

    def layout(self, units: Sequence[Unit], rng: random.Random) -> dict[str, Any]:
        # swapped[unit_id] is True when the unit's second system is shown as A.
        return {"swapped": {str(u.id): rng.random() < 0.5 for u in units}}

    def view(self, unit: Unit, layout: Mapping[str, Any]) -> dict[str, Any]:
        first, second = unit.payload["responses"]
        swapped = layout.get("swapped", {}).get(str(unit.id), False)
        a, b = (second, first) if swapped else (first, second)
        return {
            "unit_id": unit.public_key,
            "prompt": unit.payload["prompt"],
            "a": a,
            "b": b,
            "identical": self._identical(unit),
            "question": self.config.pairwise.question,
        }

    def perceived_quality(self) -> dict[str, float]:
        """Each system's quality in [0, 1] as the simulated crowd perceives it (``simulated.quality``, else 0.5)."""
        return {s.name: 0.5 for s in self.config.systems} | dict(self.config.simulated.quality)

    def simulation_context(self, session: Session, study: Study) -> dict[str, float]:
        """Which system wrote each response text: how a simulated reader 'judges' a text."""
        quality = self.perceived_quality()
        by_text: dict[str, float] = {}
        for unit in session.scalars(select(Unit).where(Unit.study_id == study.id)):
            original = (unit.payload.get("gold") or {}).get("system")
            for system, text in zip(unit.payload["systems"], unit.payload["responses"]):
                if system not in GOLD_QUALITY:
                    by_text[text] = quality[system]
                elif original is None:
                    by_text.setdefault(text, GOLD_QUALITY[system])
                elif system == GOLD_WORSE:  # a degraded copy reads clearly worse than its original
                    by_text.setdefault(text, quality[original] - _DEGRADED_DROP)
        return by_text

    def simulate(
        self, profile: str, view: Mapping[str, Any], rng: random.Random, context: Any, worker: str = ""
    ) -> dict[str, str]:
        if view["identical"]:
            return {}
        if profile == "always_tie":
            return {"vote": "tie"}
        if profile == "spammer":
            return {"vote": rng.choice(VOTES)}
        sharpness, tie_rate = _PROFILE[profile]
        diff = context[view["a"]] - context[view["b"]]
        if profile == "judge_like":
            # An LLM judge's habits (Zheng et al. 2023): drawn to the longer response and to the first shown.
            longer = (len(view["a"]) > len(view["b"])) - (len(view["a"]) < len(view["b"]))
            diff += (_VERBOSITY * longer + _POSITION) / sharpness
        if rng.random() < tie_rate:
            return {"vote": "tie"}
        p_a = 1.0 / (1.0 + math.exp(-sharpness * diff))
        return {"vote": "a" if rng.random() < p_a else "b"}

    def export(self, session: Session, study: Study) -> dict[str, pd.DataFrame]:
        rows = done_responses(session, study, Response.question == "vote")
        marked = self.config.gold is not None  # the gold columns only where gold items exist
        votes = []
        for resp, asg, hit, worker, unit in rows:
            first, second = unit.payload["systems"]
            swapped = asg.layout.get("swapped", {}).get(str(unit.id), False)
            shown_a, shown_b = (second, first) if swapped else (first, second)
            gold = {}
            if marked:
                is_gold = "gold" in unit.payload
                gold = {"is_gold": int(is_gold), "gold_answer": ("b" if swapped else "a") if is_gold else ""}
            votes.append(
                {
                    **answer_ids(study, hit, asg, worker),
                    "item_id": unit.payload["item_id"],
                    "system_a": shown_a,
                    "system_b": shown_b,
                    "vote": resp.value,
                    **gold,
                }
            )
        columns = list(VOTE_COLUMNS) + (["is_gold", "gold_answer"] if marked else [])
        return {"votes": pd.DataFrame(votes, columns=columns)}
