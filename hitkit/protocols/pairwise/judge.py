"""Pairwise A/B with an LLM judge (the study file's ``judge:``; :mod:`hitkit.judges.judging` runs it).

The judge sees each comparison twice, once in each display order (``ab``: the unit's first system
shown as A; ``ba``: its second), so that a preference for a position counts once for each system
and cancels when the two labels are averaged (:func:`hitkit.analysis.ppi.order_averaged`). A
reply's label is its first word (A, B or tie; ``[[A]]`` as MT-Bench writes it also counts); a
reply that names none is recorded as a tie with ``parsed`` false: the judge is then a worse
predictor, which the prediction-powered estimate corrects and which only costs precision.
Identical responses are a tie without asking, as on the worker's page.

The analysis (:func:`analysis_tables`) turns ``votes.csv`` and ``judge.csv`` into one row per
item (a prompt and a pair): the human score, the mean of every vote on the item, and the judge's
order-averaged score, and hands them to :mod:`hitkit.analysis.ppi`. The statistics are imported
when asked for, so the task side of this module loads no scipy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from hitkit.protocols.base import JudgeRequest, UnitSpec
from hitkit.protocols.kit.judge import judged

PLACEHOLDERS = ("prompt", "response_a", "response_b")
"""What a pairwise judge prompt names: the prompt and the two responses in their display order."""

DEFAULT_PROMPT = """You are judging two chatbot responses to the same message.

Message:
{prompt}

Response A:
{response_a}

Response B:
{response_b}

Which response is better: more helpful, relevant, correct and fluent? Answer with one word: A, B or tie."""

MAX_TOKENS = 16
"""The reply's default length limit (``judge.options.max_tokens`` overrides): the label is its first word."""

ORDERS = ("ab", "ba")
NEUTRAL = "tie"
"""The label of a reply that names none."""

JUDGE_COLUMNS = ("study", "item_id", "system_a", "system_b", "vote", "parsed", "human_subset", "model", "reply")
"""``judge.csv``: one row per comparison and display order (docs/COLUMNS.md)."""

SCORE = {"a": 1.0, "b": 0.0, "tie": 0.5}
LABELS = tuple(SCORE)
"""The labels a reply's token log-probabilities are read over (:mod:`hitkit.judges.confidence`)."""

_BRACKETED = re.compile(r"\[\[\s*(a|b|tie)\s*\]\]", re.IGNORECASE)
_FIRST_WORD = re.compile(
    r"^[\s\"'*_(\[]*(?:(?:the\s+)?(?:final\s+)?(?:answer|verdict|winner|better(?:\s+response)?)\s*(?:is)?\s*[:\-]?\s*)?"
    r"[\s\"'*_(\[]*(?:response\s+)?(a|b|tie)\b",
    re.IGNORECASE,
)


def stratum(unit: UnitSpec) -> str:
    """The pair a unit compares: the human subset is drawn within each pair, so every pair's
    estimate rests on a uniformly random sample of its own items."""
    return "~".join(unit.payload["systems"])


def requests(units: Sequence[UnitSpec]) -> list[JudgeRequest]:
    """Every label the judge gives: each unit in both display orders."""
    out = []
    for unit in units:
        p = unit.payload
        first, second = p["systems"]
        texts = dict(zip(p["systems"], p["responses"]))
        identical = texts[first].strip() == texts[second].strip()
        for order in ORDERS:
            a, b = (first, second) if order == "ab" else (second, first)
            out.append(
                JudgeRequest(
                    unit_key=unit.key,
                    variant=order,
                    fields={"prompt": p["prompt"], "response_a": texts[a], "response_b": texts[b]},
                    meta={"item_id": p["item_id"], "system_a": a, "system_b": b},
                    auto=NEUTRAL if identical else None,
                )
            )
    return out


def parse(reply: str) -> str | None:
    """The label a reply gives (a, b or tie), or None when it names none."""
    match = _BRACKETED.search(reply) or _FIRST_WORD.match(reply)
    return match.group(1).lower() if match else None


