"""The arena's ratings agree with FastChat's compute_bt and compute_style_control on FastChat-format battles.

The reference below is an independent re-implementation of the formulas of FastChat's
``fastchat/serve/monitor/rating_systems.py`` (read, not copied): the same losses, the same defaults
(base 10, scale 400, initial rating 1000, FastChat's baseline anchor, style ``reg`` 0.5, ties and both-bad
as 0.5, style covariates (a − b)/(a + b + 1) standardised with ddof 0, count dicts summed) and the same
optimiser FastChat calls (scipy's L-BFGS-B from zeros, maxiter 100, gtol 1e-6). hitkit fits by damped
Newton to convergence, so the two can only agree if the formulas are the same.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.optimize import minimize

from hitkit.protocols.arena.analysis import analyze

MODELS = ["mixtral-8x7b-instruct-v0.1", "gpt-x", "llama-y", "qwen-z", "mistral-w", "phi-v", "gemma-u"]
TRUE = np.array([0.0, 0.45, 0.2, 0.1, -0.15, -0.4, 0.3])  # log10 units
LENGTH = np.array([500, 900, 300, 700, 400, 250, 1100])


def fastchat_battles(n: int, seed: int) -> list[dict]:
    """FastChat clean battles with conv_metadata in FastChat's format; votes lean to the longer reply."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a, b = rng.choice(len(MODELS), 2, replace=False)
        ta, tb = (int(max(1, LENGTH[m] * rng.lognormal(0, 0.5))) for m in (a, b))
        logit = math.log(10) * (TRUE[a] - TRUE[b]) + 2.0 * (ta - tb) / (ta + tb + 1)
        p = 1 / (1 + math.exp(-logit))
        u = rng.random()
        winner = "tie (bothbad)" if u < 0.05 else "tie" if u < 0.2 else "model_a" if rng.random() < p else "model_b"
        heads = [{f"h{j}": int(rng.poisson(0.3)) for j in range(1, 7)} for _ in (a, b)]
        lists = [{"ordered": int(rng.poisson(1)), "unordered": int(rng.poisson(2))} for _ in (a, b)]
        bold = [{"**": int(rng.poisson(1.5)), "__": int(rng.poisson(0.2))} for _ in (a, b)]
        out.append(
            {
                "question_id": f"q{i}",
                "model_a": MODELS[a],
                "model_b": MODELS[b],
                "winner": winner,
                "judge": f"arena_user_{rng.integers(0, 300)}",
                "turn": 1,
                "anony": True,
                "language": "English",
                "conv_metadata": {
                    "sum_assistant_a_tokens": ta,
                    "sum_assistant_b_tokens": tb,
                    "header_count_a": heads[0],
                    "header_count_b": heads[1],
                    "list_count_a": lists[0],
                    "list_count_b": lists[1],
                    "bold_count_a": bold[0],
                    "bold_count_b": bold[1],
                },
            }
        )
    return out


