"""Coverage of hitkit's 95 % intervals on simulated crowds with worker (or conversation) effects.

Three estimators, each with its clustered bootstrap and with the naive one that resamples single
votes / ratings / annotations:

- **Bradley–Terry strengths** (pairwise): 4 systems; each of 24 workers has their own taste, the
  system strengths plus N(0, 0.8²) per system, and casts 40 votes on random pairs. The truth is
  the fit on a crowd of 1500 such workers (what the estimator converges to). Clustered unit:
  worker.
- **Live-chat system scores**: 5 systems; 40 workers each rate every system in 2 chats of 7
  criteria; z = system effect + worker × system effect N(0, 0.4²) + chat effect N(0, 0.3²) +
  noise N(0, 0.6²). The truth is the system effect. Clustered unit: worker.
- **Spot The Bot win rates**: 3 bots, 45 conversations per pair (the paper's |S_ij|), 6
  annotations per bot per conversation (segments of 2/3/5, 2 annotators each); a bot is labelled bot with probability
  logistic(base + conversation effect N(0, 1.5²)). The truth is the win rate on 3000
  conversations per pair. Clustered unit: conversation.

Coverage = share of (replicate, parameter) intervals that contain the truth; the bar is ≥ 93 %
for the clustered intervals of every estimator, so the RESULT line leads with the smallest of the
three. The intervals are the analysis' own: expanded percentile intervals
(``hitkit.analysis.inference.bootstrap_interval``) from ``N_BOOT`` = 1000 resamples, the analysis
default. (With plain percentile intervals, 24 workers and 300 resamples, Bradley–Terry covered
92.7 % over 1000 replicates; an earlier run of this file with 40 replicates and 300 resamples
printed win rates at 90.8 %, which 120 intervals cannot tell from 94 %: hence the larger
default.)

**Type-I error of the default tests** (no bootstrap): the live-chat / rating significance matrix under
the live-chat null above with every system effect 0 (worker × system and chat effects only), for the
default worker-clustered test and the paper's per-rating Mann–Whitney (``live_chat_type1_default``
should be 3–7 %); the same default test where a few workers do most HITs (``live_chat_type1_unequal``, the
worse of 30 workers of whom 3 do 10 HITs and the rest 2, worker × system effects sd 0.4, and 20 workers of whom
2 do 10 HITs, effects sd 0.8; bar 3–7 %); pairwise's sign test under worker tastes with equal strengths
(``pairwise_type1_default``).

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/coverage.py [--reps N]`` (default 300 per
estimator: 900–1500 intervals each, a Monte Carlo standard error of about 0.006; about four
minutes on a shared 2-core machine). Last line: ``RESULT coverage_clustered=… coverage_naive=…``
(each the minimum over the three estimators), then each estimator's figures, then
``live_chat_type1_default=… live_chat_type1_rating=… live_chat_type1_unequal=… pairwise_type1_default=…``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import numpy as np
import pandas as pd

from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA
from hitkit.protocols.live_chat.scores import score_intervals
from hitkit.protocols.pairwise.bradley_terry import bradley_terry
from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS
from hitkit.protocols.spot_the_bot.win_rates import win_rates

N_BOOT = 1000
BAR = 0.93
STRENGTHS = np.array([0.6, 0.2, -0.2, -0.6])


def pairwise_votes(rng: np.random.Generator, n_workers: int, votes_each: int) -> pd.DataFrame:
    names = [f"s{i}" for i in range(len(STRENGTHS))]
    rows = []
    for w in range(n_workers):
        taste = STRENGTHS + rng.normal(0, 0.8, len(STRENGTHS))
        i = rng.integers(0, len(names), votes_each)
        j = (i + rng.integers(1, len(names), votes_each)) % len(names)
        a_wins = rng.random(votes_each) < 1 / (1 + np.exp(taste[j] - taste[i]))
        for n, (x, y, won) in enumerate(zip(i, j, a_wins)):
            rows.append(("s", "h", f"as{w}", f"w{w}", f"it{w}-{n}", names[x], names[y], "a" if won else "b"))
    return pd.DataFrame(
        rows, columns=["study", "hit_id", "assignment_id", "worker_id", "item_id", "system_a", "system_b", "vote"]
    )


def bt_coverage(replicates: int, rng: np.random.Generator) -> tuple[float, float]:
    truth = bradley_terry(pairwise_votes(rng, 1500, 40), n_boot=0).set_index("system")["score"]
    hits = {"worker": [], "vote": []}
    for r in range(replicates):
        votes = pairwise_votes(rng, 24, 40)
        for unit in hits:
            t = bradley_terry(votes, n_boot=N_BOOT, seed=r, resample=unit).set_index("system")
            hits[unit] += list((t["ci_low"] <= truth[t.index]) & (truth[t.index] <= t["ci_high"]))
    return float(np.mean(hits["worker"])), float(np.mean(hits["vote"]))


def live_chat_kept(rng: np.random.Generator, effects: np.ndarray) -> pd.DataFrame:
    names = [c.name for c in DEFAULT_CRITERIA]
    rows = []
    for w in range(40):
        taste = rng.normal(0, 0.4, len(effects))
        for s, effect in enumerate(effects):
            for chat in range(2):
                chat_effect = rng.normal(0, 0.3)
                for c in names:
                    rows.append(
                        (
                            f"w{w}",
                            f"a{w}",
                            f"c{w}-{s}-{chat}",
                            f"sys{s}",
                            c,
                            effect + taste[s] + chat_effect + rng.normal(0, 0.6),
                        )
                    )
    return pd.DataFrame(rows, columns=["worker_id", "assignment_id", "conversation_id", "system", "criterion", "z"])


def live_chat_coverage(replicates: int, rng: np.random.Generator) -> tuple[float, float]:
    effects = np.array([0.5, 0.25, 0.0, -0.25, -0.5])
    truth = {f"sys{s}": e for s, e in enumerate(effects)}
    hits = {"worker": [], "rating": []}
    for r in range(replicates):
        kept = live_chat_kept(rng, effects)
        for unit in hits:
            t = score_intervals(kept, unit=unit, n_boot=N_BOOT, seed=r)
            t = t[t["criterion"] == "overall"]
            want = t["system"].map(truth)
            hits[unit] += list((t["low"] <= want) & (want <= t["high"]))
    return float(np.mean(hits["worker"])), float(np.mean(hits["rating"]))


BOTS = {"x": 0.3, "y": 0.0, "z": -0.3}


def annotations(rng: np.random.Generator, per_pair: int) -> pd.DataFrame:
    names = list(BOTS)
    rows = []
    c = 0
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for _ in range(per_pair):
                c += 1
                effect = {a: rng.normal(0, 1.5), b: rng.normal(0, 1.5)}
                for k in (2, 3, 5):
                    for annotator in range(2):
                        labels = [
                            "bot" if rng.random() < 1 / (1 + np.exp(-(BOTS[s] + effect[s]))) else "human"
                            for s in (a, b)
                        ]
                        base = dict(
                            study="s",
                            hit_id="h",
                            assignment_id=f"a{c}-{k}-{annotator}",
                            worker_id=f"w{(c + annotator) % 50}",
                            conversation_id=f"c{c}",
                            segment_exchanges=k,
                            fluency=0,
                            sensibleness=0,
                            specificity=0,
                            elapsed_s=20.0,
                        )
                        rows.append({**base, "entity": 0, "system": a, "label": labels[0]})
                        rows.append({**base, "entity": 1, "system": b, "label": labels[1]})
    return pd.DataFrame(rows, columns=list(ANNOTATION_COLUMNS))


def win_rate_coverage(replicates: int, rng: np.random.Generator) -> tuple[float, float]:
    big = win_rates(annotations(rng, 3000), n_boot=0)
    truth = big.set_index(["system_a", "system_b"])["win_rate"]
    hits = {"conversation": [], "annotation": []}
    for r in range(replicates):
        ann = annotations(rng, 45)
        for unit in hits:
            t = win_rates(ann, n_boot=N_BOOT, seed=r, cluster=unit)
            t = t[t["system_a"] < t["system_b"]]
            want = truth.loc[list(zip(t["system_a"], t["system_b"]))].to_numpy()
            hits[unit] += list((t["win_rate_low"].to_numpy() <= want) & (want <= t["win_rate_high"].to_numpy()))
    return float(np.mean(hits["conversation"])), float(np.mean(hits["annotation"]))


def live_chat_type1(replicates: int, rng: np.random.Generator) -> tuple[float, float]:
    """Type-I error of the live-chat (and rating: the same function) significance matrix under a null with
    worker × system effects N(0, 0.4²) and chat effects N(0, 0.3²) (:func:`live_chat_kept` with equal
    systems): the share of (replicate, ordered pair) one-sided p-values below 0.05, uncorrected, for the
    default worker-clustered test and for Ji et al.'s per-rating Mann–Whitney."""
    from hitkit.protocols.live_chat.scores import pairwise_significance

    rejected = {"worker": [], "rating": []}
    for _ in range(replicates):
        kept = live_chat_kept(rng, np.zeros(5))
        for unit in rejected:
            rejected[unit] += list(pairwise_significance(kept, unit=unit, correction="none")["p_value"] < 0.05)
    return float(np.mean(rejected["worker"])), float(np.mean(rejected["rating"]))


