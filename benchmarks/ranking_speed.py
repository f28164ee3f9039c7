"""Speed of hitkit's vectorised TrueSkill bootstrap and of the stability analysis (METHODS §2).

1. 1000 bootstrap TrueSkill rankings of 6 systems over 5000 one-versus-one games (draws
   included): hitkit's vectorised implementation (all resamples advance one game per numpy
   step) against a plain Python loop over the ``trueskill`` package's ``rate_1vs1``, on the same
   resamples, in the same run. The loop is timed on the first ``LOOP_RESAMPLES`` resamples and
   scaled linearly to 1000 (each resample costs the same: 5000 games); the output says so. The
   two must agree (same rank in every looped resample, mu to 1e-3: the package's default
   backend approximates erfc).
2. The full stability analysis (conversations per pair 3–45, 1000 subsamples each, 40 bootstrap
   resamples per subsample, 6 systems, without the leave-one-system-out variant) on a simulated
   Spot The Bot study: 45 conversations per pair, segments of 2, 3, 5 exchanges, 2 annotations
   per segment. Required: under 10 minutes on 2 cores.

Run: ``.venv/bin/python benchmarks/ranking_speed.py``. Last line:
``RESULT speedup=… stability_seconds=…``.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd
import trueskill

from hitkit.analysis.ranking import ranks as rank_scores
from hitkit.analysis.trueskill_vec import DEFAULT_ENV, rate_sequences
from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS
from hitkit.protocols.spot_the_bot.stability import smallest_stable_size, stability

N_SYSTEMS = 6
N_GAMES = 5000
N_BOOT = 1000
LOOP_RESAMPLES = 20
SKILL = np.array([1.2, 0.8, 0.5, 0.3, 0.0, -0.4])  # performance scale, one per system
DRAW_WIDTH = 0.35  # |performance difference| below which a game is a draw
DETECT = {f"bot{i}": p for i, p in enumerate([0.15, 0.3, 0.4, 0.5, 0.65, 0.8])}
CONVERSATIONS_PER_PAIR = 45
SEGMENTS = (2, 3, 5)
STABILITY_LIMIT_S = 600


def simulated_games(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N_GAMES games between random pairs: (winner, loser, drawn) system indices."""
    a = rng.integers(0, N_SYSTEMS, N_GAMES)
    b = (a + rng.integers(1, N_SYSTEMS, N_GAMES)) % N_SYSTEMS
    diff = SKILL[a] - SKILL[b] + rng.normal(0, 1, N_GAMES)
    drawn = np.abs(diff) < DRAW_WIDTH
    a_won = diff >= 0
    return np.where(a_won, a, b), np.where(a_won, b, a), drawn