def reference(battles: list[dict]) -> tuple[dict, dict, np.ndarray]:
    """compute_bt and compute_style_control's ratings, re-derived from their formulas."""
    models: list[str] = []  # FastChat's order: pd.factorize over model_a, then model_b
    for name in [b["model_a"] for b in battles] + [b["model_b"] for b in battles]:
        if name not in models:
            models.append(name)
    idx = {m: i for i, m in enumerate(models)}
    a = np.array([idx[b["model_a"]] for b in battles])
    bb = np.array([idx[b["model_b"]] for b in battles])
    y = np.array([1.0 if b["winner"] == "model_a" else 0.0 if b["winner"] == "model_b" else 0.5 for b in battles])
    alpha = math.log(10.0)

    def expit(z):
        return 1 / (1 + np.exp(-z))

    def bt_loss(r):
        p = expit(alpha * (r[a] - r[bb]))
        loss = -(y * np.log(p) + (1 - y) * np.log(1 - p)).sum()
        g = -alpha * (y - p)
        grad = np.bincount(a, g, len(models)) - np.bincount(bb, g, len(models))
        return loss, grad

    r = minimize(bt_loss, np.zeros(len(models)), jac=True, method="L-BFGS-B", options={"maxiter": 100, "gtol": 1e-6}).x

    def total(v):
        return v if isinstance(v, int) else sum(v.values())

    keys = ["sum_assistant_{}_tokens", "header_count_{}", "list_count_{}", "bold_count_{}"]
    sa = np.array([[total(b["conv_metadata"][k.format("a")]) for k in keys] for b in battles], dtype=float)
    sb = np.array([[total(b["conv_metadata"][k.format("b")]) for k in keys] for b in battles], dtype=float)
    diff = (sa - sb) / (sa + sb + 1)
    x = (diff - diff.mean(axis=0)) / diff.std(axis=0)
    reg, k = 0.5, len(models)

    def style_loss(params):
        rt, beta = params[:k], params[k:]
        p = expit(alpha * (rt[a] - rt[bb]) + x @ beta)
        loss = -(y * np.log(p) + (1 - y) * np.log(1 - p)).sum() + reg / 2 * params @ params
        err = y - p
        grad = reg * params
        grad[:k] += np.bincount(a, -alpha * err, k) - np.bincount(bb, -alpha * err, k)
        grad[k:] -= x.T @ err
        return loss, grad

    params = minimize(
        style_loss, np.zeros(k + 4), jac=True, method="L-BFGS-B", options={"maxiter": 100, "gtol": 1e-6}
    ).x

    def scaled(theta):
        rating = 400 * theta + 1000
        return dict(zip(models, rating + (1114 - rating[idx["mixtral-8x7b-instruct-v0.1"]])))

    return scaled(r), scaled(params[:k]), params[k:]


@pytest.fixture(scope="module")
def battles_file(tmp_path_factory):
    battles = fastchat_battles(3000, seed=29)
    path = tmp_path_factory.mktemp("fastchat") / "clean_battle.json"
    path.write_text(json.dumps(battles))
    return path, battles


def test_ratings_and_style_ratings_match_fastchat_within_one_point(battles_file):
    path, battles = battles_file
    result = analyze(path, seed=0, options={"n_boot": 0})
    board = result.tables["leaderboard"].set_index("system")
    plain, style, beta = reference(battles)
    assert set(board.index) == set(MODELS)
    for model in MODELS:
        assert abs(board.at[model, "rating"] - plain[model]) < 1.0, model
        assert abs(board.at[model, "rating_style"] - style[model]) < 1.0, model
    # FastChat's anchor: the baseline model sits at 1114 in both leaderboards.
    assert board.at["mixtral-8x7b-instruct-v0.1", "rating"] == pytest.approx(1114.0)
    coefficients = result.tables["style"].set_index("feature")["coefficient"]
    assert np.allclose(coefficients.to_numpy(), beta, atol=0.01)
    # The length bias is real in these battles, so style control moves the verbose model down.
    assert board.at["gemma-u", "rating_style"] < board.at["gemma-u", "rating"]
    assert coefficients["length"] > 0.2


def test_fastchat_judges_are_the_bootstrap_clusters(battles_file):
    path, _ = battles_file
    result = analyze(path, seed=3, options={"n_boot": 50})
    assert result.summary["workers"] == len({b["judge"] for b in battles_file[1]})
    board = result.tables["leaderboard"].set_index("system")
    # FastChat's anchor pins the baseline model, so its interval is that one point and the others' are
    # intervals of the difference to it.
    anchor = board.loc["mixtral-8x7b-instruct-v0.1"]
    assert anchor["rating_lower"] == pytest.approx(1114.0) and anchor["rating_upper"] == pytest.approx(1114.0)
    others = board.drop(index="mixtral-8x7b-instruct-v0.1")
    assert (others["rating_lower"] < others["rating"]).all() and (others["rating"] < others["rating_upper"]).all()
    assert (others["rating_style_lower"] < others["rating_style_upper"]).all()
