"""The arena's leaderboard: ratings with and without style control, worker-clustered bootstrap
intervals, rank ranges, the win-rate matrix and per-category leaderboards (pure functions of a battle frame).

Rank (FastChat's "rank (UB)"): 1 + the number of systems whose interval's lower bound lies above this
system's upper bound; ``rank_lower`` is the worst rank the intervals allow (1 + the number of other
systems whose upper bound reaches this one's lower bound). Systems that no chain of battles connects
(different components of the comparison graph) are on unrelated scales: their ranks count only the
systems of their own component, and ``component`` says which one a system is in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from hitkit.analysis.inference import bootstrap_interval, cluster_codes, cluster_weights
from hitkit.protocols.arena import bradley_terry as bt
from hitkit.protocols.arena import robust
from hitkit.protocols.arena.reading import STYLE_A, STYLE_B

TIES = ("half", "davidson")
BATCH = 100
"""Bootstrap replicates fitted together (memory: BATCH × battles weights)."""
MIN_CATEGORY_BATTLES = 20
"""A category needs this many leaderboard battles for a leaderboard of its own."""
LEADERBOARD_COLUMNS = (
    "system",
    "rating",
    "rating_lower",
    "rating_upper",
    "rating_style",
    "rating_style_lower",
    "rating_style_upper",
    "rank",
    "rank_lower",
    "rank_style",
    "rank_style_lower",
    "strength",
    "strength_style",
    "battles",
    "wins",
    "losses",
    "ties",
    "component",
)


@dataclass(frozen=True)
class Battles:
    """A battle frame as arrays: system indices, outcomes for the left system, workers' cluster codes."""

    systems: list[str]
    first: np.ndarray
    second: np.ndarray
    outcome: np.ndarray
    clusters: np.ndarray
    n_clusters: int
    counts_a: np.ndarray
    counts_b: np.ndarray
    weights: np.ndarray | None = None
    """Each battle's weight in the plain Bradley–Terry fit (:func:`inverse_sampling_weights`); None: 1 each."""
    features: tuple[str, ...] = bt.STYLE_FEATURES
    """The style covariates' names: FastChat's four, then those the study declares."""

    @classmethod
    def of(cls, battles: pd.DataFrame, covariates: Sequence[str] = (), inverse_sampling: bool = False) -> Battles:
        """The arrays of ``battles``; ``covariates``: declared style covariates, whose counts are the
        columns ``style_NAME_a`` and ``style_NAME_b``."""
        systems = sorted(set(battles["system_a"]) | set(battles["system_b"]))
        index = {s: i for i, s in enumerate(systems)}
        codes, n_clusters = cluster_codes(battles["worker_id"].astype(str).to_numpy())
        first = battles["system_a"].map(index).to_numpy(int)
        second = battles["system_b"].map(index).to_numpy(int)
        left = list(STYLE_A) + [f"style_{c}_a" for c in covariates]
        right = list(STYLE_B) + [f"style_{c}_b" for c in covariates]
        return cls(
            systems,
            first,
            second,
            battles["vote"].map(bt.OUTCOME).to_numpy(float),
            codes,
            n_clusters,
            battles[left].to_numpy(float),
            battles[right].to_numpy(float),
            inverse_sampling_weights(first, second) if inverse_sampling else None,
            bt.STYLE_FEATURES + tuple(covariates),
        )

    @property
    def has_style(self) -> bool:
        return len(self.first) > 0 and not (np.isnan(self.counts_a).any() or np.isnan(self.counts_b).any())


