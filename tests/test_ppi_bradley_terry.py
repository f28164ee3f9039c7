"""Prediction-powered Bradley–Terry strengths (hitkit.analysis.ppi_bradley_terry) and their table in
``hitkit analyze`` and the report."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import optimize
from scipy.special import expit

from hitkit.analysis.ppi import order_averaged
from hitkit.analysis.ppi_bradley_terry import STRENGTH_COLUMNS, strengths
from hitkit.cli import main
from hitkit.protocols.pairwise.bradley_terry import bradley_terry
from hitkit.protocols.pairwise.judge import analysis_tables

STRENGTHS = {"s0": 0.6, "s1": 0.2, "s2": -0.2, "s3": -0.6}
NAMES = sorted(STRENGTHS)
PAIRS = [(a, b) for i, a in enumerate(NAMES) for b in NAMES[i + 1 :]]
TRUTH = np.array([expit(STRENGTHS[a] - STRENGTHS[b]) for a, b in PAIRS])


def crowd_votes(rng, pair, votes_per_item=1, tie_share=0.1):
    """Each item's crowd votes for system_a (1, 0, ½), [items, votes_per_item], Bradley–Terry with ties."""
    p = TRUTH[pair][:, None]
    u = rng.random((len(pair), votes_per_item))
    tie = rng.random((len(pair), votes_per_item)) < tie_share
    return np.where(tie, 0.5, (u < p).astype(float))


def judged(rng, pair, y, bias_toward="s1", bias=0.3, agreement=0.8):
    """The judge's order-averaged score: each of two calls agrees with the crowd's vote (a tie drawn
    as either) with probability ``agreement``, then ``bias`` logits toward one system."""
    lean = np.array([1.0 if a == bias_toward else -1.0 if b == bias_toward else 0.0 for a, b in PAIRS])[pair]
    decided = np.where(y == 0.5, rng.random(len(y)) < 0.5, y == 1)
    logit = np.where(decided, 1.0, -1.0) * math.log(agreement / (1 - agreement)) + bias * lean
    calls = rng.random((2, len(y))) < expit(logit)
    return order_averaged(calls[0], calls[1])


def study(rng, n_items=5000, n_human=200, **judge) -> pd.DataFrame:
    """Items (ITEM_COLUMNS) of one simulated judged study, rows in random orientation."""
    pair = rng.integers(0, len(PAIRS), n_items)
    y = crowd_votes(rng, pair, tie_share=0.0)[:, 0]
    human = np.full(n_items, np.nan)
    chosen = rng.choice(n_items, n_human, replace=False)
    human[chosen] = y[chosen]
    a, b = np.array(PAIRS).T[:, pair]
    f = judged(rng, pair, y, **judge)
    flip = rng.random(n_items) < 0.5
    return pd.DataFrame(
        {
            "system_a": np.where(flip, b, a),
            "system_b": np.where(flip, a, b),
            "human": np.where(flip, 1 - human, human),
            "judge": np.where(flip, 1 - f, f),
        }
    )


def vote_rows(rng, n_items, votes_per_item) -> tuple[pd.DataFrame, pd.DataFrame]:
    """votes.csv and judge.csv frames: every item voted ``votes_per_item`` times in random display order,
    judged in both orders."""
    pair = rng.integers(0, len(PAIRS), n_items)
    y = crowd_votes(rng, pair, votes_per_item)
    votes, judge = [], []
    for item, (p, scores) in enumerate(zip(pair, y)):
        a, b = PAIRS[p]
        for w, score in enumerate(scores):
            swap = rng.random() < 0.5
            vote = "tie" if score == 0.5 else "a" if (score == 1) != swap else "b"
            votes.append((f"w{w}", f"q{item}", *((b, a) if swap else (a, b)), vote))
        for first, second in ((a, b), (b, a)):
            judge.append((f"q{item}", first, second, rng.choice(["a", "b", "tie"]), True, True, "j", ""))
    votes = pd.DataFrame(votes, columns=["worker_id", "item_id", "system_a", "system_b", "vote"])
    judge = pd.DataFrame(
        judge, columns=["item_id", "system_a", "system_b", "vote", "parsed", "human_subset", "model", "reply"]
    )
    return votes, judge


