"""The Spot The Bot judge's analysis: its labels (``judge.csv``, :mod:`hitkit.protocols.spot_the_bot.judge`)
against the people's annotations, as prediction-powered win rates and the judge's bias per system.

The analysis (:func:`analysis_tables`) turns ``annotations.csv`` and ``judge.csv`` into one row
per segment and pair of different systems: the people's share of wins and of decisive annotations
for the first system of the pair (the means over the segment's annotations) and the judge's (its
one pair of labels); sums them over each conversation (its segments are prefixes of each other, so
the conversation, drawn whole for the crowd, is the independent unit) and hands the conversation
totals to :func:`hitkit.analysis.ppi_ratio.ppi_ratio`: the win rate WINS / (WINS + LOSSES) of METHODS §2
is a ratio of two means, and its jackknife leaves out one conversation at a time. The statistics (scipy) are
imported when asked for.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from hitkit.protocols.spot_the_bot.annotations import LABEL_RANK
from hitkit.tables.schema import JUDGE_ESTIMATE_COLUMNS


def segment_outcomes(table: pd.DataFrame) -> pd.DataFrame:
    """One row per segment (and annotation) with both speakers side by side: study, conversation_id,
    segment_exchanges, system_0, system_1 and outcome (+1: entity 0's label ranks higher, −1 lower, 0 same)."""
    keys = ["study", "conversation_id", "segment_exchanges"] + (["assignment_id"] if "assignment_id" in table else [])
    t = table.assign(**{c: table[c].astype(str).str.strip() for c in keys}, rank=table["label"].map(LABEL_RANK))
    zero = t[t["entity"].astype(int) == 0].set_index(keys)
    one = t[t["entity"].astype(int) == 1].set_index(keys).loc[zero.index]
    diff = zero["rank"].to_numpy() - one["rank"].to_numpy()
    return pd.DataFrame(
        {
            "system_0": zero["system"].to_numpy(),
            "system_1": one["system"].to_numpy(),
            "outcome": (diff > 0).astype(int) - (diff < 0),
        },
        index=zero.index,
    ).reset_index()


ITEM_COLUMNS = (
    "study",
    "conversation_id",
    "segment_exchanges",
    "system_a",
    "system_b",
    "human_subset",
    "human_wins",
    "human_decisive",
    "judge_wins",
    "judge_decisive",
)
"""One row per judged segment of two different systems (system_a < system_b by name): whether it was
drawn for the crowd (judge.csv's ``human_subset``), the share of the people's annotations system_a
won and the share that were decisive (NaN where nobody annotated the segment), and the judge's (0 or 1)."""


def items(annotations: pd.DataFrame, judge: pd.DataFrame) -> pd.DataFrame:
    """:data:`ITEM_COLUMNS` from the tidy annotations and judge.csv (both with entity rows)."""
    keys = ["study", "conversation_id", "segment_exchanges"]

    def oriented(table: pd.DataFrame) -> pd.DataFrame:
        seg = segment_outcomes(table)
        seg = seg[seg["system_0"] != seg["system_1"]]
        flip = (seg["system_0"] > seg["system_1"]).to_numpy()
        outcome = seg["outcome"].to_numpy() * (1 - 2 * flip)
        return pd.DataFrame(
            {
                **{k: seg[k].to_numpy() for k in keys},
                "system_a": seg["system_0"].where(~flip, seg["system_1"]).to_numpy(),
                "system_b": seg["system_1"].where(~flip, seg["system_0"]).to_numpy(),
                "wins": (outcome > 0).astype(float),
                "decisive": (outcome != 0).astype(float),
            }
        )

    if "human_subset" not in judge:
        raise ValueError(
            "the judge's labels need the human_subset column (judge.csv): which segments were drawn for the crowd"
        )
    judged = oriented(judge).rename(columns={"wins": "judge_wins", "decisive": "judge_decisive"})
    if len(annotations):
        human = (
            oriented(annotations)
            .groupby(keys + ["system_a", "system_b"], as_index=False)[["wins", "decisive"]]
            .mean()
            .rename(columns={"wins": "human_wins", "decisive": "human_decisive"})
        )
        judged = judged.merge(human, on=keys + ["system_a", "system_b"], how="left")
    else:
        judged["human_wins"] = judged["human_decisive"] = float("nan")
    drawn = judge.assign(
        **{k: judge[k].astype(str).str.strip() for k in keys},
        human_subset=judge["human_subset"].astype(str).str.strip().str.lower().isin(["true", "1"]),
    )
    judged = judged.merge(drawn.groupby(keys, as_index=False)["human_subset"].any(), on=keys, how="left")
    return judged[list(ITEM_COLUMNS)].reset_index(drop=True)


CONVERSATION_COLUMNS = (
    "study",
    "conversation_id",
    "system_a",
    "system_b",
    "human_subset",
    "segments",
    "human_wins",
    "human_decisive",
    "judge_wins",
    "judge_decisive",
    "labelled",
)
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
    frame = per_item.assign(
        human_subset=drawn,
        segments=1,
        annotated=seen.astype(int),
        judge_wins=per_item["judge_wins"].where(counted, 0.0),
        judge_decisive=per_item["judge_decisive"].where(counted, 0.0),
    )
    out = frame.groupby(keys, as_index=False, sort=True).agg(
        human_subset=("human_subset", "any"),
        segments=("segments", "sum"),
        annotated=("annotated", "sum"),
        human_wins=("human_wins", "sum"),
        human_decisive=("human_decisive", "sum"),
        judge_wins=("judge_wins", "sum"),
        judge_decisive=("judge_decisive", "sum"),
    )
    out["labelled"] = out["human_subset"] & (out["annotated"] > 0)
    out.loc[out["annotated"] == 0, ["human_wins", "human_decisive"]] = float("nan")
    return out[list(CONVERSATION_COLUMNS)].reset_index(drop=True)


WIN_RATE_COLUMNS = ("system_a", "system_b", *JUDGE_ESTIMATE_COLUMNS)
"""``judge_win_rates``: as pairwise's (:data:`hitkit.analysis.ppi.WIN_RATE_COLUMNS`), the win rate
being METHODS §2's WINS / (WINS + LOSSES), ties excluded."""


def win_rates(per_item: pd.DataFrame, *, level: float = 0.95, probability: pd.Series | None = None) -> pd.DataFrame:
    """Per pair of different systems (system_a < system_b by name): the win rate of system_a,
    human-only (Σ wins / Σ decisive over the conversations drawn for the crowd, jackknife t interval
    leaving out one conversation), judge-only (the same over every conversation; naive, it ignores the
    judge's bias) and prediction-powered (:func:`hitkit.analysis.ppi_ratio.ppi_ratio` on the conversation
    totals of :func:`conversation_totals`); estimates and intervals clipped to [0, 1]. ``n_human``, ``n_judge``:
    segments; ``n_effective``: the human segments the people-only estimate would need for the same
    variance (the estimator's, in conversations, times the labelled conversations' mean segments). A drawn
    conversation nobody annotated is left out of both sides (:func:`analysis_tables` warns).

    ``probability``: each conversation's probability of going to people (indexed by conversation_id), where the
    crowd's share was drawn with unequal ones (``judge.select: uncertainty``, or a judge-labels file's
    ``human_probability``): then the human-only and prediction-powered columns are the inverse-probability-
    weighted ratio (:func:`hitkit.analysis.ppi_weighted_ratio.ipw_ratio`) with the conversation as the item —
    the unit drawn — so that its weight and its term of the variance are the conversation's."""
    from hitkit.analysis import ppi_ratio
    from hitkit.analysis.ppi_weighted_ratio import ipw_ratio

    totals = conversation_totals(per_item)
    rows = []
    for (a, b), pair in totals.groupby(["system_a", "system_b"], sort=True):
        pair = pair[pair["labelled"] | ~pair["human_subset"]]  # drawn but not annotated: out of both sides
        h = pair["labelled"].to_numpy(bool)
        fw, fd = pair["judge_wins"].to_numpy(float), pair["judge_decisive"].to_numpy(float)
        hw, hd = pair["human_wins"].to_numpy(float), pair["human_decisive"].to_numpy(float)
        if probability is None:
            est = ppi_ratio.ppi_ratio(hw[h], hd[h], fw[h], fd[h], fw[~h], fd[~h], level=level)
        else:
            est = ipw_ratio(hw, hd, fw, fd, h, pair["conversation_id"].map(probability).to_numpy(float), level=level)
        segments = per_item[(per_item["system_a"] == a) & (per_item["system_b"] == b)]
        n_human = int(segments["human_wins"].notna().sum())
        # λ̂'s effective sample size in the human segments it stands for (conversations × their mean segments).
        n_effective = est.n_effective * n_human / h.sum() if h.any() else est.n_effective
        every = segments.groupby(["study", "conversation_id"])[["judge_wins", "judge_decisive"]].sum()
        judge = ppi_ratio.ratio_interval(
            every["judge_wins"].to_numpy(float), every["judge_decisive"].to_numpy(float), level=level
        )
        rows.append((a, b, n_human, len(segments), *est.three_ways(judge), est.lam, n_effective, est.fallback))
    table = pd.DataFrame(rows, columns=list(WIN_RATE_COLUMNS))
    # A win rate lies in [0, 1]: an interval clipped to it covers θ whenever the unclipped one does, and a
    # clipped estimate is never farther from θ (the prediction-powered ratio can leave [0, 1] with few
    # labelled conversations).
    bounds = [f"{kind}{end}" for kind in ("human", "judge", "ppi") for end in ("", "_low", "_high")]
    table[bounds] = table[bounds].clip(0.0, 1.0)
    return table


def conversation_probability(judge: pd.DataFrame) -> pd.Series | None:
    """Each conversation's probability of going to the crowd (indexed by conversation_id) from judge.csv's
    ``human_probability`` (``judge.select: uncertainty``: its segments', which are its own); None without
    the column (a uniform share)."""
    if "human_probability" not in judge.columns:
        return None
    keyed = judge.assign(conversation_id=judge["conversation_id"].astype(str).str.strip())
    return pd.to_numeric(keyed["human_probability"]).groupby(keyed["conversation_id"]).first()


def judge_bias(annotations: pd.DataFrame, judge: pd.DataFrame, *, level: float = 0.95) -> pd.DataFrame:
    """The judge's bias per system (``human`` for the people of human–human material) on the segments
    people annotated: the mean over those segments of (the judge's share of the system's speakers it
    labelled human − the people's share), with its t interval. Positive: the judge takes the system
    for a person more often than people do. Columns system, n_human, bias, bias_low, bias_high."""
    from hitkit.analysis import ppi

    keys = ["study", "conversation_id", "segment_exchanges", "system"]

    def human_share(table: pd.DataFrame) -> pd.Series:
        t = table.assign(
            **{k: table[k].astype(str).str.strip() for k in keys}, is_human=(table["label"] == "human").astype(float)
        )
        return t.groupby(keys)["is_human"].mean()

    people = human_share(annotations) if len(annotations) else pd.Series(dtype=float)
    both = pd.concat({"judge": human_share(judge), "people": people}, axis=1).dropna().reset_index()
    rows = []
    for system in sorted(set(judge["system"].astype(str).str.strip())):
        d = both[both["system"] == system]
        est = ppi.mean_interval((d["judge"] - d["people"]).to_numpy(), level=level)
        rows.append((system, len(d), est.estimate, est.low, est.high))
    return pd.DataFrame(rows, columns=["system", "n_human", "bias", "bias_low", "bias_high"])


def analysis_tables(
    annotations: pd.DataFrame, judge: pd.DataFrame, *, level: float = 0.95
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], list[str]]:
    """The judge's part of a Spot The Bot analysis: (tables, summary, warnings).

    ``judge_win_rates``: per pair of different systems, the win rate of system_a over system_b
    human-only, judge-only and prediction-powered (:func:`win_rates`), with λ̂, the effective human
    sample size and the fallback flag (λ̂ = 0); ``judge_bias``: the judge's bias per system
    (:func:`judge_bias`).
    """
    from hitkit.analysis import ppi, ppi_active, ppi_ratio, ppi_weighted_ratio

    per_item = items(annotations, judge)
    keys = ["study", "conversation_id", "segment_exchanges"]
    lines = []
    if len(annotations):
        annotated = set(annotations[keys].astype(str).itertuples(index=False, name=None))
        judged = set(judge[keys].astype(str).itertuples(index=False, name=None))
        if annotated - judged:
            lines.append(
                f"{len(annotated - judged)} annotated segment(s) have no judge label and are left out of "
                "the judge's tables"
            )
    totals = conversation_totals(per_item)
    missing = totals[totals["human_subset"] & ~totals["labelled"]]
    if len(missing):
        lines.append(
            f"{len(missing)} conversation(s) drawn for the crowd have no annotations and are left out of "
            "both sides of the prediction-powered win rates; valid only if these annotations are missing "
            "at random"
        )
    partial = int((per_item["human_subset"].astype(bool) & per_item["human_wins"].isna()).sum()) - int(
        missing["segments"].sum()
    )
    if partial:
        lines.append(
            f"{partial} segment(s) of annotated conversations drawn for the crowd have no annotations; "
            "their conversations count only their annotated segments, on both sides"
        )
    probability = conversation_probability(judge)
    table = win_rates(per_item, level=level, probability=probability)
    segments = judge[keys].astype(str).drop_duplicates()
    fallback = [f"{a} vs {b}" for a, b, f in table[["system_a", "system_b", "fallback"]].itertuples(index=False) if f]
    summary = {
        "labels": len(segments),
        "unparsed": int((~judge["parsed"].astype(str).str.lower().isin(["true", "1"])).sum() // 2),
        "models": sorted(set(judge["model"].astype(str))),
        "items": len(segments),
        "pair_items": len(per_item),
        "human_items": int(per_item["human_wins"].notna().sum()),
        "conversations": len(totals),
        "human_conversations": int(totals["labelled"].sum()),
        "level": level,
        "estimator": (ppi.REFERENCE if probability is None else ppi_active.REFERENCE)
        + ", as a ratio of means with one λ",
        "interval": ppi_ratio.RATIO_INTERVAL if probability is None else ppi_weighted_ratio.INTERVAL,
        "fallback_pairs": fallback,
        **(
            {}
            if probability is None
            else {"selection": "uncertainty (judge.csv's human_probability)", "weights": "per conversation"}
        ),
    }
    return {"judge_win_rates": table, "judge_bias": judge_bias(annotations, judge, level=level)}, summary, lines
