"""The arena benchmark's voter-quality and scale parts (``benchmarks/arena.py`` runs them; see its docstring).

Voter quality: simulated studies of honest workers (``arena.py``'s systems and length-biased crowd, Zipf
activity) with bad voters mixed in, each casting 30 votes; hitkit's voter test
(:func:`hitkit.protocols.arena.voters.voter_table`, α = 0.01) and our re-implementation of FastChat's
anomalous-user test (:mod:`hitkit.protocols.arena.fastchat_users`, α = 0.01, checkpoints in 1 … 30) judge
the same battles.

Scale: ``hitkit analyze arena``'s analysis (:func:`hitkit.protocols.arena.analysis.analyze_battles`: the
leaderboard with ``rounds`` worker-bootstrap rounds, style control with its sandwich intervals, the voter
test) against FastChat's ``compute_bootstrap_bt`` + ``compute_bootstrap_style_control`` for the same rounds.
FastChat's own functions (``fastchat/serve/monitor/rating_systems.py``) are not in its PyPI release
(fschat 0.2.36), so :func:`fastchat_bootstrap_bt` and :func:`fastchat_bootstrap_style` stand in: our
re-implementation of what they do, read from their source: the BT bootstrap draws multinomial counts of
the unique (left, right, outcome) cells and fits each by scipy's L-BFGS-B (maxiter 100, gtol 1e-6); the
style bootstrap resamples battles and fits the penalised contextual model by L-BFGS-B on each; both in
a ``multiprocessing.Pool`` of all CPUs, as FastChat does.
"""

from __future__ import annotations

import math
import os
import time
import tracemalloc
from functools import partial
from multiprocessing import Pool

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from hitkit.protocols.arena import bradley_terry as bt
from hitkit.protocols.arena.analysis import analyze_battles
from hitkit.protocols.arena.fastchat_users import flag_users
from hitkit.protocols.arena.mixed_crowds import bad_kind, mixed_crowd
from hitkit.protocols.arena.simulation import Crowd, Systems, battles, uniform_pairs
from hitkit.protocols.arena.voters import VOTER_ALPHA, voter_table

HONEST_WORKERS = 400
HONEST_BATTLES = 12_000
BAD = {"random": 20, "left": 20, "longer": 12}
"""5 % random, 5 % always-left and 3 % always-longer voters, as shares of the 400 honest workers."""
VOTES_EACH = 30


def qc_study(systems: Systems, crowd: Crowd, seed: int) -> dict:
    """One study: the share of bad voters each test flags, and the share of honest workers flagged."""
    rng = np.random.default_rng([seed, 7])
    honest = Crowd(**{**crowd.__dict__, "workers": HONEST_WORKERS})
    frame = mixed_crowd(systems, honest, HONEST_BATTLES, BAD, VOTES_EACH, rng)
    ours = voter_table(frame, alpha=VOTER_ALPHA)
    theirs = flag_users(frame, alpha=VOTER_ALPHA, horizon=VOTES_EACH, seed=seed)
    out = {}
    for name, table in (("ours", ours), ("fastchat", theirs)):
        kind = table["worker_id"].map(bad_kind)
        bad = kind.notna()
        out[f"{name}_bad"] = float(table.loc[bad, "flagged"].mean())
        out[f"{name}_false"] = float(table.loc[~bad, "flagged"].mean())
        out[f"{name}_kinds"] = table[bad].groupby(kind[bad])["flagged"].mean().to_dict()
    return out