@pytest.mark.parametrize("votes_per_item", [1, 3])
def test_lambda_zero_and_the_human_only_column_are_the_rankings_bradley_terry_fit(votes_per_item):
    rng = np.random.default_rng(5)
    votes, judge = vote_rows(rng, 120, votes_per_item)
    # Judge labels on more items than people voted on: those are the unlabelled ones.
    extra = judge.assign(item_id="x" + judge["item_id"])
    tables, summary, _ = analysis_tables(votes, pd.concat([judge, extra], ignore_index=True))
    table = tables["judge_strengths"].set_index("system")
    ranking = bradley_terry(votes, n_boot=0).set_index("system")["score"]
    assert summary["strengths_prior"] == pytest.approx(1 / votes_per_item)
    assert np.abs(table["human"] - ranking).max() < 1e-8
    assert abs(table["human"].sum()) < 1e-12 and abs(table["ppi"].sum()) < 1e-12
    from hitkit.protocols.pairwise.judge import items

    fixed = strengths(items(votes, judge), lam=0, prior=1 / votes_per_item).set_index("system")
    assert np.abs(fixed["ppi"] - ranking).max() < 1e-8 and (fixed["ppi_low"] == fixed["human_low"]).all()
    assert fixed["fallback"].all() and fixed["n_effective"].to_numpy() == pytest.approx(120.0)


def test_without_unlabelled_items_it_is_human_only():
    rng = np.random.default_rng(3)
    items = study(rng, n_items=150, n_human=150)
    table = strengths(items)
    assert tuple(table.columns) == STRENGTH_COLUMNS
    assert (table["lam"] == 0).all() and table["fallback"].all()
    for part in ("", "_low", "_high"):
        assert table[f"ppi{part}"].to_numpy() == pytest.approx(table[f"human{part}"].to_numpy(), abs=1e-12)
    assert table["n_effective"].to_numpy() == pytest.approx(150.0)
    assert (table["n_human"] == table["n_judge"]).all()


def test_the_fit_minimises_the_lambda_loss_written_item_by_item_and_the_sandwich_matches():
    """The per-pair sums stand for the item-by-item loss and gradients: a general optimiser on the
    loss as the module docstring writes it, and the sandwich from explicit per-item gradients."""
    rng = np.random.default_rng(11)
    items = study(rng, n_items=400, n_human=60)
    lam, prior = 0.6, 0.5
    table = strengths(items, lam=lam, prior=prior, small_sample=False).set_index("system").loc[NAMES]
    canon_a = np.where(items["system_a"] < items["system_b"], items["system_a"], items["system_b"])
    canon_b = np.where(items["system_a"] < items["system_b"], items["system_b"], items["system_a"])
    flip = (items["system_a"] > items["system_b"]).to_numpy()
    y = np.where(flip, 1 - items["human"], items["human"])
    f = np.where(flip, 1 - items["judge"], items["judge"])
    x = np.zeros((len(items), 4))
    x[np.arange(len(items)), [NAMES.index(s) for s in canon_a]] = 1
    x[np.arange(len(items)), [NAMES.index(s) for s in canon_b]] = -1
    h = ~np.isnan(y)
    n, big_n = h.sum(), (~h).sum()
    prior_x = np.array([[1.0 if s == a else -1.0 if s == b else 0.0 for s in NAMES] for a, b in PAIRS])

    def loss(beta, out, rows):
        d = x[rows] @ beta
        return -(out * d - np.logaddexp(0, d))

    def total(beta):
        d0 = prior_x @ beta
        penalty = prior * (0.5 * d0 - np.logaddexp(0, d0)).sum()
        return (
            loss(beta, y[h], h).mean() + lam * (loss(beta, f[~h], ~h).mean() - loss(beta, f[h], h).mean()) - penalty / n
        )

    best = optimize.minimize(total, np.zeros(4), method="BFGS", options={"gtol": 1e-12}).x
    assert table["ppi"].to_numpy() == pytest.approx(best - best.mean(), abs=1e-6)

    beta = table["ppi"].to_numpy()
    p = expit(x @ beta)
    g_y, g_f = -(y - p)[:, None] * x, -(f - p)[:, None] * x
    w = p * (1 - p)
    w0 = expit(prior_x @ beta) * (1 - expit(prior_x @ beta))
    outer = lambda weights, rows: weights[:, None, None] * rows[:, :, None] * rows[:, None, :]  # noqa: E731
    hessian = (
        (1 - lam) * outer(w[h], x[h]).mean(0)
        + lam * outer(w[~h], x[~h]).mean(0)
        + prior * outer(w0, prior_x).sum(0) / n
    )
    hinv = np.linalg.pinv(hessian)
    middle = np.cov((g_y - lam * g_f)[h].T) / n + lam**2 * np.cov(g_f[~h].T) / big_n
    se = np.sqrt(np.diag(hinv @ middle @ hinv))
    assert ((table["ppi_high"] - table["ppi_low"]) / (2 * 1.959963984540054)).to_numpy() == pytest.approx(se, rel=1e-6)


