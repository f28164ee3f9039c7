"""Spot The Bot's rankings (METHODS §2): TrueSkill over one-versus-one games and the plain mean win
rate, each with bootstrap 95 % rank ranges and clusters of overlapping ranges (Dušek et al. 2018)."""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import pandas as pd

from hitkit.analysis.inference import cluster_codes, cluster_weights
from hitkit.analysis.ranking import clusters, rank_range, ranks, widen_unordered
from hitkit.analysis.trueskill_vec import (
    DEFAULT_TRUESKILL,
    TrueSkillEnv,
    rate_repeated,
    rate_sequences,
)
from hitkit.errors import InputError
from hitkit.protocols.spot_the_bot.reading import segment_annotations

RankBy = Literal["mu", "conservative"]


Resample = Literal["game", "conversation", "worker"]


RESAMPLE_UNITS: tuple[str, ...] = ("game", "conversation", "worker")


# Bootstrap resamples are played in chunks of about this many games (all resamples together).
_BOOT_CELLS = 2_000_000


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
    return pd.DataFrame(
        {
            "winner": np.where(lost, s1, s0),
            "loser": np.where(lost, s0, s1),
            "drawn": (seg["outcome"] == 0).to_numpy(),
            "conversation": (seg["study"].astype(str) + "/" + seg["conversation_id"].astype(str)).to_numpy(),
            "worker": seg["worker_id"].astype(str).to_numpy(),
        }
    )


RANKING_COLUMNS = [
    "system",
    "win_rate",
    "mean_pairwise_win_rate",
    "trueskill_mu",
    "trueskill_sigma",
    "rank_low",
    "rank_high",
    "cluster",
    "win_rate_rank_low",
    "win_rate_rank_high",
    "win_rate_cluster",
]
"""The columns of :func:`rank_with_bootstrap`'s table, in order."""


