"""The arena's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`) and its adaptive pair priorities.

Stopping (``stop:``): as pairwise A/B (:mod:`hitkit.protocols.pairwise.sequential`), each leaderboard
battle on systems x and y (x before y by name) is an x-over-y score, 1 when x wins, 0 when y wins, ½ for
a tie or a both-bad vote; QC battles never count, nor battles flagged as identity leaks. A worker's
battles share their taste, so the sequence counts workers, not battles: each worker gives one
observation, the mean score of the battles on the pair in their first HIT that has any, watched with
the bounded (hedged betting) confidence sequence (:func:`hitkit.analysis.contributions.worker_contributions`
states what is guaranteed; a prompt set's prompts are taken as fixed material, a worker's own prompt is
theirs alone). The per-battle sequence before it was exact only when every battle came from a new
worker: with a pool of 20 returning workers it claimed a difference between equal systems in 36 % of
simulated studies, the per-worker one in none (benchmarks/adaptive.py measures both). Battles whose pair is drawn by the adaptive design depend on
the answers so far, which the guarantee covers only approximately (the benchmark measures it).

Adaptive design (``design: adaptive``): :func:`pair_priorities` weighs each pair by how much one more
battle on it would narrow the leaderboard's intervals: with the Bradley–Terry Fisher information I of
the battles so far (each battle on i, j adds w·x·xᵀ, x = ln 10·(e_i − e_j), w = p_ij·(1 − p_ij) at the
current ratings) and V = I⁺ the ratings' covariance, one battle on (i, j) lowers the sum of the ratings'
variances by w·xᵀV²x / (1 + w·xᵀVx) (Sherman–Morrison): the A-optimal greedy step. Pairs of
near-equal systems, seldom compared, whose difference is still uncertain come first; a lopsided pair
(w small) or a well-measured one little. :func:`next_pairs` picks a batch greedily, updating V after
each pick. Before any battle every pair has the same priority. Free of scipy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from hitkit.analysis.per_worker import pair_answers, worker_comparisons
from hitkit.analysis.sequential import Comparison
from hitkit.protocols.arena.bradley_terry import bradley_terry

UNIT = "workers"
"""What a comparison's n counts: workers, each one observation (their first HIT with battles on the pair)."""

SCORE = {"a": 1.0, "b": 0.0, "tie": 0.5, "both_bad": 0.5}
RIDGE = 1e-3
"""Added to the information matrix's diagonal so that a pair never compared still has a finite variance."""


def _pair_of(payload: Mapping) -> tuple[str, str] | None:
    """The leaderboard pair a unit's payload names (``systems``, two names), or None: none named, or a QC
    battle (``is_control``), which never counts toward the leaderboard."""
    if payload.get("is_control"):
        return None
    systems = payload.get("systems")
    if isinstance(systems, (list, tuple)) and len(systems) == 2:
        return tuple(sorted(str(s) for s in systems))  # type: ignore[return-value]
    return None


def planned(payloads: Sequence[Mapping], config) -> dict[tuple[str, str], float]:
    """Battles each pair gets in the fixed design: a unit whose payload names its pair (``systems``, two
    names) counts its ``required_answers`` (1 when absent) for that pair; a unit that leaves the pair to
    be drawn when served counts as one battle spread evenly over the study's pairs; QC battles
    (``is_control``) count for none."""
    out: dict[tuple[str, str], float] = {}
    spread = 0.0
    for payload in payloads:
        if payload.get("is_control"):
            continue
        pair = _pair_of(payload)
        votes = float(payload.get("required_answers", 1) or 1)
        if pair is None:
            spread += votes
        else:
            out[pair] = out.get(pair, 0.0) + votes
    if spread and config is not None:
        control = {getattr(getattr(config, "arena", None), "control", None)}  # the QC bot never counts
        names = sorted(s.name for s in config.systems if s.name not in control)
        pairs = list(combinations(names, 2))
        for pair in pairs:
            out[pair] = out.get(pair, 0.0) + spread / len(pairs)
    return out


