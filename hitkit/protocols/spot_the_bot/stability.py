"""Spot The Bot ranking stability (METHODS §2, "Stability"): how many conversations are enough.

For each number n of conversations per pair of systems, draw ``n_sub`` subsamples of n
conversations from every pair, rank the systems of each subsample with the clustered TrueSkill
ranking of :mod:`hitkit.protocols.spot_the_bot.analysis`, and report how often the most frequent clustered
ranking comes up. The smallest n at which that share reaches 95 % is how many conversations per
pair the ranking needs. The leave-one-system-out variant repeats this without each system in turn.

Choices METHODS leaves open, made here:

- **Sampling.** Conversations are drawn without replacement within each pair; where a pair has
  fewer than n conversations, its n are drawn with replacement (column ``with_replacement``), so
  such rows say how the ranking would vary with n conversations like the ones there are.
- **Bootstrap per subsample.** Each subsample's clustered ranking needs rank ranges, i.e. its own
  bootstrap; with 1000 subsamples per n, ``n_boot`` = 40 resamples per subsample (default) keeps a
  run to minutes. Ranges drop ``floor(2.5 % · n_boot)`` ranks at each end, as in
  :func:`~hitkit.protocols.spot_the_bot.analysis.rank_with_bootstrap` (with 40: the 2nd to 39th of 40).
  The ranking is ``by`` TrueSkill mu (default) or mu − 3σ; games are played in annotation order.
- **Identity of a ranking.** Two clustered rankings are the same when they put the same systems
  in the same clusters at the same positions (order inside a cluster does not count), written
  like ``(1,1) hard | (2,3) twin1 twin2 | (4,4) easy``.

All subsamples of one n and their resamples are played together, in batches of up to
``_CELLS`` replicate × game cells (at n = 45 with 6 systems, ~16 000 replicates a batch), as
replicates of :func:`hitkit.analysis.trueskill_vec.play_flat`: games stay sequential within a
replicate, but each game is one numpy step over all replicates of the batch. Each game is stored
as one small code (winner, loser, drawn) in a game-major matrix, so a step reads one contiguous
column; replicates are ordered longest first, so a step only touches those that still have games.
With 6 systems and 45 conversations per pair, sizes 3–45 × 1000 subsamples take about 4 CPU
minutes on one core (6 minutes' wall time on a shared, busy 2-core machine;
``benchmarks/ranking_speed.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from hitkit.analysis.ranking import TAIL, clusters, ranks
from hitkit.analysis.trueskill_vec import DEFAULT_TRUESKILL, TrueSkillEnv, play_flat
from hitkit.progress import progress
from hitkit.protocols.spot_the_bot.ranking import RankBy
from hitkit.protocols.spot_the_bot.reading import segment_annotations

STABILITY_COLUMNS = [
    "left_out",
    "conversations_per_pair",
    "subsamples",
    "n_boot",
    "with_replacement",
    "rankings",
    "top_ranking",
    "top_share",
]
ALL_SYSTEMS = "none"
"""``left_out`` of the rows that keep every system."""
# Replicate × game cells per batch of subsamples played together (2 bytes a cell, ~130 MB):
# large batches keep numpy's per-step overhead small against the work of a step.
_CELLS = 64_000_000
# Cells built at a time while resampling a batch (several 8-byte arrays of this size, ~200 MB).
_BUILD_CELLS = 4_000_000


def conversation_games(annotations: pd.DataFrame) -> pd.DataFrame:
    """Ranking games (as :func:`~hitkit.protocols.spot_the_bot.analysis.games`) with their conversation.

    Columns winner, loser, drawn, conversation (study and conversation_id), pair (the two
    systems, alphabetical, joined by `` vs ``); in annotation order.
    """
    seg = segment_annotations(annotations)
    seg = seg[seg["system_0"] != seg["system_1"]]
    lost = (seg["outcome"] < 0).to_numpy()
    s0, s1 = seg["system_0"].to_numpy(), seg["system_1"].to_numpy()
    first, second = np.minimum(s0, s1), np.maximum(s0, s1)
    return pd.DataFrame(
        {
            "winner": np.where(lost, s1, s0),
            "loser": np.where(lost, s0, s1),
            "drawn": (seg["outcome"] == 0).to_numpy(),
            "conversation": (seg["study"].astype(str) + "/" + seg["conversation_id"].astype(str)).to_numpy(),
            "pair": np.char.add(np.char.add(first.astype(str), " vs "), second.astype(str)),
        }
    )


def _ranking_label(systems: list[str], labels: list[str], order: np.ndarray) -> str:
    groups: dict[str, list[str]] = {}
    for i in order:
        groups.setdefault(labels[i], []).append(systems[i])
    return " | ".join(f"{label} {' '.join(sorted(names))}" for label, names in groups.items())


def _subsample_counts(
    conv_of_pair: list[np.ndarray], n_conv: int, size: int, n_sub: int, rng: np.random.Generator
) -> np.ndarray:
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


def _resample_codes(codes_of_sub: np.ndarray, lengths: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """The game codes each row plays: [n_sub * (n_boot + 1), longest], padded with 0.

    ``codes_of_sub`` is [n_sub, longest]: each subsample's games in the data's order, padded.
    Row r belongs to subsample r // (n_boot + 1): first that subsample's own order (the point
    estimate), then ``n_boot`` resamples with replacement, each played in the data's order, as
    in rank_with_bootstrap. The order is had by counting rather than sorting: a resample is the
    subsample's games, each repeated as often as it was drawn.
    """
    n_sub, longest = codes_of_sub.shape
    column = np.arange(longest)
    boot_len = np.repeat(lengths, n_boot)
    n_boot_rows = n_sub * n_boot
    cell = np.floor(rng.random((n_boot_rows, longest)) * boot_len[:, None]).astype(np.int64)
    cell += np.arange(n_boot_rows)[:, None] * longest
    full = bool((lengths == longest).all())
    valid = None if full else column[None] < boot_len[:, None]
    counts = np.bincount(cell.ravel() if full else cell[valid], minlength=n_boot_rows * longest)
    del cell
    played = np.repeat(np.repeat(codes_of_sub, n_boot, axis=0).ravel(), counts)
    out = np.zeros((n_sub, n_boot + 1, longest), dtype=codes_of_sub.dtype)
    out[:, 0] = codes_of_sub
    if full:
        out[:, 1:] = played.reshape(n_sub, n_boot, longest)
    else:
        boot = np.zeros((n_boot_rows, longest), dtype=codes_of_sub.dtype)
        boot[valid] = played
        out[:, 1:] = boot.reshape(n_sub, n_boot, longest)
    return out.reshape(-1, longest)


def _clustered_rankings(
    games_of_sub: list[np.ndarray],
    code: np.ndarray,
    systems: list[str],
    n_boot: int,
    rng: np.random.Generator,
    by: RankBy,
    env: TrueSkillEnv,
) -> list[str]:
    """The clustered TrueSkill ranking of each subsample (game index lists), as labels.

    ``code`` is each game's code, (winner · k + loser) · 2 + drawn.
    """
    k = len(systems)
    rows_per_sub = n_boot + 1
    # Subsamples longest first, so the rows that still have a game t are a prefix.
    by_length = np.argsort([-len(g) for g in games_of_sub], kind="stable")
    lengths = np.array([len(games_of_sub[i]) for i in by_length])
    n_sub, longest = len(lengths), int(lengths.max())
    n_rows = n_sub * rows_per_sub
    codes_of_sub = np.zeros((n_sub, longest), dtype=code.dtype)
    for s, i in enumerate(by_length):
        codes_of_sub[s, : lengths[s]] = code[games_of_sub[i]]
    # Stored game-major ([longest, n_rows], 1–2 bytes a cell): step t reads one contiguous
    # column. Built a few subsamples at a time to bound the resampling's temporary arrays.
    codes = np.empty((longest, n_rows), dtype=code.dtype)
    part = max(1, _BUILD_CELLS // (longest * rows_per_sub))
    for a in range(0, n_sub, part):
        b = min(n_sub, a + part)
        codes[:, a * rows_per_sub : b * rows_per_sub] = _resample_codes(codes_of_sub[a:b], lengths[a:b], n_boot, rng).T
    active = np.searchsorted(-np.repeat(lengths, rows_per_sub), -np.arange(longest), side="left")
    base = np.arange(n_rows) * k
    pair_code, drawn_of = np.divmod(np.arange(2 * k * k), 2)
    first_of, second_of = np.divmod(pair_code, k)
    drawn_of = drawn_of.astype(bool)
    any_drawn = np.zeros(longest, dtype=bool)
    for a in range(0, n_rows, 1 << 16):  # which steps have a draw at all, in bounded pieces
        any_drawn |= drawn_of[codes[:, a : a + (1 << 16)]].any(axis=1)
    mu = np.full(n_rows * k, float(env.mu))
    var = np.full(n_rows * k, float(env.sigma) ** 2)
    for t in range(longest):
        stop = int(active[t])
        c = codes[t, :stop]
        play_flat(
            mu, var, base[:stop] + first_of[c], base[:stop] + second_of[c], drawn_of[c] if any_drawn[t] else None, env
        )
    means, variances = mu.reshape(n_sub, rows_per_sub, k), var.reshape(n_sub, rows_per_sub, k)
    score = means if by == "mu" else means - 3 * np.sqrt(variances)
    boot_ranks = ranks(score[:, 1:])
    drop = math.floor(TAIL * n_boot)
    ordered = np.sort(boot_ranks, axis=1)
    low, high = ordered[:, drop], ordered[:, n_boot - 1 - drop]
    out = [""] * n_sub
    for s in range(n_sub):
        order, labels = clusters(low[s], high[s], score[s, 0])
        out[by_length[s]] = _ranking_label(systems, labels, order)
    return out


def _stability_rows(
    games: pd.DataFrame,
    sizes: Iterable[int],
    n_sub: int,
    n_boot: int,
    seed_key: list[int],
    by: RankBy,
    env: TrueSkillEnv,
    label: str = "",
) -> list[dict]:
    systems = sorted(set(games["winner"]) | set(games["loser"]))
    index = {s: i for i, s in enumerate(systems)}
    winner = games["winner"].map(index).to_numpy()
    loser = games["loser"].map(index).to_numpy()
    drawn = games["drawn"].to_numpy().astype(bool)
    n_codes = 2 * len(systems) ** 2
    code = ((winner * len(systems) + loser) * 2 + drawn).astype(
        np.uint8 if n_codes <= 256 else np.uint16 if n_codes <= 65536 else np.int64
    )
    conv_codes, conv_of_game = np.unique(games["conversation"].to_numpy(), return_inverse=True)
    pair_of_conv = pd.Series(games["pair"].to_numpy()).groupby(conv_of_game).first()
    conv_of_pair = [
        np.array(ix, dtype=np.int64) for _, ix in pair_of_conv.groupby(pair_of_conv.to_numpy()).groups.items()
    ]
    fewest = min(len(c) for c in conv_of_pair)
    rows = []
    sizes = list(sizes)
    for size in progress(sizes, f"stability {label}", total=len(sizes), unit="size"):
        rng = np.random.default_rng([*seed_key, size])
        counts = _subsample_counts(conv_of_pair, len(conv_codes), size, n_sub, rng)
        per_sub = counts[:, conv_of_game]
        games_of_sub = [np.repeat(np.arange(len(winner)), c) for c in per_sub]
        per_batch = max(1, _CELLS // (max(len(g) for g in games_of_sub) * (n_boot + 1)))
        labels: list[str] = []
        for start in range(0, n_sub, per_batch):
            labels += _clustered_rankings(games_of_sub[start : start + per_batch], code, systems, n_boot, rng, by, env)
        top, count = Counter(labels).most_common(1)[0]
        rows.append(
            {
                "conversations_per_pair": size,
                "subsamples": n_sub,
                "n_boot": n_boot,
                "with_replacement": size > fewest,
                "rankings": len(set(labels)),
                "top_ranking": top,
                "top_share": count / n_sub,
            }
        )
    return rows


def stability(
    annotations: pd.DataFrame,
    sizes: Iterable[int] = range(3, 46),
    *,
    n_sub: int = 1000,
    n_boot: int = 40,
    seed: int = 0,
    leave_one_out: bool = True,
    by: RankBy = "mu",
    env: TrueSkillEnv | None = None,
) -> pd.DataFrame:
    """Share of the most frequent clustered ranking per number of conversations per pair.

    Columns: left_out (``none``, or the system left out), conversations_per_pair, subsamples,
    n_boot, with_replacement, rankings (distinct clustered rankings seen), top_ranking,
    top_share. ``leave_one_out`` adds the rows without each system (needs 3 or more systems).
    Seeded: each (variant, size) draws from ``numpy.random.default_rng([seed, variant, size])``.
    ``env`` None = the ranking's default, :data:`~hitkit.protocols.spot_the_bot.analysis.DEFAULT_TRUESKILL`
    on all the games (τ = 0, draw probability = observed tie rate), the same for every
    subsample. See the module docstring for the sampling and bootstrap choices.
    """
    sizes = [int(s) for s in sizes]
    if not sizes or min(sizes) < 1:
        raise ValueError(f"sizes={sizes!r}; give one or more numbers of conversations >= 1")
    if n_sub < 1 or n_boot < 1:
        raise ValueError(f"n_sub={n_sub!r}, n_boot={n_boot!r}; both must be >= 1")
    if by not in ("mu", "conservative"):
        raise ValueError(f"by={by!r}; use 'mu' or 'conservative'")
    games = conversation_games(annotations)
    if env is None:
        env = DEFAULT_TRUESKILL.env_for(games)
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
        rows += [
            {"left_out": left_out, **row}
            for row in _stability_rows(
                subset, sizes, n_sub, n_boot, [seed, v], by, env, label=f"{v + 1}/{len(variants)}"
            )
        ]
    return pd.DataFrame(rows, columns=STABILITY_COLUMNS)


def smallest_stable_size(table: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per left_out: the smallest conversations_per_pair whose top_share reaches ``level``
    (NaN when none does). Columns left_out, smallest_size."""
    reached = table[table["top_share"] >= level]
    smallest = reached.groupby("left_out", sort=False)["conversations_per_pair"].min()
    out = pd.DataFrame({"left_out": pd.unique(table["left_out"])})
    out["smallest_size"] = out["left_out"].map(smallest).astype(float)
    return out
