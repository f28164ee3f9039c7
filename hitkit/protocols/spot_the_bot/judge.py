"""Spot The Bot with an LLM judge (the study file's ``judge:``; :mod:`hitkit.judges.judging` runs it).

The judge reads each segment once, as the worker's page shows it (the first k exchanges,
Speaker A = entity 0, Speaker B = entity 1), and labels each speaker human, bot or unsure. A reply
like ``Speaker A: bot, Speaker B: human`` is read by speaker name (A/B, or 1/2 as many models
number them), with *person* read as human, *AI*/*machine* as bot and *not sure*/*can't tell* as
unsure; a reply naming no speaker but exactly two labels is read in order. A speaker the reply
does not label is unsure; a reply that labels neither is ``unsure,unsure`` with ``parsed`` false. A
label must end its clause (punctuation, a line's end, "and"), so a small model that continues the
conversation ("Speaker B: Human beings are …") is not read as labelling.
The stored label is the two speakers' labels joined by a comma (entity 0's first).

The analysis of the labels against the people's annotations is
:mod:`hitkit.protocols.spot_the_bot.judge_analysis`, so this task side loads no scipy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from hitkit.protocols.base import JudgeRequest, UnitSpec
from hitkit.protocols.kit.judge import judged
from hitkit.protocols.spot_the_bot.annotations import LABELS

PLACEHOLDERS = ("conversation",)
"""What a Spot The Bot judge prompt names: the segment, one ``Speaker A: …`` line per message."""

SPEAKERS = ("A", "B")
"""The speakers' names on the worker's page, entity 0 first."""

DEFAULT_PROMPT = """Below is the beginning of a conversation between two speakers, Speaker A and Speaker B. \
Each speaker is either a person or a chatbot; both may be people, or both chatbots.

{conversation}

