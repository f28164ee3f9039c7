"""The arena's leaderboard on simulated battles with known strengths, heterogeneous workers and a length bias.

The arena (simulated with :mod:`hitkit.protocols.arena.simulation`, the generator ``hitkit plan`` uses,
seeded): 10 systems s0 … s9 with true strengths θ = −1.2 … 1.2 evenly spaced (log10 units: Arena ratings
520 … 1480, s9 best). The weaker a system, the longer its replies: typical lengths 1500 tokens for s0
down to 100 for s9 (log-normal around them), and votes lean to the longer reply with ``LENGTH_BIAS`` = 6
logits per unit of (L_left − L_right) / (L_left + L_right + 1), enough to turn plain Bradley–Terry's
order around. The crowd: 400 workers whose activity is Pareto(3) (some cast several times the votes of
others), each with their own taste (N(0, 0.03²) per system: one worker's votes are correlated), 5 %
spammers voting a or b at random, ties with probability 0.2·4p(1 − p).

Measured:

- ``tau_style`` / ``tau_plain``: Kendall τ of the style-controlled / plain Bradley–Terry order against the
  true one, averaged over ``--studies`` studies of ``BATTLES`` = 4,000 battles on uniformly drawn pairs;
- ``coverage``: over those studies and systems, the share of worker-clustered 95 % intervals of the
  style-controlled rating (as ``hitkit analyze arena`` computes them,
  :func:`hitkit.protocols.arena.leaderboard.style_intervals`: the fit moved by the penalty correction
  ``bradley_terry.ridge_shift`` ± t_{C−1} × the worker-clustered sandwich standard error) that hold the
  rating the style-controlled fit converges to in this crowd: the mean of ``TRUTH_FITS`` = 4 fits, each on
  400,000 battles of a fresh crowd of 20,000 workers (the spammers and tastes shrink the scale a little,
  so that, not 1000 + 400·θ, is what an interval estimates; one such fit alone is off by up to 3–4 points
  at the ends, which the printed spread of the four shows). Printed with it, per system: the intervals'
  mean centre minus that truth, the centres' spread across studies and the mean half-width / 1.96;
- ``votes_ratio``: the scenario adaptive sampling is for, a study that adds systems to a leaderboard.
  Seven incumbents (s0, s1, s3, s4, s6, s8, s9) come with 20,000 public battles among themselves (their
  own crowd of 2,000 workers, read together with the study's as ``hitkit analyze arena export --add
  public.json`` would); the study adds s2, s5 and s7 with up to 3,000 battles of its own crowd. Uniform:
  pairs drawn uniformly over all 45 pairs. Adaptive: each batch of ``BATCH`` = 250 battles picked by
  :func:`hitkit.protocols.arena.sequential.next_pairs` (A-optimal greedy on the style-controlled model
  fitted to everything so far). The width is the mean over the ten systems of the style-controlled
  interval's width; per study, the battles at which the adaptive design's width first reaches the
  uniform design's after 3,000 (linear between reads every 250 battles from 1,000 on) ÷ 3,000, over
  ``--adaptive-studies`` studies (their median, quartiles and range are printed); votes_ratio = the same
  for the studies' mean width curves, and votes_ratio_median the median of the per-study ratios.

- ``flagged_bad`` / ``false_flags``: voter quality without control battles (:mod:`benchmarks.arena_qc`):
  over ``--qc-studies`` studies, each of 12,000 battles by 400 honest workers of the crowd above (its
  length bias and tastes; Zipf activity, :mod:`hitkit.simulation.activity`) with 20 random (coin-flip),
  20 always-left and 12 always-longer voters mixed in (5 %, 5 % and 3 % of the honest workers), 30 votes
  each: the share of bad voters hitkit's voter test flags (α = 0.01) and the share of honest workers it
  flags; ``fastchat_flagged_bad`` / ``fastchat_false_flags`` the same for our re-implementation of
  FastChat's anomalous-user test (Fisher's combination of per-vote conformal p-values, five random
  checkpoints, Bonferroni; :mod:`hitkit.protocols.arena.fastchat_users`) on the same battles.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/arena.py [--studies N] [--adaptive-studies M]
[--qc-studies Q] [--seed S]`` (defaults 100, 20 and 10, seed 0; 566 s wall on the shared 2-core machine
at a load average of 27–43 before the voter part). Last line: ``RESULT tau_style=… tau_plain=… coverage=…
votes_ratio=… votes_ratio_median=… flagged_bad=… false_flags=… fastchat_flagged_bad=…
fastchat_false_flags=… studies=N adaptive_studies=M qc_studies=Q``.

``--scale [--scale-battles B] [--scale-rounds R]`` (defaults 200,000 and 1,000) times instead, on one set
of simulated battles, ``hitkit analyze arena``'s analysis with R bootstrap rounds against the FastChat
stand-ins of ``compute_bootstrap_bt`` + ``compute_bootstrap_style_control`` with R rounds (see
:mod:`benchmarks.arena_qc` for why stand-ins), printing the peak memory of ours:
``RESULT scale_battles=B scale_rounds=R ours_s=… fastchat_s=… ratio=… ours_peak_mib=…``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import time

import numpy as np
import pandas as pd
from arena_qc import qc_study, scale_run
from scipy import stats

from hitkit.protocols.arena import bradley_terry as bt
from hitkit.protocols.arena.leaderboard import Battles, style_intervals
from hitkit.protocols.arena.sequential import next_pairs
from hitkit.protocols.arena.simulation import (
    Crowd,
    Systems,
    battles,
    crowd_of,
    uniform_pairs,
)

K = 10
THETA = tuple(np.round(np.linspace(-1.2, 1.2, K), 3))
LENGTH = tuple(np.round(np.geomspace(1500, 100, K)))
MARKDOWN = tuple(np.linspace(1.0, 2.0, K))
LENGTH_BIAS = 6.0
CROWD = Crowd(workers=400, activity_shape=3.0, taste=0.03, spammers=0.05, length_bias=LENGTH_BIAS, tie_rate=0.2)
PUBLIC = Crowd(workers=2000, activity_shape=3.0, taste=0.03, spammers=0.05, length_bias=LENGTH_BIAS, tie_rate=0.2)
SYSTEMS = Systems(tuple(f"s{i}" for i in range(K)), THETA, LENGTH, MARKDOWN)
INCUMBENTS = (0, 1, 3, 4, 6, 8, 9)
BATTLES = 4000
PRIOR_BATTLES = 20_000
STUDY_BATTLES = 3000
TRUTH_BATTLES = 400_000
TRUTH_FITS = 4
BATCH = 250
READ_EVERY = BATCH
READ_FROM = 1000
"""The adaptive design's width is read from this many study battles on (the uniform one's at the end only)."""


def _arrays(frame: pd.DataFrame):
    index = {name: i for i, name in enumerate(SYSTEMS.names)}
    return (
        frame["system_a"].map(index).to_numpy(),
        frame["system_b"].map(index).to_numpy(),
        frame["vote"].map(bt.OUTCOME).to_numpy(float),
    )


def style_interval(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The style-controlled ratings and their worker-clustered 95 % interval (as the leaderboard computes them)."""
    data = Battles.of(frame)
    fit = bt.style_control(data.first, data.second, data.outcome, K, data.counts_a, data.counts_b)
    lower, upper, _, _ = style_intervals(data, fit, anchor=None)
    order = [data.systems.index(name) for name in SYSTEMS.names]
    return bt.to_rating(fit.theta[0], data.systems, None)[order], lower[order], upper[order]


