"""Ranking k responses: a prompt and k systems' responses, put in order by the worker (best first, ties
allowed where the study allows them).

A unit is one prompt with k of the study's systems (every system when there are at most k; otherwise
prompt i gets systems i, i + 1, … i + k − 1 in turn, so that every system is ranked equally often and
the systems form one connected chain). ``degraded_per_hit`` units of each HIT are *control* units:
for each assignment they show one response more, a degraded copy (:func:`hitkit.material.degrade.degrade`)
of one of their own responses with a phrase of a response to another prompt of the HIT, made when the
worker accepts (:meth:`RankingTask.layout`, which also records the units' order and each unit's shown
order of responses). The worker labels responses A, B, …; the answer to ``order`` names them best
first, ``>`` between places and ``=`` between tied responses (``C>A=D>B``).

The export ``rankings`` has one row per ranked response; ``preferences.jsonl`` the pairs a ranking
implies (intact responses only, workers who fail QC left out) in TRL's conversational preference format.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Response, Study, Unit
from hitkit.errors import AnswerError
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
from hitkit.protocols.ranking.settings import COLUMNS, TABLE
from hitkit.protocols.responses import read_responses

LETTERS = "ABCDEF"
ORDER = Question("order")
DEGRADED_QUALITY = 0.0
"""How a simulated worker perceives a degraded copy, whatever it degrades."""
# How sharply a simulated profile tells better from worse (Plackett–Luce utilities: sharpness × quality
# plus Gumbel noise), and the utility gap below which a worker calls two neighbours level.
_SHARPNESS = {"diligent": 15.0, "noisy": 3.0}
_TIE_GAP = 0.15


def parse_order(value: str, n: int, ties: bool = True) -> list[list[int]]:
    """The tie groups, best first, of an answer naming the shown places A… (``C>A=D>B``); AnswerError
    unless it names each of the ``n`` responses once (and, without ``ties``, puts none level)."""
    # English only: the page always sends every label once (and "=" only where the study allows ties), so
    # only a malformed request meets these (docs: Worker pages in other languages).
    groups = [[label.strip().upper() for label in part.split("=")] for part in value.split(">")]
    if sorted(label for group in groups for label in group) != list(LETTERS[:n]):
        raise AnswerError(
            f"'{value[:40]}' does not name the responses {', '.join(LETTERS[:n])} once each; "
            f"write them best first, as in {'>'.join(LETTERS[:n])}"
        )
    if not ties and any(len(group) > 1 for group in groups):
        raise AnswerError(f"'{value[:40]}' puts responses level; this study asks for a strict order (no '=')")
    return [[LETTERS.index(label) for label in group] for group in groups]


def written(groups: Sequence[Sequence[int]]) -> str:
    """An order as an answer: ``C>A=D>B``."""
    return ">".join("=".join(LETTERS[i] for i in group) for group in groups)


class RankingTask(TaskType):
    name = "ranking"
    template = "ranking.html"
    instructions_template = "ranking_instructions.html"

    @property
    def _cfg(self):
        return self.config.ranking

    def build(self) -> Material:
        cfg, systems = self._cfg, [s.name for s in self.config.systems]
        k = cfg.shown(len(systems))
        items = read_responses(self.config.path(cfg.responses), systems, "ranking")
        # Which prompts carry a degraded copy: degraded_per_hit of every HIT's worth of prompts (seeded).
        sizes = [min(cfg.prompts_per_hit, len(items) - s) for s in range(0, len(items), cfg.prompts_per_hit)]
        picked = sum(min(cfg.degraded_per_hit, n) for n in sizes)
        controls = set(random.Random(f"controls:{self.config.seed}").sample(range(len(items)), picked))
        units, conversations = [], []
        for i, item in enumerate(items):
            key = f"prompt:{item['id']}"
            turns = (
                TurnSpec("prompt", item["prompt"]),
                *(TurnSpec(s, item["responses"][s], system=s) for s in systems),
            )
            conversations.append(ConversationSpec(key, "prompt", turns))
            chosen = [systems[(i + j) % len(systems)] for j in range(k)]
            payload = {"item_id": item["id"], "prompt": item["prompt"], "systems": chosen, "control": i in controls}
            payload["responses"] = [item["responses"][s] for s in chosen]
            units.append(UnitSpec(item["id"], payload, cfg.rankings_per_prompt, conversation_key=key))
        return Material(units=units, conversations=conversations)

    def pack(self, units: Sequence[UnitSpec], rng: random.Random) -> list[HitSpec]:
        cfg = self._cfg
        controls = [u for u in units if u.payload["control"]]
        others = [u for u in units if not u.payload["control"]]
        rng.shuffle(controls)
        rng.shuffle(others)
        blocks = []
        while controls or others:
            take = min(cfg.degraded_per_hit, len(controls))
            block = controls[:take] + others[: cfg.prompts_per_hit - take]
            controls, others = controls[take:], others[cfg.prompts_per_hit - take :]
            blocks.append(block)
        return [HitSpec(tuple(u.key for u in block), cfg.rankings_per_prompt) for block in blocks]

    def questions(self, unit: Unit) -> list[Question]:
        return [ORDER]

    def validate(self, unit: Unit, question: str, value: str) -> str:
        value = super().validate(unit, question, value)
        n = len(unit.payload["systems"]) + (1 if unit.payload["control"] else 0)
        return written(parse_order(value, n, self._cfg.ties))

    def layout(self, units: Sequence[Unit], rng: random.Random) -> dict[str, Any]:
        """The units' order; each unit's shown order of its responses (place n: the degraded copy); for each
        control unit a degraded copy of one of its responses, with a phrase of another prompt's response."""
        order = shuffled_order(units, rng)
        shown, made = {}, {}
        for unit in units:
            p, places = unit.payload, list(range(len(unit.payload["systems"])))
            if p["control"]:
                source = rng.randrange(len(places))
                own = p["responses"][source]
                others = [t for u in units if u.payload["item_id"] != p["item_id"] for t in u.payload["responses"]]
                donors = [t for t in others if t != own] or [t for t in p["responses"] if t != own] or [own]
                made[str(unit.id)] = {"source": source, "text": degrade(own, rng.choice(donors), rng)}
                places.append(len(places))
            rng.shuffle(places)
            shown[str(unit.id)] = places
        return {**order, "shown": shown, "degraded": made}

    @staticmethod
    def shown_items(unit: Unit, layout: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
        """(system, text, is degraded copy) of each response in the order the page shows them; before an
        assignment has a layout (a preview), the intact responses as stored."""
        p = unit.payload
        made = layout.get("degraded", {}).get(str(unit.id))
        places = layout.get("shown", {}).get(str(unit.id), range(len(p["systems"])))
        return [
            (p["systems"][i], p["responses"][i], False)
            if i < len(p["systems"])
            else (p["systems"][made["source"]], made["text"], True)
            for i in places
        ]

    def view(self, unit: Unit, layout: Mapping[str, Any]) -> dict[str, Any]:
        return {
            **placed(unit, layout, lambda n: N_("Prompt %(n)s", n=n), N_("Prompt")),
            "prompt": unit.payload["prompt"],
            "question": own(self._cfg.question),
            "ties": self._cfg.ties,
            "items": [{"label": LETTERS[i], "text": t} for i, (_s, t, _c) in enumerate(self.shown_items(unit, layout))],
        }

    def perceived_quality(self) -> dict[str, float]:
        """Each system's quality in [0, 1] as the simulated crowd perceives it (``simulated.quality``, else 0.5)."""
        return {s.name: 0.5 for s in self.config.systems} | dict(self.config.simulated.quality)

    def simulation_context(self, session: Session, study: Study) -> dict[str, float]:
        """Each response text's quality as the simulated crowd perceives it (any other text: a degraded copy)."""
        quality = self.perceived_quality()
        units = session.scalars(select(Unit).where(Unit.study_id == study.id))
        return {t: quality[s] for u in units for s, t in zip(u.payload["systems"], u.payload["responses"])}

    def simulate(
        self, profile: str, view: Mapping[str, Any], rng: random.Random, context: Any, worker: str = ""
    ) -> dict[str, str]:
        n, ties = len(view["items"]), view["ties"]
        if profile == "always_tie":
            return {"order": written([list(range(n))] if ties else [[i] for i in range(n)])}
        if profile == "spammer":
            return {"order": written([[i] for i in rng.sample(range(n), n)])}
        sharpness = _SHARPNESS.get(profile, _SHARPNESS["diligent"])
        utility = [
            sharpness * context.get(item["text"], DEGRADED_QUALITY) - math.log(-math.log(rng.uniform(1e-12, 1 - 1e-12)))
            for item in view["items"]
        ]
        best_first = sorted(range(n), key=lambda i: -utility[i])
        groups = [[best_first[0]]]
        for prev, i in zip(best_first, best_first[1:]):
            level = ties and utility[prev] - utility[i] < _TIE_GAP
            if level:
                groups[-1].append(i)
            else:
                groups.append([i])
        return {"order": written(groups)}

    def _answers(self, session: Session, study: Study):
        """(assignment, hit, worker, unit, shown items, tie groups) of every confirmed ranking."""
        for resp, asg, hit, worker, unit in done_responses(session, study, Response.question == ORDER.name):
            items = self.shown_items(unit, asg.layout)
            yield asg, hit, worker, unit, items, parse_order(resp.value, len(items))

    def export(self, session: Session, study: Study) -> dict[str, pd.DataFrame]:
        rows = []
        for asg, hit, worker, unit, items, groups in self._answers(session, study):
            rank = {i: 1 + sum(len(g) for g in groups[:at]) for at, group in enumerate(groups) for i in group}
            ids = {
                **answer_ids(study, hit, asg, worker),
                "item_id": unit.payload["item_id"],
            }
            rows += [
                {**ids, "system": s, "is_control": int(c), "shown": i, "rank": rank[i]}
                for i, (s, _t, c) in enumerate(items)
            ]
        return {TABLE: pd.DataFrame(rows, columns=list(COLUMNS))}

    def export_files(self, session: Session, study: Study, out: Path) -> list[Path]:
        """``preferences.jsonl``: per ranking, every pair of intact responses it puts one above the other
        (``pair``: ``best_vs_worst`` for its top against its bottom place, else ``implied``); ties give none."""
        from hitkit.protocols.ranking.analysis import worker_qc  # scipy: only when exporting

        checked = worker_qc(self.export(session, study))
        failed = {w for w, ok in (checked[1] if checked else {}).items() if ok is False}
        path = Path(out) / "preferences.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            for asg, _hit, worker, unit, items, groups in self._answers(session, study):
                if worker.external_id in failed:
                    continue
                places = [[items[i] for i in g if not items[i][2]] for g in groups]
                places = [g for g in places if g]
                for hi, lo in ((a, b) for a in range(len(places)) for b in range(a + 1, len(places))):
                    kind = "best_vs_worst" if (hi, lo) == (0, len(places) - 1) else "implied"
                    for (win, chosen, _c), (lose, rejected, _d) in ((x, y) for x in places[hi] for y in places[lo]):
                        record = {
                            "prompt": [{"role": "user", "content": unit.payload["prompt"]}],
                            "chosen": [{"role": "assistant", "content": chosen}],
                            "rejected": [{"role": "assistant", "content": rejected}],
                            "chosen_system": win,
                            "rejected_system": lose,
                            "pair": kind,
                            "study": study.name,
                            "item_id": unit.payload["item_id"],
                            "worker_id": worker.external_id,
                            "assignment_id": asg.provider_assignment_id or str(asg.id),
                        }
                        fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        return [path]
