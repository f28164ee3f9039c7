"""Numbers that cannot look wrong (issue 31): rate intervals inside [0, 1], an exact-style interval for
0 of n and n of n (never [0, 0]), legends naming only what is drawn, overlapping curves told apart, and
no order claimed between systems never compared."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from hitkit.analysis.bounded import clip_interval, rate_interval, wilson_interval
from hitkit.analysis.ppi import mean_interval, win_rates
from tests.studies import REPO

GOLDEN = REPO / "tests" / "data" / "golden"


def scipy_wilson(k: int, n: int) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return ci.low, ci.high


@pytest.mark.parametrize("k,n", [(0, 6), (6, 6), (3, 6), (1, 40), (4, 4)])
def test_the_wilson_interval_matches_scipys(k, n):
    low, high = wilson_interval(k, n)
    assert (low, high) == pytest.approx(scipy_wilson(k, n), abs=1e-12)
    assert 0 <= low < high <= 1


def test_bad_counts_are_refused_with_what_was_given():
    with pytest.raises(ValueError, match="7 successes of 6"):
        wilson_interval(7, 6)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_an_interval_is_clipped_to_the_parameters_range_and_nan_stays_nan():
    assert clip_interval(0.7836, 1.0856) == (0.7836, 1.0)
    assert clip_interval(-0.2, 0.3) == (0.0, 0.3)
    assert all(math.isnan(x) for x in clip_interval(math.nan, math.nan))


def items(pair_scores: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    rows = [(a, b, y, y) for (a, b), ys in pair_scores.items() for y in ys]
    return pd.DataFrame(rows, columns=["system_a", "system_b", "human", "judge"])


def test_a_win_rate_whose_t_interval_passes_1_is_reported_inside_0_1():
    # 14 wins of 15: the t interval (mean ± t·sd/√n) reaches past 1, as the [0.7836, 1.0856] the issue showed.
    votes = [1.0] * 14 + [0.0]
    raw = mean_interval(votes)
    assert raw.high > 1
    row = win_rates(items({("alpha", "beta"): votes})).iloc[0]
    for kind in ("human", "judge", "ppi"):
        assert 0 <= row[f"{kind}_low"] <= row[kind] <= row[f"{kind}_high"] == 1.0
    assert row["human_low"] == pytest.approx(raw.low)  # only the impossible end moves


def test_a_win_rate_of_0_of_6_gets_the_wilson_interval_not_0_0():
    row = win_rates(items({("alpha", "beta"): [0.0] * 6})).iloc[0]
    assert row["human"] == 0.0
    for kind in ("human", "judge", "ppi"):
        assert (row[f"{kind}_low"], row[f"{kind}_high"]) == pytest.approx(scipy_wilson(0, 6))
        assert row[f"{kind}_high"] > 0.35
    row = win_rates(items({("alpha", "beta"): [1.0] * 6})).iloc[0]
    assert (row["human_low"], row["human_high"]) == pytest.approx(scipy_wilson(6, 6))


def test_rate_interval_keeps_an_interval_with_spread_and_only_clips_it():
    assert rate_interval([0, 1, 0.5], -0.3, 1.2) == (0.0, 1.0)
    assert rate_interval([0, 1, 1], 0.2, 0.9) == (0.2, 0.9)
    # one value has no estimate (a t interval needs two): no interval either, not a Wilson one around nothing
    assert all(math.isnan(v) for v in rate_interval([0.0], math.nan, math.nan))


def test_spot_the_bots_4_of_4_wins_get_the_wilson_interval_on_the_golden_study():
    """tests/data/golden/spot_the_bot's export: alpha beat gamma in 4 of 4 decisive annotations; the
    bootstrap interval was [1, 1] (every resample 4 of 4) and is Wilson's now."""
    from hitkit.protocols.spot_the_bot.reading import read_annotations
    from hitkit.protocols.spot_the_bot.win_rates import win_rates as stb_win_rates

    table = stb_win_rates(read_annotations(GOLDEN / "spot_the_bot" / "export"), n_boot=200, seed=1)
    row = table[(table.system_a == "alpha") & (table.system_b == "gamma")].iloc[0]
    assert (row.wins, row.losses) == (4, 0)
    assert (row.win_rate_low, row.win_rate_high) == pytest.approx(scipy_wilson(4, 4))
    back = table[(table.system_a == "gamma") & (table.system_b == "alpha")].iloc[0]
    assert (back.win_rate_low, back.win_rate_high) == pytest.approx(scipy_wilson(0, 4))
    decided = table.dropna(subset=["win_rate"])
    assert (decided.win_rate_low <= decided.win_rate).all() and (decided.win_rate <= decided.win_rate_high).all()


def test_a_legend_names_only_the_estimates_that_have_points():
    """Spot The Bot's judge figure had a "judge only" legend entry with no points: an all-NaN kind is dropped."""
    from hitkit.report.plots import compared_intervals, drawn

    nan = [math.nan, math.nan]
    kinds = [
        ("people only", [0.4, 0.6], [0.2, 0.4], [0.6, 0.8]),
        ("judge only", nan, nan, nan),
        ("prediction-powered", [0.45, math.nan], [0.3, math.nan], [0.6, math.nan]),
    ]
    assert [k[0] for k in drawn(kinds)] == ["people only", "prediction-powered"]
    png = compared_intervals(["a over b", "a over c"], kinds, xlabel="win rate", title="t")
    assert png == compared_intervals(["a over b", "a over c"], [kinds[0], kinds[2]], xlabel="win rate", title="t")
    assert png != compared_intervals(["a over b", "a over c"], kinds[:1], xlabel="win rate", title="t")