def export(study: str, labels: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """``judge.csv`` from the stored labels (dicts with meta, label, parsed, human_subset, model, reply, and
    human_probability where the crowd's share followed the judge's uncertainty: then a column of it). Where
    labels carry logprob confidences (meta's ``confidence`` and ``label_probs``: :mod:`hitkit.judges.confidence`),
    two more columns: ``confidence`` and ``soft_vote``, P(a) + ½·P(tie) (NaN for labels without)."""
    rows = [
        {
            "study": study,
            "item_id": row["meta"]["item_id"],
            "system_a": row["meta"]["system_a"],
            "system_b": row["meta"]["system_b"],
            "vote": row["label"],
            **judged(row, row["human_subset"]),
            **({"human_probability": row["human_probability"]} if "human_probability" in row else {}),
            **_soft(row["meta"]),
        }
        for row in labels
    ]
    weighted = any("human_probability" in row for row in rows)
    soft = ("confidence", "soft_vote") if any("soft_vote" in row for row in rows) else ()
    return pd.DataFrame(rows, columns=[*JUDGE_COLUMNS, *(("human_probability",) if weighted else ()), *soft])


def labels_file_row(meta: Mapping[str, Any], label: str) -> dict[str, Any]:
    """One stored label as a row of a judge-labels file (:mod:`hitkit.analysis.judge_labels`; several judges,
    :mod:`hitkit.judges.panel`): the item, the pair as the judge saw it, its vote and, with logprobs, its
    confidence."""
    return {
        "unit": meta["item_id"],
        "system_a": meta["system_a"],
        "system_b": meta["system_b"],
        "label": label,
        "confidence": meta.get("confidence", ""),
    }


def _soft(meta: Mapping[str, Any]) -> dict[str, float]:
    probs = meta.get("label_probs")
    if not isinstance(probs, Mapping):
        return {}
    return {"confidence": meta["confidence"], "soft_vote": sum(SCORE[k] * float(p) for k, p in probs.items())}


def read_judge(path) -> pd.DataFrame:
    """``judge.csv``, checked: its columns, every vote a, b or tie, and each ``human_probability`` (where the
    crowd's share followed the judge's uncertainty) a number in (0, 1]."""
    from hitkit.analysis.tables import read_probability, read_table
    from hitkit.errors import InputError

    table = read_table(path, JUDGE_COLUMNS)
    vote = table["vote"].str.strip().str.lower()
    bad = table.index[~vote.isin(tuple(SCORE))]
    if len(bad):
        raise InputError(path, f"vote {table.at[bad[0], 'vote']!r} is not one of a, b, tie", line=int(bad[0]) + 2)
    table["vote"] = vote
    return read_probability(path, table)


def items(votes: pd.DataFrame, judge: pd.DataFrame, score: str | None = None) -> pd.DataFrame:
    """One row per judged item (prompt and pair): system_a, system_b (by name), the human score for
    system_a (the mean of its votes; NaN where nobody voted), the judge's order-averaged score and
    ``votes``, the number of votes behind the human score (0 where nobody voted).

    An item's key is (study, item_id, pair) when both tables have a study column; ``score`` names a column
    of the judge's scores for system_a as displayed to use instead of its votes."""
    from hitkit.protocols.pairwise.reading import FIRST, TIE, canonical

    keys = ["study", "item_id"] if "study" in votes.columns and "study" in judge.columns else ["item_id"]
    j = judge.assign(score=judge["vote"].map(SCORE) if score is None else judge[score])
    flip = (j["system_a"] > j["system_b"]).to_numpy()
    j = pd.DataFrame(
        {
            **{k: j[k].astype(str) for k in keys},
            "system_a": j["system_a"].where(~flip, j["system_b"]),
            "system_b": j["system_b"].where(~flip, j["system_a"]),
            "judge": j["score"].where(~flip, 1 - j["score"]),
        }
    )
    weighted = "human_probability" in judge.columns
    if weighted:
        j["human_probability"] = pd.to_numeric(judge["human_probability"], errors="coerce").to_numpy()
    # The mean of the two orders: order_averaged, when both are there (they always are from hitkit).
    judged = j.groupby(keys + ["system_a", "system_b"], as_index=False).agg(
        judge=("judge", "mean"), **({"human_probability": ("human_probability", "first")} if weighted else {})
    )
    if len(votes):
        c = canonical(votes, *keys)
        c["human"] = pd.Series(c["outcome"]).map({FIRST: 1.0, TIE: 0.5}).fillna(0.0).to_numpy()
        human = (
            c.rename(columns={"first": "system_a", "second": "system_b"})
            .groupby(keys + ["system_a", "system_b"], as_index=False)
            .agg(human=("human", "mean"), votes=("human", "size"))
        )
        judged = judged.merge(human, on=keys + ["system_a", "system_b"], how="left")
        judged["votes"] = judged["votes"].fillna(0).astype(int)
    else:
        judged["human"], judged["votes"] = float("nan"), 0
    return judged[
        keys + ["system_a", "system_b", "human", "judge", "votes"] + (["human_probability"] if weighted else [])
    ]


def selection(units: Sequence[UnitSpec], tables: Mapping[str, pd.DataFrame], judge: pd.DataFrame) -> pd.DataFrame:
    """Per unit of the material (index: its key), what ``judge.select: uncertainty`` draws its second wave
    from (:mod:`hitkit.judges.second_wave`): ``judge``, the judge's order-averaged score for the unit's first
    system; ``confidence``, |2·judge − 1| (1 when both orders name the same winner, 0 when they split or
    call a tie), with each label's vote replaced by its ``soft_vote`` where the judge's logprobs gave one
    (:mod:`hitkit.judges.confidence`: then |2·E[score] − 1|, the same rule with the judge's probabilities);
    ``human``, the people's mean score for it (NaN where nobody voted)."""
    per_item = items(tables["votes"], judge).set_index(["item_id", "system_a", "system_b"])
    soft = per_item
    if "soft_vote" in judge.columns:  # the soft score's order average, with the hard vote where none
        scored = judge.assign(soft=pd.to_numeric(judge["soft_vote"]).fillna(judge["vote"].map(SCORE)))
        soft = items(tables["votes"], scored, score="soft").set_index(["item_id", "system_a", "system_b"])
    rows = []
    for unit in units:
        first, second = unit.payload["systems"]
        low, high = sorted((first, second))
        row = per_item.loc[(str(unit.payload["item_id"]), low, high)]
        flip = first > second
        f, y = float(row["judge"]), float(row["human"])
        f, y = (1 - f, 1 - y) if flip else (f, y)
        rows.append((unit.key, f, abs(2 * float(soft.loc[(str(unit.payload["item_id"]), low, high), "judge"]) - 1), y))
    return pd.DataFrame(rows, columns=["unit", "judge", "confidence", "human"]).set_index("unit")


def analysis_tables(
    votes: pd.DataFrame, judge: pd.DataFrame, *, level: float = 0.95
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]]:
    """The judge's part of a pairwise analysis: (tables, summary, warnings).

    ``judge_win_rates``: per pair, the win rate of system_a over system_b human-only, judge-only and
    prediction-powered (PPI++ with tuned λ) with their intervals, λ, the effective human sample size
    and the fallback flag (:func:`hitkit.analysis.ppi.win_rates`); ``judge_bias``: the judge's bias
    per system on the items people voted on (:func:`hitkit.analysis.ppi.judge_bias`);
    ``judge_strengths``: per system, the Bradley–Terry strength the ranking reports, human-only,
    judge-only and prediction-powered (:func:`hitkit.analysis.ppi_bradley_terry.strengths`), with
    the ranking's prior of one virtual tied game per pair counted in votes (1 / votes per voted
    item, in items), so that the human-only column is the ranking's fit whenever every voted item
    has the same number of votes.
    """
    from hitkit.analysis import ppi, ppi_active, ppi_bradley_terry, ppi_weighted

    per_item = items(votes, judge)
    weighted = "human_probability" in per_item.columns
    table = ppi_weighted.ipw_win_rates(per_item, level=level) if weighted else ppi.win_rates(per_item, level=level)
    bias = ppi.judge_bias(per_item, level=level)
    voted = per_item["votes"] > 0
    prior = float(voted.sum() / per_item.loc[voted, "votes"].sum()) if voted.any() else 1.0
    fit = ppi_weighted.ipw_strengths if weighted else ppi_bradley_terry.strengths
    strengths = fit(per_item, level=level, prior=prior)
    unmatched = 0
    if len(votes):
        voted = {
            (str(i), *sorted((a, b))) for i, a, b in votes[["item_id", "system_a", "system_b"]].itertuples(index=False)
        }
        judged = set(zip(per_item["item_id"], per_item["system_a"], per_item["system_b"]))
        unmatched = len(voted - judged)
    lines = []
    if unmatched:
        lines.append(f"{unmatched} voted item(s) have no judge label and are left out of the judge's tables")
    fallback = [f"{a} vs {b}" for a, b, f in table[["system_a", "system_b", "fallback"]].itertuples(index=False) if f]
    summary = {
        "labels": len(judge),
        "unparsed": int((~judge["parsed"].astype(str).str.lower().isin(["true", "1"])).sum()),
        "models": sorted(set(judge["model"].astype(str))),
        "items": len(per_item),
        "human_items": int(per_item["human"].notna().sum()),
        "level": level,
        **({"selection": "uncertainty (judge.csv's human_probability)"} if weighted else {}),
        **({"confidence": "logprobs" if "soft_vote" in judge.columns else "agreement"} if weighted else {}),
        "estimator": ppi_active.REFERENCE if weighted else ppi.REFERENCE,
        "interval": (
            "plug-in linearised variance, t with n − 1 degrees of freedom"
            if weighted
            else "jackknife t (λ re-estimated, t with n − 1 degrees of freedom)"
        ),
        "fallback_pairs": fallback,
        "strengths_estimator": ppi_weighted.REFERENCE if weighted else ppi_bradley_terry.REFERENCE,
        "strengths_interval": ppi_weighted.INTERVAL if weighted else ppi_bradley_terry.INTERVAL,
        "strengths_lam": float(strengths["lam"].iloc[0]),
        "strengths_prior": prior,
    }
    return {"judge_win_rates": table, "judge_bias": bias, "judge_strengths": strengths}, summary, lines
