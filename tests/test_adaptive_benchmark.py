"""benchmarks/adaptive.py: its vectorised stopping rule is hitkit's (intervals + settle), and it runs."""
from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

from benchmarks import adaptive
from hitkit.analysis.sequential import Comparison, intervals, radius, rho_for, settle


def random_states(rng: np.random.Generator, count: int):
    """n and x-over-y wins per pair, from crowds with strengths 0–0.6 logits apart (some fire)."""
    gap = rng.uniform(0.0, 0.6, (count, 1))
    s = gap * rng.permuted(np.tile(np.arange(adaptive.N_SYSTEMS), (count, 1)), axis=1)
    p = 1 / (1 + np.exp(-(s[:, adaptive.PAIR_A] - s[:, adaptive.PAIR_B])))
    n = rng.integers(0, 400, (count, len(adaptive.PAIRS))) * adaptive.VOTES_PER_HIT
    n[rng.random(n.shape) < 0.15] = 0
    return n, rng.binomial(n, p)


def reference(n_row, wins_row, planned):
    comparisons = [Comparison(adaptive.SYSTEMS[a], adaptive.SYSTEMS[b], int(k), w / k if k else 0.5, 0.25,
                              planned, null=0.5, exact=True)
                   for (a, b), k, w in zip(adaptive.PAIRS, n_row, wins_row)]
    return settle(intervals(comparisons, alpha=0.05), "best", adaptive.SYSTEMS)


def test_vectorised_best_rule_agrees_with_intervals_and_settle():
    rng = np.random.default_rng(7)
    n, wins = random_states(rng, 600)
    bound = adaptive.boundary(0.05, adaptive.PLANNED, int(n.max()))
    fired, top, nxt = adaptive.best_rule(n, wins, bound)
    for k in range(len(n)):
        state = reference(n[k], wins[k], adaptive.PLANNED)
        assert bool(fired[k]) == state.fired, k
        assert adaptive.SYSTEMS[top[k]] == state.leader, k
        want = max(state.weights, key=state.weights.get) if state.weights else None
        got = adaptive.PAIRS[nxt[k]] if nxt[k] >= 0 else None
        assert (tuple(adaptive.SYSTEMS[i] for i in got) if got else None) == want, k
    # the sample covers the cases: decisions made and not, every leader, pairs to post
    assert 0.1 < fired.mean() < 0.9
    assert len(set(top.tolist())) == adaptive.N_SYSTEMS
    assert (nxt >= 0).sum() > 100


def test_vectorised_futility_and_claims_agree_with_intervals():
    rng = np.random.default_rng(8)
    planned = 2000
    bound = radius(np.arange(planned + 1), 0.25, 0.05, rho_for(planned, 0.25, 0.05))
    n = rng.integers(1, planned // 10 + 1, 3000) * 10
    wins = rng.binomial(n, rng.uniform(0.42, 0.58, len(n)))
    fut = adaptive.futile(n, wins, bound, planned)
    exclude = np.abs(wins / n - 0.5) > bound[n]
    for k in range(len(n)):
        (i,) = intervals([Comparison("a", "b", int(n[k]), wins[k] / n[k], 0.25, planned, 0.5, True)], 0.05)
        assert bool(fut[k]) == i.futile, k
        assert bool(exclude[k]) == (i.winner is not None), k
    assert 0.1 < fut.mean() < 0.9 and exclude.any()


def test_main_runs_small_and_ends_with_the_result_line(capsys):
    start = time.perf_counter()
    out = adaptive.main(["--studies", "40", "--uniform-studies", "20", "--gap", "0.6", "--planned", "500",
                         "--null-cap", "2000", "--seed", "3"])
    assert time.perf_counter() - start < 20
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"RESULT votes_ratio=\d+\.\d{3} p_correct=\d\.\d{3} false_claims=\d\.\d{3}", last), last
    assert math.isfinite(out["votes_ratio"]) and 0 < out["votes_ratio"] < 1
    assert out["p_correct"] == pytest.approx(float(last.split("p_correct=")[1].split()[0]), abs=5e-4)
