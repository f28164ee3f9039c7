"""Replay of a real live-chat run through hitkit's stopping rule: Ji et al. (2022), Free run 1.

The run's rated HITs (``tests/data/ji2022-run1``, read with hitkit's readers) are taken in 200 seeded
random orders. After every HIT the rule looks, as a study's scheduler would, at hitkit's live-chat
comparisons (:func:`hitkit.protocols.live_chat.sequential.comparisons`: for each pair of systems, each
HIT that passes its own QC test and holds both systems is one observation, its within-HIT slider
difference in [−1, 1], watched with the bounded confidence sequence at α = 0.05, Bonferroni over the
watched pairs) and at the ``clear`` decision (:func:`hitkit.analysis.sequential.settle`): the rule stops
once every pair is settled — it differs, or it is undecided (at its present estimate it would not differ
by the end of the design) or futile — and reports the undecided ones as such. A pair's planned size is
the number of the run's HITs that hold both systems (the design, known before the run; pass or fail);
the run never puts a system beside its persona variant, so those five pairs are planned at 0 and not
watched, as :func:`hitkit.running.stopping.compute` leaves out pairs the material never compares. A
pair's horizon is what it can still expect: its observations so far plus the HITs still planned to hold
it × the share of the HITs so far that pass QC (:func:`hitkit.protocols.live_chat.sequential.passed_share`).
A HIT's observation is fixed when it arrives (its own QC, its own sliders), so the replay computes them
once (:func:`observations`) and runs the rule over numpy arrays, every order at once (:func:`run_orders`);
``tests/test_sequential_ratings.py`` checks it against live chat's comparisons + ``intervals`` + ``settle``.
``--pairs`` adds the per-pair diagnosis of ``benchmarks/replay_pairs.py``.

This replay counts **HITs**: hitkit's live rule takes one observation per worker (their first HIT on the
pair that passes QC), and the two agree only where every worker did one HIT (the test above checks them
there). Free run 1 has 304 HITs by 249 workers, so they differ little; ``hitkit replay live_chat
tests/data/ji2022-run1`` replays the per-worker rule itself (benchmarks/README.md gives both).

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

Usage: ``python benchmarks/replay_ji.py [--orders 200] [--seed 0] [--data DIR] [--pairs]`` (about 10 s).
The last line is::

    RESULT hits_ratio=… contradictions=… recall=… clear_agree=… orders_ok=…
"""

from __future__ import annotations

import argparse
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
from hitkit.protocols.live_chat.analysis import read_tables
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA  # noqa: E402
from hitkit.protocols.live_chat.sequential import PASS_PRIOR, hit_differences  # noqa: E402
from hitkit.protocols.live_chat.steps import RatingChoices  # noqa: E402

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


