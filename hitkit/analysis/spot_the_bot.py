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
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.base import AnalysisResult
from hitkit.analysis.tables import keep_counted, read_table
from hitkit.analysis.trueskill_vec import DEFAULT_ENV, TrueSkillEnv, rate_sequences
from hitkit.errors import InputError

RankBy = Literal["mu", "conservative"]

ANNOTATION_COLUMNS = ("study", "hit_id", "assignment_id", "worker_id", "conversation_id",
                      "segment_exchanges", "entity", "system", "label", "fluency",
                      "sensibleness", "specificity", "elapsed_s")
LABELS = ("human", "unsure", "bot")
LABEL_RANK = {"human": 2, "unsure": 1, "bot": 0}
FEATURES = ("fluency", "sensibleness", "specificity")
HUMAN = "human"
SEGMENT_KEY = ["study", "assignment_id", "conversation_id", "segment_exchanges"]
_FEATURE_VALUES = {"+1": 1, "1": 1, "0": 0, "-1": -1, "\u22121": -1}
WIN_COLUMNS = ["system_a", "system_b", "wins", "losses", "ties", "win_rate", "p_value"]

# Share of bootstrap ranks dropped at each end of a system's rank range (95 % range).
_TAIL = 0.025
# Bootstrap resamples are played in chunks of about this many games (all resamples together).
_BOOT_CELLS = 2_000_000
# Scores equal to this many decimals share a rank (symmetric data differs only by float noise).
_RANK_DECIMALS = 9


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
    bad = out.index[(elapsed.isna() & (text != "") & (text.str.lower() != "nan"))
                    | (elapsed < 0) | np.isinf(elapsed)]
    if len(bad):
        fail(bad[0], f"elapsed_s {out.at[bad[0], 'elapsed_s']!r} is not a number of seconds >= 0 "
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


def read_annotations(in_dir: str | Path) -> pd.DataFrame:
    """Read and check ``annotations.csv``; keep only rows of submitted or approved assignments.

    Without ``assignments.csv`` every row counts. Labels are lower-cased; entity,
    segment_exchanges and the three features become integers, elapsed_s a float (NaN when empty).
    Raises :class:`~hitkit.errors.InputError` naming the file and line for a missing file or
    column, a bad value, a segment annotation without both entities, preferences that are not
    mirror images, or an assignment missing from ``assignments.csv``.
    """
    in_dir = Path(in_dir)
    path = in_dir / "annotations.csv"
    table = _check_values(read_table(path, ANNOTATION_COLUMNS), path)
    _check_pairs(table, path)
    table = keep_counted(table, in_dir, path)
    extra = [c for c in table.columns if c not in ANNOTATION_COLUMNS]
    return table[list(ANNOTATION_COLUMNS) + extra].reset_index(drop=True)


def segment_annotations(annotations: pd.DataFrame) -> pd.DataFrame:
    """One row per segment annotation (both entities side by side), in order of first appearance.

    Columns: the segment key, worker_id, system_0, system_1, label_0, label_1, outcome (+1 entity
    0's label ranks higher, 0 equal, −1 lower), the three features as entity 0 answered them, and
    elapsed_s (the larger of the two rows' values).
    """
    missing = [c for c in ANNOTATION_COLUMNS if c not in annotations.columns]
    if missing:
        raise InputError("annotations", f"missing column(s) {missing}; expected "
                         f"{list(ANNOTATION_COLUMNS)}")
    table = _check_values(annotations[list(ANNOTATION_COLUMNS)], "annotations")
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


def _win_table(system_0: np.ndarray, system_1: np.ndarray, outcome: np.ndarray) -> pd.DataFrame:
    """WIN_COLUMNS per ordered pair from outcomes seen from entity 0 (+1 win, 0 tie, −1 loss)."""
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
    return pd.DataFrame(rows, columns=WIN_COLUMNS).sort_values(["system_a", "system_b"],
                                                               ignore_index=True)


def win_rates(annotations: pd.DataFrame) -> pd.DataFrame:
    """Wins, losses, ties, win rate and chi-square p per ordered pair of systems that met.

    A win of system_a over system_b is a segment annotation in which system_a's speaker got the
    higher label (human > unsure > bot); each annotator's annotation counts separately.
    win_rate = wins / (wins + losses), NaN when all tied; p_value =
    ``scipy.stats.chisquare([wins, losses])`` (equal split expected), 1.0 when all tied.
    """
    seg = segment_annotations(annotations)
    return _win_table(seg["system_0"].to_numpy(), seg["system_1"].to_numpy(),
                      seg["outcome"].to_numpy())


def feature_win_rates(annotations: pd.DataFrame) -> pd.DataFrame:
    """:func:`win_rates` from the fluency, sensibleness and specificity preferences, per feature."""
    seg = segment_annotations(annotations)
    tables = []
    for feature in FEATURES:
        table = _win_table(seg["system_0"].to_numpy(), seg["system_1"].to_numpy(),
                           seg[feature].to_numpy())
        table.insert(0, "feature", feature)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def games(annotations: pd.DataFrame) -> pd.DataFrame:
    """Ranking games in annotation order: winner, loser, drawn (ties are draws).

    One game per segment annotation between two different systems; for a draw, winner/loser are
    simply entity 0 / entity 1. Self-chat annotations are not games (a system cannot play itself).
    """
    seg = segment_annotations(annotations)
    seg = seg[seg["system_0"] != seg["system_1"]]
    lost = (seg["outcome"] < 0).to_numpy()
    s0, s1 = seg["system_0"].to_numpy(), seg["system_1"].to_numpy()
    return pd.DataFrame({"winner": np.where(lost, s1, s0), "loser": np.where(lost, s0, s1),
                         "drawn": (seg["outcome"] == 0).to_numpy()})


def _ranks(score: np.ndarray) -> np.ndarray:
    """Rank 1 = highest score along the last axis; equal scores share the lower rank."""
    return stats.rankdata(-np.round(score, _RANK_DECIMALS), method="min", axis=-1).astype(int)


def _rank_range(boot_ranks: np.ndarray, point_ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each system's 95 % rank range: drop ``floor(2.5 % · n_boot)`` bootstrap ranks at each end."""
    n_boot = boot_ranks.shape[0]
    if n_boot == 0:
        return point_ranks, point_ranks
    drop = math.floor(_TAIL * n_boot)
    ordered = np.sort(boot_ranks, axis=0)
    return ordered[drop], ordered[n_boot - 1 - drop]


def clusters(low: np.ndarray, high: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Order of systems and cluster label per system: ranges that overlap merge, transitively.

    Systems are grouped into connected components of overlapping (closed) rank ranges; the
    components are ordered by their best rank, systems within one by score (highest first). The
    label is the ``(first,last)`` position of the system's component in that order, e.g.
    ``(2,3)``. Returns (order as indices into the inputs, labels in input order).
    """
    n = len(low)
    by_low = sorted(range(n), key=lambda i: (low[i], high[i], -score[i]))
    component = np.zeros(n, dtype=int)
    current, reach = -1, -math.inf
    for i in by_low:
        if low[i] > reach:
            current += 1
            reach = high[i]
        else:
            reach = max(reach, high[i])
        component[i] = current
    order = sorted(range(n), key=lambda i: (component[i], -score[i]))
    labels = [""] * n
    position = 0
    for c in range(current + 1):
        members = [i for i in order if component[i] == c]
        for i in members:
            labels[i] = f"({position + 1},{position + len(members)})"
        position += len(members)
    return np.array(order, dtype=int), labels


def rank_with_bootstrap(games: pd.DataFrame, n_boot: int = 1000, seed: int = 0, *,
                        by: RankBy = "mu", env: TrueSkillEnv = DEFAULT_ENV) -> pd.DataFrame:
    """TrueSkill and win-rate rankings with bootstrap 95 % rank ranges and clusters.

    ``games`` has winner, loser, drawn (see :func:`games`), in the order they are played.
    TrueSkill point estimates play every game once in that order. The bootstrap draws ``n_boot``
    resamples of the games with replacement (``numpy.random.default_rng(seed)``) and plays each
    resample in the original order of its games (sorted draw indices): TrueSkill depends on game
    order, and this keeps the one order the data has rather than adding a random one. The same
    resamples give the win-rate ranking (a system's wins / (wins + losses) over all its games;
    0.5 in a resample where all its games tied or it played none). METHODS does not say which
    TrueSkill score to rank by: ``by="mu"`` (default) ranks by mean skill, ``by="conservative"``
    by mu − 3σ. Rank 1 = best; ranges drop 2.5 % of bootstrap ranks at each end; clusters merge
    overlapping ranges (:func:`clusters`). Rows are in TrueSkill cluster order.
    """
    if by not in ("mu", "conservative"):
        raise ValueError(f"by={by!r}; use 'mu' or 'conservative'")
    if n_boot < 0:
        raise ValueError(f"n_boot={n_boot!r}; use 0 (no ranges) or more")
    columns = ["system", "win_rate", "trueskill_mu", "trueskill_sigma", "rank_low", "rank_high",
               "cluster", "win_rate_rank_low", "win_rate_rank_high", "win_rate_cluster"]
    systems = sorted(set(games["winner"]) | set(games["loser"]))
    if not systems:
        return pd.DataFrame(columns=columns)
    index = {s: i for i, s in enumerate(systems)}
    k = len(systems)
    winner = games["winner"].map(index).to_numpy()
    loser = games["loser"].map(index).to_numpy()
    drawn = games["drawn"].to_numpy().astype(bool)
    if np.any(winner == loser):
        raise InputError("games", "a game has the same system on both sides; a system cannot "
                         "play itself")

    def win_rate(w: np.ndarray, l: np.ndarray, d: np.ndarray) -> np.ndarray:
        rows = np.arange(w.shape[0])[:, None] * k
        won = np.bincount((rows + w)[~d], minlength=w.shape[0] * k).reshape(-1, k)
        lost = np.bincount((rows + l)[~d], minlength=w.shape[0] * k).reshape(-1, k)
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
    for start in range(0, n_boot, chunk):
        idx = np.sort(rng.integers(0, n, size=(min(chunk, n_boot - start), n)), axis=1)
        boot_mu, boot_sigma = rate_sequences(winner[idx], loser[idx], drawn[idx], k, env)
        ts_ranks.append(_ranks(score_of(boot_mu, boot_sigma)))
        wr_ranks.append(_ranks(win_rate(winner[idx], loser[idx], drawn[idx])))
    empty = np.zeros((0, k), dtype=int)
    ts_low, ts_high = _rank_range(np.concatenate(ts_ranks or [empty]), _ranks(score_of(mu, sigma)))
    wr_low, wr_high = _rank_range(np.concatenate(wr_ranks or [empty]), _ranks(point_rate))
    order, ts_cluster = clusters(ts_low, ts_high, score_of(mu, sigma))
    _, wr_cluster = clusters(wr_low, wr_high, point_rate)
    table = pd.DataFrame({
        "system": systems, "win_rate": point_rate, "trueskill_mu": mu, "trueskill_sigma": sigma,
        "rank_low": ts_low.astype(int), "rank_high": ts_high.astype(int), "cluster": ts_cluster,
        "win_rate_rank_low": wr_low.astype(int), "win_rate_rank_high": wr_high.astype(int),
        "win_rate_cluster": wr_cluster,
    })
    return table.iloc[order].reset_index(drop=True)[columns]


def ranking(annotations: pd.DataFrame, n_boot: int = 1000, seed: int = 0, *,
            by: RankBy = "mu", env: TrueSkillEnv = DEFAULT_ENV) -> pd.DataFrame:
    """:func:`rank_with_bootstrap` on the :func:`games` of ``annotations``."""
    return rank_with_bootstrap(games(annotations), n_boot, seed, by=by, env=env)


def agreement(annotations: pd.DataFrame) -> pd.DataFrame:
    """Annotator agreement per system and label: of the pairs where one annotator gave it, both did.

    A pair is two annotations (different assignments) of the same speaker in the same segment
    (study, conversation, segment length, entity). For label L, a speaker-segment annotated n times
    with m labels L gives C(m, 2) pairs where both gave L out of C(n, 2) − C(n − m, 2) where at
    least one did. Columns: system, label, pairs (at least one gave it), both, agreement = both /
    pairs (NaN without pairs). The paper reads it against a chance level of 0.33.
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
    by_system = (pd.concat({"both": both.groupby(level="system").sum().stack(),
                            "pairs": some.groupby(level="system").sum().stack()}, axis=1)
                 .rename_axis(["system", "label"]).reset_index())
    by_system["label"] = pd.Categorical(by_system["label"], list(LABELS), ordered=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        by_system["agreement"] = np.where(by_system["pairs"] > 0,
                                          by_system["both"] / by_system["pairs"], np.nan)
    table = by_system.sort_values(["system", "label"], ignore_index=True)
    table["label"] = table["label"].astype(str)
    table[["pairs", "both"]] = table[["pairs", "both"]].astype(int)
    return table[["system", "label", "pairs", "both", "agreement"]]


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


def annotation_time(annotations: pd.DataFrame) -> pd.DataFrame:
    """Mean and median seconds per segment annotation, by segment length (rows without a time
    are left out of the means): segment_exchanges, segment_annotations, timed, mean_elapsed_s,
    median_elapsed_s."""
    seg = segment_annotations(annotations)
    table = (seg.groupby("segment_exchanges", sort=True)["elapsed_s"]
             .agg(segment_annotations="size", timed="count", mean_elapsed_s="mean",
                  median_elapsed_s="median")
             .reset_index())
    return table


def win_rate_figure(table: pd.DataFrame, order: list[str]):
    """A figure drawer: heatmap of win_rate(row system over column system); * marks p < 0.05."""
    def draw(path: Path) -> None:
        from matplotlib.figure import Figure  # no pyplot: no global state, renders with Agg

        names = list(order) + sorted(set(table["system_a"]) - set(order))
        at = {s: i for i, s in enumerate(names)}
        grid = np.full((len(names), len(names)), np.nan)
        stars = np.zeros_like(grid, dtype=bool)
        for row in table.itertuples(index=False):
            grid[at[row.system_a], at[row.system_b]] = row.win_rate
            stars[at[row.system_a], at[row.system_b]] = row.p_value < 0.05
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
        ax.set_ylabel("system (win rate of this row; * p < 0.05)")
        fig.colorbar(image, ax=ax)
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=120)
    return draw


def _json_float(value) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def analyze_spot_the_bot(in_dir: str | Path, *, n_boot: int = 1000, seed: int = 0,
                         by: RankBy = "mu", env: TrueSkillEnv = DEFAULT_ENV,
                         survival: bool = False, n_imputations: int = 50,
                         stability: bool = False,
                         stability_sizes: range | list[int] = range(3, 46),
                         n_sub: int = 1000, stability_boot: int = 40) -> AnalysisResult:
    """Run METHODS §2 on ``in_dir``: win rates, feature win rates, clustered rankings and the
    annotator tables (agreement, correctness, segment lengths, annotation time).

    ``survival=True`` adds ``survival`` (Turnbull curve per system), ``survival_tests``
    (generalized log-rank per pair, Holm; ``n_imputations``), ``cox`` (proportional hazards per
    system on the three features) and the ``survival`` figure (:mod:`hitkit.analysis.survival`).
    ``stability=True`` adds ``stability``, ``stability_smallest`` and the ``stability`` figure
    (:mod:`hitkit.analysis.stability`; ``n_sub`` subsamples with ``stability_boot`` resamples
    each per size in ``stability_sizes``: about 5 minutes per variant for 6 pairs of 45
    conversations with the defaults, one variant per system on top)."""
    annotations = read_annotations(in_dir)
    if annotations.empty:
        raise InputError(Path(in_dir) / "annotations.csv", "no annotations from submitted or "
                         "approved assignments; nothing to analyse")
    pairs = win_rates(annotations)
    ranked = ranking(annotations, n_boot=n_boot, seed=seed, by=by, env=env)
    annotators = annotator_correctness(annotations)
    seg = segment_annotations(annotations)
    summary = {
        "annotations": len(annotations),
        "segment_annotations": len(seg),
        "games": int((seg["system_0"] != seg["system_1"]).sum()),
        "workers": int(annotations["worker_id"].nunique()),
        "conversations": len(annotations[["study", "conversation_id"]].drop_duplicates()),
        "systems": sorted(set(annotations["system"])),
        "correctness_mean": _json_float(annotators["correctness"].mean()),
        "correctness_mean_human_human": _json_float(annotators["hh_correctness"].mean()),
        "correctness_share_below_half": _json_float((annotators["correctness"] < 0.5).mean()),
        "mean_elapsed_s": _json_float(seg["elapsed_s"].mean()),
        "ranked_by": by,
        "trueskill": {"mu": env.mu, "sigma": env.sigma, "beta": env.beta, "tau": env.tau,
                      "draw_probability": env.draw_probability},
        "seed": seed,
        "n_boot": n_boot,
    }
    result = AnalysisResult(
        tables={"win_rates": pairs, "feature_win_rates": feature_win_rates(annotations),
                "ranking": ranked, "agreement": agreement(annotations),
                "annotators": annotators, "segment_lengths": segment_lengths(annotations),
                "annotation_time": annotation_time(annotations)},
        summary=summary,
        figures={"win_rates": win_rate_figure(pairs, list(ranked["system"]))})
    if survival:
        # Imported here: survival and stability build on this module.
        from hitkit.analysis import survival as surv

        data = surv.survival_data(annotations)
        curves = surv.survival_curves(data)
        result.tables["survival"] = curves
        result.tables["survival_tests"] = surv.survival_tests(data, n_imputations=n_imputations,
                                                              seed=seed)
        result.tables["cox"] = surv.cox_by_system(data)
        result.figures["survival"] = surv.survival_figure(curves)
        summary["survival"] = {"n_imputations": n_imputations, "bot_annotations": len(data)}
    if stability:
        from hitkit.analysis import stability as stab

        table = stab.stability(annotations, stability_sizes, n_sub=n_sub, n_boot=stability_boot,
                               seed=seed, by=by, env=env)
        result.tables["stability"] = table
        result.tables["stability_smallest"] = stab.smallest_stable_size(table)
        result.figures["stability"] = stab.stability_figure(table)
        summary["stability"] = {"n_sub": n_sub, "n_boot": stability_boot,
                                "sizes": [int(x) for x in stability_sizes]}
    return result