def _bt_cell_loss(theta: np.ndarray, cells: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
    eta = math.log(10.0) * (theta[cells[:, 0]] - theta[cells[:, 1]])
    nll = float((w * (np.logaddexp(0.0, eta) - y * eta)).sum())
    g = -math.log(10.0) * w * (y - 0.5 * (1.0 + np.tanh(0.5 * eta)))
    grad = np.bincount(cells[:, 0], g, len(theta)) - np.bincount(cells[:, 1], g, len(theta))
    return nll, grad


def _fit_cells(cells: np.ndarray, y: np.ndarray, k: int, w: np.ndarray) -> np.ndarray:
    res = minimize(
        _bt_cell_loss, np.zeros(k), (cells, y, w), jac=True, method="L-BFGS-B", options={"maxiter": 100, "gtol": 1e-6}
    )
    return res.x


def fastchat_bootstrap_bt(first, second, outcome, k: int, rounds: int, pool) -> np.ndarray:
    """Stand-in for FastChat's compute_bootstrap_bt: multinomial cell counts, one L-BFGS-B fit each."""
    keys = np.stack([first, second, np.rint(np.asarray(outcome) * 2)], axis=1).astype(np.int64)
    cells, counts = np.unique(keys, axis=0, return_counts=True)
    rng = np.random.default_rng(0)
    weights = rng.multinomial(len(first), counts / counts.sum(), size=rounds) / len(first)
    return np.array(list(pool.imap_unordered(partial(_fit_cells, cells[:, :2], cells[:, 2] / 2.0, k), weights)))


def _style_loss(params, k, first, second, x, y, reg):
    eta = math.log(10.0) * (params[first] - params[second]) + x @ params[k:]
    nll = float((np.logaddexp(0.0, eta) - y * eta).sum()) + 0.5 * reg * float(params @ params)
    err = y - 0.5 * (1.0 + np.tanh(0.5 * eta))
    grad = reg * params
    grad[:k] += -math.log(10.0) * (np.bincount(first, err, k) - np.bincount(second, err, k))
    grad[k:] -= x.T @ err
    return nll, grad


def _fit_style(first, second, x, y, k, idx):
    args = (k, first[idx], second[idx], x[idx], y[idx], bt.STYLE_REG)
    start = np.zeros(k + x.shape[1])
    return minimize(_style_loss, start, args, jac=True, method="L-BFGS-B", options={"maxiter": 100, "gtol": 1e-6}).x


def fastchat_bootstrap_style(first, second, outcome, features, k: int, rounds: int, pool) -> np.ndarray:
    """Stand-in for FastChat's compute_bootstrap_style_control: resampled battles, one L-BFGS-B fit each."""
    idx = np.random.default_rng(1).integers(0, len(first), size=(rounds, len(first)))
    fit = partial(_fit_style, first, second, features, np.asarray(outcome, dtype=float), k)
    return np.array(list(pool.imap_unordered(fit, idx)))


def scale_run(systems: Systems, crowd: Crowd, n_battles: int, rounds: int, seed: int) -> dict:
    """Side by side on the same battles: hitkit's analysis (time, peak traced memory) and the FastChat
    stand-ins (time)."""
    rng = np.random.default_rng([seed, 11])
    big = Crowd(**{**crowd.__dict__, "workers": max(1000, n_battles // 40)})
    frame = battles(systems, big, uniform_pairs(len(systems.names), n_battles, rng), rng)
    tracemalloc.start()
    started = time.perf_counter()
    result = analyze_battles(frame, n_boot=rounds, seed=seed)
    ours = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    index = {s: i for i, s in enumerate(systems.names)}
    first, second = frame["system_a"].map(index).to_numpy(), frame["system_b"].map(index).to_numpy()
    outcome = frame["vote"].map(bt.OUTCOME).to_numpy(float)
    features, _, _ = bt.style_features(
        frame[["tokens_a", "header_count_a", "list_count_a", "bold_count_a"]].to_numpy(),
        frame[["tokens_b", "header_count_b", "list_count_b", "bold_count_b"]].to_numpy(),
    )
    k = len(systems.names)
    with Pool(os.cpu_count()) as pool:
        started = time.perf_counter()
        fastchat_bootstrap_bt(first, second, outcome, k, rounds, pool)
        bt_time = time.perf_counter() - started
        started = time.perf_counter()
        fastchat_bootstrap_style(first, second, outcome, features, k, rounds, pool)
        style_time = time.perf_counter() - started
    return {
        "battles": n_battles,
        "rounds": rounds,
        "workers": int(pd.Series(frame["worker_id"]).nunique()),
        "ours_s": ours,
        "ours_peak_mib": peak / 2**20,
        "fastchat_bt_s": bt_time,
        "fastchat_style_s": style_time,
        "qc_failed": result.summary.get("qc_failed"),
    }
