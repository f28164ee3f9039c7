"""Live chat with an LLM judge (the study file's ``judge:``; :mod:`hitkit.judges.judging` runs it).

Live chat's items, the conversations, are made by the crowd during the study, so they cannot be
judged before posting (:data:`WHEN` is ``"after"``): the judge rates each finished conversation of a
real system (:func:`requests_from`; the QC bot's conversations are never ranked and are not judged)
on every criterion, with the statements the worker saw, in one request per conversation. Its reply,
one ``name: number`` line per criterion (:func:`parse`), becomes one label per criterion
(:func:`split`); a criterion the reply does not rate counts as the neutral 50 with ``parsed`` false.

Which conversations the worker also rates is drawn per chat slot when the study is built
(:func:`hitkit.judges.human_subset.rated`, a Bernoulli draw with ``judge.human_share``): independent of
anything the worker does, which is what prediction-powered inference needs. The QC bot's slot is
always rated (the QC test needs it).

The analysis (:func:`analysis_tables`) takes Y as the worker's z rating (Ji et al.'s per-worker
standardisation, unchanged: only rated conversations have one) and f as the judge's rating,
reversed for negative criteria and standardised as if the judge were one more worker, and hands
them per system and criterion, and per system overall, to :func:`hitkit.analysis.ppi.ppi_mean`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from hitkit.protocols.base import JudgeRequest
from hitkit.protocols.kit.judge import judged
from hitkit.tables.schema import JUDGE_ESTIMATE_COLUMNS

WHEN = "after"
"""The judge rates the study's stored conversations once the crowd has made them (:mod:`hitkit.judges.judging`)."""

PLACEHOLDERS = ("conversation", "criteria")
"""What a live-chat judge prompt names: the conversation's text and the criteria to rate, one per line."""

DEFAULT_PROMPT = """You are reading a conversation between a person and a chatbot.

Conversation:
{conversation}

Rate the conversation as the person would. For each statement below, say how much you agree with it, from 0 (strongly disagree) to 100 (strongly agree). Answer with one line per statement, in the form `name: number`, and nothing else.

{criteria}"""

MAX_TOKENS = 256
"""The reply's default length limit: one short line per criterion (``judge.options.max_tokens`` overrides)."""

NEUTRAL = "50"
"""The label of a criterion the reply does not rate (the slider's middle)."""

ASKED = "conversations"
"""What one request is, in the judge's progress line."""

VARIANT = "criteria"
"""A conversation's one request asks for every criterion at once."""

JUDGE_COLUMNS = (
    "study",
    "hit_id",
    "assignment_id",
    "worker_id",
    "conversation_id",
    "system",
    "criterion",
    "score",
    "parsed",
    "human_subset",
    "model",
    "reply",
)
"""``judge.csv``: one row per judged conversation and criterion (docs/COLUMNS.md)."""

_LINE = re.compile(
    r"^[\s*_`\-•\d.)]*([a-z][a-z0-9_ ]*?)[\s*_`]*[:=\-–]\s*[*_`\s]*(\d{1,3}(?:\.\d+)?)\b", re.IGNORECASE | re.MULTILINE
)


def _transcript(turns: Sequence[Any]) -> str:
    return "\n".join(f"{'Person' if t.speaker == 'worker' else 'Chatbot'}: {t.text}" for t in turns)


def requests_from(session, study, config) -> list[JudgeRequest]:
    """One request per finished conversation with a real system: the conversations of the study's
    confirmed submitted or approved assignments (what ``ratings.csv`` exports), rated or not, in
    HIT and slot order. The QC bot's are left out: it is in no ranking."""
    from sqlalchemy import select

    from hitkit.db.models import Assignment, Conversation, Hit, HitUnit, Unit, Worker
    from hitkit.protocols.live_chat.task import conversation_key
    from hitkit.tables.schema import HANDED_IN_STATUSES

    criteria = config.live_chat.criteria
    listed = "\n".join(f"{c.name}: {c.statement}" for c in criteria)
    rows = session.execute(
        select(Assignment, Hit, Worker, Unit)
        .join(Hit, Assignment.hit_id == Hit.id)
        .join(Worker, Assignment.worker_id == Worker.id)
        .join(HitUnit, HitUnit.hit_id == Hit.id)
        .join(Unit, HitUnit.unit_id == Unit.id)
        .where(
            Hit.study_id == study.id, Assignment.status.in_(HANDED_IN_STATUSES), Assignment.confirmed_at.is_not(None)
        )
        .order_by(Hit.index, Assignment.id, HitUnit.position)
    ).all()
    keys = [conversation_key(a.id, u.id) for a, _, _, u in rows]
    conversations = (
        {
            c.key: c
            for c in session.scalars(
                select(Conversation).where(Conversation.study_id == study.id, Conversation.key.in_(keys))
            )
        }
        if keys
        else {}
    )
    out = []
    for (assignment, hit, worker, unit), key in zip(rows, keys):
        conversation = conversations.get(key)
        if unit.payload["is_control"] or conversation is None or not conversation.turns:
            continue
        out.append(
            JudgeRequest(
                unit_key=key,
                variant=VARIANT,
                fields={"conversation": _transcript(conversation.turns), "criteria": listed},
                meta={
                    "hit_id": hit.provider_hit_id or str(hit.id),
                    "assignment_id": assignment.provider_assignment_id or str(assignment.id),
                    "worker_id": worker.external_id,
                    "conversation_id": key,
                    "system": unit.payload["system"],
                    "human_subset": bool(unit.payload.get("rated", True)),
                    "criteria": [c.name for c in criteria],
                },
            )
        )
    return out


