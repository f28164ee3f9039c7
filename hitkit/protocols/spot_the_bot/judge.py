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

The analysis (:func:`analysis_tables`) turns ``annotations.csv`` and ``judge.csv`` into one row
per segment and pair of different systems: the people's share of wins and of decisive annotations
for the first system of the pair (the means over the segment's annotations) and the judge's (its
one pair of labels); sums them over each conversation (its segments are prefixes of each other, so
the conversation, drawn whole for the crowd, is the independent unit) and hands the conversation
totals to :func:`hitkit.analysis.ppi.ppi_ratio`: the win rate WINS / (WINS + LOSSES) of METHODS §2
is a ratio of two means, and its jackknife leaves out one conversation at a time. The statistics are imported when
asked for, so the task side of this module loads no scipy.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from hitkit.protocols.base import JudgeRequest, UnitSpec
from hitkit.protocols.spot_the_bot.annotations import LABEL_RANK, LABELS

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

JUDGE_COLUMNS = ("study", "conversation_id", "segment_exchanges", "entity", "system", "label", "parsed",
                 "human_subset", "model", "reply")
"""``judge.csv``: one row per segment and speaker, as ``annotations.csv`` (docs/COLUMNS.md)."""

_WORDS = {"human": "human", "person": "human", "people": "human", "bot": "bot", "chatbot": "bot", "ai": "bot",
          "machine": "bot", "unsure": "unsure", "not sure": "unsure", "uncertain": "unsure", "unknown": "unsure",
          "can't tell": "unsure", "cannot tell": "unsure", "can not tell": "unsure"}
_LABEL = r"(chatbot|bot|human|person|people|ai|machine|unsure|not\s+sure|uncertain|unknown|can'?t\s+tell|can\s*not\s+tell)"
# A label ends its clause: "Speaker B: Human beings are …" (a model continuing the chat) is no label.
_NAMED = re.compile(r"speaker\s*[\"'*_]*\s*([ab12])\b[\s\"'*_]*(?:is|:|=|-|–|—)?[\s\"'*_]*(?:(?:an?|the)\s+)?"
                    + _LABEL + r"\b(?=[\s\"'*_]*(?:[,.;:!?)\]]|$|and\b|\())", re.IGNORECASE | re.MULTILINE)
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


def conversation_text(turns: Sequence[Mapping[str, Any]]) -> str:
    """The segment as the judge reads it: one ``Speaker A: text`` line per message, in order."""
    return "\n".join(f"Speaker {SPEAKERS[int(t['entity'])]}: {' '.join(str(t['text']).split())}" for t in turns)


def requests(units: Sequence[UnitSpec]) -> list[JudgeRequest]:
    """Every label the judge gives: one per segment, both speakers at once."""
    return [JudgeRequest(unit_key=u.key, variant="segment",
                         fields={"conversation": conversation_text(u.payload["turns"])},
                         meta={"conversation_id": u.payload["conversation"], "segment_exchanges": u.payload["k"],
                               "systems": list(u.payload["systems"])})
            for u in units]


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
    """``judge.csv`` from the stored labels (dicts with meta, label, parsed, human_subset, model, reply):
    two rows per segment, one per speaker."""
    rows = []
    for row in labels:
        meta, speakers = row["meta"], str(row["label"]).split(",")
        for entity in (0, 1):
            rows.append({"study": study, "conversation_id": meta["conversation_id"],
                         "segment_exchanges": meta["segment_exchanges"], "entity": entity,
                         "system": meta["systems"][entity], "label": speakers[entity], "parsed": bool(row["parsed"]),
                         "human_subset": bool(row["human_subset"]), "model": row["model"], "reply": row["reply"] or ""})
    return pd.DataFrame(rows, columns=list(JUDGE_COLUMNS))


def read_judge(path) -> pd.DataFrame:
    """``judge.csv``, checked: its columns, every label human, unsure or bot, entity 0 or 1, and both
    speakers of every segment."""
    from hitkit.analysis.tables import read_table
    from hitkit.errors import InputError

    table = read_table(path, JUDGE_COLUMNS)
    label = table["label"].astype(str).str.strip().str.lower()
    bad = table.index[~label.isin(LABELS)]
    if len(bad):
        raise InputError(path, f"label {table.at[bad[0], 'label']!r} is not one of human, unsure, bot",
                         line=int(bad[0]) + 2)
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
        raise InputError(path, f"segment {conversation!r} ({k} exchanges) needs exactly one row for entity 0 and "
                               "one for entity 1")
    return table


def _segments(table: pd.DataFrame) -> pd.DataFrame:
    """One row per segment (and annotation) with both speakers side by side: study, conversation_id,
    segment_exchanges, system_0, system_1 and outcome (+1: entity 0's label ranks higher, −1 lower, 0 same)."""
    keys = ["study", "conversation_id", "segment_exchanges"] + (["assignment_id"] if "assignment_id" in table else [])
    t = table.assign(**{c: table[c].astype(str).str.strip() for c in keys}, rank=table["label"].map(LABEL_RANK))
    zero = t[t["entity"].astype(int) == 0].set_index(keys)
    one = t[t["entity"].astype(int) == 1].set_index(keys).loc[zero.index]
    diff = zero["rank"].to_numpy() - one["rank"].to_numpy()
    return pd.DataFrame({"system_0": zero["system"].to_numpy(), "system_1": one["system"].to_numpy(),
                         "outcome": (diff > 0).astype(int) - (diff < 0)}, index=zero.index).reset_index()


ITEM_COLUMNS = ("study", "conversation_id", "segment_exchanges", "system_a", "system_b", "human_subset",
                "human_wins", "human_decisive", "judge_wins", "judge_decisive")
"""One row per judged segment of two different systems (system_a < system_b by name): whether it was
drawn for the crowd (judge.csv's ``human_subset``), the share of the people's annotations system_a
won and the share that were decisive (NaN where nobody annotated the segment), and the judge's (0 or 1)."""


def items(annotations: pd.DataFrame, judge: pd.DataFrame) -> pd.DataFrame:
    """:data:`ITEM_COLUMNS` from the tidy annotations and judge.csv (both with entity rows)."""
    keys = ["study", "conversation_id", "segment_exchanges"]

    def oriented(table: pd.DataFrame) -> pd.DataFrame:
        seg = _segments(table)
        seg = seg[seg["system_0"] != seg["system_1"]]
        flip = (seg["system_0"] > seg["system_1"]).to_numpy()
        outcome = seg["outcome"].to_numpy() * (1 - 2 * flip)
        return pd.DataFrame({**{k: seg[k].to_numpy() for k in keys},
                             "system_a": seg["system_0"].where(~flip, seg["system_1"]).to_numpy(),
                             "system_b": seg["system_1"].where(~flip, seg["system_0"]).to_numpy(),
                             "wins": (outcome > 0).astype(float), "decisive": (outcome != 0).astype(float)})

    if "human_subset" not in judge:
        raise ValueError("the judge's labels need the human_subset column (judge.csv): which segments were "
                         "drawn for the crowd")
    judged = oriented(judge).rename(columns={"wins": "judge_wins", "decisive": "judge_decisive"})
    if len(annotations):
        human = (oriented(annotations).groupby(keys + ["system_a", "system_b"], as_index=False)[["wins", "decisive"]]
                 .mean().rename(columns={"wins": "human_wins", "decisive": "human_decisive"}))
        judged = judged.merge(human, on=keys + ["system_a", "system_b"], how="left")
    else:
        judged["human_wins"] = judged["human_decisive"] = float("nan")
    drawn = judge.assign(**{k: judge[k].astype(str).str.strip() for k in keys},
                         human_subset=judge["human_subset"].astype(str).str.strip().str.lower().isin(["true", "1"]))
    judged = judged.merge(drawn.groupby(keys, as_index=False)["human_subset"].any(), on=keys, how="left")
    return judged[list(ITEM_COLUMNS)].reset_index(drop=True)


CONVERSATION_COLUMNS = ("study", "conversation_id", "system_a", "system_b", "human_subset", "segments",
                        "human_wins", "human_decisive", "judge_wins", "judge_decisive", "labelled")
"""One row per conversation of two different systems: whether it was drawn for the crowd, its segments,
the sums over its segments of :data:`ITEM_COLUMNS`' W and D (human: over the segments people annotated,
NaN where none; judge: over the same segments where it is drawn, over all where not), and whether it is
labelled (drawn and annotated)."""


def conversation_totals(per_item: pd.DataFrame) -> pd.DataFrame:
    """:data:`CONVERSATION_COLUMNS` from :func:`items`. The conversation is the unit of the ratio estimate:
    its segments are prefixes of each other, and the crowd's share is drawn by whole conversations, so
    the ratio of the conversations' sums is the segments' Σ W / Σ D and resampling conversations respects
    their dependence. Labelled by design (judge.csv's ``human_subset``), not by which were annotated."""
    keys = ["study", "conversation_id", "system_a", "system_b"]
    seen = per_item["human_wins"].notna()
    drawn = per_item["human_subset"].astype(bool)
    # A drawn conversation's judge side covers the segments people annotated, as its human side does.
    counted = ~drawn | seen
    frame = per_item.assign(human_subset=drawn, segments=1, annotated=seen.astype(int),
                            judge_wins=per_item["judge_wins"].where(counted, 0.0),
                            judge_decisive=per_item["judge_decisive"].where(counted, 0.0))
    out = frame.groupby(keys, as_index=False, sort=True).agg(
        human_subset=("human_subset", "any"), segments=("segments", "sum"), annotated=("annotated", "sum"),
        human_wins=("human_wins", "sum"), human_decisive=("human_decisive", "sum"),
        judge_wins=("judge_wins", "sum"), judge_decisive=("judge_decisive", "sum"))
    out["labelled"] = out["human_subset"] & (out["annotated"] > 0)
    out.loc[out["annotated"] == 0, ["human_wins", "human_decisive"]] = float("nan")
    return out[list(CONVERSATION_COLUMNS)].reset_index(drop=True)


WIN_RATE_COLUMNS = ("system_a", "system_b", "n_human", "n_judge",
                    "human", "human_low", "human_high", "judge", "judge_low", "judge_high",
                    "ppi", "ppi_low", "ppi_high", "lam", "n_effective", "fallback")
"""``judge_win_rates``: as pairwise's (:data:`hitkit.analysis.ppi.WIN_RATE_COLUMNS`), the win rate
being METHODS §2's WINS / (WINS + LOSSES), ties excluded."""


def win_rates(per_item: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """Per pair of different systems (system_a < system_b by name): the win rate of system_a,
    human-only (Σ wins / Σ decisive over the conversations drawn for the crowd, jackknife t interval
    leaving out one conversation), judge-only (the same over every conversation; naive, it ignores the
    judge's bias) and prediction-powered (:func:`hitkit.analysis.ppi.ppi_ratio` on the conversation
    totals of :func:`conversation_totals`); estimates and intervals clipped to [0, 1]. ``n_human``, ``n_judge``:
    segments; ``n_effective``: the human segments the people-only estimate would need for the same
    variance (ppi_ratio's, in conversations, times the labelled conversations' mean segments). A drawn conversation nobody annotated is left out of
    both sides (:func:`analysis_tables` warns)."""
    from hitkit.analysis import ppi

    totals = conversation_totals(per_item)
    rows = []
    for (a, b), pair in totals.groupby(["system_a", "system_b"], sort=True):
        h = pair["labelled"].to_numpy(bool)
        u = ~pair["human_subset"].to_numpy(bool)
        fw, fd = pair["judge_wins"].to_numpy(float), pair["judge_decisive"].to_numpy(float)
        est = ppi.ppi_ratio(pair["human_wins"].to_numpy(float)[h], pair["human_decisive"].to_numpy(float)[h],
                            fw[h], fd[h], fw[u], fd[u], level=level)
        segments = per_item[(per_item["system_a"] == a) & (per_item["system_b"] == b)]
        n_human = int(segments["human_wins"].notna().sum())
        # λ̂'s effective sample size in the human segments it stands for (conversations × their mean segments).
        n_effective = est.n_effective * n_human / h.sum() if h.any() else est.n_effective
        every = segments.groupby(["study", "conversation_id"])[["judge_wins", "judge_decisive"]].sum()
        judge = ppi.ratio_interval(every["judge_wins"].to_numpy(float), every["judge_decisive"].to_numpy(float),
                                   level=level)
        rows.append((a, b, n_human, len(segments), est.human.estimate, est.human.low, est.human.high,
                     judge.estimate, judge.low, judge.high, est.estimate, est.low, est.high, est.lam, n_effective,
                     est.fallback))
    table = pd.DataFrame(rows, columns=list(WIN_RATE_COLUMNS))
    # A win rate lies in [0, 1]: an interval clipped to it covers θ whenever the unclipped one does, and a
    # clipped estimate is never farther from θ (the prediction-powered ratio can leave [0, 1] with few
    # labelled conversations).
    bounds = [f"{kind}{end}" for kind in ("human", "judge", "ppi") for end in ("", "_low", "_high")]
    table[bounds] = table[bounds].clip(0.0, 1.0)
    return table


def judge_bias(annotations: pd.DataFrame, judge: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """The judge's bias per system (``human`` for the people of human–human material) on the segments
    people annotated: the mean over those segments of (the judge's share of the system's speakers it
    labelled human − the people's share), with its t interval. Positive: the judge takes the system
    for a person more often than people do. Columns system, n_human, bias, bias_low, bias_high."""
    from hitkit.analysis import ppi

    keys = ["study", "conversation_id", "segment_exchanges", "system"]

    def human_share(table: pd.DataFrame) -> pd.Series:
        t = table.assign(**{k: table[k].astype(str).str.strip() for k in keys},
                         is_human=(table["label"] == "human").astype(float))
        return t.groupby(keys)["is_human"].mean()

    people = human_share(annotations) if len(annotations) else pd.Series(dtype=float)
    both = pd.concat({"judge": human_share(judge), "people": people}, axis=1).dropna().reset_index()
    rows = []
    for system in sorted(set(judge["system"].astype(str).str.strip())):
        d = both[both["system"] == system]
        est = ppi.mean_interval((d["judge"] - d["people"]).to_numpy(), level=level)
        rows.append((system, len(d), est.estimate, est.low, est.high))
    return pd.DataFrame(rows, columns=["system", "n_human", "bias", "bias_low", "bias_high"])


def analysis_tables(annotations: pd.DataFrame, judge: pd.DataFrame, *, level: float = 0.95
                    ) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]]:
    """The judge's part of a Spot The Bot analysis: (tables, summary, warnings).

    ``judge_win_rates``: per pair of different systems, the win rate of system_a over system_b
    human-only, judge-only and prediction-powered (:func:`win_rates`), with λ̂, the effective human
    sample size and the fallback flag (λ̂ = 0); ``judge_bias``: the judge's bias per system
    (:func:`judge_bias`).
    """
    from hitkit.analysis import ppi

    per_item = items(annotations, judge)
    keys = ["study", "conversation_id", "segment_exchanges"]
    lines = []
    if len(annotations):
        annotated = set(annotations[keys].astype(str).itertuples(index=False, name=None))
        judged = set(judge[keys].astype(str).itertuples(index=False, name=None))
        if annotated - judged:
            lines.append(f"{len(annotated - judged)} annotated segment(s) have no judge label and are left out of "
                         "the judge's tables")
    totals = conversation_totals(per_item)
    missing = totals[totals["human_subset"] & ~totals["labelled"]]
    if len(missing):
        lines.append(f"{len(missing)} conversation(s) drawn for the crowd have no annotations and are left out of "
                     "both sides of the prediction-powered win rates; valid only if these annotations are missing "
                     "at random")
    partial = int((per_item["human_subset"].astype(bool) & per_item["human_wins"].isna()).sum()) \
        - int(missing["segments"].sum())
    if partial:
        lines.append(f"{partial} segment(s) of annotated conversations drawn for the crowd have no annotations; "
                     "their conversations count only their annotated segments, on both sides")
    table = win_rates(per_item, level=level)
    segments = judge[keys].astype(str).drop_duplicates()
    fallback = [f"{a} vs {b}" for a, b, f in table[["system_a", "system_b", "fallback"]].itertuples(index=False) if f]
    summary = {
        "labels": len(segments),
        "unparsed": int((~judge["parsed"].astype(str).str.lower().isin(["true", "1"])).sum() // 2),
        "models": sorted(set(judge["model"].astype(str))), "items": len(segments),
        "pair_items": len(per_item), "human_items": int(per_item["human_wins"].notna().sum()),
        "conversations": len(totals), "human_conversations": int(totals["labelled"].sum()), "level": level,
        "estimator": ppi.REFERENCE + ", as a ratio of means with one λ", "interval": ppi.RATIO_INTERVAL,
        "fallback_pairs": fallback,
    }
    return {"judge_win_rates": table, "judge_bias": judge_bias(annotations, judge, level=level)}, summary, lines