def test_prediction_powered_strengths_cover_the_truth_where_the_biased_judge_misses():
    """200 simulated studies (4 systems, 5,000 judged items, 200 with a crowd vote, a judge agreeing
    80 % and +0.3 logits toward s1): 800 system estimates, coverage s.e. about 0.008."""
    rng = np.random.default_rng(2024)
    truth = pd.Series(STRENGTHS)
    ppi_hits, judge_hits, ppi_width, human_width, lam = [], [], [], [], []
    for _ in range(200):
        table = strengths(study(rng)).set_index("system")
        want = truth.loc[table.index]
        ppi_hits += list((table["ppi_low"] <= want) & (want <= table["ppi_high"]))
        judge_hits.append(table.loc["s1", "judge_low"] <= STRENGTHS["s1"] <= table.loc["s1", "judge_high"])
        ppi_width.append((table["ppi_high"] - table["ppi_low"]).mean())
        human_width.append((table["human_high"] - table["human_low"]).mean())
        lam.append(table["lam"].iloc[0])
    assert np.mean(ppi_hits) >= 0.9
    assert np.mean(judge_hits) < 0.5
    assert np.mean(ppi_width) < np.mean(human_width)
    assert 0 < np.mean(lam) <= 1


def test_a_useless_judge_falls_back_or_costs_little():
    rng = np.random.default_rng(9)
    ratios, fallback = [], []
    for _ in range(20):
        items = study(rng, n_items=2000, n_human=200)
        items["judge"] = order_averaged(rng.random(2000) < 0.5, rng.random(2000) < 0.5)
        table = strengths(items)
        ratios.append(((table["ppi_high"] - table["ppi_low"]) / (table["human_high"] - table["human_low"])).mean())
        fallback.append(table["fallback"].iloc[0])
    assert np.mean(ratios) < 1.1 and any(fallback)


def test_bad_input_is_refused_with_what_to_do():
    items = pd.DataFrame({"system_a": ["a"], "system_b": ["b"], "human": [1.0], "judge": [np.nan]})
    with pytest.raises(ValueError, match="no judge score"):
        strengths(items)
    with pytest.raises(ValueError, match="prior"):
        strengths(items.assign(judge=1.0), prior=0)
    few = strengths(items.assign(judge=1.0))
    assert few["ppi_low"].isna().all() and (few["lam"] == 0).all()


def test_hitkit_analyze_writes_judge_strengths_and_the_report_shows_them(tmp_path):
    rng = np.random.default_rng(4)
    votes, judge = vote_rows(rng, 60, 1)
    extra = judge.assign(item_id="x" + judge["item_id"], human_subset=False)
    export = tmp_path / "export"
    export.mkdir()
    votes.insert(0, "study", "s")
    votes.insert(1, "hit_id", "h1")
    votes.insert(2, "assignment_id", "as-" + votes["worker_id"])
    votes.to_csv(export / "votes.csv", index=False)
    pd.concat([judge, extra], ignore_index=True).assign(study="s").to_csv(export / "judge.csv", index=False)
    out = tmp_path / "analysis"
    run = CliRunner().invoke(
        main, ["analyze", "pairwise", str(export), "--out", str(out), "--no-progress", "--n-boot", "50"]
    )
    assert run.exit_code == 0, run.output
    table = pd.read_csv(out / "judge_strengths.csv")
    assert tuple(table.columns) == STRENGTH_COLUMNS and sorted(table["system"]) == NAMES
    assert (table["n_judge"] == 2 * table["n_human"]).all()
    for kind in ("human", "judge", "ppi"):
        assert ((table[f"{kind}_low"] <= table[kind]) & (table[kind] <= table[f"{kind}_high"])).all()
    assert (out / "judge_strengths.png").is_file()

    from hitkit.report.build import report

    files = report(out, tmp_path / "report")
    html = files.html.read_text()
    assert "Strengths: people, judge, prediction-powered" in html
    assert "Bradley–Terry strengths combine the two by PPI++ for M-estimation" in files.methods
