"""Ranking fragility (issue 42): the fewest votes or ratings whose removal flips adjacent systems equals a
brute-force search over every subset on small data, for means (exact by sorting), for the pairwise
and arena Bradley–Terry fits and for Spot The Bot's win rates (refitted); the first-order order alone
(no subsets tried) is an upper bound that is usually already the minimum."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from hitkit.analysis import fragility as fr
from hitkit.protocols.arena import bradley_terry as bt


def brute_force(n: int, scores, higher: int, lower: int) -> int | None:
    """The smallest number of observations whose removal flips the pair, trying every subset."""
    for size in range(n + 1):
        for removed in combinations(range(n), size):
            keep = np.ones((1, n), dtype=bool)
            keep[0, list(removed)] = False
            if fr.flipped(scores(keep), higher, lower)[0]:
                return size
    return None


def test_mean_removals_equal_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(150):
        high = rng.integers(0, 6, size=rng.integers(1, 6)).astype(float)
        low = rng.integers(0, 6, size=rng.integers(1, 6)).astype(float)
        if high.mean() <= low.mean():
            high, low = low, high
        values = np.r_[high, low]
        side = np.r_[np.zeros(len(high)), np.ones(len(low))].astype(bool)

        def scores(keep, values=values, side=side):
            out = np.full((len(keep), 2), -np.inf)
            for r, k in enumerate(keep):
                if k[~side].any() and k[side].any():  # one kept on each side, as mean_removals requires
                    out[r] = values[k & ~side].mean(), values[k & side].mean()
                else:
                    out[r] = 1.0, 0.0  # an empty side is no flip
            return out

        assert fr.mean_removals(high, low) == brute_force(len(values), scores, 0, 1)


def test_no_removal_can_flip_groups_that_never_overlap():
    assert fr.mean_removals([9, 10], [1, 2, 3]) is None
    rows = fr.mean_fragility(
        pd.DataFrame({"system": ["a", "a", "b"], "z": [2.0, 3.0, 1.0]}),
        system="system",
        value="z",
        order=["a", "b"],
        ranking="r",
    )
    assert pd.isna(rows["removals"].iloc[0]) and rows["method"].iloc[0] == fr.NO_FLIP


def random_votes(rng, n: int, k: int = 3):
    first = rng.integers(0, k, n)
    second = (first + rng.integers(1, k, n)) % k
    outcome = rng.choice([0.0, 0.5, 1.0, 1.0], n)  # the first system a bit stronger on average
    return first, second, outcome


@pytest.mark.parametrize("seed", range(8))
def test_arena_bradley_terry_fragility_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    first, second, outcome = random_votes(rng, 11)

    def scores(keep):
        return bt.bradley_terry(first, second, outcome, 3, keep.astype(float)).theta

    full = scores(np.ones((1, 11), dtype=bool))[0]
    order = [int(i) for i in np.argsort(-full)]
    rows = fr.refit_fragility([0, 1, 2], order, fr.bt_influence(first, second, outcome, 3), scores, ranking="bt")
    for row in rows.itertuples():
        assert row.removals == brute_force(11, scores, row.higher, row.lower)
        assert row.method == fr.ALL_TRIED


def test_pairwise_fragility_uses_its_own_fit_and_equals_brute_force():
    from hitkit.protocols.pairwise.evidence import fragility

    rng = np.random.default_rng(4)
    first, second, outcome = random_votes(rng, 10)
    names = np.array(["alpha", "beta", "gamma"])
    canon = pd.DataFrame({"first": names[np.minimum(first, second)], "second": names[np.maximum(first, second)]})
    # The canonical outcome is for the system that sorts first: 0 it won, 1 tie, 2 it lost.
    won = np.where(first < second, outcome, 1 - outcome)
    canon["outcome"] = np.select([won == 1.0, won == 0.5], [0, 1], 2)
    from hitkit.protocols.pairwise.bradley_terry import _fit_bradley_terry

    def scores(keep):
        wins = np.zeros((len(keep), 3, 3))
        for r, k in enumerate(keep):
            for f, s, o in zip(first[k], second[k], outcome[k]):
                lo, hi = min(f, s), max(f, s)
                won = o if f == lo else 1 - o
                wins[r, lo, hi] += won
                wins[r, hi, lo] += 1 - won
        return _fit_bradley_terry(wins, 1.0)

    full = scores(np.ones((1, 10), dtype=bool))[0]
    order = list(names[np.argsort(-full)])
    rows = fragility(canon, order)
    for row in rows.itertuples():
        h, lo = list(names).index(row.higher), list(names).index(row.lower)
        assert row.removals == brute_force(10, scores, h, lo)


def test_the_first_order_order_alone_is_an_upper_bound_and_mostly_the_minimum():
    rng = np.random.default_rng(11)
    exact_too = compared = 0
    for _ in range(25):
        first, second, outcome = random_votes(rng, 10)

        def scores(keep, first=first, second=second, outcome=outcome):
            return bt.bradley_terry(first, second, outcome, 3, keep.astype(float)).theta

        full = scores(np.ones((1, 10), dtype=bool))[0]
        order = [int(i) for i in np.argsort(-full)]
        influence = fr.bt_influence(first, second, outcome, 3)
        greedy = fr.refit_fragility([0, 1, 2], order, influence, scores, ranking="bt", limit=0)
        for row in greedy.itertuples():
            truth = brute_force(10, scores, row.higher, row.lower)
            if truth is None or pd.isna(row.removals):
                continue
            assert row.removals >= truth and row.method in (fr.UPPER_BOUND, fr.ALL_TRIED)
            compared += 1
            exact_too += row.removals == truth
    assert compared >= 30 and exact_too >= 0.8 * compared


def test_spot_the_bot_win_rate_fragility_equals_brute_force():
    from hitkit.protocols.spot_the_bot.evidence import fragility

    rng = np.random.default_rng(7)
    systems = np.array(["a", "b", "c"])
    winner_i = rng.integers(0, 3, 10)
    loser_i = (winner_i + rng.integers(1, 3, 10)) % 3
    games = pd.DataFrame({"winner": systems[winner_i], "loser": systems[loser_i], "drawn": rng.random(10) < 0.2})

    def scores(keep):
        d = ~games["drawn"].to_numpy()
        out = []
        for k in keep:
            wins = np.bincount(winner_i[k & d], minlength=3).astype(float)
            played = wins + np.bincount(loser_i[k & d], minlength=3)
            out.append(np.divide(wins, played, out=np.full(3, 0.5), where=played > 0))
        return np.array(out)

    full = scores(np.ones((1, 10), dtype=bool))[0]
    order = list(systems[np.argsort(-full, kind="stable")])
    for row in fragility(games, order).itertuples():
        h, lo = list(systems).index(row.higher), list(systems).index(row.lower)
        assert row.removals == brute_force(10, scores, h, lo)
