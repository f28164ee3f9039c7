"""Spot The Bot survival analysis (METHODS §2, "Survival"): how long a bot goes unspotted.

Every annotation of a bot speaker in a segment of k exchanges is one observation of the time T
(in exchanges) until the bot is spotted: labelled bot → T in (0, k] (interval-censored); human or
unsure → T > k (right-censored at k). :func:`survival_data` builds these intervals,
:func:`turnbull` is the non-parametric maximum-likelihood estimate of the distribution of T
(Turnbull 1976), :func:`survival_curves` gives one survival curve per system, and
:func:`~hitkit.protocols.spot_the_bot.logrank.survival_tests` compares every pair of systems with the
generalized log-rank test for interval-censored data (Zhao & Sun 2004; variance as corrected by
Huang, Lee & Yu 2008), corrected for multiple comparisons (Bonferroni, the paper's, by default; Holm
or none as options). :func:`~hitkit.protocols.spot_the_bot.cox.cox_by_system` fits a
proportional-hazards model per system with the fluency, sensibleness and specificity answers as
covariates (Finkelstein 1986).

**Clustering** (METHODS §2b). One conversation gives several annotations of each bot, and one
annotator labels many segments; treated as independent, the log-rank test rejects too often.
Given a cluster per observation (conversation by default in the analysis), the log-rank test
uses a cluster-robust (sandwich) variance of its score, and the Cox model a cluster-robust
sandwich covariance; the model-based figures stay beside them (``*_model`` columns).

Intervals are half-open, (left, right]; right = inf is right-censored at left; left == right is
an exact time (not produced by Spot The Bot, accepted so that the estimator can be checked against
Kaplan–Meier).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.protocols.spot_the_bot.annotations import FEATURES, HUMAN
from hitkit.protocols.spot_the_bot.reading import segment_annotations

SURVIVAL_DATA_COLUMNS = ["system", "left", "right", *FEATURES, "conversation", "worker"]
CURVE_COLUMNS = ["system", "time", "survival"]

# Endpoint kinds, in the order they sort at one value t: an exact time's left end stands for
# t − ε, every right end for t, an open left end (left < right) for t + ε. So (0, t] and (t, inf)
# do not overlap, and an exact t lies inside (s, t].
_EXACT_LEFT, _RIGHT, _OPEN_LEFT = 0, 1, 2
# Pruning of vanishing Turnbull masses (see _self_consistent).
_PRUNE_EVERY = 20
_PRUNE_BELOW = 1e-4


def survival_data(annotations: pd.DataFrame) -> pd.DataFrame:
    """One row per annotation of a bot speaker: system, left, right, fluency, sensibleness,
    specificity, conversation (study/conversation_id), worker.

    Labelled bot in a segment of k exchanges → (0, k]; human or unsure → (k, inf). Speakers of
    system ``human`` are left out. The features are as this speaker's annotator answered them
    (+1 this speaker did better than the other, 0 same, −1 worse), for the Cox model.
    """
    seg = segment_annotations(annotations)
    sides = []
    for entity, sign in ((0, 1), (1, -1)):
        spotted = (seg[f"label_{entity}"] == "bot").to_numpy()
        k = seg["segment_exchanges"].to_numpy().astype(float)
        sides.append(
            pd.DataFrame(
                {
                    "system": seg[f"system_{entity}"].to_numpy(),
                    "left": np.where(spotted, 0.0, k),
                    "right": np.where(spotted, k, np.inf),
                    **{f: sign * seg[f].to_numpy() for f in FEATURES},
                    "conversation": (seg["study"].astype(str) + "/" + seg["conversation_id"].astype(str)).to_numpy(),
                    "worker": seg["worker_id"].astype(str).to_numpy(),
                }
            )
        )
    data = pd.concat(sides, ignore_index=True)
    return data[data["system"] != HUMAN].reset_index(drop=True)[SURVIVAL_DATA_COLUMNS]


def check_intervals(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``left`` and ``right`` as float arrays of one observation each, or a ValueError saying what is wrong."""
    left, right = np.asarray(left, dtype=float), np.asarray(right, dtype=float)
    if left.shape != right.shape or left.ndim != 1:
        raise ValueError(f"left {left.shape} and right {right.shape} must be 1-D of one length")
    bad = np.flatnonzero(~((left >= 0) & np.isfinite(left) & (right >= left) & (right > 0)))
    if len(bad):
        i = bad[0]
        raise ValueError(
            f"interval {i} is ({left[i]}, {right[i]}]; need 0 <= left <= right, "
            "right > 0, left finite (right = inf for right-censored)"
        )
    return left, right


def _covers(value_a, kind_a, value_b, kind_b) -> np.ndarray:
    """Endpoint a sorts at or before endpoint b (values, then kinds at equal values)."""
    return (value_a < value_b) | ((value_a == value_b) & (kind_a <= kind_b))