def package_loop(winner, loser, drawn, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ratings and ranks per resample with a plain loop over ``trueskill.rate_1vs1``."""
    env = trueskill.TrueSkill()  # the package's defaults, as DEFAULT_ENV
    mus = np.empty((len(idx), N_SYSTEMS))
    for r, games in enumerate(idx):
        ratings = [env.create_rating() for _ in range(N_SYSTEMS)]
        for g in games:
            w, l = winner[g], loser[g]
            ratings[w], ratings[l] = env.rate_1vs1(ratings[w], ratings[l], drawn=bool(drawn[g]))
        mus[r] = [x.mu for x in ratings]
    return mus, rank_scores(mus)


def speed_comparison() -> float:
    rng = np.random.default_rng(0)
    winner, loser, drawn = simulated_games(rng)
    # The resamples of rank_with_bootstrap: games drawn with replacement, played in data order.
    idx = np.sort(rng.integers(0, N_GAMES, size=(N_BOOT, N_GAMES)), axis=1)
    start = time.perf_counter()
    mu, _ = rate_sequences(winner[idx], loser[idx], drawn[idx], N_SYSTEMS, DEFAULT_ENV)
    ranks = rank_scores(mu)
    vectorised_s = time.perf_counter() - start
    start = time.perf_counter()
    loop_mu, loop_ranks = package_loop(winner, loser, drawn, idx[:LOOP_RESAMPLES])
    loop_part_s = time.perf_counter() - start
    loop_s = loop_part_s * N_BOOT / LOOP_RESAMPLES
    gap = float(np.abs(loop_mu - mu[:LOOP_RESAMPLES]).max())
    same_ranks = bool((loop_ranks == ranks[:LOOP_RESAMPLES]).all())
    print(f"{N_BOOT} bootstrap TrueSkill rankings, {N_SYSTEMS} systems, {N_GAMES} games ({drawn.mean():.0%} draws)")
    print(f"  hitkit vectorised: {vectorised_s:.2f} s for all {N_BOOT} resamples")
    print(
        f"  trueskill package loop: {loop_part_s:.2f} s for the first {LOOP_RESAMPLES} "
        f"resamples, scaled linearly to {N_BOOT}: {loop_s:.0f} s (not run in full: too long)"
    )
    print(f"  agreement on those {LOOP_RESAMPLES}: max |mu difference| {gap:.1e}, same ranks: {same_ranks}")
    if gap > 1e-3 or not same_ranks:
        raise SystemExit("FAIL: the vectorised ratings do not match the trueskill package")
    speedup = loop_s / vectorised_s
    print(f"  speed-up: {speedup:.0f}x")
    return speedup


def simulated_study(rng: np.random.Generator) -> pd.DataFrame:
    """Spot The Bot annotations: every pair of bots, CONVERSATIONS_PER_PAIR conversations."""
    names = list(DETECT)
    rows = []
    c = 0
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for _ in range(CONVERSATIONS_PER_PAIR):
                c += 1
                for k in SEGMENTS:
                    for worker in rng.choice(30, size=2, replace=False):
                        base = {
                            "study": "bench",
                            "hit_id": f"h{c}-{k}",
                            "assignment_id": f"w{worker}-c{c}-k{k}",
                            "worker_id": f"w{worker}",
                            "conversation_id": f"c{c}",
                            "segment_exchanges": k,
                            "elapsed_s": 30.0,
                        }
                        for entity, system in enumerate((a, b)):
                            u = rng.random()
                            p = DETECT[system]
                            label = "bot" if u < p else "unsure" if u < p + 0.1 else "human"
                            rows.append(
                                {
                                    **base,
                                    "entity": entity,
                                    "system": system,
                                    "label": label,
                                    "fluency": 0,
                                    "sensibleness": 0,
                                    "specificity": 0,
                                }
                            )
    return pd.DataFrame(rows, columns=list(ANNOTATION_COLUMNS))


def stability_run() -> float:
    study = simulated_study(np.random.default_rng(1))
    start = time.perf_counter()
    table = stability(study, sizes=range(3, 46), n_sub=1000, seed=0, leave_one_out=False)
    seconds = time.perf_counter() - start
    smallest = smallest_stable_size(table)["smallest_size"].iloc[0]
    print(
        f"stability: {N_SYSTEMS} systems, {CONVERSATIONS_PER_PAIR} conversations per pair, "
        f"sizes 3–45 × 1000 subsamples × (40 + 1) rankings, no leave-one-out: {seconds:.0f} s "
        f"(limit {STABILITY_LIMIT_S} s)"
    )
    print(
        "  top share at 3 / 20 / 45: "
        + " / ".join(f"{table.set_index('conversations_per_pair').loc[n, 'top_share']:.3f}" for n in (3, 20, 45))
        + f"; smallest size reaching 95 %: {smallest}"
    )
    return seconds


def main() -> int:
    speedup = speed_comparison()
    seconds = stability_run()
    ok = speedup >= 100 and seconds < STABILITY_LIMIT_S
    if not ok:
        print("FAIL: speed-up below 100x or stability over 10 minutes")
    print(f"RESULT speedup={speedup:.0f} stability_seconds={seconds:.0f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
