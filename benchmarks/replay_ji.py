"""Replay of a real live-chat run through hitkit's stopping rule: Ji et al. (2022), Free run 1.

The run's rated HITs (``tests/data/ji2022-run1``, read with hitkit's readers) are taken in 200 seeded
random orders. After every HIT the rule looks, as a study's scheduler would, at hitkit's live-chat
comparisons (:func:`hitkit.protocols.live_chat.sequential.comparisons`: for each of the 45 pairs of
systems, each HIT that passes its own QC test and holds both systems is one observation, its within-HIT
slider difference in [−1, 1], watched with the bounded confidence sequence at α = 0.05, Bonferroni over
the pairs; ``planned`` as the study would plan it) and at the ``clear`` decision
(:func:`hitkit.analysis.sequential.settle`): the rule stops once every pair that looks clear differs, and
declares the rest undecided. A HIT's observation is fixed when it arrives (its own QC, its own
sliders), so the replay computes them once (:func:`observations`) and runs the rule over numpy arrays
(:func:`run_order`); ``tests/test_sequential_ratings.py`` checks it against ``intervals`` + ``settle``.

References on all the data:

- the *fixed-sample Holm test*: the analysis' default significance matrix (worker-clustered, one-sided
  per ordered pair, :func:`hitkit.protocols.live_chat.scores.pairwise_significance`) on every HIT,
  Holm-adjusted p < 0.05;
- the *full-data verdicts*: the rule's own intervals after every HIT in the run's own (submission)
  order; a pair's *margin* is |estimate| / half-width of its full-data interval.

Per order, at the rule's stop: the share of the HITs used; *contradictions*, claimed differences
opposite to, or not supported by, the fixed-sample Holm test; *recall*, the share of the full-data
verdicts claimed; and whether every *clear* pair (margin ≥ 1.5) gets exactly its full-data verdict. An
order is ok when it stops at ≤ 70 % of the HITs with zero contradictions, recall ≥ 0.8 and every clear
pair agreeing. ``hits_ratio`` is the 90th percentile of the share of HITs, ``contradictions`` their
mean per order, ``recall`` the mean recall, ``clear_agree`` the share of orders whose clear pairs all
agree, ``orders_ok`` the share of orders that are ok (the bar: ≥ 0.9).

Usage: ``python benchmarks/replay_ji.py [--orders 200] [--seed 0] [--data DIR]`` (about a minute). The
last line is::

    RESULT hits_ratio=… contradictions=… recall=… clear_agree=… orders_ok=…
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hitkit.analysis.sequential import (  # noqa: E402
    MIN_UNDECIDED,
    Comparison,
    bounded_excludes,
    bounded_radius,
    bounded_step,
    intervals,
    settle,
)
from hitkit.analysis.tables import counted  # noqa: E402
from hitkit.protocols.live_chat.analysis import read_tables, scored  # noqa: E402
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA  # noqa: E402
from hitkit.protocols.live_chat.sequential import hit_differences  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "ji2022-run1"
"""The released run, shipped with the tests (MIT licence)."""
ALPHA = 0.05
SHARE = 0.70
"""The bar: the rule stops with at most this share of the HITs…"""
ORDERS_SHARE = 0.90
"""…in at least this share of the orders…"""
RECALL = 0.8
"""…claiming at least this share of the full-data verdicts…"""
CLEAR = 1.5
"""…and agreeing exactly on every pair whose full-data margin is at least this."""
DECISION = "clear"


def observations(assignments: pd.DataFrame, ratings: pd.DataFrame, systems) -> tuple[list[str], dict]:
    """The run's HITs in submission order, and per pair (x, y) the HITs that inform it with their
    observation: {pair: (HIT indices, differences)}."""
    hits = [h for h in assignments["assignment_id"].astype(str) if h in set(ratings["assignment_id"].astype(str))]
    index = {h: i for i, h in enumerate(hits)}
    found = hit_differences(ratings, systems, DEFAULT_CRITERIA)
    out = {}
    for x, y in combinations(sorted(systems), 2):
        own = found[(found["x"] == x) & (found["y"] == y)]
        out[(x, y)] = (own["hit"].map(index).to_numpy(int), own["difference"].to_numpy(float))
    return hits, out


def run_order(position: np.ndarray, obs: dict, plan: dict, alpha: float = ALPHA) -> dict:
    """The rule after every HIT of one order (``position[i]``: when HIT i arrives, 0-based): per look and
    pair, winner (+1 x, −1 y, 0 none) and whether the pair is settled for the ``clear`` decision; the look
    at which the rule first fires (or the last) and the verdicts there."""
    pairs = list(obs)
    each = alpha / len(pairs)
    looks = len(position)
    winner = np.zeros((looks, len(pairs)), dtype=int)
    settled = np.zeros((looks, len(pairs)), dtype=bool)
    for j, pair in enumerate(pairs):
        hits, x = obs[pair]
        if not len(hits):
            continue
        order = np.argsort(position[hits])
        at, x = position[hits][order], x[order]
        scaled = (x + 1) / 2
        state = np.zeros(5)
        won = np.zeros(len(x), dtype=int)
        rest = np.zeros(len(x), dtype=bool)
        for k in range(len(x)):
            state = bounded_step(state, scaled[k], each, plan[pair])
            above, below = bounded_excludes(state, each)
            won[k] = 1 if above else (-1 if below else 0)
            n = k + 1
            if won[k] == 0 and n >= 2:
                # Interval.futile / Interval.undecided as intervals() computes them (scaled to [0, 1])
                mean, var = float(scaled[:n].mean()), float(scaled[:n].var(ddof=1))
                r_plan = float(bounded_radius(max(plan[pair], n), var, each, plan[pair]))
                gap = abs(mean - 0.5)
                planned = max(plan[pair], n)
                sd = math.sqrt(var)
                reach = 2 * sd * math.sqrt(planned - n) / planned + 2 * sd / math.sqrt(n) * (planned - n) / planned
                futile = n >= planned or (var > 0 and gap + reach < r_plan)
                undecided = n >= MIN_UNDECIDED and gap < r_plan
                rest[k] = futile or undecided
        # after look t (t + 1 HITs), the pair has seen the observations that arrived at positions ≤ t
        seen = np.searchsorted(at, np.arange(looks), side="right")
        has = seen > 0
        winner[has, j] = won[seen[has] - 1]
        settled[has, j] = (won[seen[has] - 1] != 0) | rest[seen[has] - 1]
    fired = settled.all(axis=1)
    stop = int(np.argmax(fired)) if fired.any() else looks - 1
    return {"pairs": pairs, "winner": winner, "settled": settled, "stop": stop, "fired": bool(fired.any())}


def claims(pairs, row: np.ndarray) -> frozenset[tuple[str, str]]:
    """(winner, loser) of every pair whose interval excludes 0 in this row of winners."""
    return frozenset(((a, b) if w > 0 else (b, a)) for (a, b), w in zip(pairs, row) if w != 0)


def holm_verdicts(assignments: pd.DataFrame, ratings: pd.DataFrame) -> frozenset[tuple[str, str]]:
    """The fixed-sample Holm test on all the data: (row, column) with Holm-adjusted p < α in the default
    (worker-clustered) significance matrix."""
    steps = scored(assignments, ratings, DEFAULT_CRITERIA, alpha=ALPHA, qc_method="asymptotic", ddof=1,
                   significance_unit="worker", correction="holm")
    table = steps.significance
    return frozenset((a, b) for a, b, p in zip(table["system_a"], table["system_b"], table["p_adjusted"]) if p < ALPHA)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args(argv)
    started = time.monotonic()

    every, ratings = read_tables(args.data)
    assignments = counted(every)
    ratings = ratings[ratings["assignment_id"].isin(set(assignments["assignment_id"]))]
    systems = sorted(ratings.loc[~ratings["is_control"], "system"].unique())
    hits, obs = observations(assignments, ratings, systems)
    total = len(hits)
    real_slots = int((~ratings.drop_duplicates(["assignment_id", "conversation_id"])["is_control"]).sum())
    k, s = real_slots / total, len(systems)
    plan = {pair: total * min(1.0, k * (k - 1) / (s * (s - 1))) for pair in obs}
    print(f"{total} rated HITs by {ratings['worker_id'].nunique()} workers, {len(systems)} systems, {len(plan)} "
          f"pairs; {np.mean([len(h) for h, _ in obs.values()]):.0f} observations a pair on average (HITs that "
          f"pass their own QC and hold both systems); planned {next(iter(plan.values())):.0f}; α = {ALPHA} "
          f"(Bonferroni); decision '{DECISION}'")

    full_run = run_order(np.arange(total), obs, plan)
    pairs = full_run["pairs"]
    full = claims(pairs, full_run["winner"][-1])
    found = intervals([Comparison(a, b, len(obs[(a, b)][1]), float(np.mean(obs[(a, b)][1])) if len(obs[(a, b)][1])
                                  else 0.0, float(np.var(obs[(a, b)][1], ddof=1)) if len(obs[(a, b)][1]) > 1 else 0.0,
                                  plan[(a, b)], clusters=tuple(obs[(a, b)][1]), bounds=(-1.0, 1.0))
                       for a, b in pairs], ALPHA)
    assert claims(pairs, [1 if i.winner == i.a else (-1 if i.winner else 0) for i in found]) == full
    margin = {(i.a, i.b): abs(i.estimate) / ((i.high - i.low) / 2) for i in found}
    clear = {p for p, m in margin.items() if m >= CLEAR}
    holm = holm_verdicts(assignments, ratings)
    print(f"full data: the rule's intervals claim {len(full)} of {len(pairs)} pairs; {len(clear)} pairs have a "
          f"margin >= {CLEAR}; the fixed-sample Holm test (worker-clustered) finds {len(holm)} ordered pairs")
    state = settle(found, DECISION, systems)
    print(f"full data, the rule: {state.outcome[:300]}")

    rng = np.random.default_rng(args.seed)
    fractions, contradictions, recalls, clear_ok, ok = [], [], [], [], []
    for _ in range(args.orders):
        position = np.empty(total, dtype=int)
        position[rng.permutation(total)] = np.arange(total)
        run = run_order(position, obs, plan)
        stop = run["stop"]
        claimed = claims(pairs, run["winner"][stop])
        fraction = (stop + 1) / total
        wrong = sum(1 for c in claimed if c not in holm)
        recall = len(claimed & full) / len(full) if full else 1.0
        agree = all((claims([p], run["winner"][stop][[pairs.index(p)]]) == claims([p], full_run["winner"][-1][
            [pairs.index(p)]])) for p in clear)
        fractions.append(fraction)
        contradictions.append(wrong)
        recalls.append(recall)
        clear_ok.append(agree)
        ok.append(fraction <= SHARE and wrong == 0 and recall >= RECALL and agree)
    fractions = np.array(fractions)
    hits_ratio = float(np.quantile(fractions, ORDERS_SHARE))
    result = {"hits_ratio": hits_ratio, "contradictions": float(np.mean(contradictions)),
              "recall": float(np.mean(recalls)), "clear_agree": float(np.mean(clear_ok)),
              "orders_ok": float(np.mean(ok))}
    print(f"over {args.orders} orders: the rule stopped at a median {np.median(fractions):.3f} of the HITs (90th "
          f"percentile {hits_ratio:.3f}; never fired in {np.mean(fractions >= 1.0):.1%}); orders with a "
          f"contradiction {np.mean(np.array(contradictions) > 0):.1%}; recall median {np.median(recalls):.3f}; "
          f"every clear pair agreeing in {np.mean(clear_ok):.1%}")
    met = result["orders_ok"] >= ORDERS_SHARE
    print(f"bar (in >= {ORDERS_SHARE:.0%} of orders: <= {SHARE:.0%} of the HITs, no contradiction, recall >= "
          f"{RECALL}, every pair of margin >= {CLEAR} agreeing): {'met' if met else 'NOT met'}; runtime "
          f"{time.monotonic() - started:.0f} s")
    print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in result.items()))
    return result


if __name__ == "__main__":
    main()
