"""The arena's exports: ``battles.csv`` (one row per vote; the contract with its analysis) and
``preferences.jsonl`` (prompt, chosen, rejected: what a DPO/RLHF trainer reads). docs/COLUMNS.md says
what every column holds."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Conversation, Response, Study, Turn
from hitkit.material.gold import GOLD_ANSWER, IS_GOLD
from hitkit.protocols.arena.columns import BATTLE_COLUMNS, SIDES
from hitkit.protocols.arena.quality import leak_pattern, leaks
from hitkit.protocols.arena.style import style_of
from hitkit.protocols.base import done_responses
from hitkit.protocols.kit.task import answer_ids

if TYPE_CHECKING:
    from hitkit.protocols.arena.task import ArenaTask


def conversation_turns(session: Session, study: Study) -> dict[str, list[tuple[str, str]]]:
    """Every arena conversation's turns as (speaker, text), by conversation key."""
    rows = session.execute(
        select(Conversation.key, Turn.speaker, Turn.text)
        .join(Turn, Turn.conversation_id == Conversation.id)
        .where(Conversation.study_id == study.id, Conversation.key.startswith("arena:"))
        .order_by(Conversation.id, Turn.index)
    ).all()
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for key, speaker, text in rows:
        out[key].append((speaker, text))
    return out


def battles(session: Session, study: Study, task: ArenaTask) -> list[dict]:
    """One record per confirmed vote: the battles.csv row, plus each side's turns (``_turns_a``/``_b``)."""
    reasons = {
        (r.assignment_id, r.unit_id): r.value for r, *_ in done_responses(session, study, Response.question == "reason")
    }
    conversations = conversation_turns(session, study)
    pattern = leak_pattern(task.config.arena.leak_words)
    out = []
    for resp, asg, hit, worker, unit in done_responses(session, study, Response.question == "vote"):
        p = unit.payload
        sides = {s: conversations.get(task.chat_key(asg.id, unit.id, s), []) for s in SIDES}
        replies = {s: [text for speaker, text in turns if speaker == "bot"] for s, turns in sides.items()}
        style = {s: style_of(replies[s]) for s in SIDES}
        row = {
            **answer_ids(study, hit, asg, worker),
            "battle_id": f"a{asg.id}:u{unit.id}",
            "prompt_id": p.get("prompt_id", ""),
            "category": p.get("category", ""),
            "turns": sum(s == "worker" for s, _ in sides["a"]),
            "system_a": p["system_a"],
            "system_b": p["system_b"],
            "vote": resp.value,
            "reason": reasons.get((asg.id, unit.id), ""),
            "tokens_a": style["a"].tokens,
            "tokens_b": style["b"].tokens,
            "header_count_a": style["a"].header_count,
            "list_count_a": style["a"].list_count,
            "bold_count_a": style["a"].bold_count,
            "header_count_b": style["b"].header_count,
            "list_count_b": style["b"].list_count,
            "bold_count_b": style["b"].bold_count,
            "is_control": int(bool(p["is_control"])),
            "leak": int(leaks(replies["a"] + replies["b"], pattern)),
        }
        out.append({**row, "_turns_a": sides["a"], "_turns_b": sides["b"]})
    return out


def battles_table(session: Session, study: Study, task: ArenaTask) -> pd.DataFrame:
    """``battles.csv``: one row per vote, in the order the votes were given (HIT, assignment, battle)."""
    rows = [{k: v for k, v in b.items() if not k.startswith("_")} for b in battles(session, study, task)]
    if task.config.gold is None:
        return pd.DataFrame(rows, columns=list(BATTLE_COLUMNS))
    # A study with gold: its QC battles are the gold items, right when the real system's side wins.
    control = task.config.arena.control
    for row in rows:
        row[IS_GOLD] = row["is_control"]
        row[GOLD_ANSWER] = ("b" if row["system_a"] == control else "a") if row["is_control"] else ""
    return pd.DataFrame(rows, columns=[*BATTLE_COLUMNS, IS_GOLD, GOLD_ANSWER])


def _messages(turns: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"role": "user" if speaker == "worker" else "assistant", "content": text} for speaker, text in turns]


def write_preferences(session: Session, study: Study, task: ArenaTask, out: Path) -> Path:
    """``preferences.jsonl``: per decisive vote of a real battle without a leak, the first prompt and the
    preferred and the other side's conversation after it (TRL's conversational preference format:
    ``prompt``, ``chosen``, ``rejected`` as lists of messages). Ties and both-bad votes are left out unless
    ``arena.preferences_ties``; then they come with ``"vote"`` saying so and the left side as ``chosen``.
    Votes of workers who fail QC are left out, and those of workers QC has not judged yet unless
    ``arena.unjudged`` is ``include`` (:func:`left_out_workers`)."""
    with_ties = task.config.arena.preferences_ties
    path = Path(out) / "preferences.jsonl"
    records = battles(session, study, task)
    skip = left_out_workers(records, task.config)
    with path.open("w", encoding="utf-8") as fh:
        for b in records:
            if b["is_control"] or b["leak"] or not b["_turns_a"] or not b["_turns_b"] or b["worker_id"] in skip:
                continue
            if b["vote"] not in ("a", "b") and not with_ties:
                continue
            win, lose = ("b", "a") if b["vote"] == "b" else ("a", "b")
            chosen, rejected = b[f"_turns_{win}"], b[f"_turns_{lose}"]
            fh.write(
                json.dumps(
                    {
                        "prompt": _messages(chosen[:1]),
                        "chosen": _messages(chosen[1:]),
                        "rejected": _messages(rejected[1:]),
                        "chosen_system": b[f"system_{win}"],
                        "rejected_system": b[f"system_{lose}"],
                        "vote": b["vote"],
                        "study": b["study"],
                        "battle_id": b["battle_id"],
                        "worker_id": b["worker_id"],
                        "prompt_id": b["prompt_id"],
                        "category": b["category"],
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )
    return path


def left_out_workers(records: list[dict], config) -> set[str]:
    """The workers whose votes stay out of ``preferences.jsonl``: those who fail QC, and those not judged
    yet unless ``arena.unjudged: include`` (the verdicts of the analysis's ``qc.csv``)."""
    from hitkit.protocols.arena.analysis import worker_table
    from hitkit.protocols.arena.reading import check_battles
    from hitkit.protocols.arena.verdicts import FAILED, NOT_JUDGED

    if not records:
        return set()
    frame = pd.DataFrame([{k: v for k, v in b.items() if not k.startswith("_")} for b in records])
    table = worker_table(check_battles(frame[list(BATTLE_COLUMNS)], "battles"), config)
    out = {FAILED} if config.arena.unjudged == "include" else {FAILED, NOT_JUDGED}
    return set(table.loc[table["status"].isin(out), "worker_id"].astype(str))