def test_overlapping_survival_curves_differ_in_line_style_and_marker(monkeypatch):
    from hitkit.report import curves

    styles = [curves.curve_style(i) for i in range(28)]
    assert len(set(styles)) == 28 and len({s for s, _m in styles[:4]}) == 4 and len({m for _s, m in styles[:7]}) == 7
    # Two systems with exactly the same curve (the survival plot where one hid the other).
    same = pd.DataFrame(
        {"system": ["alpha"] * 3 + ["beta"] * 3, "time": [1, 2, 3] * 2, "survival": [0.8, 0.5, 0.2] * 2}
    )
    monkeypatch.setattr(curves, "to_png", lambda fig: fig)  # the figure itself, to read its lines
    ax = curves.step_curves(same).axes[0]
    lines = {line.get_label(): (line.get_linestyle(), line.get_marker()) for line in ax.get_lines()}
    assert set(lines) == {"alpha", "beta"} and lines["alpha"] != lines["beta"]
    assert all(line.get_linestyle() != lines["alpha"][0] for line in ax.get_lines() if line.get_label() == "beta")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["alpha", "beta"]


def adaptive_votes() -> pd.DataFrame:
    """An adaptive study that found alpha best early and then paired only alpha: beta and gamma each met
    alpha, never each other (gamma lost to alpha a little less often, so its score is higher)."""
    rows = []
    for other, wins in (("beta", 3), ("gamma", 5)):
        for i in range(12):
            rows.append(
                {
                    "worker_id": f"w{i % 4}",
                    "item_id": f"{other}{i}",
                    "system_a": "alpha",
                    "system_b": other,
                    "vote": "b" if i < wins else "a",
                }
            )
    return pd.DataFrame(rows)


def test_pairwise_claims_no_order_between_systems_that_never_met():
    from hitkit.protocols.pairwise.bradley_terry import bradley_terry

    table = bradley_terry(adaptive_votes(), n_boot=50, seed=1).set_index("system")
    assert table.loc["gamma", "score"] > table.loc["beta", "score"]  # the fit alone would order them
    assert table.loc["alpha", "rank"] == 1
    assert table.loc["beta", "rank"] == table.loc["gamma", "rank"] == 2  # tied: 0 comparisons between them
    # One vote between them, and the order is claimed again.
    more = pd.concat(
        [
            adaptive_votes(),
            pd.DataFrame([{"worker_id": "w9", "item_id": "x", "system_a": "beta", "system_b": "gamma", "vote": "b"}]),
        ]
    )
    table = bradley_terry(more, n_boot=0).set_index("system")
    assert sorted(table["rank"]) == [1, 2, 3]


def test_compared_ranks_follow_chains_of_direct_comparisons():
    from hitkit.analysis.ranking import compared_ranks, ranks

    score = np.array([3.0, 2.0, 1.0, 0.5])
    everyone = ~np.eye(4, dtype=bool)
    assert list(compared_ranks(score, everyone)) == list(ranks(score))
    chain = np.zeros((4, 4), bool)
    for i, j in ((0, 1), (1, 2)):  # 0 met 1, 1 met 2: 0 > 1 > 2 by a chain; 3 met nobody
        chain[i, j] = chain[j, i] = True
    assert list(compared_ranks(score, chain)) == [1, 2, 3, 1]


def test_spot_the_bot_puts_systems_that_never_met_in_one_cluster():
    from hitkit.protocols.spot_the_bot.ranking import rank_with_bootstrap

    rows = []
    for other, wins in (("beta", 2), ("gamma", 6)):  # alpha met both; beta and gamma never met
        for i in range(16):
            won = i < wins
            rows.append(
                {
                    "winner": other if won else "alpha",
                    "loser": "alpha" if won else other,
                    "drawn": False,
                    "conversation": f"{other}/{i}",
                    "worker": f"w{i % 5}",
                }
            )
    games = pd.DataFrame(rows)
    table = rank_with_bootstrap(games, n_boot=100, seed=2, resample="conversation").set_index("system")
    assert table.loc["gamma", "win_rate"] > table.loc["beta", "win_rate"]
    for cluster in ("cluster", "win_rate_cluster"):
        assert table.loc["beta", cluster] == table.loc["gamma", cluster]
    # With games between them, their clusters come from the bootstrap ranges alone again.
    extra = pd.DataFrame(
        [
            {"winner": "gamma", "loser": "beta", "drawn": False, "conversation": f"x/{i}", "worker": f"w{i}"}
            for i in range(30)
        ]
    )
    table = rank_with_bootstrap(pd.concat([games, extra]), n_boot=100, seed=2, resample="conversation")
    assert table.set_index("system").loc["beta", "cluster"] != table.set_index("system").loc["gamma", "cluster"]


def test_the_pairwise_report_says_which_systems_share_a_rank_and_why():
    from hitkit.protocols.pairwise.bradley_terry import bradley_terry
    from hitkit.protocols.pairwise.report import shared_ranks

    text = shared_ranks(bradley_terry(adaptive_votes(), n_boot=0))
    assert len(text) == 1 and text[0].startswith("beta, gamma share rank 2") and "order is unknown" in text[0]
    assert shared_ranks(bradley_terry(adaptive_votes().assign(system_b="beta"), n_boot=0)) == []