def pseudo_truth(seed: int) -> np.ndarray:
    """The mean of ``TRUTH_FITS`` style-controlled fits, each to its own fresh crowd's battles."""
    fits = []
    for j in range(TRUTH_FITS):
        rng = np.random.default_rng([seed, 1, j])
        crowd = Crowd(**{**CROWD.__dict__, "workers": 20_000})
        frame = battles(SYSTEMS, crowd, uniform_pairs(K, TRUTH_BATTLES, rng), rng)
        fit = bt.style_control(
            *_arrays(frame),
            K,
            frame[["tokens_a", "header_count_a", "list_count_a", "bold_count_a"]].to_numpy(),
            frame[["tokens_b", "header_count_b", "list_count_b", "bold_count_b"]].to_numpy(),
        )
        fits.append(bt.to_rating(fit.theta[0], list(SYSTEMS.names), None))
    print("pseudo-truth fits' spread (sd, points):", np.round(np.std(fits, axis=0, ddof=1), 1).tolist(), flush=True)
    return np.mean(fits, axis=0)


def uniform_study(seed: int, truth: np.ndarray) -> dict:
    rng = np.random.default_rng([seed, 2])
    frame = battles(SYSTEMS, CROWD, uniform_pairs(K, BATTLES, rng), rng)
    point, lower, upper = style_interval(frame)
    plain = bt.bradley_terry(*_arrays(frame), K).theta[0]
    return {
        "tau_style": stats.kendalltau(THETA, point).statistic,
        "tau_plain": stats.kendalltau(THETA, plain).statistic,
        "covered": ((lower <= truth) & (truth <= upper)).mean(),
        "covered_each": (lower <= truth) & (truth <= upper),
        "centre": (lower + upper) / 2,
        "width": upper - lower,
    }


