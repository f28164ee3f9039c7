"""Spot The Bot ranking stability (METHODS §2, "Stability"): how many conversations are enough.

For each number n of conversations per pair of systems, draw ``n_sub`` subsamples of n
conversations from every pair, rank the systems of each subsample with the clustered TrueSkill
ranking of :mod:`hitkit.analysis.spot_the_bot`, and report how often the most frequent clustered
ranking comes up. The smallest n at which that share reaches 95 % is how many conversations per
pair the ranking needs. The leave-one-system-out variant repeats this without each system in turn.

Choices METHODS leaves open, made here:

- **Sampling.** Conversations are drawn without replacement within each pair; where a pair has
  fewer than n conversations, its n are drawn with replacement (column ``with_replacement``), so
  such rows say how the ranking would vary with n conversations like the ones there are.
- **Bootstrap per subsample.** Each subsample's clustered ranking needs rank ranges, i.e. its own
  bootstrap; with 1000 subsamples per n, ``n_boot`` = 40 resamples per subsample (default) keeps a
  run to minutes. Ranges drop ``floor(2.5 % · n_boot)`` ranks at each end, as in
  :func:`~hitkit.analysis.spot_the_bot.rank_with_bootstrap` (with 40: the 2nd to 39th of 40).
  The ranking is ``by`` TrueSkill mu (default) or mu − 3σ; games are played in annotation order.
- **Identity of a ranking.** Two clustered rankings are the same when they put the same systems
  in the same clusters at the same positions (order inside a cluster does not count), written
  like ``(1,1) hard | (2,3) twin1 twin2 | (4,4) easy``.

All subsamples and their resamples are played together as replicates of
:func:`hitkit.analysis.trueskill_vec.play`, longest first, so a step only touches the replicates
that still have games.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.spot_the_bot import (_TAIL, RankBy, _ranks, clusters,
                                          segment_annotations)
from hitkit.analysis.trueskill_vec import DEFAULT_ENV, TrueSkillEnv, play

STABILITY_COLUMNS = ["left_out", "conversations_per_pair", "subsamples", "n_boot",
                     "with_replacement", "rankings", "top_ranking", "top_share"]
ALL_SYSTEMS = "none"
"""``left_out`` of the rows that keep every system."""
# Replicate × game cells per chunk of subsamples (a few 8-byte arrays of this size, ~200 MB).
_CELLS = 8_000_000


def conversation_games(annotations: pd.DataFrame) -> pd.DataFrame:
    """Ranking games (as :func:`~hitkit.analysis.spot_the_bot.games`) with their conversation.

    Columns winner, loser, drawn, conversation (study and conversation_id), pair (the two
    systems, alphabetical, joined by `` vs ``); in annotation order.
    """
    seg = segment_annotations(annotations)
    seg = seg[seg["system_0"] != seg["system_1"]]
    lost = (seg["outcome"] < 0).to_numpy()
    s0, s1 = seg["system_0"].to_numpy(), seg["system_1"].to_numpy()
    first, second = np.minimum(s0, s1), np.maximum(s0, s1)
    return pd.DataFrame({
        "winner": np.where(lost, s1, s0), "loser": np.where(lost, s0, s1),
        "drawn": (seg["outcome"] == 0).to_numpy(),
        "conversation": (seg["study"].astype(str) + "/" + seg["conversation_id"].astype(str))
        .to_numpy(),
        "pair": np.char.add(np.char.add(first.astype(str), " vs "), second.astype(str)),
    })


def _ranking_label(systems: list[str], labels: list[str], order: np.ndarray) -> str:
    groups: dict[str, list[str]] = {}
    for i in order:
        groups.setdefault(labels[i], []).append(systems[i])
    return " | ".join(f"{label} {' '.join(sorted(names))}" for label, names in groups.items())


def _subsample_counts(conv_of_pair: list[np.ndarray], n_conv: int, size: int, n_sub: int,
                      rng: np.random.Generator) -> np.ndarray:
    """How often each conversation is in each subsample: [n_sub, n_conv]."""
    counts = np.zeros((n_sub, n_conv), dtype=np.int32)
    rows = np.arange(n_sub)[:, None]
    for convs in conv_of_pair:
        if size <= len(convs):
            chosen = np.argsort(rng.random((n_sub, len(convs))), axis=1)[:, :size]
        else:
            chosen = rng.integers(0, len(convs), size=(n_sub, size))
        np.add.at(counts, (np.broadcast_to(rows, chosen.shape), convs[chosen]), 1)
    return counts


def _clustered_rankings(games_of_sub: list[np.ndarray], winner: np.ndarray, loser: np.ndarray,
                        drawn: np.ndarray, systems: list[str], n_boot: int,
                        rng: np.random.Generator, by: RankBy, env: TrueSkillEnv) -> list[str]:
    """The clustered TrueSkill ranking of each subsample (game index lists), as labels."""
    k = len(systems)
    lengths = np.array([len(g) for g in games_of_sub])
    n_rows = len(lengths) * (n_boot + 1)
    longest = int(lengths.max())
    # Row r plays subsample r // (n_boot + 1): first in order (point estimate), then resamples.
    sub_of_row = np.repeat(np.arange(len(lengths)), n_boot + 1)
    row_len = lengths[sub_of_row]
    padded = np.zeros((len(lengths), longest), dtype=np.int64)
    for s, g in enumerate(games_of_sub):
        padded[s, :len(g)] = g
    column = np.arange(longest)[None]
    draw = np.floor(rng.random((n_rows, longest)) * row_len[:, None]).astype(np.int64)
    draw[np.arange(n_rows) % (n_boot + 1) == 0] = column  # the point estimate's own order
    draw = np.where(column < row_len[:, None], draw, longest)
    draw.sort(axis=1)  # resampled games keep the data's order, as in rank_with_bootstrap
    by_length = np.argsort(-row_len, kind="stable")
    draw, sub_of_row, row_len = draw[by_length], sub_of_row[by_length], row_len[by_length]
    game = padded[sub_of_row[:, None], np.minimum(draw, longest - 1)]
    mu = np.full((n_rows, k), float(env.mu))
    var = np.full((n_rows, k), float(env.sigma) ** 2)
    # Rows are longest first, so the rows with a game t are a prefix: those longer than t.
    active = np.searchsorted(-row_len, -np.arange(longest), side="left")
    for t in range(longest):
        stop = int(active[t])
        g = game[:stop, t]
        play(mu[:stop], var[:stop], winner[g], loser[g], drawn[g], env)
    score = mu if by == "mu" else mu - 3 * np.sqrt(var)
    back = np.empty(n_rows, dtype=np.int64)
    back[by_length] = np.arange(n_rows)
    score = score[back].reshape(len(lengths), n_boot + 1, k)
    ranks = _ranks(score[:, 1:])
    drop = math.floor(_TAIL * n_boot)
    ordered = np.sort(ranks, axis=1)
    low, high = ordered[:, drop], ordered[:, n_boot - 1 - drop]
    out = []
    for s in range(len(lengths)):
        order, labels = clusters(low[s], high[s], score[s, 0])
        out.append(_ranking_label(systems, labels, order))
    return out


def _stability_rows(games: pd.DataFrame, sizes: Iterable[int], n_sub: int, n_boot: int,
                    seed_key: list[int], by: RankBy, env: TrueSkillEnv) -> list[dict]:
    systems = sorted(set(games["winner"]) | set(games["loser"]))
    index = {s: i for i, s in enumerate(systems)}
    winner = games["winner"].map(index).to_numpy()
    loser = games["loser"].map(index).to_numpy()
    drawn = games["drawn"].to_numpy().astype(bool)
    conv_codes, conv_of_game = np.unique(games["conversation"].to_numpy(), return_inverse=True)
    pair_of_conv = pd.Series(games["pair"].to_numpy()).groupby(conv_of_game).first()
    conv_of_pair = [np.array(ix, dtype=np.int64)
                    for _, ix in pair_of_conv.groupby(pair_of_conv.to_numpy()).groups.items()]
    fewest = min(len(c) for c in conv_of_pair)
    rows = []
    for size in sizes:
        rng = np.random.default_rng([*seed_key, size])
        counts = _subsample_counts(conv_of_pair, len(conv_codes), size, n_sub, rng)
        per_sub = counts[:, conv_of_game]
        games_of_sub = [np.repeat(np.arange(len(winner)), c) for c in per_sub]
        per_row = max(1, _CELLS // (max(len(g) for g in games_of_sub) * (n_boot + 1)))
        labels: list[str] = []
        for start in range(0, n_sub, per_row):
            labels += _clustered_rankings(games_of_sub[start:start + per_row], winner, loser,
                                          drawn, systems, n_boot, rng, by, env)
        top, count = Counter(labels).most_common(1)[0]
        rows.append({"conversations_per_pair": size, "subsamples": n_sub, "n_boot": n_boot,
                     "with_replacement": size > fewest, "rankings": len(set(labels)),
                     "top_ranking": top, "top_share": count / n_sub})
    return rows


def stability(annotations: pd.DataFrame, sizes: Iterable[int] = range(3, 46), *,
              n_sub: int = 1000, n_boot: int = 40, seed: int = 0, leave_one_out: bool = True,
              by: RankBy = "mu", env: TrueSkillEnv = DEFAULT_ENV) -> pd.DataFrame:
    """Share of the most frequent clustered ranking per number of conversations per pair.

    Columns: left_out (``none``, or the system left out), conversations_per_pair, subsamples,
    n_boot, with_replacement, rankings (distinct clustered rankings seen), top_ranking,
    top_share. ``leave_one_out`` adds the rows without each system (needs 3 or more systems).
    Seeded: each (variant, size) draws from ``numpy.random.default_rng([seed, variant, size])``.
    See the module docstring for the sampling and bootstrap choices.
    """
    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes={sizes!r}; give one or more numbers of conversations >= 1")
    if n_sub < 1 or n_boot < 1:
        raise ValueError(f"n_sub={n_sub!r}, n_boot={n_boot!r}; both must be >= 1")
    if by not in ("mu", "conservative"):
        raise ValueError(f"by={by!r}; use 'mu' or 'conservative'")
    games = conversation_games(annotations)
    systems = sorted(set(games["winner"]) | set(games["loser"]))
    if len(systems) < 2:
        return pd.DataFrame(columns=STABILITY_COLUMNS)
    variants = [(ALL_SYSTEMS, games)]
    if leave_one_out and len(systems) > 2:
        variants += [(s, games[(games["winner"] != s) & (games["loser"] != s)]) for s in systems]
    rows = []
    for v, (left_out, subset) in enumerate(variants):
        if subset.empty:  # the left-out system was in every pair: nothing left to rank
            continue
        rows += [{"left_out": left_out, **row} for row in
                 _stability_rows(subset, sizes, n_sub, n_boot, [seed, v], by, env)]
    return pd.DataFrame(rows, columns=STABILITY_COLUMNS)


def smallest_stable_size(table: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per left_out: the smallest conversations_per_pair whose top_share reaches ``level``
    (NaN when none does). Columns left_out, smallest_size."""
    reached = table[table["top_share"] >= level]
    smallest = reached.groupby("left_out", sort=False)["conversations_per_pair"].min()
    out = pd.DataFrame({"left_out": pd.unique(table["left_out"])})
    out["smallest_size"] = out["left_out"].map(smallest).astype(float)
    return out


def stability_figure(table: pd.DataFrame, level: float = 0.95):
    """A figure drawer: top_share against conversations per pair, one line per variant."""
    def draw(path: Path) -> None:
        from matplotlib.figure import Figure  # no pyplot: no global state, renders with Agg

        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        for left_out, rows in table.groupby("left_out", sort=False):
            label = "all systems" if left_out == ALL_SYSTEMS else f"without {left_out}"
            ax.plot(rows["conversations_per_pair"], rows["top_share"], marker=".",
                    label=label, linewidth=2 if left_out == ALL_SYSTEMS else 1)
        ax.axhline(level, color="grey", linestyle="--", linewidth=1)
        ax.set_xlabel("conversations per pair")
        ax.set_ylabel("share of the most frequent clustered ranking")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=120)
    return draw
