"""Spot The Bot's stopping rule, the group-sequential worker sign-flip test (hitkit.analysis.signflip):
its level when a few workers do most of the HITs and lean one way, its power on a clear difference, and the
pieces its exactness rests on (ownership, signs fixed per worker, the interval agreeing with the test)."""

from __future__ import annotations

import numpy as np

from hitkit.analysis.signflip import FlipRows, flip_path, flips, owned, verdict
from hitkit.simulation.activity import hit_workers


def _study(rng, *, gap=0.0, taste=1.0, workers=20, conversations=60, per_hit=4):
    """One pair's annotations: ``conversations`` bot–bot conversations, three segments each (one shared
    conversation effect), shuffled into HITs of ``per_hit`` taken by a Zipf crowd whose every worker leans
    to x or y by ``taste`` (logit sd); x is ``gap`` logits better. Scores in {0, ½, 1}."""
    segments = np.repeat(np.arange(conversations), 3)
    effect = rng.normal(0, 0.7, conversations)
    order = rng.permutation(len(segments))
    hits = [order[i : i + per_hit] for i in range(0, len(order), per_hit)]
    who = hit_workers(len(hits), workers, "zipf", rng)
    lean = rng.normal(0, taste, workers)
    look, worker, item, score = [], [], [], []
    for h, members in enumerate(hits):
        for s in members:
            latent = gap + effect[segments[s]] + lean[who[h]] + rng.logistic()
            look.append(h)
            worker.append(who[h])
            item.append(segments[s])
            score.append(1.0 if latent > 1 else (0.0 if latent < -1 else 0.5))
    return np.array(look), np.array(worker), np.array(item), np.array(score), float(conversations)


def test_equal_bots_are_claimed_different_at_most_alpha_when_a_few_leaning_workers_do_most_hits():
    rng = np.random.default_rng(7)
    claims = 0
    studies = 400
    for _ in range(studies):
        look, worker, item, score, planned = _study(rng, taste=1.13)
        claims += bool((flip_path("x", "y", look, worker, item, score, planned, 0.05).winner != 0).any())
    # 0.036 over 2,000 such studies; taking each annotation as its own worker claims in 0.10
    assert claims / studies <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / studies)


def test_a_clear_difference_is_claimed_for_the_better_bot_well_before_the_end():
    rng = np.random.default_rng(3)
    early = 0
    for _ in range(40):
        look, worker, item, score, planned = _study(rng, gap=2.0, taste=0.3, conversations=120)
        path = flip_path("x", "y", look, worker, item, score, planned, 0.05)
        claimed = np.flatnonzero(path.winner != 0)
        assert not (path.winner < 0).any()
        early += bool(len(claimed)) and path.looks[claimed[0]] < 0.7 * (look.max() + 1)
    assert early >= 36


def test_only_the_first_worker_to_reach_a_conversation_counts_its_annotations():
    look = np.array([0, 0, 1, 2, 2, 3])
    worker = np.array(["w1", "w1", "w2", "w1", "w1", "w3"])
    item = np.array(["c1", "c2", "c1", "c1", "c3", "c3"])
    assert owned(look, worker, item).tolist() == [True, True, False, True, True, False]


def test_a_workers_signs_do_not_depend_on_how_many_workers_came_after():
    few, many = flips("a", "b", 5, 0.05), flips("a", "b", 200, 0.05)
    assert np.array_equal(few, many[:, :5])
    assert not np.array_equal(flips("a", "b", 5, 0.05), flips("a", "c", 5, 0.05))
    assert flips("a", "b", 5, 0.01).shape[0] + 1 >= 50 / 0.01


def test_the_interval_excludes_one_half_exactly_when_the_test_claims():
    rng = np.random.default_rng(11)
    for gap in (0.0, 0.6, 2.0):
        look, worker, item, score, planned = _study(rng, gap=gap, taste=0.3)
        path = flip_path("x", "y", look, worker, item, score, planned, 0.05)
        for k in range(len(path.looks)):
            low, high = path.interval(k)
            assert 0.0 <= low <= high <= 1.0
            claimed = (path.winner[: k + 1] != 0).any()
            assert (low > 0.5 or high < 0.5) == claimed
            first = int(np.argmax(path.winner != 0)) if claimed else k
            assert low <= path.estimate[first] <= high


def test_a_pair_with_no_annotations_is_open_and_says_nothing():
    empty = FlipRows(np.zeros(0, int), np.zeros(0), np.zeros(0), np.zeros(0))
    found = verdict("x", "y", empty, 10.0, 0.05)
    assert (found.low, found.high, found.workers, found.finished) == (0.0, 1.0, 0, False)


def _reference_rejections(others, observed, room):
    """The rule as written: every path in play, the observed one among them, rejected when at most
    ``room`` paths in play reach its |T| (itself included) and |T| > 0."""
    pool = np.append(others, observed)
    reach = np.array([(pool >= t).sum() for t in pool])
    return (reach[:-1] <= room) & (others > 0), bool(reach[-1] <= room and observed > 0)


def test_the_linear_time_rejections_are_the_rule_as_written():
    from hitkit.analysis.signflip import _rejections

    rng = np.random.default_rng(5)
    for _ in range(3000):
        size = int(rng.integers(1, 12))
        others = rng.integers(0, 5, size).astype(float)  # many ties, zeros
        observed = float(rng.integers(0, 5))
        room = int(rng.integers(1, size + 3))
        critical, beaten = _rejections(others, observed, room)
        want_beaten, want_observed = _reference_rejections(others, observed, room)
        assert (observed > critical) == want_observed
        if not want_observed:
            assert beaten.tolist() == want_beaten.tolist()


def test_a_pair_whose_every_annotation_is_a_tie_shows_no_bounds_rather_than_a_point():
    look = np.arange(12)
    found = verdict("x", "y", FlipRows(look, look % 4, look, np.full(12, 0.5)), 12.0, 0.05)
    assert (found.estimate, found.low, found.high) == (0.5, 0.0, 1.0)
