"""Spot The Bot (Deriu et al., EMNLP 2020): METHODS §2, win rates and ranking.

Reads ``annotations.csv`` (and ``assignments.csv`` when present) from one folder (METHODS §4).
A row is one entity (speaker 0 or 1) of one segment as one assignment annotated it; the two rows of
a segment annotation share (study, assignment_id, conversation_id, segment_exchanges). Returns an
:class:`~hitkit.analysis.base.AnalysisResult` with these tables (column contract v1):

- ``win_rates``: system_a, system_b, wins, losses, ties, win_rate, p_value: one row per ordered
  pair of systems that met in a conversation; wins = segment annotations in which system_a's
  label ranked above system_b's (human > unsure > bot); win_rate = wins / (wins + losses);
  p_value = chi-square test that wins and losses split evenly.
- ``feature_win_rates``: feature plus the same columns, from the fluency / sensibleness /
  specificity answers (+1 = this entity did better).
- ``ranking``: system, win_rate, trueskill_mu, trueskill_sigma, rank_low, rank_high, cluster,
  win_rate_rank_low, win_rate_rank_high, win_rate_cluster: TrueSkill and plain win-rate rankings,
  each with its bootstrap 95 % rank range and clusters of overlapping ranges, e.g. ``(2,3)``.
- ``agreement``: system, label, pairs, both, agreement (:func:`agreement`).
- ``annotators``: worker_id, entities, correct, correctness, hh_entities, hh_correct,
  hh_correctness (:func:`annotator_correctness`).
- ``segment_lengths``: system, segment_exchanges, annotations, games, wins, losses, ties, win_rate,
  labelled_human (:func:`segment_lengths`).
- ``annotation_time``: segment_exchanges, segment_annotations, timed, mean_elapsed_s,
  median_elapsed_s (:func:`annotation_time`).

The summary holds counts, the annotator correctness figures (mean, mean on human–human material,
share of annotators below 50 %), the mean annotation time, and the ranking settings.

**Self-chat.** Human–human material (and a bot talking to itself) gives pairs with
system_a == system_b. They get one ``win_rates`` row each: every decisive annotation is one win
and one loss of the system against itself, every equal pair of labels one tie, so win_rate is 0.5
and p_value 1 by construction; what such a row tells is the tie share (how often annotators
could not tell two speakers of the same kind apart), a bound for the bot pairs. A system cannot
play itself in a ranking, so these annotations are not ranking games; a system that never met
another system is not ranked.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.base import AnalysisResult, common_options
from hitkit.analysis.inference import (DEFAULT_CORRECTION, DEFAULT_DUPLICATES, INTERVAL_METHOD,
                                       Correction, DuplicatePolicy, DuplicateRowsWarning, adjust,
                                       apply_duplicate_policy, bootstrap_interval, check_correction,
                                       cluster_codes, cluster_weights, clusters_per_column,
                                       duplicate_warnings)
from hitkit.analysis.tables import ASSIGNMENT_DUPLICATES, keep_counted, read_table
from hitkit.analysis.ranking import clusters, rank_range, ranks
from hitkit.analysis.trueskill_vec import (DEFAULT_TRUESKILL, TrueSkillEnv, TrueSkillSettings, rate_repeated,
                                          rate_sequences)
from hitkit.errors import InputError
from hitkit.protocols.spot_the_bot.annotations import (ANNOTATION_COLUMNS, FEATURES, HUMAN, LABEL_RANK, LABELS,
                                                      SEGMENT_KEY)

RankBy = Literal["mu", "conservative"]
Resample = Literal["game", "conversation", "worker"]
RESAMPLE_UNITS: tuple[str, ...] = ("game", "conversation", "worker")
ClusterUnit = Literal["annotation", "conversation", "worker"]
CLUSTER_UNITS: tuple[str, ...] = ("annotation", "conversation", "worker")

_FEATURE_VALUES = {"+1": 1, "1": 1, "0": 0, "-1": -1, "\u22121": -1}
WIN_COLUMNS = ["system_a", "system_b", "wins", "losses", "ties", "win_rate", "p_value"]

# Bootstrap resamples are played in chunks of about this many games (all resamples together).
_BOOT_CELLS = 2_000_000
# An elapsed_s above this (about 3 years) is a timestamp, not a duration.
_TIMESTAMP_S = 1e8




def _where(source, index) -> dict:
    """InputError arguments for a row: the file and its line (header is line 1) or the row label."""
    if isinstance(source, Path):
        return {"path": source, "line": int(index) + 2}
    label = index.item() if isinstance(index, np.generic) else index
    return {"path": f"{source} row {label!r}"}


def _check_values(table: pd.DataFrame, source) -> pd.DataFrame:
    """Typed copy of the annotation table; InputError at the first bad value."""
    def fail(index, message):
        raise InputError(message=message, **_where(source, index))

    out = table.copy()
    for column in ("assignment_id", "worker_id", "conversation_id", "system"):
        text = out[column].astype(str).str.strip()
        empty = out.index[text == ""]
        if len(empty):
            fail(empty[0], f"{column} is empty; every annotation needs one")
        out[column] = text
    label = out["label"].astype(str).str.strip().str.lower()
    bad = out.index[~label.isin(LABELS)]
    if len(bad):
        fail(bad[0], f"label {out.at[bad[0], 'label']!r} is not one of human, unsure, bot")
    out["label"] = label
    entity = out["entity"].astype(str).str.strip()
    bad = out.index[~entity.isin(["0", "1"])]
    if len(bad):
        fail(bad[0], f"entity {out.at[bad[0], 'entity']!r} is not 0 or 1")
    out["entity"] = entity.astype(int)
    k = pd.to_numeric(out["segment_exchanges"].astype(str).str.strip(), errors="coerce")
    bad = out.index[~((k > 0) & (k == np.floor(k)))]
    if len(bad):
        fail(bad[0], f"segment_exchanges {out.at[bad[0], 'segment_exchanges']!r} is not a "
                     "positive whole number of exchanges")
    out["segment_exchanges"] = k.astype(int)
    for feature in FEATURES:
        value = out[feature].astype(str).str.strip().map(_FEATURE_VALUES)
        bad = out.index[value.isna()]
        if len(bad):
            fail(bad[0], f"{feature} {out.at[bad[0], feature]!r} is not +1, 0 or -1 (this "
                         "entity better, same, worse than the other)")
        out[feature] = value.astype(int)
    text = out["elapsed_s"].astype(str).str.strip()
    elapsed = pd.to_numeric(text, errors="coerce")
    # Negative, infinite or timestamp-sized values are read (and later flagged and counted by
    # implausible_times), not refused: released files have them.
    bad = out.index[elapsed.isna() & (text != "") & (text.str.lower() != "nan")]
    if len(bad):
        fail(bad[0], f"elapsed_s {out.at[bad[0], 'elapsed_s']!r} is not a number of seconds "
                     "(leave it empty when unknown)")
    out["elapsed_s"] = elapsed.astype(float)
    for column in ("study", "hit_id"):
        out[column] = out[column].astype(str).str.strip()
    return out


def _check_pairs(table: pd.DataFrame, source) -> None:
    """Each segment annotation has exactly entity 0 and entity 1, with mirrored preferences."""
    keys = SEGMENT_KEY + ["entity"]
    dup = table.index[table.duplicated(keys)]
    if len(dup):
        raise InputError(message=f"entity {table.at[dup[0], 'entity']} of this segment appears "
                         "twice in one assignment; each segment annotation has one row per entity",
                         **_where(source, dup[0]))
    size = table.groupby(SEGMENT_KEY, sort=False)["entity"].transform("size")
    alone = table.index[size != 2]
    if len(alone):
        i = alone[0]
        raise InputError(message=f"entity {table.at[i, 'entity']} of conversation "
                         f"{table.at[i, 'conversation_id']!r} ({table.at[i, 'segment_exchanges']} "
                         "exchanges) has no row for the other entity in this assignment; export "
                         "both speakers of every annotated segment", **_where(source, i))
    zero = table[table["entity"] == 0].set_index(SEGMENT_KEY)
    one = (table[table["entity"] == 1].rename_axis("_row").reset_index()
           .set_index(SEGMENT_KEY).loc[zero.index])
    for feature in FEATURES:
        bad = np.flatnonzero(zero[feature].to_numpy() != -one[feature].to_numpy())
        if len(bad):
            i = one["_row"].iloc[bad[0]]
            this, other = (f"{x:+d}" if x else "0"
                           for x in (one[feature].iloc[bad[0]], zero[feature].iloc[bad[0]]))
            raise InputError(message=f"{feature} is {this} for this entity but {other} for "
                             "the other; one answer "
                             "must read +1/-1 or 0/0 from the two sides", **_where(source, i))


DUPLICATE_KEY = ["study", "worker_id", "conversation_id", "segment_exchanges"]
"""Two segment annotations with this key are one worker annotating one segment twice."""


def resolve_duplicates(table: pd.DataFrame, source, policy: DuplicatePolicy = DEFAULT_DUPLICATES
                       ) -> tuple[pd.DataFrame, dict]:
    """Apply the duplicate policy to repeated segment annotations; returns (table, report).

    Released Spot The Bot files repeat annotations (the same worker, segment and entity twice).
    Rows are grouped into segment annotations first: within one assignment, the n-th row of
    entity 0 of a segment pairs with the n-th row of entity 1. Two segment annotations with the
    same :data:`DUPLICATE_KEY` are duplicates, resolved as a whole (both entities) by
    :func:`~hitkit.analysis.inference.apply_duplicate_policy`: ``first`` (default), ``last``,
    ``drop`` or ``error``. The report counts the repeated keys and the rows removed.
    """
    work = table.copy()
    work["_occurrence"] = work.groupby(SEGMENT_KEY + ["entity"], sort=False).cumcount()
    kept, report = apply_duplicate_policy(
        work, DUPLICATE_KEY, policy, what="segment annotation (same worker, segment)",
        source=source, unit=SEGMENT_KEY + ["_occurrence"])
    return kept.drop(columns="_occurrence"), report


def load_annotations(in_dir: str | Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES
                     ) -> tuple[pd.DataFrame, dict]:
    """:func:`read_annotations` and the duplicate report of :func:`resolve_duplicates`; the report
    on repeated rows of ``assignments.csv`` (same policy) is in the table's
    ``attrs["assignment_duplicates"]``."""
    in_dir = Path(in_dir)
    path = in_dir / "annotations.csv"
    table = _check_values(read_table(path, ANNOTATION_COLUMNS), path)
    table, report = resolve_duplicates(table, path, duplicates)
    _check_pairs(table, path)
    table = keep_counted(table, in_dir, path, duplicates=duplicates)
    extra = [c for c in table.columns if c not in ANNOTATION_COLUMNS]
    out = table[list(ANNOTATION_COLUMNS) + extra].reset_index(drop=True)
    out.attrs["assignment_duplicates"] = table.attrs["assignment_duplicates"]
    return out, report


def read_annotations(in_dir: str | Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES
                     ) -> pd.DataFrame:
    """Read and check ``annotations.csv``; keep only rows of submitted or approved assignments.

    Without ``assignments.csv`` every row counts. Labels are lower-cased; entity,
    segment_exchanges and the three features become integers, elapsed_s a float (NaN when empty).
    Repeated annotations are resolved by the ``duplicates`` policy (:func:`resolve_duplicates`,
    with a warning that counts them). Raises :class:`~hitkit.errors.InputError` naming the file
    and line for a missing file or column, a bad value, a segment annotation without both
    entities, preferences that are not mirror images, or an assignment missing from
    ``assignments.csv``.
    """
    return load_annotations(in_dir, duplicates=duplicates)[0]


def segment_annotations(annotations: pd.DataFrame, *,
                        duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.DataFrame:
    """One row per segment annotation (both entities side by side), in order of first appearance.

    Columns: the segment key, worker_id, system_0, system_1, label_0, label_1, outcome (+1 entity
    0's label ranks higher, 0 equal, −1 lower), the three features as entity 0 answered them, and
    elapsed_s (the larger of the two rows' values). Repeated annotations are resolved by
    ``duplicates`` (:func:`resolve_duplicates`).
    """
    missing = [c for c in ANNOTATION_COLUMNS if c not in annotations.columns]
    if missing:
        raise InputError("annotations", f"missing column(s) {missing}; expected "
                         f"{list(ANNOTATION_COLUMNS)}")
    table = _check_values(annotations[list(ANNOTATION_COLUMNS)], "annotations")
    table, _ = resolve_duplicates(table, "annotations", duplicates)
    _check_pairs(table, "annotations")
    table = table.reset_index(drop=True)
    table["_order"] = table.groupby(SEGMENT_KEY, sort=False).ngroup()
    zero = table[table["entity"] == 0].set_index(SEGMENT_KEY)
    one = table[table["entity"] == 1].set_index(SEGMENT_KEY).loc[zero.index]
    rank_0 = zero["label"].map(LABEL_RANK).to_numpy()
    rank_1 = one["label"].map(LABEL_RANK).to_numpy()
    out = pd.DataFrame({
        "worker_id": zero["worker_id"].to_numpy(),
        "system_0": zero["system"].to_numpy(), "system_1": one["system"].to_numpy(),
        "label_0": zero["label"].to_numpy(), "label_1": one["label"].to_numpy(),
        "outcome": np.sign(rank_0 - rank_1).astype(int),
        **{f: zero[f].to_numpy() for f in FEATURES},
        "elapsed_s": np.fmax(zero["elapsed_s"].to_numpy(), one["elapsed_s"].to_numpy()),
        "_order": np.minimum(zero["_order"].to_numpy(), one["_order"].to_numpy()),
    }, index=zero.index).reset_index()
    return out.sort_values("_order", kind="stable").drop(columns="_order").reset_index(drop=True)


def _win_table(system_0: np.ndarray, system_1: np.ndarray, outcome: np.ndarray,
               correction: Correction = DEFAULT_CORRECTION) -> pd.DataFrame:
    """WIN_COLUMNS per ordered pair from outcomes seen from entity 0 (+1 win, 0 tie, −1 loss).

    p_adjusted corrects the chi-square p-values over the family of unordered pairs of different
    systems (both orders of a pair share one test); self-chat rows keep p = 1.
    """
    cross = system_0 != system_1
    # Two different systems: the annotation counts once from each side. Same system: once.
    a = np.concatenate([system_0, system_1[cross]])
    b = np.concatenate([system_1, system_0[cross]])
    o = np.concatenate([outcome, -outcome[cross]])
    counts = (pd.crosstab([pd.Series(a, name="system_a"), pd.Series(b, name="system_b")],
                          pd.Series(o, name="outcome"))
              .reindex(columns=[1, -1, 0], fill_value=0))
    rows = []
    for (sys_a, sys_b), (wins, losses, ties) in zip(counts.index, counts.to_numpy()):
        if sys_a == sys_b:
            # Every decisive annotation is a win and a loss of the system against itself.
            wins = losses = wins + losses
        decisive = int(wins + losses)
        rows.append({
            "system_a": sys_a, "system_b": sys_b,
            "wins": int(wins), "losses": int(losses), "ties": int(ties),
            "win_rate": wins / decisive if decisive else math.nan,
            "p_value": float(stats.chisquare([wins, losses]).pvalue) if decisive else 1.0,
        })
    table = pd.DataFrame(rows, columns=WIN_COLUMNS).sort_values(["system_a", "system_b"],
                                                                ignore_index=True)
    family = (table["system_a"] < table["system_b"]).to_numpy()
    adjusted = pd.Series(adjust(table.loc[family, "p_value"].to_numpy(), correction),
                         index=pd.MultiIndex.from_frame(table.loc[family, ["system_a", "system_b"]]))
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


def _add_win_intervals(table: pd.DataFrame, seg: pd.DataFrame, outcome: np.ndarray, unit: str,
                       n_boot: int, seed: int) -> pd.DataFrame:
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
    return table


def win_rates(annotations: pd.DataFrame, *, correction: Correction = DEFAULT_CORRECTION,
              cluster: ClusterUnit = "conversation", n_boot: int = 1000,
              seed: int = 0) -> pd.DataFrame:
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
    table = _win_table(seg["system_0"].to_numpy(), seg["system_1"].to_numpy(), outcome,
                       correction)
    return _add_win_intervals(table, seg, outcome, cluster, n_boot, seed)


def feature_win_rates(annotations: pd.DataFrame, *,
                      correction: Correction = DEFAULT_CORRECTION) -> pd.DataFrame:
    """:func:`win_rates` from the fluency, sensibleness and specificity preferences, per feature
    (each feature its own family for the correction)."""
    seg = segment_annotations(annotations)
    tables = []
    for feature in FEATURES:
        table = _win_table(seg["system_0"].to_numpy(), seg["system_1"].to_numpy(),
                           seg[feature].to_numpy(), correction)
        table.insert(0, "feature", feature)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def system_feature_win_rates(annotations: pd.DataFrame) -> pd.DataFrame:
    """Per feature and system: wins, losses, ties and win rate against all other systems pooled
    (the paper's Table 2). Self-chat is left out. Columns feature, system, wins, losses, ties,
    win_rate."""
    table = feature_win_rates(annotations, correction="none")
    table = table[table["system_a"] != table["system_b"]]
    out = (table.groupby(["feature", "system_a"], sort=True)[["wins", "losses", "ties"]].sum()
           .reset_index().rename(columns={"system_a": "system"}))
    decisive = out["wins"] + out["losses"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["win_rate"] = np.where(decisive > 0, out["wins"] / decisive, np.nan)
    return out


def games(annotations: pd.DataFrame) -> pd.DataFrame:
    """Ranking games in annotation order: winner, loser, drawn (ties are draws), conversation,
    worker.

    One game per segment annotation between two different systems; for a draw, winner/loser are
    simply entity 0 / entity 1. Self-chat annotations are not games (a system cannot play itself).
    conversation (study/conversation_id) and worker say where the game came from, for a
    clustered bootstrap.
    """
    seg = segment_annotations(annotations)
    seg = seg[seg["system_0"] != seg["system_1"]]
    lost = (seg["outcome"] < 0).to_numpy()
    s0, s1 = seg["system_0"].to_numpy(), seg["system_1"].to_numpy()
    return pd.DataFrame({"winner": np.where(lost, s1, s0), "loser": np.where(lost, s0, s1),
                         "drawn": (seg["outcome"] == 0).to_numpy(),
                         "conversation": (seg["study"].astype(str) + "/"
                                          + seg["conversation_id"].astype(str)).to_numpy(),
                         "worker": seg["worker_id"].astype(str).to_numpy()})


def rank_with_bootstrap(games: pd.DataFrame, n_boot: int = 1000, seed: int = 0, *,
                        by: RankBy = "mu", env: TrueSkillEnv | None = None,
                        resample: Resample = "game") -> pd.DataFrame:
    """TrueSkill and win-rate rankings with bootstrap 95 % rank ranges and clusters.

    ``games`` has winner, loser, drawn (see :func:`games`), in the order they are played.
    ``env`` None = :data:`DEFAULT_TRUESKILL` for these games (τ = 0, draw probability = the
    observed tie rate). TrueSkill point estimates play every game once in that order. The
    bootstrap draws ``n_boot`` resamples (``numpy.random.default_rng(seed)``) and plays each
    resample in the original order of its games: TrueSkill depends on game order (unless τ = 0
    and even then slightly), and this keeps the one order the data has rather than adding a
    random one. ``resample="game"`` (default, Dušek et al.) resamples games;
    ``"conversation"`` or ``"worker"`` resample whole conversations or workers (columns
    conversation / worker of ``games``) with all their games, the clustered bootstrap of
    METHODS §2b. The same resamples give the win-rate ranking (a system's wins / (wins +
    losses) over all its games; 0.5 in a resample where all its games tied or it played none).
    METHODS does not say which TrueSkill score to rank by: ``by="mu"`` (default) ranks by mean
    skill, ``by="conservative"`` by mu − 3σ. Rank 1 = best; ranges drop 2.5 % of bootstrap
    ranks at each end; clusters merge overlapping ranges (:func:`clusters`). Rows are in
    TrueSkill cluster order. Besides the pooled win_rate, mean_pairwise_win_rate is the mean
    over opponents of the pairwise win rates (the paper's aggregate).
    """
    if by not in ("mu", "conservative"):
        raise ValueError(f"by={by!r}; use 'mu' or 'conservative'")
    if n_boot < 0:
        raise ValueError(f"n_boot={n_boot!r}; use 0 (no ranges) or more")
    if resample not in RESAMPLE_UNITS:
        raise ValueError(f"resample={resample!r}; use one of {', '.join(RESAMPLE_UNITS)}")
    if resample != "game" and resample not in games.columns:
        raise ValueError(f"resample={resample!r} needs a {resample!r} column in the games")
    columns = ["system", "win_rate", "mean_pairwise_win_rate", "trueskill_mu",
               "trueskill_sigma", "rank_low", "rank_high", "cluster", "win_rate_rank_low",
               "win_rate_rank_high", "win_rate_cluster"]
    systems = sorted(set(games["winner"]) | set(games["loser"]))
    if not systems:
        return pd.DataFrame(columns=columns)
    if env is None:
        env = DEFAULT_TRUESKILL.env_for(games)
    index = {s: i for i, s in enumerate(systems)}
    k = len(systems)
    winner = games["winner"].map(index).to_numpy()
    loser = games["loser"].map(index).to_numpy()
    drawn = games["drawn"].to_numpy().astype(bool)
    if np.any(winner == loser):
        raise InputError("games", "a game has the same system on both sides; a system cannot "
                         "play itself")

    def win_rate(w: np.ndarray, l: np.ndarray, d: np.ndarray,
                 weight: np.ndarray | None = None) -> np.ndarray:
        rows = np.arange(w.shape[0])[:, None] * k
        size = w.shape[0] * k
        wt = None if weight is None else weight[~d]
        won = np.bincount((rows + w)[~d], wt, minlength=size).reshape(-1, k)
        lost = np.bincount((rows + l)[~d], wt, minlength=size).reshape(-1, k)
        decisive = won + lost
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(decisive > 0, won / decisive, 0.5)

    def score_of(mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        return mu if by == "mu" else mu - 3 * sigma

    mu, sigma = rate_sequences(winner, loser, drawn, k, env)
    point_rate = win_rate(winner[None], loser[None], drawn[None])[0]
    rng = np.random.default_rng(seed)
    n = len(winner)
    ts_ranks, wr_ranks = [], []
    # Resamples in chunks of at most _BOOT_CELLS games in all, to bound memory on large studies.
    chunk = max(1, _BOOT_CELLS // max(n, 1))
    if resample != "game":
        codes, n_clusters = cluster_codes(games[resample].to_numpy())
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        if resample == "game":
            idx = np.sort(rng.integers(0, n, size=(size, n)), axis=1)
            boot_mu, boot_sigma = rate_sequences(winner[idx], loser[idx], drawn[idx], k, env)
            boot_rate = win_rate(winner[idx], loser[idx], drawn[idx])
        else:
            weight = cluster_weights(codes, n_clusters, size, rng)
            boot_mu, boot_sigma = rate_repeated(winner, loser, drawn, weight, k, env)
            tile = np.broadcast_to
            boot_rate = win_rate(tile(winner, weight.shape), tile(loser, weight.shape),
                                 tile(drawn, weight.shape), weight.astype(float))
        ts_ranks.append(ranks(score_of(boot_mu, boot_sigma)))
        wr_ranks.append(ranks(boot_rate))
    empty = np.zeros((0, k), dtype=int)
    ts_low, ts_high = rank_range(np.concatenate(ts_ranks or [empty]), ranks(score_of(mu, sigma)))
    wr_low, wr_high = rank_range(np.concatenate(wr_ranks or [empty]), ranks(point_rate))
    order, ts_cluster = clusters(ts_low, ts_high, score_of(mu, sigma))
    _, wr_cluster = clusters(wr_low, wr_high, point_rate)
    table = pd.DataFrame({
        "system": systems, "win_rate": point_rate,
        "mean_pairwise_win_rate": _mean_pairwise_win_rate(winner, loser, drawn, k),
        "trueskill_mu": mu, "trueskill_sigma": sigma,
        "rank_low": ts_low.astype(int), "rank_high": ts_high.astype(int), "cluster": ts_cluster,
        "win_rate_rank_low": wr_low.astype(int), "win_rate_rank_high": wr_high.astype(int),
        "win_rate_cluster": wr_cluster,
    })
    return table.iloc[order].reset_index(drop=True)[columns]


def _mean_pairwise_win_rate(winner: np.ndarray, loser: np.ndarray, drawn: np.ndarray,
                            k: int) -> np.ndarray:
    """Per system, the mean over opponents it had a decisive game with of its pairwise win rate."""
    decisive = ~drawn
    wins = np.zeros((k, k))
    np.add.at(wins, (winner[decisive], loser[decisive]), 1)
    played = wins + wins.T
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(played > 0, wins / played, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(rate, axis=1)


def ranking(annotations: pd.DataFrame, n_boot: int = 1000, seed: int = 0, *,
            by: RankBy = "mu", env: TrueSkillEnv | None = None,
            resample: Resample = "game") -> pd.DataFrame:
    """:func:`rank_with_bootstrap` on the :func:`games` of ``annotations``."""
    return rank_with_bootstrap(games(annotations), n_boot, seed, by=by, env=env, resample=resample)


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
    speakers = pd.concat([
        seg[["study", "conversation_id", "segment_exchanges"]].assign(
            entity=e, system=seg[f"system_{e}"], label=seg[f"label_{e}"]) for e in (0, 1)])
    keys = ["study", "conversation_id", "segment_exchanges", "entity", "system"]
    counts = (pd.crosstab([speakers[k] for k in keys], speakers["label"])
              .reindex(columns=list(LABELS), fill_value=0))
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
    by_system = (pd.concat({"both": both.groupby(level="system").sum().stack(),
                            "pairs": some.groupby(level="system").sum().stack(),
                            "_given": given.groupby(level="system").sum().stack(),
                            "_matched": matched.groupby(level="system").sum().stack()}, axis=1)
                 .rename_axis(["system", "label"]).reset_index())
    by_system["label"] = pd.Categorical(by_system["label"], list(LABELS), ordered=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        by_system["agreement"] = np.where(by_system["pairs"] > 0,
                                          by_system["both"] / by_system["pairs"], np.nan)
        by_system["agreement_paper"] = np.where(by_system["_given"] > 0,
                                                by_system["_matched"] / by_system["_given"],
                                                np.nan)
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
    speakers = pd.concat([pd.DataFrame({
        "worker_id": seg["worker_id"],
        "right": np.where(seg[f"system_{e}"] == HUMAN, seg[f"label_{e}"] == HUMAN,
                          seg[f"label_{e}"] == "bot"),
        "hh": human_human}) for e in (0, 1)])
    speakers["hh_right"] = speakers["right"] & speakers["hh"]
    table = (speakers.groupby("worker_id", sort=True)
             .agg(entities=("right", "size"), correct=("right", "sum"),
                  hh_entities=("hh", "sum"), hh_correct=("hh_right", "sum"))
             .reset_index())
    table["correctness"] = table["correct"] / table["entities"]
    with np.errstate(invalid="ignore", divide="ignore"):
        table["hh_correctness"] = np.where(table["hh_entities"] > 0,
                                           table["hh_correct"] / table["hh_entities"], np.nan)
    columns = ["worker_id", "entities", "correct", "correctness", "hh_entities", "hh_correct",
               "hh_correctness"]
    return table[columns].astype({c: int for c in columns[1:] if "correctness" not in c})


def segment_lengths(annotations: pd.DataFrame) -> pd.DataFrame:
    """Per system and segment length: games, wins, losses, ties, win rate, share labelled human.

    Games are annotations against a different system (as for the ranking); win_rate = wins /
    (wins + losses), NaN without decisive games. labelled_human is the share of all the system's
    speaker annotations (self-chat included) labelled human.
    """
    seg = segment_annotations(annotations)
    cross = (seg["system_0"] != seg["system_1"]).to_numpy()
    sides = pd.concat([pd.DataFrame({
        "system": seg[f"system_{e}"], "segment_exchanges": seg["segment_exchanges"],
        "human": seg[f"label_{e}"] == HUMAN, "game": cross,
        "win": cross & (seg["outcome"] * sign > 0), "loss": cross & (seg["outcome"] * sign < 0),
        "tie": cross & (seg["outcome"] == 0)}) for e, sign in ((0, 1), (1, -1))])
    table = (sides.groupby(["system", "segment_exchanges"], sort=True)
             .agg(annotations=("human", "size"), labelled_human=("human", "mean"),
                  games=("game", "sum"), wins=("win", "sum"), losses=("loss", "sum"),
                  ties=("tie", "sum"))
             .reset_index())
    decisive = table["wins"] + table["losses"]
    with np.errstate(invalid="ignore", divide="ignore"):
        table["win_rate"] = np.where(decisive > 0, table["wins"] / decisive, np.nan)
    columns = ["system", "segment_exchanges", "annotations", "games", "wins", "losses", "ties",
               "win_rate", "labelled_human"]
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


def annotation_time(annotations: pd.DataFrame, work_time_s: pd.Series | None = None
                    ) -> pd.DataFrame:
    """Median (and mean) seconds per segment annotation, by segment length.

    Columns segment_exchanges, segment_annotations, timed, implausible, median_elapsed_s,
    mean_elapsed_s. Medians are the figure to read: sessions left open give means of days.
    Implausible times (:func:`implausible_times`) are counted and left out, as are rows without
    a time.
    """
    seg = segment_annotations(annotations)
    bad = implausible_times(seg, work_time_s)
    seg = seg.assign(implausible=bad, elapsed_s=seg["elapsed_s"].where(~bad))
    table = (seg.groupby("segment_exchanges", sort=True)
             .agg(segment_annotations=("elapsed_s", "size"), timed=("elapsed_s", "count"),
                  implausible=("implausible", "sum"), median_elapsed_s=("elapsed_s", "median"),
                  mean_elapsed_s=("elapsed_s", "mean"))
             .reset_index())
    table["implausible"] = table["implausible"].astype(int)
    return table


def win_rate_figure(table: pd.DataFrame, order: list[str]):
    """A figure drawer: heatmap of win_rate(row system over column system); * marks adjusted
    p < 0.05 (p_adjusted where the table has it)."""
    def draw(path: Path) -> None:
        from matplotlib.figure import Figure  # no pyplot: no global state, renders with Agg

        names = list(order) + sorted(set(table["system_a"]) - set(order))
        at = {s: i for i, s in enumerate(names)}
        grid = np.full((len(names), len(names)), np.nan)
        stars = np.zeros_like(grid, dtype=bool)
        for row in table.itertuples(index=False):
            grid[at[row.system_a], at[row.system_b]] = row.win_rate
            stars[at[row.system_a], at[row.system_b]] = getattr(row, "p_adjusted", row.p_value) < 0.05
        fig = Figure(figsize=(1.5 + 0.7 * len(names), 1.2 + 0.6 * len(names)))
        ax = fig.subplots()
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="RdBu")
        for (i, j), value in np.ndenumerate(grid):
            if not np.isnan(value):
                ax.text(j, i, f"{value:.2f}{'*' if stars[i, j] else ''}", ha="center",
                        va="center", fontsize=8,
                        color="white" if abs(value - 0.5) > 0.35 else "black")
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
        ax.set_yticks(range(len(names)), names)
        ax.set_xlabel("opponent")
        ax.set_ylabel("system (win rate of this row; * adjusted p < 0.05)")
        fig.colorbar(image, ax=ax)
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=120)
    return draw


def _json_float(value) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def analyze_spot_the_bot(in_dir: str | Path, *, n_boot: int = 1000, seed: int = 0,
                         by: RankBy = "mu", env: TrueSkillEnv | None = None,
                         trueskill: TrueSkillSettings = DEFAULT_TRUESKILL,
                         resample: Resample = "game",
                         cluster: ClusterUnit = "conversation",
                         correction: Correction = DEFAULT_CORRECTION,
                         duplicates: DuplicatePolicy = DEFAULT_DUPLICATES,
                         survival: bool = False, n_imputations: int = 50,
                         stability: bool = False,
                         stability_sizes: range | list[int] = range(3, 46),
                         n_sub: int = 1000, stability_boot: int = 40) -> AnalysisResult:
    """Run METHODS §2 on ``in_dir``: win rates, feature win rates, clustered rankings and the
    annotator tables (agreement, correctness, segment lengths, annotation time).

    Settings (all recorded in the summary): ``trueskill`` (τ = 0 and the observed tie rate as
    draw probability by default; ``env`` overrides it whole), ``by`` and ``resample`` (the
    ranking bootstrap's unit: ``game`` as Dušek et al., or ``conversation`` / ``worker``),
    ``cluster`` (the unit resampled for win-rate intervals and, with ``survival``, the cluster
    of the robust log-rank and Cox variances; ``annotation`` = none), ``correction``
    (Bonferroni, Holm or none, for the chi-square, log-rank and Cox p-values), ``duplicates``
    (the policy for repeated annotations; the count is in the summary and in ``warnings``).

    ``survival=True`` adds ``survival`` (Turnbull curve per system), ``survival_tests``
    (generalized log-rank per pair; ``n_imputations``), ``cox`` (proportional hazards per
    system on the three features) and the ``survival`` figure (:mod:`hitkit.protocols.spot_the_bot.survival`).
    ``stability=True`` adds ``stability``, ``stability_smallest`` and the ``stability`` figure
    (:mod:`hitkit.protocols.spot_the_bot.stability`; ``n_sub`` subsamples with ``stability_boot`` resamples
    each per size in ``stability_sizes``: about 5 minutes per variant for 6 pairs of 45
    conversations with the defaults, one variant per system on top); it uses the same TrueSkill
    environment as the ranking."""
    check_correction(correction)
    if cluster not in CLUSTER_UNITS:
        raise ValueError(f"cluster={cluster!r}; use one of {', '.join(CLUSTER_UNITS)}")
    in_dir = Path(in_dir)
    annotations, duplicate_report = load_annotations(in_dir, duplicates=duplicates)
    if annotations.empty:
        raise InputError(in_dir / "annotations.csv", "no annotations from submitted or "
                         "approved assignments; nothing to analyse")
    played = games(annotations)
    if env is not None:  # an explicit environment: every setting given
        trueskill = TrueSkillSettings(env.mu, env.sigma, env.beta, env.tau, env.draw_probability)
    env = trueskill.env_for(played)
    pairs = win_rates(annotations, correction=correction, cluster=cluster, n_boot=n_boot,
                      seed=seed)
    ranked = rank_with_bootstrap(played, n_boot=n_boot, seed=seed, by=by, env=env,
                                 resample=resample)
    annotators = annotator_correctness(annotations)
    seg = segment_annotations(annotations)
    work_time = _work_times(in_dir, duplicates)
    times = annotation_time(annotations, work_time)
    implausible = implausible_times(seg, work_time)
    plausible = seg["elapsed_s"].where(~implausible)
    assignment_report = annotations.attrs.get("assignment_duplicates")
    warnings_out = duplicate_warnings([
        ("segment annotation key(s) (same worker, segment)", duplicate_report),
        (ASSIGNMENT_DUPLICATES, assignment_report)])
    if implausible.any():
        warnings_out.append(f"{int(implausible.sum())} annotation time(s) are implausible "
                            "(negative, a timestamp, or longer than the assignment) and were left "
                            "out of the time table")
    summary = {
        "annotations": len(annotations),
        "segment_annotations": len(seg),
        "games": len(played),
        "workers": int(annotations["worker_id"].nunique()),
        "conversations": len(annotations[["study", "conversation_id"]].drop_duplicates()),
        "systems": sorted(set(annotations["system"])),
        "correctness_mean": _json_float(annotators["correctness"].mean()),
        "correctness_mean_human_human": _json_float(annotators["hh_correctness"].mean()),
        "correctness_share_below_half": _json_float((annotators["correctness"] < 0.5).mean()),
        "median_elapsed_s": _json_float(plausible.median()),
        "mean_elapsed_s": _json_float(plausible.mean()),
        "implausible_elapsed": int(implausible.sum()),
        "ranked_by": by,
        "trueskill": trueskill.record(env),
        "ranking_resampled": resample,
        "interval_unit": cluster,
        "interval_method": INTERVAL_METHOD,
        "multiple_comparisons": correction,
        "duplicates": duplicate_report,
        "assignment_duplicates": assignment_report,
        "warnings": warnings_out,
        "seed": seed,
        "n_boot": n_boot,
    }
    result = AnalysisResult(
        tables={"win_rates": pairs, "feature_win_rates": feature_win_rates(annotations,
                                                                           correction=correction),
                "system_feature_win_rates": system_feature_win_rates(annotations),
                "ranking": ranked, "agreement": agreement(annotations),
                "annotators": annotators, "segment_lengths": segment_lengths(annotations),
                "annotation_time": times},
        summary=summary,
        figures={"win_rates": win_rate_figure(pairs, list(ranked["system"]))})
    if survival:
        # Imported here: survival and stability build on this module.
        from hitkit.protocols.spot_the_bot import survival as surv

        data = surv.survival_data(annotations)
        curves = surv.survival_curves(data)
        unit = None if cluster == "annotation" else cluster
        result.tables["survival"] = curves
        result.tables["survival_tests"] = surv.survival_tests(
            data, n_imputations=n_imputations, seed=seed, correction=correction, cluster=unit)
        result.tables["cox"] = surv.cox_by_system(data, cluster=unit, correction=correction)
        result.figures["survival"] = surv.survival_figure(curves)
        summary["survival"] = {"n_imputations": n_imputations, "bot_annotations": len(data),
                               "cluster": cluster}
    if stability:
        from hitkit.protocols.spot_the_bot import stability as stab

        table = stab.stability(annotations, stability_sizes, n_sub=n_sub, n_boot=stability_boot,
                               seed=seed, by=by, env=env)
        result.tables["stability"] = table
        result.tables["stability_smallest"] = stab.smallest_stable_size(table)
        result.figures["stability"] = stab.stability_figure(table)
        summary["stability"] = {"n_sub": n_sub, "n_boot": stability_boot,
                                "sizes": [int(x) for x in stability_sizes]}
    return result


def _work_times(in_dir: Path, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.Series | None:
    """work_time_s by assignment_id from ``assignments.csv``, or None without that table."""
    from hitkit.analysis.tables import read_assignments, table_exists

    if not table_exists(in_dir / "assignments.csv"):
        return None
    with warnings.catch_warnings():  # the same repeats were counted when the annotations were read
        warnings.simplefilter("ignore", DuplicateRowsWarning)
        assignments = read_assignments(in_dir, duplicates=duplicates)
    return assignments.set_index("assignment_id")["work_time_s"]


def study_trueskill(config=None) -> TrueSkillSettings:
    """The TrueSkill settings of the study file's ``spot_the_bot.trueskill`` section, or the
    defaults (:data:`DEFAULT_TRUESKILL`) without a study file."""
    section = getattr(config, "spot_the_bot", None) if config is not None else None
    return section.trueskill.settings() if section is not None else DEFAULT_TRUESKILL


def analyze(in_dir: str | Path, *, seed: int, config=None, options: dict, replicate_dir=None,
            stability: bool = False) -> AnalysisResult:
    """The registry's entry point: :func:`analyze_spot_the_bot` with ``hitkit analyze``'s options;
    without a ``trueskill`` option the study file's ``spot_the_bot.trueskill`` applies."""
    common = common_options(options)
    return analyze_spot_the_bot(in_dir, seed=seed, survival=True, stability=stability,
                                cluster=options.get("cluster", "conversation"),
                                resample=options.get("resample", "game"), by=options.get("rank_by", "mu"),
                                trueskill=options.get("trueskill", study_trueskill(config)), **common)


def cli_options(config, given: dict) -> dict:
    """``hitkit analyze``'s Spot The Bot options as :func:`analyze` takes them: the ``--trueskill-*`` and
    ``--draw-probability`` values override the study file's settings (:func:`study_trueskill`) one by one."""
    import dataclasses

    from hitkit.errors import HitkitError

    settings = {name: given[f"trueskill_{name}"] for name in ("mu", "sigma", "beta", "tau")
                if given.get(f"trueskill_{name}") is not None}
    try:
        if given.get("draw_probability") is not None:
            p = given["draw_probability"]
            settings["draw_probability"] = None if p == "observed" else float(p)
        trueskill = dataclasses.replace(study_trueskill(config), **settings)
    except ValueError as exc:
        raise HitkitError(f"TrueSkill settings: {exc}; e.g. --trueskill-tau 0 --draw-probability observed") from None
    return {"resample": given.get("resample"), "rank_by": given.get("rank_by"), "trueskill": trueskill}


def worker_qc(tables: dict[str, pd.DataFrame], config=None) -> tuple[str, dict[str, bool]] | None:
    """Which workers pass quality control so far (the dashboard's and the QC policy's check): those whom
    :func:`annotator_correctness` finds right on at least half the speakers; None before any annotation."""
    annotations = tables["annotations"]
    if annotations.empty:
        return None
    table = annotator_correctness(annotations)
    return ("labels at least half the speakers right (human as human, bot as bot)",
            {str(w): bool(c >= 0.5) for w, c in zip(table["worker_id"], table["correctness"])})