def mean_width(frame: pd.DataFrame) -> float:
    _, lower, upper = style_interval(frame)
    return float(np.mean(upper - lower))


def prior_battles(rng: np.random.Generator) -> pd.DataFrame:
    """The public arena's battles among the incumbents (their own crowd, worker ids apart from the study's)."""
    inc = np.asarray(INCUMBENTS)
    pairs = inc[uniform_pairs(len(inc), PRIOR_BATTLES, rng)]
    frame = battles(SYSTEMS, PUBLIC, pairs, rng, study="public")
    frame["worker_id"] = "public-" + frame["worker_id"]
    return frame


def extension(seed: int, adaptive: bool) -> list[tuple[int, float]]:
    """(study battles, mean interval width) every ``BATCH`` battles of a study that adds the new systems."""
    rng = np.random.default_rng([seed, 3])
    prior = prior_battles(rng)
    drawn = crowd_of(CROWD, rng, K)
    index = {s: i for i, s in enumerate(SYSTEMS.names)}
    frame, out = prior, []
    while len(frame) - len(prior) < STUDY_BATTLES:
        if adaptive:
            chosen = np.array([[index[a], index[b]] for a, b in next_pairs({"battles": frame}, SYSTEMS.names, BATCH)])
        else:
            chosen = uniform_pairs(K, BATCH, rng)
        frame = pd.concat([frame, battles(SYSTEMS, CROWD, chosen, rng, drawn, start=len(frame))], ignore_index=True)
        done = len(frame) - len(prior)
        if done == STUDY_BATTLES or (adaptive and done >= READ_FROM and done % READ_EVERY == 0):
            out.append((done, mean_width(frame)))
    return out


def needed(curve: list[tuple[int, float]], width: float) -> float:
    """Battles at which the width curve first reaches ``width`` (linear between reads); inf if never."""
    for (n0, w0), (n1, w1) in itertools.pairwise(curve):
        if w1 <= width:
            return n0 + (n1 - n0) * (w0 - width) / (w0 - w1) if w0 > width else float(n0)
    return math.inf