def rank_with_bootstrap(
    games: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
    *,
    by: RankBy = "mu",
    env: TrueSkillEnv | None = None,
    resample: Resample = "game",
) -> pd.DataFrame:
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
    _check_options(games, by, n_boot, resample)
    systems = sorted(set(games["winner"]) | set(games["loser"]))
    if not systems:
        return pd.DataFrame(columns=RANKING_COLUMNS)
    if env is None:
        env = DEFAULT_TRUESKILL.env_for(games)
    index = {s: i for i, s in enumerate(systems)}
    k = len(systems)
    winner = games["winner"].map(index).to_numpy()
    loser = games["loser"].map(index).to_numpy()
    drawn = games["drawn"].to_numpy().astype(bool)
    if np.any(winner == loser):
        raise InputError("games", "a game has the same system on both sides; a system cannot play itself")

    def score_of(mu: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        return mu if by == "mu" else mu - 3 * sigma

    mu, sigma = rate_sequences(winner, loser, drawn, k, env)
    point_rate = _win_rate(winner[None], loser[None], drawn[None], k)[0]
    clustered = None if resample == "game" else games[resample].to_numpy()
    ts_boot, wr_boot = _bootstrap_ranks(winner, loser, drawn, k, env, n_boot, seed, clustered, score_of)
    ts_low, ts_high = rank_range(ts_boot, ranks(score_of(mu, sigma)))
    wr_low, wr_high = rank_range(wr_boot, ranks(point_rate))
    # Systems that never met, and no chain of games orders, share one cluster: their order is unknown.
    met = np.zeros((k, k), dtype=bool)
    met[winner, loser] = met[loser, winner] = True
    ts_low, ts_high = widen_unordered(ts_low, ts_high, score_of(mu, sigma), met)
    wr_low, wr_high = widen_unordered(wr_low, wr_high, point_rate, met)
    order, ts_cluster = clusters(ts_low, ts_high, score_of(mu, sigma))
    _, wr_cluster = clusters(wr_low, wr_high, point_rate)
    table = pd.DataFrame(
        {
            "system": systems,
            "win_rate": point_rate,
            "mean_pairwise_win_rate": _mean_pairwise_win_rate(winner, loser, drawn, k),
            "trueskill_mu": mu,
            "trueskill_sigma": sigma,
            "rank_low": ts_low.astype(int),
            "rank_high": ts_high.astype(int),
            "cluster": ts_cluster,
            "win_rate_rank_low": wr_low.astype(int),
            "win_rate_rank_high": wr_high.astype(int),
            "win_rate_cluster": wr_cluster,
        }
    )
    return table.iloc[order].reset_index(drop=True)[RANKING_COLUMNS]


def _check_options(games: pd.DataFrame, by: str, n_boot: int, resample: str) -> None:
    """ValueError for a ranking score, a number of resamples or a resampled unit :func:`rank_with_bootstrap` does not take."""
    if by not in ("mu", "conservative"):
        raise ValueError(f"by={by!r}; use 'mu' or 'conservative'")
    if n_boot < 0:
        raise ValueError(f"n_boot={n_boot!r}; use 0 (no ranges) or more")
    if resample not in RESAMPLE_UNITS:
        raise ValueError(f"resample={resample!r}; use one of {', '.join(RESAMPLE_UNITS)}")
    if resample != "game" and resample not in games.columns:
        raise ValueError(f"resample={resample!r} needs a {resample!r} column in the games")


def _win_rate(w: np.ndarray, l: np.ndarray, d: np.ndarray, k: int, weight: np.ndarray | None = None) -> np.ndarray:
    """Per row of games (winner ``w``, loser ``l``, drawn ``d``; ``weight`` per game) each of the ``k``
    systems' wins / (wins + losses), 0.5 where it had no decisive game."""
    rows = np.arange(w.shape[0])[:, None] * k
    size = w.shape[0] * k
    wt = None if weight is None else weight[~d]
    won = np.bincount((rows + w)[~d], wt, minlength=size).reshape(-1, k)
    lost = np.bincount((rows + l)[~d], wt, minlength=size).reshape(-1, k)
    decisive = won + lost
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(decisive > 0, won / decisive, 0.5)


def _bootstrap_ranks(
    winner: np.ndarray,
    loser: np.ndarray,
    drawn: np.ndarray,
    k: int,
    env: TrueSkillEnv,
    n_boot: int,
    seed: int,
    clustered: np.ndarray | None,
    score_of,
) -> tuple[np.ndarray, np.ndarray]:
    """The TrueSkill and win-rate ranks of the ``k`` systems in each of ``n_boot`` resamples (rows), drawn
    from ``numpy.random.default_rng(seed)``: of the games (``clustered`` None) or of whole clusters (each
    game's cluster label in ``clustered``), each resample played in the original order of its games."""
    rng = np.random.default_rng(seed)
    n = len(winner)
    ts_ranks, wr_ranks = [], []
    # Resamples in chunks of at most _BOOT_CELLS games in all, to bound memory on large studies.
    chunk = max(1, _BOOT_CELLS // max(n, 1))
    if clustered is not None:
        codes, n_clusters = cluster_codes(clustered)
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        if clustered is None:
            idx = np.sort(rng.integers(0, n, size=(size, n)), axis=1)
            boot_mu, boot_sigma = rate_sequences(winner[idx], loser[idx], drawn[idx], k, env)
            boot_rate = _win_rate(winner[idx], loser[idx], drawn[idx], k)
        else:
            weight = cluster_weights(codes, n_clusters, size, rng)
            boot_mu, boot_sigma = rate_repeated(winner, loser, drawn, weight, k, env)
            tile = np.broadcast_to
            boot_rate = _win_rate(
                tile(winner, weight.shape),
                tile(loser, weight.shape),
                tile(drawn, weight.shape),
                k,
                weight.astype(float),
            )
        ts_ranks.append(ranks(score_of(boot_mu, boot_sigma)))
        wr_ranks.append(ranks(boot_rate))
    empty = np.zeros((0, k), dtype=int)
    return np.concatenate(ts_ranks or [empty]), np.concatenate(wr_ranks or [empty])


def _mean_pairwise_win_rate(winner: np.ndarray, loser: np.ndarray, drawn: np.ndarray, k: int) -> np.ndarray:
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


def ranking(
    annotations: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
    *,
    by: RankBy = "mu",
    env: TrueSkillEnv | None = None,
    resample: Resample = "game",
) -> pd.DataFrame:
    """:func:`rank_with_bootstrap` on the :func:`games` of ``annotations``."""
    return rank_with_bootstrap(games(annotations), n_boot, seed, by=by, env=env, resample=resample)
