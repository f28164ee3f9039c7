"""The simulated crowd's activity laws: long-tailed by default, uniform on request, seeded."""

import random
from collections import Counter

import numpy as np
import pytest

from hitkit.simulation.activity import (
    activity_weights,
    capped_quotas,
    heavy_hitters,
    hit_quotas,
    hit_workers,
    top_share,
    worker_shares,
)
from hitkit.simulation.crowd import SimWorker, worker_quotas
from hitkit.simulation.staffing import staff
from hitkit.study.loading import load_study
from tests.studies import pairwise_study


def test_the_default_law_is_long_tailed_so_a_few_workers_do_most_of_the_work():
    shares = worker_shares(30)
    assert shares.sum() == pytest.approx(1.0)
    assert shares[:3].sum() > 0.4
    assert list(shares) == sorted(shares, reverse=True)


def test_the_uniform_law_gives_every_worker_the_same_share():
    assert np.allclose(worker_shares(7, "uniform"), 1 / 7)


def test_quotas_sum_to_the_hits_and_give_every_worker_one_while_there_are_enough():
    q = hit_quotas(100, 30)
    assert sum(q) == 100 and min(q) >= 1 and q[0] > 10
    assert hit_quotas(5, 10, "uniform") == [1] * 5 + [0] * 5


def test_heavy_hitters_do_the_share_asked_for():
    rng = np.random.default_rng(0)
    w = heavy_hitters(300, 5, 0.7, rng)
    assert top_share(w, 5) == pytest.approx(0.7, abs=0.01)
    pool = heavy_hitters(300, 20, 0.5, np.random.default_rng(1), light_pool=40)
    assert pool.max() < 60


def test_draws_are_seeded():
    a = hit_workers(50, 10, "lognormal", np.random.default_rng(3))
    b = hit_workers(50, 10, "lognormal", np.random.default_rng(3))
    assert (a == b).all()


def test_an_unknown_law_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown law 'pareto'"):
        worker_shares(3, "pareto")


def test_a_cap_flattens_the_law_and_hands_the_rest_to_the_busiest_workers_below_it():
    free = hit_quotas(200, 12)
    assert free[0] > 40  # zipf's busiest worker, uncapped
    capped = capped_quotas(200, 12, cap=20)
    assert max(capped) == 20 and sum(capped) == 200
    assert capped == sorted(capped, reverse=True)
    # caps that cannot hold the work: every worker at the cap, the rest undone
    assert capped_quotas(200, 12, cap=10) == [10] * 12


def test_activity_weights_are_seeded_and_shuffled_away_from_the_crowds_order():
    a, b = activity_weights(30, "zipf", random.Random(1)), activity_weights(30, "zipf", random.Random(1))
    assert a == b and sorted(a, reverse=True) == list(worker_shares(30))
    assert a != sorted(a, reverse=True)
    assert activity_weights(5, "uniform", random.Random(0)) == [0.2] * 5


def _crowd_study(tmp_path, activity=None, cap=100):
    simulated = {"workers": [{"profile": "diligent", "count": 30}]}
    if activity:
        simulated["activity"] = activity
    path = pairwise_study(tmp_path, f"sqlite:///{tmp_path / 'x.db'}", simulated=simulated)
    config = load_study(path)
    return config.model_copy(update={"schedule": config.schedule.model_copy(update={"per_worker_cap": cap})})


def test_plans_staff_a_long_tailed_crowd_by_default_and_a_uniform_one_on_request(tmp_path):
    zipf = Counter(w for hit in staff(_crowd_study(tmp_path), [1] * 300, random.Random(0)) for w in hit)
    uniform = Counter(w for hit in staff(_crowd_study(tmp_path, "uniform"), [1] * 300, random.Random(0)) for w in hit)
    top3 = lambda c: sum(n for _, n in c.most_common(3)) / 300  # noqa: E731
    assert top3(zipf) > 0.35 and top3(uniform) < 0.2
    capped = Counter(w for hit in staff(_crowd_study(tmp_path, cap=12), [2] * 150, random.Random(0)) for w in hit)
    assert max(capped.values()) == 12  # the busiest reach the cap and go no further
    again = Counter(w for hit in staff(_crowd_study(tmp_path), [1] * 300, random.Random(0)) for w in hit)
    assert again == zipf


def test_the_launch_crowd_gets_the_laws_shares_within_the_cap_seeded(tmp_path):
    config = _crowd_study(tmp_path, cap=15)
    workers = [SimWorker(f"sim-diligent-{i:03d}", "diligent") for i in range(30)]
    quotas = worker_quotas(workers, config, 200)
    assert sum(quotas.values()) == 200 and max(quotas.values()) == 15
    assert sorted(quotas.values(), reverse=True) == capped_quotas(200, 30, "zipf", 15)
    assert quotas == worker_quotas(workers, config, 200)
    assert max(quotas, key=quotas.__getitem__) != "sim-diligent-000"  # shuffled with the seed
    uniform = worker_quotas(workers, _crowd_study(tmp_path, "uniform", cap=15), 200)
    assert set(uniform.values()) <= {6, 7}


def _crowd_state(quota, taken, idle=()):
    """A SimulatedCrowd's bookkeeping alone (no database, no server), to test who takes the next HIT."""
    import threading

    from hitkit.simulation.crowd import SimulatedCrowd

    crowd = object.__new__(SimulatedCrowd)
    crowd._lock, crowd._quota, crowd._taken = threading.Lock(), quota, dict(taken)
    crowd._idle, crowd._places = set(idle), sum(quota.values())
    return crowd


def test_a_busy_worker_takes_its_share_all_through_the_study_and_the_rest_once_others_cannot():
    quota = {"busy": 12, "a": 4, "b": 4}
    # Early on the busy worker runs ahead by its share only: with 3 of 20 places taken, ⌈12 × 3/20⌉ + 1 = 3.
    assert not _crowd_state(quota, {"busy": 2, "a": 1, "b": 0})._quota_reached("busy")
    assert _crowd_state(quota, {"busy": 3, "a": 0, "b": 0})._quota_reached("busy")
    # Half-way, its share is far above the others': 12 × 10/20 + 1 = 7.
    assert not _crowd_state(quota, {"busy": 6, "a": 2, "b": 2})._quota_reached("busy")
    # Past its quota it waits while another worker below its share still finds work …
    assert _crowd_state(quota, {"busy": 12, "a": 3, "b": 4})._quota_reached("busy")
    # … and takes what is left once those workers found nothing they may take, so the study finishes.
    assert not _crowd_state(quota, {"busy": 12, "a": 3, "b": 4}, idle={"a"})._quota_reached("busy")