For each speaker, decide whether it is a human or a bot; answer unsure only if you cannot tell. \
Answer in exactly this form: Speaker A: human, bot or unsure. Speaker B: human, bot or unsure."""

MAX_TOKENS = 32
"""Default ``judge.options.max_tokens``: a label for each of two speakers (``Speaker A: bot, Speaker B: human``)."""

NEUTRAL = "unsure,unsure"
"""The label of a reply that names none."""

JUDGE_COLUMNS = (
    "study",
    "conversation_id",
    "segment_exchanges",
    "entity",
    "system",
    "label",
    "parsed",
    "human_subset",
    "model",
    "reply",
)
"""``judge.csv``: one row per segment and speaker, as ``annotations.csv`` (docs/COLUMNS.md)."""

_WORDS = {
    "human": "human",
    "person": "human",
    "people": "human",
    "bot": "bot",
    "chatbot": "bot",
    "ai": "bot",
    "machine": "bot",
    "unsure": "unsure",
    "not sure": "unsure",
    "uncertain": "unsure",
    "unknown": "unsure",
    "can't tell": "unsure",
    "cannot tell": "unsure",
    "can not tell": "unsure",
}
_LABEL = (
    r"(chatbot|bot|human|person|people|ai|machine|unsure|not\s+sure|uncertain|unknown|can'?t\s+tell|can\s*not\s+tell)"
)
# A label ends its clause: "Speaker B: Human beings are …" (a model continuing the chat) is no label.
_NAMED = re.compile(
    r"speaker\s*[\"'*_]*\s*([ab12])\b[\s\"'*_]*(?:is|:|=|-|–|—)?[\s\"'*_]*(?:(?:an?|the)\s+)?"
    + _LABEL
    + r"\b(?=[\s\"'*_]*(?:[,.;:!?)\]]|$|and\b|\())",
    re.IGNORECASE | re.MULTILINE,
)
_BARE = re.compile(r"\b" + _LABEL + r"\b", re.IGNORECASE)


def _word(text: str) -> str:
    return _WORDS[re.sub(r"\s+", " ", text.lower()).replace("’", "'")]


def stratum(unit: UnitSpec) -> str:
    """The pair of systems of the unit's conversation (``human~human`` for human–human material): the
    human subset is drawn within each, so every pair's estimate rests on a uniform sample of its own
    segments."""
    return "~".join(sorted(unit.payload["systems"]))


CLUSTER_NAME = "conversations"
"""What :func:`cluster` groups, as messages name it."""


def cluster(unit: UnitSpec) -> str:
    """The unit's conversation: its segments are prefixes of each other, so strongly dependent; the crowd's
    share is drawn by whole conversations (:func:`hitkit.judges.human_subset.human_subset`) and the analysis
    resamples conversations (:func:`conversation_totals`)."""
    return str(unit.payload["conversation"])


def selection(units: Sequence[UnitSpec], tables: Mapping[str, pd.DataFrame], judge: pd.DataFrame) -> pd.DataFrame:
    """Per conversation of ``units`` (index: its :func:`cluster` key), what ``judge.select: uncertainty`` draws
    its second wave from (:mod:`hitkit.judges.second_wave`). Each segment scores s = 1 when entity 0's label
    ranks above entity 1's (human > unsure > bot), 0 below, ½ the same — the win rate's outcome (METHODS §2);
    ``judge`` and ``human`` are the sums of the judge's s and of the people's (the mean over the segment's
    annotations) over the segments people annotated (the judge's over all of them, ``human`` NaN, where none
    were), so that (human − judge)² is the square of the conversation's residual in the win-rate ratio
    linearised at θ = ½, (W − θD)_people − (W − θD)_judge; ``confidence`` is |2·mean(s_judge) − 1| over the
    conversation's segments: 1 when every prefix has the judge name the same speaker the more human, 0 when its
    calls split evenly or tie — the conversation's agreement across its segments, as pairwise's is across display
    orders."""
    from hitkit.protocols.spot_the_bot.judge_analysis import segment_outcomes

    keys = ["conversation_id", "segment_exchanges"]
    judged = segment_outcomes(judge).assign(s=lambda t: (t["outcome"] + 1) / 2).groupby(keys)["s"].mean()
    people = tables.get("annotations")
    if people is not None and len(people):
        seen = segment_outcomes(people).assign(s=lambda t: (t["outcome"] + 1) / 2).groupby(keys)["s"].mean()
    else:
        seen = pd.Series(float("nan"), index=judged.index)
    both = pd.DataFrame({"judge": judged, "human": seen.reindex(judged.index)}).reset_index()
    rows = []
    for key, part in both.groupby("conversation_id", sort=False):
        annotated = part["human"].notna()
        counted = part[annotated] if annotated.any() else part
        rows.append(
            (
                key,
                float(counted["judge"].sum()),
                abs(2 * float(part["judge"].mean()) - 1),
                float(counted["human"].sum()) if annotated.any() else float("nan"),
            )
        )
    table = pd.DataFrame(rows, columns=["unit", "judge", "confidence", "human"]).set_index("unit")
    return table.reindex(list(dict.fromkeys(cluster(u) for u in units)))


def conversation_text(turns: Sequence[Mapping[str, Any]]) -> str:
    """The segment as the judge reads it: one ``Speaker A: text`` line per message, in order."""
    return "\n".join(f"Speaker {SPEAKERS[int(t['entity'])]}: {' '.join(str(t['text']).split())}" for t in turns)


def requests(units: Sequence[UnitSpec]) -> list[JudgeRequest]:
    """Every label the judge gives: one per segment, both speakers at once."""
    return [
        JudgeRequest(
            unit_key=u.key,
            variant="segment",
            fields={"conversation": conversation_text(u.payload["turns"])},
            meta={
                "conversation_id": u.payload["conversation"],
                "segment_exchanges": u.payload["k"],
                "systems": list(u.payload["systems"]),
            },
        )
        for u in units
    ]


def parse(reply: str) -> str | None:
    """The two speakers' labels a reply gives, ``"bot,human"`` (entity 0's first; unsure for a speaker
    it leaves out), or None when it labels neither."""
    found: dict[int, str] = {}
    for name, word in _NAMED.findall(reply):
        found.setdefault(0 if name.upper() in ("A", "1") else 1, _word(word))
    if not found:
        bare = [_word(w) for w in _BARE.findall(reply)]
        if len(bare) != 2:
            return None
        found = dict(enumerate(bare))
    return ",".join(found.get(entity, "unsure") for entity in (0, 1))


def export(study: str, labels: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """``judge.csv`` from the stored labels (dicts with meta, label, parsed, human_subset, model, reply, and
    human_probability where the crowd's share followed the judge's uncertainty: then a column of it, the
    probability that the segment's conversation went to the crowd): two rows per segment, one per speaker."""
    rows = []
    for row in labels:
        meta, speakers = row["meta"], str(row["label"]).split(",")
        for entity in (0, 1):
            rows.append(
                {
                    "study": study,
                    "conversation_id": meta["conversation_id"],
                    "segment_exchanges": meta["segment_exchanges"],
                    "entity": entity,
                    "system": meta["systems"][entity],
                    "label": speakers[entity],
                    **judged(row, row["human_subset"]),
                    **({"human_probability": row["human_probability"]} if "human_probability" in row else {}),
                }
            )
    weighted = any("human_probability" in row for row in rows)
    return pd.DataFrame(rows, columns=[*JUDGE_COLUMNS, *(("human_probability",) if weighted else ())])


def read_judge(path) -> pd.DataFrame:
    """``judge.csv``, checked: its columns, every label human, unsure or bot, entity 0 or 1, both speakers of
    every segment, and each ``human_probability`` (where the crowd's share followed the judge's uncertainty) a
    number in (0, 1]."""
    from hitkit.analysis.tables import read_probability, read_table
    from hitkit.errors import InputError

    table = read_table(path, JUDGE_COLUMNS)
    label = table["label"].astype(str).str.strip().str.lower()
    bad = table.index[~label.isin(LABELS)]
    if len(bad):
        raise InputError(
            path, f"label {table.at[bad[0], 'label']!r} is not one of human, unsure, bot", line=int(bad[0]) + 2
        )
    entity = table["entity"].astype(str).str.strip()
    bad = table.index[~entity.isin(["0", "1"])]
    if len(bad):
        raise InputError(path, f"entity {table.at[bad[0], 'entity']!r} is not 0 or 1", line=int(bad[0]) + 2)
    table["label"], table["entity"] = label, entity.astype(int)
    for column in ("study", "conversation_id", "segment_exchanges", "system"):
        table[column] = table[column].astype(str).str.strip()
    keys = ["study", "conversation_id", "segment_exchanges"]
    pairs = table.groupby(keys)["entity"].agg(lambda e: sorted(e) == [0, 1])
    if not pairs.all():
        study, conversation, k = pairs.index[~pairs.to_numpy()][0]
        raise InputError(
            path, f"segment {conversation!r} ({k} exchanges) needs exactly one row for entity 0 and one for entity 1"
        )
    return read_probability(path, table)
