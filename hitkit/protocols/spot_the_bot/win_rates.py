"""Spot The Bot's win rates (METHODS §2): per ordered pair of systems, the share of decisive segment
annotations the first system won (human > unsure > bot), a chi-square test of an even split, and
clustered bootstrap intervals; the same from the fluency, sensibleness and specificity answers."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.bounded import wilson_interval
from hitkit.analysis.inference import (
    DEFAULT_CORRECTION,
    Correction,
    adjust,
    bootstrap_interval,
    check_correction,
    cluster_codes,
    cluster_weights,
    clusters_per_column,
)
from hitkit.protocols.spot_the_bot.annotations import FEATURES
from hitkit.protocols.spot_the_bot.reading import segment_annotations

ClusterUnit = Literal["annotation", "conversation", "worker"]
CLUSTER_UNITS: tuple[str, ...] = ("annotation", "conversation", "worker")

WIN_COLUMNS = ["system_a", "system_b", "wins", "losses", "ties", "win_rate", "p_value"]


def _win_table(
    system_0: np.ndarray, system_1: np.ndarray, outcome: np.ndarray, correction: Correction = DEFAULT_CORRECTION
) -> pd.DataFrame:
    """WIN_COLUMNS per ordered pair from outcomes seen from entity 0 (+1 win, 0 tie, −1 loss).

    p_adjusted corrects the chi-square p-values over the family of unordered pairs of different
    systems (both orders of a pair share one test); self-chat rows keep p = 1.
    """
    cross = system_0 != system_1
    # Two different systems: the annotation counts once from each side. Same system: once.
    a = np.concatenate([system_0, system_1[cross]])
    b = np.concatenate([system_1, system_0[cross]])
    o = np.concatenate([outcome, -outcome[cross]])
    counts = pd.crosstab(
        [pd.Series(a, name="system_a"), pd.Series(b, name="system_b")], pd.Series(o, name="outcome")
    ).reindex(columns=[1, -1, 0], fill_value=0)
    rows = []
    for (sys_a, sys_b), (wins, losses, ties) in zip(counts.index, counts.to_numpy()):
        if sys_a == sys_b:
            # Every decisive annotation is a win and a loss of the system against itself.
            wins = losses = wins + losses
        decisive = int(wins + losses)
        rows.append(
            {
                "system_a": sys_a,
                "system_b": sys_b,
                "wins": int(wins),
                "losses": int(losses),
                "ties": int(ties),
                "win_rate": wins / decisive if decisive else math.nan,
                "p_value": float(stats.chisquare([wins, losses]).pvalue) if decisive else 1.0,
            }
        )
    table = pd.DataFrame(rows, columns=WIN_COLUMNS).sort_values(["system_a", "system_b"], ignore_index=True)
    family = (table["system_a"] < table["system_b"]).to_numpy()
    adjusted = pd.Series(
        adjust(table.loc[family, "p_value"].to_numpy(), correction),
        index=pd.MultiIndex.from_frame(table.loc[family, ["system_a", "system_b"]]),
    )
    key = [(x, y) if x < y else (y, x) for x, y in zip(table["system_a"], table["system_b"])]
    table["p_adjusted"] = [adjusted.get(k, p) for k, p in zip(key, table["p_value"])]
    table["correction"] = correction
    return table


def _cluster_labels(seg: pd.DataFrame, unit: str) -> np.ndarray:
    """The cluster of each segment annotation for a clustered bootstrap."""
    if unit == "annotation":
        return np.arange(len(seg))
    if unit == "conversation":
        return (seg["study"].astype(str) + "/" + seg["conversation_id"].astype(str)).to_numpy()
    if unit == "worker":
        return seg["worker_id"].astype(str).to_numpy()
    raise ValueError(f"cluster={unit!r}; use one of {', '.join(CLUSTER_UNITS)}")


def _add_win_intervals(
    table: pd.DataFrame, seg: pd.DataFrame, outcome: np.ndarray, unit: str, n_boot: int, seed: int
) -> pd.DataFrame:
    """Expanded percentile 95 % intervals of each win rate from a bootstrap that resamples ``unit``
    (:func:`~hitkit.analysis.inference.bootstrap_interval`, expanded for the number of units in
    which the two systems met)."""
    table = table.copy()
    table["win_rate_low"] = math.nan
    table["win_rate_high"] = math.nan
    table["interval_unit"] = unit
    if n_boot <= 0 or table.empty:
        return table
    s0, s1 = seg["system_0"].to_numpy(), seg["system_1"].to_numpy()
    codes, n_clusters = cluster_codes(_cluster_labels(seg, unit))
    weights = cluster_weights(codes, n_clusters, n_boot, np.random.default_rng([seed, 19]))
    won, lost, met = [], [], []
    for a, b in zip(table["system_a"], table["system_b"]):
        if a == b:  # self-chat: 0.5 by construction (see the module docstring)
            won.append(np.zeros(len(seg), bool))
            lost.append(np.zeros(len(seg), bool))
            met.append(np.zeros(len(seg), bool))
            continue
        ab, ba = (s0 == a) & (s1 == b), (s0 == b) & (s1 == a)
        won.append((ab & (outcome > 0)) | (ba & (outcome < 0)))
        lost.append((ab & (outcome < 0)) | (ba & (outcome > 0)))
        met.append(ab | ba)
    wins = weights @ np.stack(won, axis=1).astype(float)
    losses = weights @ np.stack(lost, axis=1).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = wins / (wins + losses)
    low, high = bootstrap_interval(rate, clusters_per_column(codes, np.stack(met, axis=1)))
    same = (table["system_a"] == table["system_b"]).to_numpy()
    table["win_rate_low"] = np.where(same, table["win_rate"], low)
    table["win_rate_high"] = np.where(same, table["win_rate"], high)
    # Every resample of 0 wins (or 0 losses) is 0 (1): the percentile interval collapses to a point.
    # Such a pair reports the Wilson interval for 0 of n (n of n) decisive annotations instead.
    for i in np.flatnonzero(~same):
        wins_i, losses_i = int(table["wins"].iat[i]), int(table["losses"].iat[i])
        if wins_i + losses_i and (wins_i == 0 or losses_i == 0):
            table.loc[table.index[i], ["win_rate_low", "win_rate_high"]] = wilson_interval(wins_i, wins_i + losses_i)
    return table


def win_rates(
    annotations: pd.DataFrame,
    *,
    correction: Correction = DEFAULT_CORRECTION,
    cluster: ClusterUnit = "conversation",
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Wins, losses, ties, win rate, its interval and chi-square p per ordered pair that met.

    A win of system_a over system_b is a segment annotation in which system_a's speaker got the
    higher label (human > unsure > bot); each annotator's annotation counts separately.
    win_rate = wins / (wins + losses), NaN when all tied; p_value =
    ``scipy.stats.chisquare([wins, losses])`` (equal split expected), 1.0 when all tied;
    p_adjusted = p_value corrected (``correction``) over the unordered pairs of different systems.
    win_rate_low / win_rate_high: expanded percentile 95 % interval from ``n_boot`` resamples of
    ``cluster`` units (``conversation`` default: one conversation's annotations move together;
    ``worker``; ``annotation`` = the naive bootstrap), named in column interval_unit.
    """
    check_correction(correction)
    seg = segment_annotations(annotations)
    outcome = seg["outcome"].to_numpy()
    table = _win_table(seg["system_0"].to_numpy(), seg["system_1"].to_numpy(), outcome, correction)
    return _add_win_intervals(table, seg, outcome, cluster, n_boot, seed)


def feature_win_rates(annotations: pd.DataFrame, *, correction: Correction = DEFAULT_CORRECTION) -> pd.DataFrame:
    """:func:`win_rates` from the fluency, sensibleness and specificity preferences, per feature
    (each feature its own family for the correction)."""
    seg = segment_annotations(annotations)
    tables = []
    for feature in FEATURES:
        table = _win_table(seg["system_0"].to_numpy(), seg["system_1"].to_numpy(), seg[feature].to_numpy(), correction)
        table.insert(0, "feature", feature)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def system_feature_win_rates(annotations: pd.DataFrame) -> pd.DataFrame:
    """Per feature and system: wins, losses, ties and win rate against all other systems pooled
    (the paper's Table 2). Self-chat is left out. Columns feature, system, wins, losses, ties,
    win_rate."""
    table = feature_win_rates(annotations, correction="none")
    table = table[table["system_a"] != table["system_b"]]
    out = (
        table.groupby(["feature", "system_a"], sort=True)[["wins", "losses", "ties"]]
        .sum()
        .reset_index()
        .rename(columns={"system_a": "system"})
    )
    decisive = out["wins"] + out["losses"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["win_rate"] = np.where(decisive > 0, out["wins"] / decisive, np.nan)
    return out
