"""FastChat's anomalous-user detection, re-implemented from its description, as the voter test's baseline.

Chiang et al. (2024, "Chatbot Arena", §5 "Detecting anomalous users") test each user's votes against
the other users' votes on the same pair of models, without a model of the systems:

1. For the user's t-th vote, on the pair A_t, take the other users' votes on that pair as the
   historical sample H; the vote's p-value is the conformal one, p_t = (1 + #{h ∈ H as unusual as the
   user's vote}) / (|H| + 1). Our reading of "as unusual": an outcome (the first model of the sorted
   pair wins, the second wins, a tie or both bad) no more frequent in H than the user's.
2. Fisher's combination M_j = −2 Σ_{t ≤ j} log p_t, which is χ² with 2j degrees of freedom when the
   p-values are uniform (discrete p-values make it conservative).
3. The user is flagged when M_j exceeds the 1 − α/5 quantile of χ²_{2j} at any of five checkpoints j
   drawn at random from 1 … 100 (Bonferroni over the five), here from 1 … ``horizon``.

This is our re-implementation from the paper's text, not FastChat's code (which is not a PyPI
dependency); the benchmark states so where it quotes ``fastchat_flagged_bad``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

CHECKPOINTS = 5
HORIZON = 100


def vote_pvalues(battles: pd.DataFrame) -> np.ndarray:
    """Each vote's conformal p-value against the other workers' votes on the same pair (step 1)."""
    a, b = battles["system_a"].astype(str).to_numpy(), battles["system_b"].astype(str).to_numpy()
    vote = battles["vote"].astype(str).to_numpy()
    first = np.minimum(a, b)
    swapped = a != first
    outcome = np.where(vote == "a", np.where(swapped, "second", "first"), vote)
    outcome = np.where(vote == "b", np.where(swapped, "first", "second"), outcome)
    outcome = np.where(np.isin(vote, ["tie", "both_bad"]), "tie", outcome)
    pair = pd.Series(first + "\x00" + np.maximum(a, b))
    frame = pd.DataFrame({"pair": pair, "outcome": outcome, "worker": battles["worker_id"].astype(str).to_numpy()})
    total = frame.groupby(["pair", "outcome"]).size()
    mine = frame.groupby(["worker", "pair", "outcome"]).size()
    others = {}  # (worker, pair) → counts of each outcome among the other workers' votes
    pvalues = np.empty(len(frame))
    outcomes = ("first", "second", "tie")
    for i, (p, o, w) in enumerate(zip(frame["pair"], frame["outcome"], frame["worker"])):
        key = (w, p)
        if key not in others:
            others[key] = {x: int(total.get((p, x), 0)) - int(mine.get((w, p, x), 0)) for x in outcomes}
        counts = others[key]
        history = sum(counts.values())
        unusual = sum(c for c in counts.values() if c <= counts[o])
        pvalues[i] = (1 + unusual) / (history + 1)
    return pvalues


def flag_users(battles: pd.DataFrame, alpha: float = 0.01, horizon: int = HORIZON, seed: int = 0) -> pd.DataFrame:
    """Per worker: votes and flagged (steps 2–3), the worker's votes taken in the order of ``battles``."""
    pvalues = vote_pvalues(battles)
    rng = np.random.default_rng(seed)
    checkpoints = np.sort(rng.choice(np.arange(1, horizon + 1), size=min(CHECKPOINTS, horizon), replace=False))
    limits = {j: stats.chi2.ppf(1 - alpha / len(checkpoints), 2 * j) for j in checkpoints}
    rows = []
    workers = battles["worker_id"].astype(str).to_numpy()
    for worker, index in pd.Series(range(len(workers))).groupby(workers):
        fisher = -2.0 * np.cumsum(np.log(pvalues[index.to_numpy()]))
        flagged = any(j <= len(fisher) and fisher[j - 1] >= limits[j] for j in checkpoints)
        rows.append({"worker_id": worker, "votes": len(fisher), "flagged": bool(flagged)})
    return pd.DataFrame(rows, columns=["worker_id", "votes", "flagged"])
