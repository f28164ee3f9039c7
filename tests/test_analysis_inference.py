"""Shared inference (METHODS §2b): the expanded percentile interval of a bootstrap of few clusters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from hitkit.analysis.inference import (
    bootstrap_interval,
    cluster_codes,
    cluster_weights,
    clusters_per_column,
    expanded_tail,
)


def test_expanded_tail_is_hesterbergs_and_tends_to_the_plain_tail():
    # n = 24: z' = sqrt(24/23) * t(0.975, 23) = 1.0215 * 2.0687 = 2.1132 -> 1.73 % each end.
    assert expanded_tail(24) == pytest.approx(stats.norm.sf(np.sqrt(24 / 23) * stats.t.ppf(0.975, 23)))
    assert expanded_tail(24) == pytest.approx(0.0173, abs=2e-4)
    assert expanded_tail(10) < expanded_tail(24) < expanded_tail(1000) < 0.025
    assert expanded_tail(100_000) == pytest.approx(0.025, abs=1e-4)
    assert expanded_tail(1) == pytest.approx(0.025) and expanded_tail(0) == pytest.approx(0.025)


def test_a_bootstrap_of_twelve_clusters_is_widened_to_the_t_interval():
    """The percentile interval of a cluster bootstrap of a mean is too narrow with few clusters
    (ddof-0 spread, z instead of t); the expanded one is about the t interval, the plain one is
    not (it is the reason 24-worker Bradley–Terry intervals covered 92.7 %)."""
    rng = np.random.default_rng(5)
    x = rng.normal(0, 1, 12)
    codes, n = cluster_codes(np.arange(12))
    boot = (cluster_weights(codes, n, 40_000, rng) @ x / 12)[:, None]
    low, high = bootstrap_interval(boot, 12)
    half_t = stats.t.ppf(0.975, 11) * x.std(ddof=1) / np.sqrt(12)
    assert (high[0] - low[0]) / 2 == pytest.approx(half_t, rel=0.05)
    plain_low, plain_high = np.percentile(boot[:, 0], [2.5, 97.5])
    assert plain_high - plain_low < 0.9 * (high[0] - low[0])


def test_bootstrap_interval_per_column_cluster_counts_and_nan_resamples():
    boot = np.tile(np.linspace(0, 1, 1001)[:, None], (1, 3))
    boot[:500, 2] = np.nan  # a statistic undefined in half the resamples
    low, high = bootstrap_interval(boot, [3, 10_000, 10_000])
    assert low[0] < low[1] and high[0] > high[1]  # 3 clusters: wider than many
    assert low[1] == pytest.approx(0.025, abs=1e-3) and high[1] == pytest.approx(0.975, abs=1e-3)
    assert 0.5 <= low[2] < high[2] <= 1.0
    low, high = bootstrap_interval(np.full((10, 1), np.nan), 5)
    assert np.isnan(low[0]) and np.isnan(high[0])


def test_clusters_per_column_counts_the_units_that_hold_each_statistic():
    codes, _ = cluster_codes(pd.Series(["w1", "w1", "w2", "w3", "w3"]))
    member = np.array([[1, 0], [1, 0], [0, 1], [1, 1], [0, 1]])
    assert list(clusters_per_column(codes, member)) == [2, 2]
    assert list(clusters_per_column(codes, member[:, :1] * 0)) == [0]