def parts(request: JudgeRequest) -> list[JudgeRequest]:
    """The labels one conversation's request gives: one per criterion, each stored as its own row."""
    meta = {k: v for k, v in request.meta.items() if k != "criteria"}
    return [
        JudgeRequest(
            unit_key=f"{request.unit_key}/{name}", variant="score", fields={}, meta={**meta, "criterion": name}
        )
        for name in request.meta["criteria"]
    ]


def parse(reply: str, names: Sequence[str]) -> dict[str, int]:
    """The ratings a reply gives, by criterion: lines like ``interesting: 73`` (case, bullets, bold and
    spaces for underscores forgiven; the first line naming a criterion counts). Numbers above 100 and
    unknown names are ignored; a criterion the reply does not rate is absent."""
    wanted = {n.lower(): n for n in names}
    found: dict[str, int] = {}
    for match in _LINE.finditer(reply):
        name = wanted.get(match.group(1).strip().lower().replace(" ", "_"))
        value = float(match.group(2))
        if name is not None and name not in found and value <= 100:
            found[name] = round(value)
    return found


def split(request: JudgeRequest, reply: str) -> list[tuple[JudgeRequest, str | None]]:
    """Each criterion's label from the conversation's reply: its rating as text, or None (unparsed)."""
    found = parse(reply, request.meta["criteria"])
    return [
        (part, str(found[part.meta["criterion"]]) if part.meta["criterion"] in found else None)
        for part in parts(request)
    ]