UNEQUAL_DESIGNS = {
    "30 workers, 3 doing 10 HITs": ([10] * 3 + [2] * 27, 0.4),
    "20 workers, 2 doing 10 HITs": ([10] * 2 + [2] * 18, 0.8),
}
"""The unequal-activity nulls of issue 39: HITs per worker, and the sd of worker × system effects."""


def live_chat_unequal_kept(rng: np.random.Generator, hits: list[int], taste_sd: float) -> pd.DataFrame:
    """A live-chat null where a few workers do most HITs: each HIT a chat with each of 5 equal systems, all
    criteria rated; z = worker × system effect N(0, taste_sd²) (the same in all the worker's HITs) + chat
    effect N(0, 0.3²) + noise N(0, 0.6²)."""
    names = [c.name for c in DEFAULT_CRITERIA]
    rows = []
    for w, n_hits in enumerate(hits):
        taste = rng.normal(0, taste_sd, 5)
        for h in range(n_hits):
            for s in range(5):
                chat = taste[s] + rng.normal(0, 0.3)
                rows += [
                    (f"w{w}", f"a{w}-{h}", f"c{w}-{h}-{s}", f"sys{s}", c, chat + rng.normal(0, 0.6)) for c in names
                ]
    return pd.DataFrame(rows, columns=["worker_id", "assignment_id", "conversation_id", "system", "criterion", "z"])