def design(ratings: pd.DataFrame, systems, hits: list[str], obs: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """The run's design and its QC outcomes, per HIT in ``hits``' order: whether it holds two or more of
    ``systems`` and whether it also passes its own QC test (what
    :func:`hitkit.protocols.live_chat.sequential.passed_share` counts); and per pair the HITs that hold both
    systems, pass or fail (:func:`~hitkit.protocols.live_chat.sequential.held_pairs`): their number is the
    pair's planned size, known before the run."""
    real = ratings[~ratings["is_control"] & ratings["system"].isin(systems)]
    holding = real.groupby(real["assignment_id"].astype(str))["system"].unique()
    held = np.array([len(holding.get(h, ())) >= 2 for h in hits])
    passed = np.zeros(len(hits), dtype=bool)
    for idx, _ in obs.values():
        passed[idx] = True
    holds = {
        pair: np.array([i for i, h in enumerate(hits) if set(pair) <= set(holding.get(h, ()))], dtype=int)
        for pair in obs
    }
    return held, passed, holds


def run_orders(
    positions: np.ndarray,
    obs: dict,
    plan: dict,
    held: np.ndarray,
    passed: np.ndarray,
    holds: dict,
    alpha: float = ALPHA,
) -> dict:
    """The rule after every HIT of many orders at once (``positions[r, i]``: when HIT i arrives in order r,
    0-based), as :func:`hitkit.analysis.sequential.intervals` and ``settle(…, "clear")`` compute it: per
    order, look and pair, winner (+1 x, −1 y, 0 none) and whether the pair is settled for ``clear``
    (claimed, futile or undecided; the horizon its observations so far + the HITs still planned to hold it
    × the share of HITs so far that pass QC, :func:`~hitkit.protocols.live_chat.sequential.passed_share`);
    per order the look at which the rule first fires (or the last)."""
    positions = np.atleast_2d(positions)
    orders, looks = positions.shape
    pairs = list(obs)
    each = alpha / len(pairs)
    arrival = np.argsort(positions, axis=1)  # arrival[r, t]: the HIT that arrives at look t
    share = (np.cumsum(passed[arrival], axis=1) + PASS_PRIOR) / (np.cumsum(held[arrival], axis=1) + PASS_PRIOR)
    share = np.minimum(share, 1.0)
    winner = np.zeros((orders, looks, len(pairs)), dtype=np.int8)
    settled = np.zeros((orders, looks, len(pairs)), dtype=bool)
    for j, pair in enumerate(pairs):
        hits, x = obs[pair]
        if not len(hits):
            continue
        at = positions[:, hits]
        order = np.argsort(at, axis=1)
        at = np.take_along_axis(at, order, axis=1)
        scaled = (x[order] + 1) / 2
        state = np.zeros((orders, 5))
        won = np.zeros((orders, len(x)), dtype=np.int8)
        for k in range(len(x)):
            state = bounded_step(state, scaled[:, k], each, plan[pair])
            above, below = bounded_excludes(state, each)
            won[:, k] = np.where(above, 1, np.where(below, -1, 0))
        count = np.arange(1, len(x) + 1)
        mean = np.cumsum(scaled, axis=1) / count
        with np.errstate(invalid="ignore", divide="ignore"):
            var = np.where(count > 1, (np.cumsum(scaled**2, axis=1) - count * mean**2) / (count - 1), 0.0)
        var = np.maximum(var, 0.0)
        # after look t, the pair has seen the observations that arrived at looks <= t
        seen = np.stack([np.searchsorted(at[r], np.arange(looks), side="right") for r in range(orders)])
        last = np.maximum(seen - 1, 0)
        n = seen.astype(float)
        w = np.where(seen > 0, np.take_along_axis(won, last, axis=1), 0)
        m = np.take_along_axis(mean, last, axis=1)
        v = np.where(seen > 1, np.take_along_axis(var, last, axis=1), 0.0)
        spent = np.cumsum(np.isin(arrival, holds[pair]), axis=1)
        horizon = n + np.maximum(plan[pair] - spent, 0.0) * share
        big = np.maximum(horizon, n)
        r_plan = bounded_radius(big, v, each, plan[pair])
        gap = np.abs(m - 0.5)
        inside = (w == 0) & (seen > 0)
        sd = np.sqrt(v)
        with np.errstate(invalid="ignore", divide="ignore"):
            reach = 2 * sd * np.sqrt(big - n) / big + 2 * sd / np.sqrt(n) * (big - n) / big
        futile = inside & np.where(n >= horizon, True, (v > 0) & (gap + reach < r_plan))
        undecided = futile | (inside & (n >= MIN_UNDECIDED) & (gap < r_plan))
        winner[:, :, j] = w
        settled[:, :, j] = (w != 0) | undecided
    fired = settled.all(axis=2)
    stop = np.where(fired.any(axis=1), np.argmax(fired, axis=1), looks - 1)
    return {"pairs": pairs, "winner": winner, "settled": settled, "stop": stop, "fired": fired.any(axis=1)}


def run_order(
    position: np.ndarray, obs: dict, plan: dict, held: np.ndarray, passed: np.ndarray, holds: dict, alpha: float = ALPHA
) -> dict:
    """:func:`run_orders` for one order: winner and settled per look and pair, the look it fires at."""
    run = run_orders(np.asarray(position)[None, :], obs, plan, held, passed, holds, alpha)
    return {
        "pairs": run["pairs"],
        "winner": run["winner"][0],
        "settled": run["settled"][0],
        "stop": int(run["stop"][0]),
        "fired": bool(run["fired"][0]),
    }


def claims(pairs, row: np.ndarray) -> frozenset[tuple[str, str]]:
    """(winner, loser) of every pair whose interval excludes 0 in this row of winners."""
    return frozenset(((a, b) if w > 0 else (b, a)) for (a, b), w in zip(pairs, row) if w != 0)


def holm_verdicts(assignments: pd.DataFrame, ratings: pd.DataFrame) -> frozenset[tuple[str, str]]:
    """The fixed-sample Holm test on all the data: (row, column) with Holm-adjusted p < α in the default
    (worker-clustered) significance matrix."""
    steps = RatingChoices(alpha=ALPHA, significance_unit="worker", correction="holm").scored(
        assignments, ratings, DEFAULT_CRITERIA
    )
    table = steps.significance
    return frozenset((a, b) for a, b, p in zip(table["system_a"], table["system_b"], table["p_adjusted"]) if p < ALPHA)


def full_data(obs: dict, plan: dict) -> list:
    """The rule's intervals on every HIT in submission order (the full-data verdicts and margins); the
    design is done, so each pair expects no more observations."""
    return intervals(
        [
            Comparison(
                a,
                b,
                len(x),
                float(np.mean(x)) if len(x) else 0.0,
                float(np.var(x, ddof=1)) if len(x) > 1 else 0.0,
                plan[(a, b)],
                clusters=tuple(x),
                bounds=(-1.0, 1.0),
                expected=float(len(x)),
            )
            for (a, b), (_, x) in obs.items()
        ],
        ALPHA,
    )


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--pairs", action="store_true", help="also print the per-pair diagnosis (replay_pairs.py)")
    args = parser.parse_args(argv)
    started = time.monotonic()

    every, ratings = read_tables(args.data)
    assignments = counted(every)
    ratings = ratings[ratings["assignment_id"].isin(set(assignments["assignment_id"]))]
    systems = sorted(ratings.loc[~ratings["is_control"], "system"].unique())
    hits, obs = observations(assignments, ratings, systems)
    held, passed, holds = design(ratings, systems, hits, obs)
    total = len(hits)
    plan = {pair: float(len(h)) for pair, h in holds.items()}
    never = [pair for pair, p in plan.items() if not p]  # as hitkit.running.stopping.compute: not watched
    obs = {pair: o for pair, o in obs.items() if plan[pair]}
    print(
        f"{total} rated HITs by {ratings['worker_id'].nunique()} workers, {len(systems)} systems, {len(obs)} "
        f"pairs watched ({len(never)} pairs no HIT holds: {', '.join('–'.join(p) for p in never)}); planned "
        f"{min(plan[p] for p in obs):.0f}–{max(plan[p] for p in obs):.0f} HITs a pair (those holding both "
        f"systems); {np.mean([len(h) for h, _ in obs.values()]):.0f} observations a pair on average (those "
        f"that also pass their own QC; {passed.sum()} of {held.sum()} HITs pass); α = {ALPHA} (Bonferroni); "
        f"decision '{DECISION}'"
    )

    full_run = run_order(np.arange(total), obs, plan, held, passed, holds)
    pairs = full_run["pairs"]
    full = claims(pairs, full_run["winner"][-1])
    found = full_data(obs, plan)
    assert claims(pairs, [1 if i.winner == i.a else (-1 if i.winner else 0) for i in found]) == full
    margin = {(i.a, i.b): abs(i.estimate) / ((i.high - i.low) / 2) for i in found}
    clear = {p for p, m in margin.items() if m >= CLEAR}
    holm = holm_verdicts(assignments, ratings)
    print(
        f"full data: the rule's intervals claim {len(full)} of {len(pairs)} pairs; {len(clear)} pairs have a "
        f"margin >= {CLEAR}; the fixed-sample Holm test (worker-clustered) finds {len(holm)} ordered pairs"
    )
    state = settle(found, DECISION, systems)
    print(f"full data, the rule: {state.outcome[:300]}")

    rng = np.random.default_rng(args.seed)
    positions = np.empty((args.orders, total), dtype=int)
    for r in range(args.orders):
        positions[r, rng.permutation(total)] = np.arange(total)
    run = run_orders(positions, obs, plan, held, passed, holds)
    if args.pairs:
        from replay_pairs import diagnose  # the per-pair table (benchmarks/replay_pairs.py)

        diagnose(obs, plan, positions, margin, holm, full)
    fractions, contradictions, recalls, clear_ok, ok = [], [], [], [], []
    clear_index = [pairs.index(p) for p in clear]
    for r in range(args.orders):
        stop = int(run["stop"][r])
        row = run["winner"][r, stop]
        claimed = claims(pairs, row)
        fraction = (stop + 1) / total
        wrong = sum(1 for c in claimed if c not in holm)
        recall = len(claimed & full) / len(full) if full else 1.0
        agree = all(row[i] == full_run["winner"][-1][i] for i in clear_index)
        fractions.append(fraction)
        contradictions.append(wrong)
        recalls.append(recall)
        clear_ok.append(agree)
        ok.append(fraction <= SHARE and wrong == 0 and recall >= RECALL and agree)
    fractions = np.array(fractions)
    hits_ratio = float(np.quantile(fractions, ORDERS_SHARE))
    result = {
        "hits_ratio": hits_ratio,
        "contradictions": float(np.mean(contradictions)),
        "recall": float(np.mean(recalls)),
        "clear_agree": float(np.mean(clear_ok)),
        "orders_ok": float(np.mean(ok)),
    }
    print(
        f"over {args.orders} orders: the rule stopped at a median {np.median(fractions):.3f} of the HITs (90th "
        f"percentile {hits_ratio:.3f}; never fired in {np.mean(~run['fired']):.1%}); orders with a "
        f"contradiction {np.mean(np.array(contradictions) > 0):.1%}; recall median {np.median(recalls):.3f}; "
        f"every clear pair agreeing in {np.mean(clear_ok):.1%}"
    )
    met = result["orders_ok"] >= ORDERS_SHARE
    print(
        f"bar (in >= {ORDERS_SHARE:.0%} of orders: <= {SHARE:.0%} of the HITs, no contradiction, recall >= "
        f"{RECALL}, every pair of margin >= {CLEAR} agreeing): {'met' if met else 'NOT met'}; runtime "
        f"{time.monotonic() - started:.0f} s"
    )
    print("RESULT " + " ".join(f"{k}={v:.3f}" for k, v in result.items()))
    return result


if __name__ == "__main__":
    main()
