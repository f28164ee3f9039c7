"""Plackett–Luce strengths (hitkit.analysis.plackett_luce) equal the choix package's ILSR estimates to 1e-6
on the same rankings, with its regularisation; ties and weights are the rankings they stand for."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hitkit.analysis import plackett_luce as pl

choix = pytest.importorskip("choix")


def random_rankings(seed: int, n: int = 5, count: int = 200, tie_share: float = 0.0) -> list[pl.Ranking]:
    """Rankings of random subsets (2 … n items) drawn from a Plackett–Luce model; some neighbours tied."""
    rng = np.random.default_rng(seed)
    strength = np.linspace(1.5, -1.5, n)
    out: list[pl.Ranking] = []
    for _ in range(count):
        items = list(rng.choice(n, size=rng.integers(2, n + 1), replace=False))
        order = []
        while items:
            w = np.exp(strength[items])
            order.append(items.pop(rng.choice(len(items), p=w / w.sum())))
        groups = [[order[0]]]
        for item in order[1:]:
            groups[-1].append(item) if rng.random() < tie_share else groups.append([item])
        out.append(groups)
    return out


def choix_fit(n: int, strict: list, alpha: float) -> np.ndarray:
    return choix.ilsr_rankings(n, strict, alpha=alpha, max_iter=100_000, tol=1e-13)


@pytest.mark.parametrize("alpha", [0.01, 0.1, 1.0])
@pytest.mark.parametrize("seed", [1, 2])
def test_strict_rankings_give_choix_ilsr_estimates(alpha, seed):
    rankings = random_rankings(seed)
    data = pl.stages(rankings, 5)
    mine = pl.fit(data.weights.sum(axis=0), data, alpha)[0]
    reference = choix_fit(5, [[g[0] for g in r] for r in rankings], alpha)
    assert np.max(np.abs(mine - reference)) < 1e-6


def test_ties_equal_choix_on_every_order_they_stand_for():
    # A ranking with a tie of two is half of each order; choix takes whole rankings.
    rankings = random_rankings(3, n=4, count=120, tie_share=0.3)
    assert any(len(g) > 2 for r in rankings for g in r)  # ties of three too
    data = pl.stages(rankings, 4)
    mine = pl.fit(data.weights.sum(axis=0), data, 0.2)[0]
    # Every ranking given m times (m a multiple of each one's count of orders), alpha scaled with the data.
    m = math.lcm(*(len(pl.orders(r)) for r in rankings))
    copies = [list(o) for r in rankings for o in pl.orders(r) for _ in range(m // len(pl.orders(r)))]
    assert np.max(np.abs(mine - choix_fit(4, copies, 0.2 * m))) < 1e-6


def test_a_bootstrap_weighting_is_the_resampled_rankings_and_the_batch_fits_each_alike():
    rankings = random_rankings(4, n=4, count=60)
    data = pl.stages(rankings, 4)
    counts = np.random.default_rng(0).multinomial(60, np.full(60, 1 / 60), size=3).astype(float)
    batch = pl.fit(counts @ data.weights, data, 0.1)
    for row, weights in zip(batch, counts):
        drawn = [[g[0] for g in r] for r, w in zip(rankings, weights) for _ in range(int(w))]
        assert np.max(np.abs(row - choix_fit(4, drawn, 0.1))) < 1e-6


def test_implied_comparisons_count_a_tie_as_half_each_way():
    wins, met = pl.above([[[2], [0, 1]]], 3)
    assert wins[0, 2, 0] == wins[0, 2, 1] == 1 and wins[0, 0, 1] == wins[0, 1, 0] == 0.5
    assert met[0].sum() == 6 and wins[0, 0, 2] == 0


def test_the_fit_refuses_no_regularisation():
    data = pl.stages([[[0], [1]]], 2)
    with pytest.raises(ValueError, match="alpha"):
        pl.fit(data.weights.sum(axis=0), data, 0.0)


def test_influence_predicts_the_refit_after_removing_one_ranking():
    rankings = random_rankings(5, n=4, count=150)
    data = pl.stages(rankings, 4)
    theta = pl.fit(data.weights.sum(axis=0), data)[0]
    effect = pl.influence(data, theta)
    keep = np.ones(len(rankings))
    keep[7] = 0
    refit = pl.fit(keep @ data.weights, data)[0]
    predicted = theta + effect[7] - effect[7].mean()
    assert np.max(np.abs(refit - predicted)) < 0.1 * np.max(np.abs(refit - theta)) + 1e-9
