"""The simulated crowd's activity laws: long-tailed by default, uniform on request, seeded."""

import numpy as np
import pytest

from hitkit.simulation.activity import heavy_hitters, hit_quotas, hit_workers, top_share, worker_shares


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