def turnbull_intervals(left: np.ndarray, right: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """Turnbull's innermost intervals and the incidence matrix of the observations.

    Returns (intervals with columns left, right, exact, in time order; ``alpha`` of shape
    [n_observations, n_intervals], True where the observation's interval contains the innermost
    interval). An innermost interval is a left end followed directly by a right end when all
    endpoints are sorted (see the module docstring for ties).
    """
    left, right = check_intervals(left, right)
    n = len(left)
    exact = left == right
    values = np.concatenate([left, right])
    kinds = np.concatenate([np.where(exact, _EXACT_LEFT, _OPEN_LEFT), np.full(n, _RIGHT)])
    is_left = np.arange(2 * n) < n
    order = np.lexsort((kinds, values))
    start = np.flatnonzero(is_left[order][:-1] & ~is_left[order][1:])
    q, p = order[start], order[start + 1]
    q_value, q_kind, p_value = values[q], kinds[q], values[p]
    alpha = _covers(
        left[:, None], np.where(exact, _EXACT_LEFT, _OPEN_LEFT)[:, None], q_value[None], q_kind[None]
    ) & _covers(p_value[None], _RIGHT, right[:, None], _RIGHT)
    intervals = pd.DataFrame({"left": q_value, "right": p_value, "exact": q_kind == _EXACT_LEFT})
    return intervals, alpha


def _self_consistent(alpha: np.ndarray, weights: np.ndarray, tol: float, max_iter: int) -> np.ndarray:
    """Turnbull's self-consistency (EM) iteration for the interval masses.

    EM creeps towards a mass of zero only sublinearly, and such masses are common here (no bot
    spotted between two segment lengths). So every ``_PRUNE_EVERY`` steps, masses below
    ``_PRUNE_BELOW`` whose gradient says they should shrink are set to zero when that does not
    lower the likelihood; at the end, a zero mass whose gradient says it should grow (the
    Kuhn–Tucker condition of the maximum) is given back a little mass and the iteration goes on.
    """
    total = weights.sum()
    a = alpha.astype(float)

    def gradient(mass: np.ndarray) -> np.ndarray:
        return (a.T @ (weights / (a @ mass))) / total

    def loglik(mass: np.ndarray) -> float:
        with np.errstate(divide="ignore"):
            return float(weights @ np.log(a @ mass))

    mass = np.full(alpha.shape[1], 1.0 / alpha.shape[1])
    for step in range(1, max_iter + 1):
        updated = mass * gradient(mass)
        if step % _PRUNE_EVERY == 0:
            small = (updated > 0) & (updated < _PRUNE_BELOW) & (gradient(updated) < 1)
            if small.any():
                pruned = np.where(small, 0.0, updated)
                pruned /= pruned.sum()
                if loglik(pruned) >= loglik(updated):
                    updated = pruned
        if np.max(np.abs(updated - mass)) < tol:
            grow = (updated == 0) & (gradient(updated) > 1 + 1e-9)
            if not grow.any():
                return updated
            updated = np.where(grow, _PRUNE_BELOW, updated)
            updated /= updated.sum()
        mass = updated
    return mass


def turnbull(
    left: np.ndarray,
    right: np.ndarray,
    weights: np.ndarray | None = None,
    *,
    tol: float = 1e-12,
    max_iter: int = 100_000,
) -> pd.DataFrame:
    """Turnbull's non-parametric estimate: innermost intervals (left, right, exact) with mass.

    Observation i says T in (left_i, right_i] (right = inf: right-censored; left == right: exact).
    The masses maximise the likelihood Π_i P(T in interval i)^{w_i} and are found by the
    self-consistency iteration, run on the distinct intervals (weighted by their counts) until no
    mass moves by ``tol``. With exact and right-censored data only, this is Kaplan–Meier.
    """
    left, right = check_intervals(left, right)
    w = np.ones(len(left)) if weights is None else np.asarray(weights, dtype=float)
    if len(left) == 0:
        return pd.DataFrame({"left": [], "right": [], "exact": [], "mass": []})
    distinct = (
        pd.DataFrame({"left": left, "right": right, "w": w})
        .groupby(["left", "right"], sort=True)["w"]
        .sum()
        .reset_index()
    )
    distinct = distinct[distinct["w"] > 0]
    intervals, alpha = turnbull_intervals(distinct["left"].to_numpy(), distinct["right"].to_numpy())
    intervals["mass"] = _self_consistent(alpha, distinct["w"].to_numpy(), tol, max_iter)
    return intervals


def survival_curve(left: np.ndarray, right: np.ndarray) -> pd.DataFrame:
    """S(t) at 0 and at the right end of every finite Turnbull interval: columns time, survival.

    Inside a Turnbull interval (q, p] the estimate is not determined (only its mass is); the
    table gives S at the interval's right end, i.e. after the whole mass has fallen.
    """
    fit = turnbull(left, right)
    after = 1.0 - np.cumsum(fit["mass"].to_numpy())
    finite = np.isfinite(fit["right"].to_numpy())
    curve = pd.DataFrame(
        {
            "time": np.concatenate([[0.0], fit["right"].to_numpy()[finite]]),
            "survival": np.concatenate([[1.0], np.clip(after[finite], 0.0, 1.0)]),
        }
    )
    return curve.drop_duplicates("time", keep="last").reset_index(drop=True)


def survival_curves(data: pd.DataFrame) -> pd.DataFrame:
    """:func:`survival_curve` per system of :func:`survival_data`: system, time, survival."""
    if data.empty:
        return pd.DataFrame(columns=CURVE_COLUMNS)
    curves = [
        survival_curve(group["left"].to_numpy(), group["right"].to_numpy()).assign(system=system)
        for system, group in data.groupby("system", sort=True)
    ]
    return pd.concat(curves, ignore_index=True)[CURVE_COLUMNS]