def export(study: str, labels: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """``judge.csv`` from the stored labels (dicts with meta, label, parsed, human_subset, model, reply);
    ``human_subset`` here is the slot's draw (the worker was asked to rate the conversation)."""
    rows = [
        {
            "study": study,
            **{
                k: row["meta"][k]
                for k in ("hit_id", "assignment_id", "worker_id", "conversation_id", "system", "criterion")
            },
            "score": int(row["label"]),
            **judged(row, row["meta"]["human_subset"]),
        }
        for row in labels
    ]
    return pd.DataFrame(rows, columns=list(JUDGE_COLUMNS))


def read_judge(path, criteria) -> pd.DataFrame:
    """``judge.csv``, checked: its columns, known criteria and every score within 0–100."""
    from hitkit.analysis.tables import read_table
    from hitkit.errors import InputError

    ids = {c: str for c in ("study", "hit_id", "assignment_id", "worker_id", "conversation_id", "system", "criterion")}
    table = read_table(path, JUDGE_COLUMNS, ids)
    known = {c.name for c in criteria}
    bad = table.index[~table["criterion"].isin(known)]
    if len(bad):
        raise InputError(
            path,
            f"criterion {table.at[bad[0], 'criterion']!r} is not one of the study's {sorted(known)}",
            line=int(bad[0]) + 2,
        )
    score = pd.to_numeric(table["score"], errors="coerce")
    bad = table.index[score.isna() | (score < 0) | (score > 100)]
    if len(bad):
        raise InputError(
            path, f"score {table.at[bad[0], 'score']!r} is not a number within 0–100", line=int(bad[0]) + 2
        )
    table["score"] = score.astype(float)
    for flag in ("parsed", "human_subset"):
        table[flag] = table[flag].astype(str).str.strip().str.lower().isin(["true", "1"])
    return table


def conversations(z: pd.DataFrame, judge: pd.DataFrame, criteria, passed: set[str]) -> pd.DataFrame:
    """One row per judged conversation of a QC-passed worker and criterion: system, criterion,
    ``human`` (the worker's z rating; NaN where the worker was not asked) and ``judge`` (the judge's
    rating reversed for negative criteria and standardised over all of the judge's ratings, ddof 1, as
    if it were one more worker; 0 throughout for a judge whose ratings do not vary). ``z`` is the
    standardised ratings table (:mod:`~.quality`)."""
    negative = {c.name for c in criteria if c.polarity == "negative"}
    j = judge.copy()
    oriented = j["score"].where(~j["criterion"].isin(negative), 100.0 - j["score"])
    sd = oriented.std(ddof=1)
    # A judge that gives every rating the same score (one whose replies named none: all the neutral 50) tells
    # no conversation from another: its z is 0 throughout, so λ̂ = 0 and the estimates are the people's.
    j["judge"] = (oriented - oriented.mean()) / sd if sd > 0 else 0.0
    j = j[j["worker_id"].isin(passed)]
    human = (
        z[~z["is_control"]]
        .groupby(["conversation_id", "criterion"], as_index=False)["z"]
        .mean()
        .rename(columns={"z": "human"})
    )
    out = j.merge(human, on=["conversation_id", "criterion"], how="left")
    out.loc[~out["human_subset"], "human"] = math.nan
    return out[["conversation_id", "worker_id", "system", "criterion", "human", "judge"]]


SCORE_COLUMNS = ("system", "criterion", *JUDGE_ESTIMATE_COLUMNS)
"""``judge_scores.csv``: per system and criterion (and ``overall``), the mean z three ways (docs/COLUMNS.md)."""


def _cells(per: pd.DataFrame) -> Iterable[tuple[str, str, pd.DataFrame]]:
    """Each (system, criterion) cell, and each system's ``overall``: the mean over criteria per conversation."""
    overall = per.groupby(["system", "conversation_id"], as_index=False).agg(
        human=("human", lambda h: h.mean() if h.notna().all() else math.nan), judge=("judge", "mean")
    )
    for system in sorted(per["system"].unique()):
        yield system, "overall", overall[overall["system"] == system]
        own = per[per["system"] == system]
        for criterion in own["criterion"].unique():
            yield system, criterion, own[own["criterion"] == criterion]


def scores(per: pd.DataFrame, criteria, *, level: float = 0.95) -> pd.DataFrame:
    """:data:`SCORE_COLUMNS`: per system, overall then each criterion in the study's order, the mean z
    people only, judge only (its naive interval ignores its bias) and prediction-powered (PPI++ with
    λ tuned per cell: :func:`hitkit.analysis.ppi.ppi_mean`; labelled = rated conversations)."""
    from hitkit.analysis import ppi

    rank = {"overall": -1, **{c.name: i for i, c in enumerate(criteria)}}
    rows = []
    for system, criterion, cell in _cells(per):
        labelled = cell["human"].notna().to_numpy()
        y, f = cell["human"].to_numpy(float)[labelled], cell["judge"].to_numpy(float)
        est = ppi.ppi_mean(y, f[labelled], f[~labelled], level=level)
        judge = ppi.mean_interval(f, level=level)
        counts = (int(labelled.sum()), len(cell))
        rows.append((system, criterion, *counts, *est.three_ways(judge), est.lam, est.n_effective, est.fallback))
    table = pd.DataFrame(rows, columns=list(SCORE_COLUMNS))
    order = table["criterion"].map(rank)
    return table.assign(_o=order).sort_values(["system", "_o"]).drop(columns="_o").reset_index(drop=True)


def bias(per: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """The judge's bias per system on the rated conversations: the mean of (judge z − worker z) over its
    criterion ratings, with its t interval. Positive: the judge favours the system more than people do.
    Columns system, n_human, bias, bias_low, bias_high."""
    from hitkit.analysis import ppi

    rated = per[per["human"].notna()]
    rows = []
    for system in sorted(per["system"].unique()):
        own = rated[rated["system"] == system]
        est = ppi.mean_interval((own["judge"] - own["human"]).to_numpy(float), level=level)
        rows.append((system, len(own), est.estimate, est.low, est.high))
    return pd.DataFrame(rows, columns=["system", "n_human", "bias", "bias_low", "bias_high"])


def analysis_tables(
    z: pd.DataFrame, judge: pd.DataFrame, criteria, passed: set[str], *, level: float = 0.95
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]]:
    """The judge's part of a live-chat analysis: (tables, summary, warnings).

    ``judge_scores`` (:func:`scores`) and ``judge_bias`` (:func:`bias`) over the conversations of
    QC-passed workers; ``z`` is every counted rating standardised per worker.
    """
    from hitkit.analysis import ppi

    per = conversations(z, judge, criteria, passed)
    lines = []
    rated = set(z.loc[~z["is_control"], "conversation_id"])
    missing = rated - set(judge["conversation_id"])
    if missing:
        lines.append(
            f"{len(missing)} rated conversation(s) have no judge label and are left out of the judge's "
            f"tables; `hitkit judge STUDY_FILE` asks for them, then export and analyse again"
        )
    stray = set(judge.loc[judge["human_subset"], "conversation_id"]) - rated
    if stray:
        lines.append(f"{len(stray)} conversation(s) drawn for rating have no rating in ratings.csv")
    table = scores(per, criteria, level=level)
    fallback = [f"{s} {c}" for s, c, f in table[["system", "criterion", "fallback"]].itertuples(index=False) if f]
    n_conv = per["conversation_id"].nunique()
    summary = {
        "labels": len(judge),
        "unparsed": int((~judge["parsed"]).sum()),
        "models": sorted(set(judge["model"].astype(str))),
        "conversations": int(judge["conversation_id"].nunique()),
        "conversations_passed": int(n_conv),
        "human_conversations": int(per.loc[per["human"].notna(), "conversation_id"].nunique()),
        "level": level,
        "estimator": ppi.REFERENCE,
        "interval": "jackknife t (λ re-estimated, t with n − 1 degrees of freedom)",
        "fallback_cells": fallback,
    }
    return {"judge_scores": table, "judge_bias": bias(per, level=level)}, summary, lines