def live_chat_type1_unequal(replicates: int, rng: np.random.Generator) -> dict[str, float]:
    """Type-I error of the default (worker-clustered CR2) live-chat test in each of :data:`UNEQUAL_DESIGNS`:
    the share of (replicate, ordered pair) one-sided p-values below 0.05, uncorrected (the plain sandwich
    with G − 1 degrees of freedom rejected 7.8 % and 8.0 % here)."""
    from hitkit.protocols.live_chat.scores import pairwise_significance

    out = {}
    for name, (hits, taste_sd) in UNEQUAL_DESIGNS.items():
        rejected: list[bool] = []
        for _ in range(replicates):
            kept = live_chat_unequal_kept(rng, hits, taste_sd)
            rejected += list(pairwise_significance(kept, correction="none")["p_value"] < 0.05)
        out[name] = float(np.mean(rejected))
    return out


def pairwise_type1(replicates: int, rng: np.random.Generator) -> float:
    """Type-I error of pairwise's default test (``pair_table``'s worker-clustered p; the per-vote sign test,
    ``test="vote"``, rejected 17.7 % here) with worker tastes
    N(0, 0.8²) per system and equal strengths: two-sided p < 0.05 over (replicate, pair)."""
    from hitkit.protocols.pairwise.analysis import pair_table

    global STRENGTHS
    saved, STRENGTHS = STRENGTHS, np.zeros(4)
    try:
        rejected = []
        for _ in range(replicates):
            rejected += list(pair_table(pairwise_votes(rng, 24, 40), correction="none")["p_value"] < 0.05)
    finally:
        STRENGTHS = saved
    return float(np.mean(rejected))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=300, help="replicates per estimator (default 300)")
    replicates = parser.parse_args().reps
    start = time.perf_counter()
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for seed, (name, run) in enumerate(
            (("bradley_terry", bt_coverage), ("live_chat_scores", live_chat_coverage), ("win_rates", win_rate_coverage))
        ):
            results[name] = run(replicates, np.random.default_rng([2019, seed]))
            print(
                f"{name:18s} clustered {results[name][0]:.3f}  naive {results[name][1]:.3f}  "
                f"({replicates} replicates, {N_BOOT} resamples each)",
                flush=True,
            )
        default, per_rating = live_chat_type1(max(replicates, 200), np.random.default_rng([2019, 7]))
        print(
            f"live chat / rating significance, type-I at 0.05 under worker x system and chat effects: "
            f"default (worker-clustered) {default:.3f}, per-rating Mann-Whitney {per_rating:.3f}",
            flush=True,
        )
        unequal = live_chat_type1_unequal(max(replicates, 200), np.random.default_rng([2019, 9]))
        print(
            "live chat / rating default test, type-I at 0.05 with unequal activity: "
            + ", ".join(f"{k} {v:.3f}" for k, v in unequal.items()),
            flush=True,
        )
        pair_default = pairwise_type1(max(replicates, 200), np.random.default_rng([2019, 8]))
        print(
            f"pairwise pairs.csv default p (worker-clustered), type-I at 0.05 under worker tastes: {pair_default:.3f}",
            flush=True,
        )
    print(f"{time.perf_counter() - start:.0f} s")
    clustered = min(v[0] for v in results.values())
    naive = min(v[1] for v in results.values())
    if clustered < BAR:
        print(f"FAIL: a clustered coverage is below {BAR}")
    print(
        f"RESULT coverage_clustered={clustered:.3f} coverage_naive={naive:.3f} "
        + " ".join(f"{k}_clustered={v[0]:.3f} {k}_naive={v[1]:.3f}" for k, v in results.items())
        + f" live_chat_type1_default={default:.3f} live_chat_type1_rating={per_rating:.3f}"
        f" live_chat_type1_unequal={max(unequal.values()):.3f}"
        f" pairwise_type1_default={pair_default:.3f}"
    )
    return 0 if clustered >= BAR else 1


if __name__ == "__main__":
    sys.exit(main())
