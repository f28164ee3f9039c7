"""The CR2 sandwich with Bell–McCaffrey degrees of freedom (hitkit.analysis.cr2) against an independent,
literal implementation (full N × N hat matrix, matrix square roots, the eigenvalues of GᵀG) on random
unbalanced clusters, and against the textbook case it reduces to."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import linalg, stats

from hitkit.analysis.cr2 import cr2_contrast


def literal_cr2(y, x, cluster, c):
    """CR2 and Bell–McCaffrey df written as the papers write them (Pustejovsky & Tipton 2018, eq. 5–8)."""
    n = len(y)
    m = np.linalg.inv(x.T @ x)
    hat = x @ m @ x.T
    resid = (np.eye(n) - hat) @ y
    meat = np.zeros((x.shape[1], x.shape[1]))
    columns = []
    for g in np.unique(cluster):
        rows = np.flatnonzero(cluster == g)
        block = np.eye(len(rows)) - hat[np.ix_(rows, rows)]
        a = np.real(linalg.pinv(linalg.sqrtm(block)))  # the symmetric square root, then its pseudo-inverse
        u = x[rows].T @ a @ resid[rows]
        meat += np.outer(u, u)
        column = (np.eye(n) - hat)[:, rows] @ a @ x[rows] @ m @ c
        columns.append(column)
    variance = c @ m @ meat @ m @ c
    lam = np.linalg.eigvalsh(np.column_stack(columns).T @ np.column_stack(columns))
    return math.sqrt(variance), lam.sum() ** 2 / (lam**2).sum()


@pytest.mark.parametrize("seed", range(6))
def test_cr2_matches_a_literal_implementation_on_random_unbalanced_clusters(seed):
    rng = np.random.default_rng(seed)
    n_clusters = int(rng.integers(4, 12))
    sizes = rng.integers(1, 15, n_clusters)  # unbalanced: 1 to 14 rows a cluster
    cluster = np.repeat(np.arange(n_clusters), sizes)
    rng.shuffle(cluster)
    n = len(cluster)
    x = np.column_stack([np.ones(n), rng.integers(0, 2, n), rng.normal(size=n)])
    y = x @ np.array([0.3, 0.5, -0.2]) + rng.normal(size=n_clusters)[cluster] + rng.normal(size=n)
    c = np.array([0.0, 1.0, 0.0])
    got = cr2_contrast(y, x, cluster.astype(str), c)
    se, df = literal_cr2(y, x, cluster, c)
    assert got.estimate == pytest.approx(np.linalg.lstsq(x, y, rcond=None)[0][1])
    assert got.se == pytest.approx(se, rel=1e-8)
    assert got.df == pytest.approx(df, rel=1e-8)
    assert got.clusters == n_clusters


def test_cr2_of_a_difference_of_means_with_clusters_that_rate_one_side_only():
    # A cluster holding every row of one group makes I − H_gg singular: the pseudo-inverse of both agrees.
    rng = np.random.default_rng(7)
    cluster = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4, 4])
    group = np.array([1, 1, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0])
    x = np.column_stack([np.ones(len(group)), group])
    y = rng.normal(size=len(group))
    got = cr2_contrast(y, x, cluster, np.array([0.0, 1.0]))
    se, df = literal_cr2(y, x, cluster, np.array([0.0, 1.0]))
    assert got.estimate == pytest.approx(y[group == 1].mean() - y[group == 0].mean())
    assert (got.se, got.df) == (pytest.approx(se), pytest.approx(df))


def test_balanced_intercept_only_cr2_is_the_one_sample_t_test_of_cluster_means():
    rng = np.random.default_rng(3)
    cluster = np.repeat(np.arange(9), 4)
    y = rng.normal(size=9)[cluster] + rng.normal(size=36) + 0.4
    got = cr2_contrast(y, np.ones((36, 1)), cluster, np.array([1.0]))
    means = y.reshape(9, 4).mean(axis=1)
    assert got.df == pytest.approx(8)
    assert got.p_two_sided() == pytest.approx(stats.ttest_1samp(means, 0.0).pvalue)


def test_a_few_busy_clusters_cost_degrees_of_freedom():
    # 3 workers with 10 rows and 27 with 2: Bell–McCaffrey's df fall far below G − 1 = 29.
    cluster = np.concatenate([np.repeat(np.arange(3), 10), np.repeat(np.arange(3, 30), 2)])
    y = np.random.default_rng(0).normal(size=len(cluster))
    got = cr2_contrast(y, np.ones((len(y), 1)), cluster, np.array([1.0]))
    assert got.df < 20


def test_the_interval_inverts_the_two_sided_p():
    rng = np.random.default_rng(11)
    for _ in range(50):
        cluster = rng.integers(0, 6, 30)
        y = rng.normal(0.3, 1, 30)
        test = cr2_contrast(y, np.ones((30, 1)), cluster, np.array([1.0]))
        low, high = test.interval(0.95)
        assert (low > 0 or high < 0) == (test.p_two_sided() < 0.05)
        assert low <= test.estimate <= high


def test_one_cluster_gives_no_standard_error_and_a_rank_deficient_design_is_refused():
    one = cr2_contrast(np.arange(4.0), np.ones((4, 1)), np.zeros(4), np.array([1.0]))
    assert math.isnan(one.se) and one.estimate == pytest.approx(1.5)
    with pytest.raises(ValueError, match="not linearly independent"):
        cr2_contrast(np.arange(4.0), np.ones((4, 2)), np.arange(4), np.array([1.0, 0.0]))


def test_reports_name_the_procedure_the_summary_records_and_older_summaries_keep_their_words():
    from hitkit.analysis.cr2 import PROCEDURE
    from hitkit.protocols.live_chat.report import significance_test
    from hitkit.protocols.pairwise.report import pair_test

    now = significance_test({"significance_unit": "worker", "significance_procedure": PROCEDURE})
    assert "CR2" in now and "Bell–McCaffrey" in now
    before = significance_test({"significance_unit": "worker"})
    assert "workers − 1 degrees of freedom" in before and "CR2" not in before
    assert "Mann–Whitney" in significance_test({"significance_unit": "rating"})
    assert "Bell–McCaffrey" in pair_test({"pair_test": "worker", "pair_procedure": PROCEDURE})
    assert "Clopper–Pearson" in pair_test({"pair_test": "vote", "pair_procedure": "exact sign test"})
    assert "Clopper–Pearson" not in pair_test({"pair_test": "vote"})
