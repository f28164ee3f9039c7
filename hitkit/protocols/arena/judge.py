"""The arena with an LLM judge (the study file's ``judge:``; :mod:`hitkit.judges.judging` runs it).

Battles are made by the crowd during the study, so the judge votes after them (:data:`WHEN` is
``"after"``): on every finished real battle (QC battles are in no ranking and are not judged), voted by
its worker or not, twice — once as the worker saw it (``ab``: ``system_a`` shown as A) and once with the
sides swapped (``ba``) — so that a preference for a position counts once for each system and cancels
when the two are averaged, as pairwise's judge does. It reads both sides' whole conversations. A reply's
label is its first word (A, B or tie; ``[[A]]`` as MT-Bench writes it counts too; pairwise's parser); a
reply naming none is a tie with ``parsed`` false.

Which real battles the worker votes on is drawn per battle when the study is built (probability
``judge.human_share``, :func:`hitkit.judges.human_subset.rated`): independent of the worker, as prediction-powered
inference needs; a battle not drawn ends with "Next battle" alone. ``judge.csv``'s ``human_subset`` says
which battles have a worker's vote; the analysis (the arena's ``analysis.py``) combines the two.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from hitkit.protocols.base import JudgeRequest
from hitkit.protocols.kit.judge import judged
from hitkit.protocols.pairwise.judge import parse  # noqa: F401 - the same labels, read the same way

WHEN = "after"
"""The judge votes on the study's stored battles once the crowd has made them (:mod:`hitkit.judges.judging`)."""

PLACEHOLDERS = ("conversation_a", "conversation_b")
"""What an arena judge prompt names: the two sides' conversations, in the order the judge is shown them."""

DEFAULT_PROMPT = """You are judging two AI assistants who were asked the same messages by a person.

Assistant A's conversation:
{conversation_a}

Assistant B's conversation:
{conversation_b}

Which assistant answered better: more helpful, relevant, correct and clear? Judge the answers, not their length or layout. Answer with one word: A, B or tie."""

MAX_TOKENS = 16
"""The reply's default length limit (``judge.options.max_tokens`` overrides): the label is its first word."""

ORDERS = ("ab", "ba")
NEUTRAL = "tie"
"""The label of a reply that names none."""
ASKED = "battle orders"
"""What one request is, in the judge's progress line."""

JUDGE_COLUMNS = (
    "study",
    "battle_id",
    "order",
    "system_a",
    "system_b",
    "vote",
    "parsed",
    "human_subset",
    "model",
    "reply",
)
"""``judge.csv``: one row per judged battle and display order; ``system_a``/``system_b`` as the judge saw
them and ``vote`` relative to them (docs/COLUMNS.md)."""


def _transcript(turns: Iterable[tuple[str, str]]) -> str:
    return "\n".join(f"{'Person' if speaker == 'worker' else 'Assistant'}: {text}" for speaker, text in turns)


def requests_from(session, study, config) -> list[JudgeRequest]:
    """Two requests (both orders) per finished real battle of the study's confirmed submitted or approved
    assignments, voted or not, in HIT and battle order."""
    from sqlalchemy import select

    from hitkit.db.models import Assignment, Hit, HitUnit, Unit
    from hitkit.protocols.arena.exports import conversation_turns
    from hitkit.protocols.arena.task import ArenaTask, is_voted
    from hitkit.tables.schema import DONE_STATUSES

    task = ArenaTask(config)
    rows = session.execute(
        select(Assignment, Hit, Unit)
        .join(Hit, Assignment.hit_id == Hit.id)
        .join(HitUnit, HitUnit.hit_id == Hit.id)
        .join(Unit, HitUnit.unit_id == Unit.id)
        .where(Hit.study_id == study.id, Assignment.status.in_(DONE_STATUSES), Assignment.confirmed_at.is_not(None))
        .order_by(Hit.index, Assignment.id, HitUnit.position)
    ).all()
    conversations = conversation_turns(session, study)
    out = []
    for assignment, _hit, unit in rows:
        p = unit.payload
        sides = {s: conversations.get(task.chat_key(assignment.id, unit.id, s), []) for s in ("a", "b")}
        if p["is_control"] or not sides["a"] or not sides["b"]:
            continue
        battle = f"a{assignment.id}:u{unit.id}"
        for order in ORDERS:
            shown = ("a", "b") if order == "ab" else ("b", "a")
            out.append(
                JudgeRequest(
                    unit_key=battle,
                    variant=order,
                    fields={
                        "conversation_a": _transcript(sides[shown[0]]),
                        "conversation_b": _transcript(sides[shown[1]]),
                    },
                    meta={
                        "battle_id": battle,
                        "system_a": p["system_" + shown[0]],
                        "system_b": p["system_" + shown[1]],
                        "order": order,
                        "human_subset": is_voted(unit),
                    },
                )
            )
    return out


def export(study: str, labels: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """``judge.csv`` from the stored labels (dicts with meta, label, parsed, model, reply); ``human_subset``
    from the battle's draw (every judged battle was chatted by a worker, not every one voted on)."""
    rows = [
        {
            "study": study,
            "battle_id": row["meta"]["battle_id"],
            "order": row["meta"]["order"],
            "system_a": row["meta"]["system_a"],
            "system_b": row["meta"]["system_b"],
            "vote": row["label"],
            **judged(row, row["meta"]["human_subset"]),
        }
        for row in labels
    ]
    return pd.DataFrame(rows, columns=list(JUDGE_COLUMNS))