def spread(values: list[float]) -> str:
    """Median, quartiles and range of per-study figures, as the README quotes them."""
    q = np.percentile(values, [0, 25, 50, 75, 100])
    return (
        f"median {q[2]:.3f}, quartiles {q[1]:.3f}–{q[3]:.3f}, range {q[0]:.3f}–{q[4]:.3f}, mean {np.mean(values):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=100)
    parser.add_argument("--adaptive-studies", type=int, default=20)
    parser.add_argument("--qc-studies", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", action="store_true", help="time the analysis against FastChat's bootstrap")
    parser.add_argument("--scale-battles", type=int, default=200_000)
    parser.add_argument("--scale-rounds", type=int, default=1000)
    args = parser.parse_args()
    if args.scale:
        run = scale_run(SYSTEMS, CROWD, args.scale_battles, args.scale_rounds, args.seed)
        fastchat = run["fastchat_bt_s"] + run["fastchat_style_s"]
        print(
            f"hitkit analyze arena: {run['ours_s']:.1f} s, peak traced memory {run['ours_peak_mib']:.0f} MiB; "
            f"FastChat stand-ins: compute_bootstrap_bt {run['fastchat_bt_s']:.1f} s + "
            f"compute_bootstrap_style_control {run['fastchat_style_s']:.1f} s ({os.cpu_count()} CPUs); "
            f"{run['workers']} workers"
        )
        print(
            f"RESULT scale_battles={run['battles']} scale_rounds={run['rounds']} ours_s={run['ours_s']:.1f} "
            f"fastchat_s={fastchat:.1f} ratio={run['ours_s'] / fastchat:.3f} ours_peak_mib={run['ours_peak_mib']:.0f}"
        )
        return
    started = time.monotonic()
    qc = [qc_study(SYSTEMS, CROWD, args.seed * 1000 + s) for s in range(args.qc_studies)]
    for name in ("ours", "fastchat"):
        kinds = pd.DataFrame([r[f"{name}_kinds"] for r in qc]).mean().round(3).to_dict()
        print(f"voter test ({name}): share flagged by kind {kinds}", flush=True)
    print(f"voter tests: {args.qc_studies} studies ({time.monotonic() - started:.0f} s)", flush=True)
    truth = pseudo_truth(args.seed)
    print("pseudo-true style-controlled ratings:", np.round(truth, 1).tolist(), flush=True)
    runs = [uniform_study(args.seed * 1000 + s, truth) for s in range(args.studies)]
    print(f"uniform: {args.studies} studies of {BATTLES} battles ({time.monotonic() - started:.0f} s)", flush=True)
    centre = np.array([r["centre"] for r in runs])
    width = np.array([r["width"] for r in runs])
    print("interval centre − truth, mean over studies:", np.round(centre.mean(axis=0) - truth, 1).tolist())
    print("sd of the centre across studies:", np.round(centre.std(axis=0, ddof=1), 1).tolist())
    print("mean half-width / 1.96:", np.round(width.mean(axis=0) / 2 / 1.96, 1).tolist(), flush=True)
    uniform_widths, curves = [], []
    for s in range(args.adaptive_studies):
        uniform_widths.append(extension(args.seed * 1000 + s, adaptive=False)[-1][1])
        curves.append(extension(args.seed * 1000 + s, adaptive=True))
        print(
            f"extension study {s}: uniform width {uniform_widths[-1]:.1f} after {STUDY_BATTLES}; adaptive "
            f"{[(n, round(w, 1)) for n, w in curves[-1]]} ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
    mean_curve = [(n, float(np.mean([c[i][1] for c in curves]))) for i, (n, _) in enumerate(curves[0])]
    ratio = needed(mean_curve, float(np.mean(uniform_widths))) / STUDY_BATTLES
    each = [needed(c, w) / STUDY_BATTLES for c, w in zip(curves, uniform_widths)]
    print("votes_ratio per extension study:", [round(r, 3) for r in each])
    print("votes_ratio per extension study:", spread(each))
    covered = np.mean([r["covered_each"] for r in runs], axis=0)
    print("coverage per system:", dict(zip(SYSTEMS.names, np.round(covered, 3).tolist())))
    tau_style = float(np.mean([r["tau_style"] for r in runs]))
    tau_plain = float(np.mean([r["tau_plain"] for r in runs]))
    coverage = float(np.mean([r["covered"] for r in runs]))
    print(f"{time.monotonic() - started:.0f} s")
    print(
        f"RESULT tau_style={tau_style:.3f} tau_plain={tau_plain:.3f} coverage={coverage:.3f} "
        f"votes_ratio={ratio:.3f} votes_ratio_median={float(np.median(each)):.3f} "
        f"flagged_bad={np.mean([r['ours_bad'] for r in qc]):.3f} false_flags={np.mean([r['ours_false'] for r in qc]):.3f} "
        f"fastchat_flagged_bad={np.mean([r['fastchat_bad'] for r in qc]):.3f} "
        f"fastchat_false_flags={np.mean([r['fastchat_false'] for r in qc]):.3f} studies={args.studies} "
        f"adaptive_studies={args.adaptive_studies} qc_studies={args.qc_studies}"
    )


if __name__ == "__main__":
    main()
