"""benchmarks/adaptive.py: its vectorised stopping rule is hitkit's (intervals + settle), and it runs."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest

from benchmarks import adaptive
from hitkit.analysis.sequential import Comparison, intervals, settle


def random_states(rng: np.random.Generator, count: int):
    """HITs and their means per pair, from crowds with strengths 0–2.5 logits apart (some fire): n
    (studies × pairs), the bounded-sequence state at ½ and every pair's HIT means in order."""
    gap = rng.uniform(0.0, 2.5, (count, 1))
    s = gap * rng.permuted(np.tile(np.arange(adaptive.N_SYSTEMS), (count, 1)), axis=1)
    p = 1 / (1 + np.exp(-(s[:, adaptive.PAIR_A] - s[:, adaptive.PAIR_B])))
    n = rng.integers(0, 120, (count, len(adaptive.PAIRS)))
    n[rng.random(n.shape) < 0.15] = 0
    x = rng.binomial(adaptive.VOTES_PER_HIT, p[..., None], (*n.shape, n.max())) / adaptive.VOTES_PER_HIT
    each = 0.05 / len(adaptive.PAIRS)
    state = np.zeros((*n.shape, 5))
    for t in range(n.max()):
        on = n > t
        state[on] = adaptive.bounded_step(state[on], x[..., t][on], each, PLANNED_HITS)
    means = [[tuple(float(v) for v in x[k, j, : n[k, j]]) for j in range(len(adaptive.PAIRS))] for k in range(count)]
    return n, state, means


PLANNED_HITS = 50


def reference(row):
    comparisons = [
        Comparison(
            adaptive.SYSTEMS[a],
            adaptive.SYSTEMS[b],
            len(x),
            float(np.mean(x)) if x else 0.5,
            float(np.var(x, ddof=1)) if len(x) > 1 else 0.0,
            PLANNED_HITS,
            null=0.5,
            clusters=x,
        )
        for (a, b), x in zip(adaptive.PAIRS, row)
    ]
    return settle(intervals(comparisons, alpha=0.05), "best", adaptive.SYSTEMS)


def test_vectorised_best_rule_agrees_with_intervals_and_settle():
    rng = np.random.default_rng(7)
    n, state, means = random_states(rng, 60)
    fired, top, nxt = adaptive.best_rule(n, state)
    for k in range(len(n)):
        found = reference(means[k])
        assert bool(fired[k]) == found.fired, k
        assert adaptive.SYSTEMS[top[k]] == found.leader, k
        want = max(found.weights, key=found.weights.get) if found.weights else None
        got = adaptive.PAIRS[nxt[k]] if nxt[k] >= 0 else None
        assert (tuple(adaptive.SYSTEMS[i] for i in got) if got else None) == want, k
    # the sample covers the cases: decisions made and not, pairs to post
    assert 0.1 < fired.mean() < 0.9
    assert len(set(top.tolist())) >= adaptive.N_SYSTEMS - 2
    assert (nxt >= 0).sum() > 30


def test_main_runs_small_and_ends_with_the_result_line(capsys):
    start = time.perf_counter()
    out = adaptive.main(
        [
            "--studies",
            "40",
            "--uniform-studies",
            "20",
            "--gap",
            "0.6",
            "--planned",
            "1000",
            "--null-cap",
            "2000",
            "--null-studies",
            "200",
            "--rating-cap",
            "100",
            "--stb-cap",
            "100",
            "--seed",
            "3",
            "--heavy-studies",
            "50",
            "--workers",
            "2000",
        ]
    )
    assert time.perf_counter() - start < 30
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(
        r"RESULT p_correct=\d\.\d{3} false_claims=\d\.\d{3} adaptive_false_claims=\d\.\d{3} "
        r"false_claims_clustered=\d\.\d{3} "
        r"false_claims_heavy=\d\.\d{3} arena_false_claims=\d\.\d{3} votes_ratio=\d+\.\d{3}",
        last,
    ), last
    # the per-vote sequence fails under the widest worker taste; the per-HIT one does not
    assert out["nulls"]["pairwise, worker taste sd 1.13"][0] > 0.1
    assert out["false_claims_clustered"] <= 0.08
    # with 5 workers doing 70 % of the HITs the per-HIT rule fails; one observation per worker does not
    assert out["heavy"]["pairwise"]["5 workers do 70%, taste sd 1.13"][0] > 0.3
    assert out["false_claims_heavy"] <= 0.1 and out["arena_false_claims"] <= 0.1
    assert math.isfinite(out["votes_ratio"]) and 0 < out["votes_ratio"] < 1
    assert out["p_correct"] == pytest.approx(float(last.split("p_correct=")[1].split()[0]), abs=5e-4)


def test_the_vectorised_rule_for_three_systems_agrees_with_intervals_and_settle():
    # the heavy-worker adaptive null runs best_rule on 3 systems: the same check as for 8
    rng = np.random.default_rng(11)
    systems = ["s0", "s1", "s2"]
    pairs = [(0, 1), (0, 2), (1, 2)]
    count, planned = 80, 50
    n = rng.integers(0, 60, (count, 3))
    strength = rng.uniform(0, 3, (count, 3))
    p = np.stack([1 / (1 + np.exp(-(strength[:, a] - strength[:, b]))) for a, b in pairs], axis=1)
    x = rng.binomial(10, p[..., None], (count, 3, 60)) / 10
    state = np.zeros((count, 3, 5))
    for t in range(60):
        on = n > t
        state[on] = adaptive.bounded_step(state[on], x[..., t][on], 0.05 / 3, planned)
    fired, top, nxt = adaptive.best_rule(n, state, systems=3)
    for k in range(count):
        comparisons = [
            Comparison(
                systems[a],
                systems[b],
                int(n[k, j]),
                float(np.mean(x[k, j, : n[k, j]])) if n[k, j] else 0.5,
                float(np.var(x[k, j, : n[k, j]], ddof=1)) if n[k, j] > 1 else 0.0,
                planned,
                null=0.5,
                clusters=tuple(float(v) for v in x[k, j, : n[k, j]]),
            )
            for j, (a, b) in enumerate(pairs)
        ]
        found = settle(intervals(comparisons, alpha=0.05), "best", systems)
        assert bool(fired[k]) == found.fired and systems[top[k]] == found.leader, k
        want = max(found.weights, key=found.weights.get) if found.weights else None
        got = tuple(systems[i] for i in pairs[nxt[k]]) if nxt[k] >= 0 else None
        assert got == want, k
    assert 0.1 < fired.mean() < 0.9
