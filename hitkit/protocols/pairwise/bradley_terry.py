"""The Bradley–Terry ranking of pairwise votes (Hunter 2004's MM algorithm, ties as half a win to each
side, a prior of one virtual tied game per pair) with clustered bootstrap intervals."""

from __future__ import annotations

import math
import warnings
from typing import Literal

import numpy as np
import pandas as pd

from hitkit.analysis.inference import bootstrap_interval, cluster_codes, cluster_weights
from hitkit.analysis.ranking import compared_ranks
from hitkit.errors import InputError

RESAMPLE_UNITS: tuple[str, ...] = ("vote", "worker", "item")
from hitkit.protocols.pairwise.reading import FIRST, SECOND, TIE, canonical  # noqa: E402 - after the definitions it needs first

Ties = Literal["half", "drop"]


Resample = Literal["vote", "worker", "item"]


def _resample_weights(
    canon: pd.DataFrame, resample: str, n_boot: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """[n_boot, n_votes] counts of each vote in each resample of ``resample`` units, and each
    vote's unit (cluster code)."""
    if resample not in RESAMPLE_UNITS:
        raise ValueError(f"resample={resample!r}; use one of {', '.join(RESAMPLE_UNITS)}")
    if resample == "vote":
        labels = np.arange(len(canon))
    elif resample == "worker":
        labels = canon["worker_id"].astype(str).to_numpy()
    else:
        item = canon["item_id"].astype(str)
        labels = ((canon["study"].astype(str) + "/" + item) if "study" in canon.columns else item).to_numpy()
    codes, n_clusters = cluster_codes(labels)
    return cluster_weights(codes, n_clusters, n_boot, rng), codes


def _fit_bradley_terry(wins: np.ndarray, prior: float, tol: float = 1e-10, max_iter: int = 100_000) -> np.ndarray:
    """Centred log-strengths for a batch of win matrices ``wins[..., i, j]`` (i beat j), by MM.

    Hunter's (2004) minorise–maximise update p_i ← W_i / Σ_j n_ij / (p_i + p_j), where each pair
    first gets ``prior`` virtual games split evenly (``prior / 2`` wins each way). Every update
    increases the penalised likelihood, and the prior makes its maximum unique and finite.
    """
    k = wins.shape[-1]
    off_diagonal = 1.0 - np.eye(k)
    w = wins + off_diagonal * (prior / 2)
    games = w + np.swapaxes(w, -1, -2)
    won = w.sum(axis=-1)
    log_p = np.zeros(wins.shape[:-1])
    for _ in range(max_iter):
        p = np.exp(log_p)
        denominator = (games / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
        new = np.log(won / denominator)
        new -= new.mean(axis=-1, keepdims=True)
        change = np.max(np.abs(new - log_p))
        log_p = new
        if change < tol:
            return log_p
    warnings.warn(
        f"Bradley–Terry fit stopped after {max_iter} iterations (last change "
        f"{change:.2g}); a larger prior makes it converge faster",
        RuntimeWarning,
        stacklevel=2,
    )
    return log_p


def bradley_terry(
    votes: pd.DataFrame,
    n_boot: int = 1000,
    seed: int = 0,
    ties: Ties = "half",
    prior: float = 1.0,
    resample: Resample = "vote",
) -> pd.DataFrame:
    """Bradley–Terry scores with 95 % bootstrap intervals, one row per system by rank.

    score = natural log-strength centred to mean 0, so P(i beats j) = 1 / (1 + e^(s_j − s_i)).
    Fitted by Hunter's MM algorithm with a symmetric prior: every pair of systems gets ``prior``
    virtual tied games (half a win each way; default one game), which shrinks scores slightly
    towards 0 and keeps a system that never loses finite. ``ties="half"`` counts a tie as half a
    win to each side, ``ties="drop"`` leaves ties out. The bootstrap resamples the (remaining) vote
    rows with replacement ``n_boot`` times with ``numpy.random.default_rng(seed)``, drawn as
    multinomial counts over the distinct (pair, outcome) cells, which has exactly the distribution
    of resampled rows (``resample="vote"``). ``resample="worker"`` or ``"item"`` resamples whole
    workers or items with all their votes instead (the clustered bootstrap of METHODS §2b; the
    analysis defaults to workers). The interval is the expanded percentile interval of
    :func:`~hitkit.analysis.inference.bootstrap_interval` for the number of units resampled.
    rank 1 = highest score; equal scores share the lower rank (method "min"), and systems that never
    met in a vote are ordered only through a chain of direct comparisons, else tied
    (:func:`~hitkit.analysis.ranking.compared_ranks`). With ``n_boot=0``
    the interval is NaN.
    """
    if resample not in RESAMPLE_UNITS:
        raise ValueError(f"resample={resample!r}; use one of {', '.join(RESAMPLE_UNITS)}")
    if ties not in ("half", "drop"):
        raise ValueError(f"ties={ties!r}; use 'half' or 'drop'")
    if not prior > 0:
        raise ValueError(f"prior={prior!r}; it must be > 0 so that every score is finite")
    if n_boot < 0:
        raise ValueError(f"n_boot={n_boot!r}; use 0 (no intervals) or more")
    keys = [c for c in ("study", "item_id", "worker_id") if c in votes.columns]
    canon = canonical(votes, *keys)
    systems = sorted(set(canon["first"]) | set(canon["second"]))
    if not systems:
        raise InputError("votes", "no votes to rank; check that some assignments count")
    met_pairs = canon[["first", "second"]]  # a tie is a comparison too, whatever ``ties`` does with it
    if ties == "drop":
        canon = canon[canon["outcome"] != TIE]
    index = {s: i for i, s in enumerate(systems)}
    k = len(systems)
    cells = canon.groupby(["first", "second", "outcome"]).size()
    first = np.array([index[f] for f, _, _ in cells.index], dtype=int)
    second = np.array([index[s] for _, s, _ in cells.index], dtype=int)
    outcome = np.array([o for _, _, o in cells.index], dtype=int)
    # What one vote of each cell adds to the win matrix, flattened to k * k.
    effect = np.zeros((len(cells), k * k))
    rows = np.arange(len(cells))
    effect[rows, first * k + second] += np.select([outcome == FIRST, outcome == TIE], [1.0, 0.5])
    effect[rows, second * k + first] += np.select([outcome == SECOND, outcome == TIE], [1.0, 0.5])
    counts = cells.to_numpy().astype(float)
    score = _fit_bradley_terry((counts @ effect).reshape(k, k), prior)

    ci_low = ci_high = np.full(k, math.nan)
    n = int(counts.sum())
    if n_boot > 0 and n > 0:
        rng = np.random.default_rng(seed)
        if resample == "vote":
            resampled = rng.multinomial(n, counts / n, size=n_boot).astype(float)
            n_units = n
        else:
            # Each vote's cell, then each resample's cell counts from its cluster weights.
            cell_of = pd.Series(np.arange(len(cells)), index=cells.index)
            cell = cell_of.loc[list(zip(canon["first"], canon["second"], canon["outcome"]))]
            onehot = np.zeros((len(canon), len(cells)))
            onehot[np.arange(len(canon)), cell.to_numpy()] = 1.0
            weights, codes = _resample_weights(canon, resample, n_boot, rng)
            resampled = weights @ onehot
            n_units = int(codes.max()) + 1
        boot = _fit_bradley_terry((resampled @ effect).reshape(n_boot, k, k), prior)
        # Every unit informs every score (through the common scale), so all units count.
        ci_low, ci_high = bootstrap_interval(boot, n_units)
    elif n_boot > 0:
        # No decisive votes left: every resample is the prior alone, all scores 0.
        ci_low = ci_high = np.zeros(k)
    table = pd.DataFrame({"system": systems, "score": score, "ci_low": ci_low, "ci_high": ci_high})
    # No order claimed between systems that never met in a vote (tied, order unknown), only along chains of
    # direct comparisons; where every pair met, the plain rank of the score.
    met = np.zeros((k, k), dtype=bool)
    met[[index[f] for f in met_pairs["first"]], [index[s] for s in met_pairs["second"]]] = True
    table["rank"] = compared_ranks(score, met | met.T)
    return table.sort_values(["rank", "system"], ignore_index=True)