def leaderboard_battles(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The battles a leaderboard counts (no QC battle, no identity leak) from the export tables."""
    battles = tables.get("battles")
    if battles is None or not len(battles):
        return pd.DataFrame(columns=["system_a", "system_b", "vote"])
    keep = (pd.to_numeric(battles["is_control"], errors="coerce").fillna(0) == 0) & (
        pd.to_numeric(battles["leak"], errors="coerce").fillna(0) == 0
    )
    return battles[keep]


def planned_hits(battles: float, config) -> float:
    """HITs of the fixed design expected to hold a pair planned ``battles`` battles: with ``hits`` HITs of
    ``battles_per_hit`` battles, each battle of the pair's in a given HIT with chance battles / all battles,
    a HIT holds at least one with chance 1 − (1 − battles / all)^battles_per_hit. Without an arena config,
    the battles themselves (one battle a HIT)."""
    arena = getattr(config, "arena", None)
    if arena is None or battles <= 0:
        return battles
    total = float(arena.hits * arena.battles_per_hit)
    share = min(battles / total, 1.0)
    return arena.hits * (1.0 - (1.0 - share) ** arena.battles_per_hit)


def comparisons(
    tables: Mapping[str, pd.DataFrame], systems: Sequence[str], plan: Mapping[tuple[str, str], float], *, config=None
) -> list[Comparison]:
    """One comparison per pair of systems from the leaderboard's battles so far: each worker's first HIT's
    mean x-over-y score on the pair, HITs in the order of the ``assignments`` table (else of their first battle). ``plan`` counts battles (:func:`planned`); the
    comparisons plan HITs (:func:`planned_hits`). Without ``assignment_id`` each battle is its own HIT, and
    without ``worker_id`` each HIT its own worker's."""
    battles = leaderboard_battles(tables)
    assignments = tables.get("assignments")
    order = list(assignments["assignment_id"].astype(str)) if assignments is not None and len(assignments) else None
    answers = None
    if len(battles):
        score = battles["vote"].astype(str).str.strip().str.lower().map(SCORE)
        hit = (
            battles["assignment_id"].astype(str)
            if "assignment_id" in battles
            else pd.Series([f"battle {i}" for i in range(len(battles))], index=battles.index)
        )
        answers = pair_answers(
            battles["system_a"],
            battles["system_b"],
            score,
            hit,
            battles["worker_id"] if "worker_id" in battles else hit,
        )
    return worker_comparisons(
        answers, systems, plan, null=0.5, bounds=(0.0, 1.0), order=order, planned=lambda b: planned_hits(b, config)
    )


def hit_pairs(payloads: Sequence[Mapping]) -> list[tuple[str, str]]:
    """The pairs a HIT's answers inform: its units' pairs (units whose pair is drawn when served inform none yet)."""
    return sorted({p for p in (_pair_of(payload) for payload in payloads) if p is not None})


def _model(battles: pd.DataFrame, systems: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The current model for the design: (information matrix [p, p] of the ratings (log10 units) and the
    style coefficients, the candidate battles' design rows [pairs, p], their weights p·(1 − p) [pairs]).

    With style counts on every battle the model is the style-controlled one (the leaderboard's): a
    candidate battle's covariates are those of the two systems' mean replies so far, standardised as the
    fit standardises them, and its win probability includes their effect; otherwise plain Bradley–Terry."""
    from hitkit.protocols.arena.bradley_terry import (
        STYLE_REG,
        design,
        style_control,
        style_features,
    )
    from hitkit.protocols.arena.reading import STYLE_A, STYLE_B

    k = len(systems)
    index = {s: i for i, s in enumerate(systems)}
    known = battles[battles["system_a"].isin(index) & battles["system_b"].isin(index)]
    pairs = list(combinations(range(k), 2))
    first = known["system_a"].map(index).to_numpy(int)
    second = known["system_b"].map(index).to_numpy(int)
    outcome = known["vote"].astype(str).str.strip().str.lower().map(SCORE).to_numpy(float)
    cand_first, cand_second = np.array([i for i, _ in pairs]), np.array([j for _, j in pairs])
    styled = (
        len(known) > 1
        and all(c in known for c in STYLE_A + STYLE_B)
        and not known[list(STYLE_A + STYLE_B)].isna().to_numpy().any()
    )
    if not styled:
        theta = bradley_terry(first, second, outcome, k, ridge=0.1).theta[0] if len(known) else np.zeros(k)
        x_seen, x_cand, params, reg = design(first, second, k), design(cand_first, cand_second, k), theta, np.zeros(k)
    else:
        counts_a = known[list(STYLE_A)].to_numpy(float)
        counts_b = known[list(STYLE_B)].to_numpy(float)
        fit = style_control(first, second, outcome, k, counts_a, counts_b)
        features, mean, std = style_features(counts_a, counts_b)
        replies = np.vstack([counts_a, counts_b])
        owner = np.concatenate([first, second])
        typical = np.tile(replies.mean(axis=0), (k, 1))
        for i in np.unique(owner):
            typical[i] = replies[owner == i].mean(axis=0)
        ta, tb = typical[cand_first], typical[cand_second]
        raw = (ta - tb) / (ta + tb + 1.0)
        cand = np.where(std > 0, (raw - mean) / np.where(std > 0, std, 1.0), 0.0)
        x_seen, x_cand = design(first, second, k, features), design(cand_first, cand_second, k, cand)
        params, reg = np.concatenate([fit.theta[0], fit.beta[0]]), np.full(k + 4, STYLE_REG)
    eta_seen = x_seen @ params
    w_seen = 1.0 / (1.0 + np.exp(-eta_seen))
    w_seen = w_seen * (1.0 - w_seen)
    info = (x_seen.T * w_seen) @ x_seen + np.diag(reg) + RIDGE * np.eye(len(params))
    p_cand = 1.0 / (1.0 + np.exp(-(x_cand @ params)))
    return info, x_cand, p_cand * (1.0 - p_cand)


def _gains(cov: np.ndarray, xs: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    """How much one battle of each candidate row lowers the sum of the k ratings' variances (Sherman–Morrison)."""
    vx = xs @ cov
    return w * (vx[:, :k] ** 2).sum(axis=1) / (1.0 + w * (vx * xs).sum(axis=1))


def pair_priorities(tables: Mapping[str, pd.DataFrame], systems: Sequence[str]) -> dict[tuple[str, str], float]:
    """How much one more battle on each pair (sorted names) would lower the sum of the ratings' variances
    (the A-optimal gain, :func:`_model`), normalised to sum to 1."""
    systems = sorted(systems)
    info, xs, w = _model(leaderboard_battles(tables), systems)
    gains = _gains(np.linalg.inv(info), xs, w, len(systems))
    total = float(gains.sum()) or 1.0
    return {
        (systems[i], systems[j]): float(g) / total for (i, j), g in zip(combinations(range(len(systems)), 2), gains)
    }


def next_pairs(tables: Mapping[str, pd.DataFrame], systems: Sequence[str], n: int) -> list[tuple[str, str]]:
    """The next ``n`` battles' pairs, picked greedily by :func:`pair_priorities`' gain, the covariance
    updated after each pick as if the battle had been played (Sherman–Morrison)."""
    systems = sorted(systems)
    k = len(systems)
    info, xs, w = _model(leaderboard_battles(tables), systems)
    cov = np.linalg.inv(info)
    pairs = list(combinations(range(k), 2))
    out = []
    for _ in range(n):
        best = int(np.argmax(_gains(cov, xs, w, k)))
        out.append((systems[pairs[best][0]], systems[pairs[best][1]]))
        v = cov @ xs[best]
        cov = cov - w[best] * np.outer(v, v) / (1.0 + w[best] * (xs[best] @ v))
    return out
