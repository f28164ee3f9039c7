"""Plackett–Luce strengths of rankings (Luce 1959; Plackett 1975), fitted by Hunter's (2004) MM algorithm
with the regularisation of the ``choix`` package's ILSR (Maystre & Grossglauser 2015), for a batch of
weightings at once (the point estimate and every bootstrap replicate in one array).

A ranking of items is a sequence of choices: the first-placed item is chosen from all of them with
probability γ_i / Σ γ, the second from the rest, and so on; the last "choice" has no alternative and
says nothing. Each choice is a *stage*: (the item chosen, the items still in the running). A tie is
broken into every order of the tied items, each order weighing 1 / (the number of orders), so a
ranking always weighs 1 and a tie between i and j counts as half of "i above j" and half of "j above
i" (the Plackett–Luce analogue of a Bradley–Terry tie as half a win each way; Davidson–Luce's tie
parameter is not fitted).

**Regularisation, exactly as choix's.** ``choix.ilsr_rankings(n, data, alpha)`` starts every rate of
its Markov chain at ``alpha`` with strengths scaled to mean 1; its fixed point solves
w_i − γ_i·D_i + α·n·(1 − γ_i) = 0, where w_i counts the stages item i wins and D_i = Σ over the stages
it is in the running of 1 / (the stage's Σ γ). That is the maximum of the log-likelihood plus
α·n·Σ_i (θ_i − e^θ_i), θ = log γ: a Gamma(α·n, α·n) prior on each strength, whose MM update is
γ_i ← (α·n + w_i) / (α·n + D_i). At the maximum Σ γ = n by itself; scores are reported as choix
reports them, θ centred to mean 0. ``tests/test_plackett_luce.py`` holds the two equal to 1e-6.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import permutations, product
from typing import Sequence

import numpy as np

ALPHA = 0.1
"""The default regularisation, in choix's units: a Gamma(0.1·n, 0.1·n) prior on each of n strengths (mean 1),
which keeps an item that always wins finite and moves well-measured scores very little."""
TOL = 1e-10
"""The fit stops when no log-strength moves by more than this in an iteration."""

Ranking = Sequence[Sequence[int]]
"""One ranking as its tie groups, best first: ``[[2], [0, 3], [1]]`` is 2 above 0 and 3 (tied), above 1."""


@dataclass(frozen=True)
class Stages:
    """Rankings as weighted stages: ``weights[r, t]`` is how much ranking r holds of stage type t, whose
    chosen item is ``winner[t]`` out of the items where ``running[t]`` is 1."""

    weights: np.ndarray
    winner: np.ndarray
    running: np.ndarray


def orders(ranking: Ranking) -> list[tuple[int, ...]]:
    """Every strict order a ranking with ties stands for (one order without ties)."""
    groups = [list(permutations(group)) for group in ranking if len(group)]
    return [tuple(i for part in choice for i in part) for choice in product(*groups)]


def stages(rankings: Sequence[Ranking], n_items: int) -> Stages:
    """The :class:`Stages` of ``rankings`` of items 0 … n_items − 1 (ties broken into every order, each
    weighing equally, so each ranking weighs 1); a ranking of fewer than two items has none."""
    kinds: dict[tuple[int, int], int] = {}
    rows, cols, vals = [], [], []
    for r, ranking in enumerate(rankings):
        strict = orders(ranking)
        for order in strict:
            mask = sum(1 << i for i in order)
            for winner in order[:-1]:
                t = kinds.setdefault((winner, mask), len(kinds))
                rows.append(r)
                cols.append(t)
                vals.append(1.0 / len(strict))
                mask &= ~(1 << winner)
    weights = np.zeros((len(rankings), len(kinds)))
    np.add.at(weights, (np.asarray(rows, dtype=int), np.asarray(cols, dtype=int)), vals)
    chosen = np.array([w for w, _ in kinds], dtype=int)
    running = np.array([[(m >> i) & 1 for i in range(n_items)] for _, m in kinds], dtype=float).reshape(-1, n_items)
    return Stages(weights, chosen, running)


def fit(
    counts: np.ndarray, data: Stages, alpha: float = ALPHA, tol: float = TOL, max_iter: int = 100_000
) -> np.ndarray:
    """Centred log-strengths [B, n_items] for a batch of stage counts ``counts`` [B, stage types] (each row a
    weighting of the rankings: ``weights.sum(0)`` for the data as they are, a bootstrap replicate's
    cluster counts @ ``weights`` for a resample), by the MM update of the module docstring."""
    if not alpha > 0:
        raise ValueError(f"alpha={alpha!r}; it must be > 0 so that every strength is finite")
    counts = np.atleast_2d(np.asarray(counts, dtype=float))
    n = data.running.shape[1]
    prior = alpha * n
    wins = counts @ np.eye(n)[data.winner] if len(data.winner) else np.zeros((len(counts), n))
    gamma = np.ones((len(counts), n))
    change = np.inf
    for _ in range(max_iter):
        exposure = (counts / (gamma @ data.running.T)) @ data.running
        new = (prior + wins) / (prior + exposure)
        change = float(np.max(np.abs(np.log(new) - np.log(gamma))))
        gamma = new
        if change < tol:
            break
    else:
        warnings.warn(
            f"Plackett–Luce fit stopped after {max_iter} iterations (last change {change:.2g}); "
            "a larger alpha makes it converge faster",
            RuntimeWarning,
            stacklevel=2,
        )
    theta = np.log(gamma)
    return theta - theta.mean(axis=1, keepdims=True)


def above(rankings: Sequence[Ranking], n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """(wins, met) [rankings, n, n]: ``wins[r, i, j]`` is 1 when ranking r puts i above j, ½ when it ties
    them; ``met[r, i, j]`` is 1 when it ranks both (the implied pairwise comparisons)."""
    wins = np.zeros((len(rankings), n_items, n_items))
    met = np.zeros_like(wins)
    for r, ranking in enumerate(rankings):
        for g, group in enumerate(ranking):
            below = [j for later in ranking[g + 1 :] for j in later]
            for i in group:
                wins[r, i, below] = 1.0
                met[r, i, below] = met[r, below, i] = 1.0
                tied = [j for j in group if j != i]
                wins[r, i, tied] = 0.5
                met[r, i, tied] = 1.0
    return wins, met


def influence(data: Stages, theta: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """Each ranking's first-order effect of its removal on every log-strength (rankings × items): H⁻¹ g_r,
    g_r the ranking's gradient of the penalised log-likelihood at the fit ``theta`` and H its Hessian
    (negative definite through the prior), for :func:`hitkit.analysis.fragility.refit_fragility`."""
    gamma = np.exp(theta - np.log(np.mean(np.exp(theta))))  # the fit's own scale: mean strength 1
    n = len(gamma)
    chance = data.running * gamma / (data.running @ gamma)[:, None]  # each stage's choice probabilities
    per_stage = np.eye(n)[data.winner] - chance
    counts = data.weights.sum(axis=0)
    hessian = np.einsum("t,ti,tj->ij", counts, chance, chance) - np.diag(counts @ chance) - alpha * n * np.diag(gamma)
    return np.linalg.solve(hessian, (data.weights @ per_stage).T).T