def inverse_sampling_weights(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Each battle's weight 1 / (battles of its pair), scaled so the weights sum to the battles: every pair
    (unordered) then weighs N / P in the fit, however often it was sampled (P pairs, N battles)."""
    low, high = np.minimum(first, second), np.maximum(first, second)
    _, pair, counts = np.unique(np.stack([low, high], axis=1), axis=0, return_inverse=True, return_counts=True)
    pair = pair.reshape(-1)
    return len(first) / len(counts) / counts[pair].astype(float)


def components(systems: list[str], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Each system's component of the comparison graph (1 = the largest; ties by first system name)."""
    parent = list(range(len(systems)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in set(zip(first.tolist(), second.tolist())):
        parent[root(a)] = root(b)
    roots = [root(i) for i in range(len(systems))]
    order = sorted(set(roots), key=lambda r: (-roots.count(r), min(i for i, x in enumerate(roots) if x == r)))
    return np.array([order.index(r) + 1 for r in roots], dtype=int)


def rank_ranges(lower: np.ndarray, upper: np.ndarray, component: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rank, worst rank) of each system from its interval, counting only its own component's systems."""
    same = component[:, None] == component[None, :]
    above = (lower[None, :] > upper[:, None]) & same
    reach = (upper[None, :] >= lower[:, None]) & same
    np.fill_diagonal(reach, False)
    return 1 + above.sum(axis=1), 1 + reach.sum(axis=1)


def _fit(data: Battles, weights: np.ndarray | None, ties: str, style: bool) -> tuple[np.ndarray, np.ndarray]:
    k = len(data.systems)
    if data.weights is not None and not style:  # inverse sampling weighs the plain fit only (style's is FastChat's)
        weights = data.weights[None, :] if weights is None else np.atleast_2d(weights) * data.weights[None, :]
    if style:
        fit = bt.style_control(data.first, data.second, data.outcome, k, data.counts_a, data.counts_b, weights)
        return fit.theta, fit.beta
    if ties == "davidson":
        theta, _ = bt.davidson(data.first, data.second, data.outcome, k, weights)
        return theta, np.zeros((len(theta), 0))
    fit = bt.bradley_terry(data.first, data.second, data.outcome, k, weights)
    return fit.theta, fit.beta


def bootstrap(
    data: Battles, *, n_boot: int, seed: int, ties: str = "half", style: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """θ [n_boot, k] and style coefficients [n_boot, f] over ``n_boot`` resamples of whole workers (each
    with all their battles), drawn with ``numpy.random.default_rng([seed, 29])`` in batches of :data:`BATCH`."""
    rng = np.random.default_rng([seed, 29])
    thetas, betas = [], []
    for start in range(0, n_boot, BATCH):
        size = min(BATCH, n_boot - start)
        weights = cluster_weights(data.clusters, data.n_clusters, size, rng)
        theta, beta = _fit(data, weights, ties, style)
        thetas.append(theta)
        betas.append(beta)
    return np.vstack(thetas), np.vstack(betas)


def style_intervals(
    data: Battles, fit: bt.Fit, *, anchor: tuple[str, float] | None = bt.FASTCHAT_BASELINE, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(rating lower, rating upper, coefficient lower, coefficient upper) of style control: for the ratings,
    the point fit moved by :func:`~hitkit.protocols.arena.bradley_terry.ridge_shift` (the penalty's pull
    toward the mean, which the fit to many battles, the intervals' target, does not have) ± t_{C−1}·the
    worker-clustered sandwich standard error (:mod:`hitkit.protocols.arena.robust`, C the workers); for
    the style coefficients, the reported coefficient itself ± the same, so that each lies in its interval;
    a rating's interval is widened to reach the reported (penalised) rating where the pull moved it outside.
    A rating's interval is relative to the mean (or to the anchored system, whose own is that point)."""
    k = len(data.systems)
    features, _, _ = bt.style_features(data.counts_a, data.counts_b)
    x = bt.design(data.first, data.second, k, features)
    params = np.concatenate([fit.theta[0], fit.beta[0]])
    cov = robust.covariance(x, data.outcome, params, data.clusters, data.n_clusters, k)
    shift_theta, _ = bt.ridge_shift(data.first, data.second, data.outcome, k, data.counts_a, data.counts_b, fit)
    lift = robust.contrasts(data.systems, anchor)
    half = robust.t_quantile(data.n_clusters, level)
    rating = bt.to_rating(fit.theta[0] + shift_theta, data.systems, anchor)
    rating_half = half * bt.SCALE * np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", lift, cov[:k, :k], lift), 0.0))
    # The coefficients' intervals are centred on the coefficients the style table reports (FastChat's
    # penalised fit): moved by the penalty's pull, a shrunken coefficient could lie outside its own interval.
    beta = fit.beta[0]
    beta_half = half * np.sqrt(np.maximum(np.diag(cov)[k:], 0.0))
    # Where the penalty's pull is large (a system that won or lost every battle), the interval around the
    # unpenalised target can miss the penalised rating the leaderboard reports: the interval is then widened to
    # reach it, so that no rating lies outside its own interval.
    reported = bt.to_rating(fit.theta[0], data.systems, anchor)
    lower = np.minimum(rating - rating_half, reported)
    upper = np.maximum(rating + rating_half, reported)
    return lower, upper, beta - beta_half, beta + beta_half


def win_rates(battles: pd.DataFrame) -> pd.DataFrame:
    """Each ordered pair's record, both directions: system, opponent, battles, wins, losses, ties
    (ties and both-bad votes), win_rate = (wins + ties / 2) / battles. Pairs never compared have no row."""
    a, b, vote = battles["system_a"], battles["system_b"], battles["vote"]
    left = pd.DataFrame({"system": a, "opponent": b, "win": vote == "a", "loss": vote == "b"})
    right = pd.DataFrame({"system": b, "opponent": a, "win": vote == "b", "loss": vote == "a"})
    both = pd.concat([left, right], ignore_index=True)
    table = (
        both.groupby(["system", "opponent"])
        .agg(battles=("win", "size"), wins=("win", "sum"), losses=("loss", "sum"))
        .reset_index()
    )
    table["ties"] = table["battles"] - table["wins"] - table["losses"]
    table["win_rate"] = (table["wins"] + table["ties"] / 2) / table["battles"]
    return table.astype({"battles": int, "wins": int, "losses": int, "ties": int})


def leaderboard(
    battles: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ties: str = "half",
    anchor: tuple[str, float] | None = bt.FASTCHAT_BASELINE,
    covariates: Sequence[str] = (),
    inverse_sampling: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """(leaderboard, style coefficients, facts) of the battles given (the caller has already left out
    QC battles and leaks). ``ties``: ``half`` (FastChat's convention) or ``davidson`` for the plain
    ratings; style control always counts a tie as half a win, as FastChat's does. Intervals (none with
    ``n_boot`` 0): the plain ratings' are expanded percentile 95 % intervals over ``n_boot`` worker
    resamples, style control's worker-clustered sandwich intervals corrected for its penalty's pull
    (:func:`style_intervals`). ``covariates``: declared style covariates beside FastChat's four;
    ``inverse_sampling``: weigh the plain fit's battles by :func:`inverse_sampling_weights`."""
    if ties not in TIES:
        raise ValueError(f"ties={ties!r}; use one of {', '.join(TIES)}")
    data = Battles.of(battles, covariates, inverse_sampling)
    k = len(data.systems)
    comp = components(data.systems, data.first, data.second)
    theta, _ = _fit(data, None, ties, False)
    rating = bt.to_rating(theta[0], data.systems, anchor)
    table = pd.DataFrame({"system": data.systems, "rating": rating, "strength": theta[0] * bt.LN10, "component": comp})
    facts: dict = {"style_control": data.has_style, "components": int(comp.max()) if k else 0}
    nan = np.full(k, math.nan)
    lower = upper = nan
    if n_boot > 0:
        boot, _ = bootstrap(data, n_boot=n_boot, seed=seed, ties=ties)
        lower, upper = bootstrap_interval(bt.to_rating(boot, data.systems, anchor), data.n_clusters)
    table["rating_lower"], table["rating_upper"] = lower, upper
    style_table = pd.DataFrame(
        columns=["feature", "coefficient", "coefficient_lower", "coefficient_upper", "raw_mean", "raw_std"]
    )
    s_lower = s_upper = nan
    if data.has_style:
        fit = bt.style_control(data.first, data.second, data.outcome, k, data.counts_a, data.counts_b)
        table["rating_style"] = bt.to_rating(fit.theta[0], data.systems, anchor)
        table["strength_style"] = fit.theta[0] * bt.LN10
        c_lower = c_upper = np.full(len(data.features), math.nan)
        if n_boot > 0:
            s_lower, s_upper, c_lower, c_upper = style_intervals(data, fit, anchor=anchor)
        style_table = pd.DataFrame(
            {
                "feature": data.features,
                "coefficient": fit.beta[0],
                "coefficient_lower": c_lower,
                "coefficient_upper": c_upper,
                "raw_mean": fit.feature_mean,
                "raw_std": fit.feature_std,
            }
        )
    else:
        table["rating_style"] = table["strength_style"] = nan
    table["rating_style_lower"], table["rating_style_upper"] = s_lower, s_upper
    for prefix, lo, hi in (("rank", lower, upper), ("rank_style", s_lower, s_upper)):
        if np.isnan(lo).any():  # no intervals: rank by the point estimates within each component
            column = "rating" if prefix == "rank" else "rating_style"
            point = table[column].to_numpy()
            lo = hi = point
        best, worst = rank_ranges(np.asarray(lo), np.asarray(hi), comp)
        table[prefix], table[f"{prefix}_lower"] = best, worst
        if np.isnan(table["rating_style"]).all() and prefix == "rank_style":
            table[prefix], table[f"{prefix}_lower"] = pd.NA, pd.NA
    record = win_rates(battles).groupby("system")[["battles", "wins", "losses", "ties"]].sum()
    table = table.join(record, on="system")
    table = table[list(LEADERBOARD_COLUMNS)]
    order = "rating_style" if data.has_style else "rating"
    return (
        table.sort_values(["component", order, "system"], ascending=[True, False, True], ignore_index=True),
        style_table,
        facts,
    )


def by_category(
    battles: pd.DataFrame,
    *,
    n_boot: int,
    seed: int,
    ties: str = "half",
    anchor: tuple[str, float] | None = bt.FASTCHAT_BASELINE,
    covariates: Sequence[str] = (),
    inverse_sampling: bool = False,
) -> tuple[pd.DataFrame, list[str]]:
    """One leaderboard per category with at least :data:`MIN_CATEGORY_BATTLES` battles and two systems
    (a ``category`` column before the leaderboard's), and the categories left out, with why."""
    frames, skipped = [], []
    for category, group in battles[battles["category"] != ""].groupby("category", sort=True):
        systems = set(group["system_a"]) | set(group["system_b"])
        if len(group) < MIN_CATEGORY_BATTLES or len(systems) < 2:
            skipped.append(f"{category} ({len(group)} battles, {len(systems)} systems)")
            continue
        table, _, _ = leaderboard(
            group,
            n_boot=n_boot,
            seed=seed,
            ties=ties,
            anchor=anchor,
            covariates=covariates,
            inverse_sampling=inverse_sampling,
        )
        frames.append(table.assign(category=category))
    if not frames:
        return pd.DataFrame(columns=["category", *LEADERBOARD_COLUMNS]), skipped
    out = pd.concat(frames, ignore_index=True)
    return out[["category", *LEADERBOARD_COLUMNS]], skipped
