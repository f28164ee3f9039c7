"""Spot The Bot's annotators: agreement per system and label, each annotator's correctness (human as
human, bot as bot), results per segment length, and the time an annotation took."""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.protocols.spot_the_bot.annotations import HUMAN, LABELS
from hitkit.protocols.spot_the_bot.reading import segment_annotations

# An elapsed_s above this (about 3 years) is a timestamp, not a duration.
_TIMESTAMP_S = 1e8


def agreement(annotations: pd.DataFrame) -> pd.DataFrame:
    """Annotator agreement per system and label: of the pairs where one annotator gave it, both did.

    A pair is two annotations (different assignments) of the same speaker in the same segment
    (study, conversation, segment length, entity). For label L, a speaker-segment annotated n times
    with m labels L gives C(m, 2) pairs where both gave L out of C(n, 2) − C(n − m, 2) where at
    least one did. Columns: system, label, pairs (at least one gave it), both, agreement = both /
    pairs (NaN without pairs), and agreement_paper = the share the paper's Table 3 reports: of all
    labels L given by an annotator with a co-annotator, the share whose co-annotator also gave L
    (Σ m(m − 1) / Σ m(n − 1)); the paper reads it against a chance level of 0.33, which only this
    share fits.
    """
    seg = segment_annotations(annotations)
    speakers = pd.concat(
        [
            seg[["study", "conversation_id", "segment_exchanges"]].assign(
                entity=e, system=seg[f"system_{e}"], label=seg[f"label_{e}"]
            )
            for e in (0, 1)
        ]
    )
    keys = ["study", "conversation_id", "segment_exchanges", "entity", "system"]
    counts = pd.crosstab([speakers[k] for k in keys], speakers["label"]).reindex(columns=list(LABELS), fill_value=0)
    n = counts.sum(axis=1).to_numpy()[:, None]
    m = counts.to_numpy()

    def pairs_of(x):
        return x * (x - 1) // 2

    both = pd.DataFrame(pairs_of(m), index=counts.index, columns=list(LABELS))
    some = pd.DataFrame(pairs_of(n) - pairs_of(n - m), index=counts.index, columns=list(LABELS))
    # The paper's share: of the labels L given (with a co-annotator), how many co-annotators
    # also gave L: Σ m(m − 1) / Σ m(n − 1).
    given = pd.DataFrame(m * (n - 1), index=counts.index, columns=list(LABELS))
    matched = pd.DataFrame(m * (m - 1), index=counts.index, columns=list(LABELS))
    by_system = (
        pd.concat(
            {
                "both": both.groupby(level="system").sum().stack(),
                "pairs": some.groupby(level="system").sum().stack(),
                "_given": given.groupby(level="system").sum().stack(),
                "_matched": matched.groupby(level="system").sum().stack(),
            },
            axis=1,
        )
        .rename_axis(["system", "label"])
        .reset_index()
    )
    by_system["label"] = pd.Categorical(by_system["label"], list(LABELS), ordered=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        by_system["agreement"] = np.where(by_system["pairs"] > 0, by_system["both"] / by_system["pairs"], np.nan)
        by_system["agreement_paper"] = np.where(
            by_system["_given"] > 0, by_system["_matched"] / by_system["_given"], np.nan
        )
    table = by_system.sort_values(["system", "label"], ignore_index=True)
    table["label"] = table["label"].astype(str)
    table[["pairs", "both"]] = table[["pairs", "both"]].astype(int)
    return table[["system", "label", "pairs", "both", "agreement", "agreement_paper"]]


def annotator_correctness(annotations: pd.DataFrame) -> pd.DataFrame:
    """Per annotator: share of speakers classified right (human as human, a bot as bot).

    ``unsure`` is never right. Columns: worker_id, entities, correct, correctness, and the same on
    human–human material (segments where both speakers are human): hh_entities, hh_correct,
    hh_correctness (NaN for an annotator who saw none).
    """
    seg = segment_annotations(annotations)
    human_human = (seg["system_0"] == HUMAN) & (seg["system_1"] == HUMAN)
    speakers = pd.concat(
        [
            pd.DataFrame(
                {
                    "worker_id": seg["worker_id"],
                    "right": np.where(
                        seg[f"system_{e}"] == HUMAN, seg[f"label_{e}"] == HUMAN, seg[f"label_{e}"] == "bot"
                    ),
                    "hh": human_human,
                }
            )
            for e in (0, 1)
        ]
    )
    speakers["hh_right"] = speakers["right"] & speakers["hh"]
    table = (
        speakers.groupby("worker_id", sort=True)
        .agg(
            entities=("right", "size"),
            correct=("right", "sum"),
            hh_entities=("hh", "sum"),
            hh_correct=("hh_right", "sum"),
        )
        .reset_index()
    )
    table["correctness"] = table["correct"] / table["entities"]
    with np.errstate(invalid="ignore", divide="ignore"):
        table["hh_correctness"] = np.where(table["hh_entities"] > 0, table["hh_correct"] / table["hh_entities"], np.nan)
    columns = ["worker_id", "entities", "correct", "correctness", "hh_entities", "hh_correct", "hh_correctness"]
    return table[columns].astype({c: int for c in columns[1:] if "correctness" not in c})


def segment_lengths(annotations: pd.DataFrame) -> pd.DataFrame:
    """Per system and segment length: games, wins, losses, ties, win rate, share labelled human.

    Games are annotations against a different system (as for the ranking); win_rate = wins /
    (wins + losses), NaN without decisive games. labelled_human is the share of all the system's
    speaker annotations (self-chat included) labelled human.
    """
    seg = segment_annotations(annotations)
    cross = (seg["system_0"] != seg["system_1"]).to_numpy()
    sides = pd.concat(
        [
            pd.DataFrame(
                {
                    "system": seg[f"system_{e}"],
                    "segment_exchanges": seg["segment_exchanges"],
                    "human": seg[f"label_{e}"] == HUMAN,
                    "game": cross,
                    "win": cross & (seg["outcome"] * sign > 0),
                    "loss": cross & (seg["outcome"] * sign < 0),
                    "tie": cross & (seg["outcome"] == 0),
                }
            )
            for e, sign in ((0, 1), (1, -1))
        ]
    )
    table = (
        sides.groupby(["system", "segment_exchanges"], sort=True)
        .agg(
            annotations=("human", "size"),
            labelled_human=("human", "mean"),
            games=("game", "sum"),
            wins=("win", "sum"),
            losses=("loss", "sum"),
            ties=("tie", "sum"),
        )
        .reset_index()
    )
    decisive = table["wins"] + table["losses"]
    with np.errstate(invalid="ignore", divide="ignore"):
        table["win_rate"] = np.where(decisive > 0, table["wins"] / decisive, np.nan)
    columns = [
        "system",
        "segment_exchanges",
        "annotations",
        "games",
        "wins",
        "losses",
        "ties",
        "win_rate",
        "labelled_human",
    ]
    return table[columns].astype({c: int for c in ("games", "wins", "losses", "ties")})


def implausible_times(seg: pd.DataFrame, work_time_s: pd.Series | None = None) -> np.ndarray:
    """Which segment annotations' elapsed_s cannot be a duration: negative, infinite, above
    :data:`_TIMESTAMP_S` (a timestamp), or longer than the whole assignment (``work_time_s`` by
    assignment_id, when known)."""
    elapsed = seg["elapsed_s"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        bad = (elapsed < 0) | np.isinf(elapsed) | (elapsed > _TIMESTAMP_S)
        if work_time_s is not None:
            limit = seg["assignment_id"].map(work_time_s).to_numpy(dtype=float)
            bad |= elapsed > limit  # NaN limit (unknown) compares False
    return bad


def annotation_time(annotations: pd.DataFrame, work_time_s: pd.Series | None = None) -> pd.DataFrame:
    """Median (and mean) seconds per segment annotation, by segment length.

    Columns segment_exchanges, segment_annotations, timed, implausible, median_elapsed_s,
    mean_elapsed_s. Medians are the figure to read: sessions left open give means of days.
    Implausible times (:func:`implausible_times`) are counted and left out, as are rows without
    a time.
    """
    seg = segment_annotations(annotations)
    bad = implausible_times(seg, work_time_s)
    seg = seg.assign(implausible=bad, elapsed_s=seg["elapsed_s"].where(~bad))
    table = (
        seg.groupby("segment_exchanges", sort=True)
        .agg(
            segment_annotations=("elapsed_s", "size"),
            timed=("elapsed_s", "count"),
            implausible=("implausible", "sum"),
            median_elapsed_s=("elapsed_s", "median"),
            mean_elapsed_s=("elapsed_s", "mean"),
        )
        .reset_index()
    )
    table["implausible"] = table["implausible"].astype(int)
    return table
