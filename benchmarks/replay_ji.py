"""Replay of a real live-chat run through hitkit's stopping rule: Ji et al. (2022), Free run 1.

The run's 304 rated HITs (``tests/data/ji2022-run1``, read with hitkit's readers) are taken in
200 seeded random orders. After every HIT the rule looks, as a study's scheduler would:
:func:`hitkit.protocols.live_chat.sequential.comparisons` on the HITs so far (the paper's overall z,
mean_x − mean_y for each of the 45 pairs of systems), :func:`hitkit.analysis.sequential.intervals` at
α = 0.05 (Bonferroni over the pairs) and :func:`~hitkit.analysis.sequential.settle` with the ``pairs``
decision; ``planned`` is the whole run (304 HITs: the run is the fixed design). The rule stops the
order when every pair either differs or cannot come to differ within the run's size.

Per order: the fraction of the HITs at which the rule fired (1.0 if it never did) and whether its
verdicts there (the pairs whose interval excludes 0, with the direction) equal the verdicts the same
intervals give on all the data. ``hits_ratio`` is the 90th percentile of the fraction over the
orders, ``agree`` the share of orders whose verdicts agree; the issue's bar is hits_ratio ≤ 0.70 and
agree ≥ 0.90.

For context the benchmark also prints the paper's own fixed-sample verdicts (one-sided Mann–Whitney
per rating, :func:`hitkit.protocols.live_chat.analysis.scored`, p < 0.05 uncorrected and Holm-adjusted)
and the *oracle bound*: the share of the same orders in which that fixed-sample analysis of only the
first 70 % of the HITs gives exactly the full-data fixed-sample verdicts. If even an analysis told in
advance to stop at 70 % cannot reproduce the full run's matrix, no stopping rule can meet the bar on
that matrix. The same bound is measured for the confidence sequences themselves: the first look of
each order whose verdicts equal the full data's (a rule can only stop at a look and report that look's
verdicts, so none can stop sooner and agree). When the bar is not met the benchmark says so and why,
naming the borderline pairs (how often each one's verdict at 70 % differs from the full data's).

Speed: a worker's z and QC verdict depend only on that worker's own HITs, so :class:`Replay` caches
them by (worker, the set of their HITs so far) and keeps per-HIT sums; its comparisons equal
:func:`~hitkit.protocols.live_chat.sequential.comparisons` on the same HITs (tests/test_sequential_ratings.py).

Usage: ``python benchmarks/replay_ji.py [--orders 200] [--seed 0] [--data DIR]``. The last line is::

    RESULT hits_ratio=… agree=…
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

from hitkit.analysis.sequential import Interval, intervals, settle  # noqa: E402
from hitkit.analysis.tables import counted  # noqa: E402
from hitkit.protocols.live_chat.analysis import read_tables, scored, screened  # noqa: E402
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA  # noqa: E402
from hitkit.protocols.live_chat.sequential import from_hit_sums, hit_sums  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "ji2022-run1"
"""The released run, shipped with the tests (MIT licence)."""
ALPHA = 0.05
SHARE = 0.70
"""The issue's bar: the rule's verdicts with at most this share of the HITs…"""
ORDERS_SHARE = 0.90
"""…in at least this share of the orders."""


class Replay:
    """The comparisons of the HITs added so far, built incrementally: per worker, their z-scores and QC
    verdict on the set of their HITs so far (cached across orders), and per HIT its sums and counts."""

    def __init__(self, assignments: pd.DataFrame, ratings: pd.DataFrame, systems, plan):
        self.systems, self.plan = list(systems), plan
        self.hits = list(pd.unique(ratings["assignment_id"]))
        self.row = {h: i for i, h in enumerate(self.hits)}
        self.worker_of = ratings.groupby("assignment_id")["worker_id"].first().to_dict()
        self.ratings_of = {h: g for h, g in ratings.groupby("assignment_id")}
        self.assignment_of = {h: g for h, g in assignments.groupby("assignment_id")}
        self._cache: dict[tuple[str, frozenset], tuple[np.ndarray, np.ndarray]] = {}
        self.reset()

    def reset(self) -> None:
        """Start a new order: no HITs."""
        self.sums = np.zeros((len(self.hits), len(self.systems)))
        self.counts = np.zeros_like(self.sums)
        self.of_worker: dict[str, frozenset] = {}
        self.n = 0

    def _worker(self, worker: str, hits: frozenset) -> tuple[np.ndarray, np.ndarray]:
        """Rows (in ``hits``' sorted order) of this worker's per-HIT sums and counts: zero unless they pass."""
        key = (worker, hits)
        if key not in self._cache:
            ordered = sorted(hits)
            own = pd.concat([self.ratings_of[h] for h in ordered])
            done = pd.concat([self.assignment_of[h] for h in ordered])
            _, _, _, kept = screened(done, own, DEFAULT_CRITERIA)
            sums, counts = np.zeros((len(ordered), len(self.systems))), np.zeros((len(ordered), len(self.systems)))
            if not kept.empty:
                got, n = hit_sums(kept, self.systems)
                at = [ordered.index(h) for h in sorted(set(kept["assignment_id"]))]
                sums[at], counts[at] = got, n
            self._cache[key] = (sums, counts)
        return self._cache[key]

    def add(self, hit: str) -> None:
        """One more HIT arrives: its worker's rows are recomputed on all of their HITs so far."""
        worker = self.worker_of[hit]
        hits = self.of_worker.get(worker, frozenset()) | {hit}
        self.of_worker[worker] = hits
        sums, counts = self._worker(worker, hits)
        rows = [self.row[h] for h in sorted(hits)]
        self.sums[rows], self.counts[rows] = sums, counts
        self.n += 1

    def comparisons(self):
        return from_hit_sums(self.sums, self.counts, self.n, self.systems, self.plan)


def verdicts(found: list[Interval]) -> frozenset[tuple[str, str]]:
    """(winner, loser) of every interval that excludes its null."""
    return frozenset((i.winner, i.b if i.winner == i.a else i.a) for i in found if i.winner is not None)


def fixed_verdicts(assignments: pd.DataFrame, ratings: pd.DataFrame, hits) -> tuple[frozenset, frozenset]:
    """The paper's fixed-sample verdicts on these HITs: (row beats column at p < 0.05, at Holm-adjusted p < 0.05)."""
    keep = set(hits)
    steps = scored(assignments[assignments["assignment_id"].isin(keep)], ratings[ratings["assignment_id"].isin(keep)],
                   DEFAULT_CRITERIA, alpha=ALPHA, qc_method="asymptotic", ddof=1, significance_unit="rating",
                   correction="holm")
    table = steps.significance
    pairs = list(zip(table["system_a"], table["system_b"]))
    return (frozenset(p for p, v in zip(pairs, table["p_value"]) if v < ALPHA),
            frozenset(p for p, v in zip(pairs, table["p_adjusted"]) if v < ALPHA))


def replay(rule: Replay, order, systems, full: frozenset, cut: int) -> tuple[int, frozenset, int, frozenset]:
    """Look after every HIT of ``order``: the number of HITs at which the rule fired (all if never) and its
    verdicts then; and, for the bound on any rule, the first look whose verdicts equal ``full`` (all HITs if
    none before the end) and the verdicts at ``cut`` HITs."""
    rule.reset()
    fired, first_equal, at_cut = None, None, frozenset()
    for k, hit in enumerate(order, 1):
        rule.add(hit)
        found = intervals(rule.comparisons(), ALPHA)
        now = verdicts(found)
        at_cut = now if k == cut else at_cut
        if first_equal is None and now == full:
            first_equal = k
        if fired is None and settle(found, "pairs", systems).fired:
            fired = (k, now)
        if fired is not None and first_equal is not None and k >= cut:
            break
    return (*(fired or (len(order), now)), first_equal or len(order), at_cut)


def main(argv=None) -> None:
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
    rule = Replay(assignments, ratings, systems, {})
    total = len(rule.hits)
    rule.plan = {pair: float(total) for pair in combinations(systems, 2)}
    print(f"{total} rated HITs by {ratings['worker_id'].nunique()} workers, {len(systems)} systems, "
          f"{len(rule.plan)} pairs; planned = {total} HITs; alpha = {ALPHA} (Bonferroni over the pairs)")

    rule.reset()
    for hit in rule.hits:
        rule.add(hit)
    full_found = intervals(rule.comparisons(), ALPHA)
    full = verdicts(full_found)
    print(f"full data, confidence sequences: {len(full)} of {len(rule.plan)} pairs differ")
    fixed_raw, fixed_holm = fixed_verdicts(assignments, ratings, rule.hits)
    print(f"full data, the paper's fixed-sample tests (one-sided Mann-Whitney per rating): "
          f"{len(fixed_raw)} ordered pairs at p < 0.05, {len(fixed_holm)} at Holm-adjusted p < 0.05")

    rng = np.random.default_rng(args.seed)
    cut = int(SHARE * total)
    fractions, agree, oracle_raw, oracle_holm, reached, at_cut, missed, differ_at_cut = [], [], [], [], [], [], {}, {}
    for o in range(args.orders):
        order = list(rng.permutation(rule.hits))
        k, found, first_equal, cut_verdicts = replay(rule, order, systems, full, cut)
        reached.append(first_equal / total)
        at_cut.append(cut_verdicts == full)
        for pair in full ^ cut_verdicts:
            differ_at_cut[pair] = differ_at_cut.get(pair, 0) + 1
        fractions.append(k / total)
        agree.append(found == full)
        for pair in full ^ found:
            missed[pair] = missed.get(pair, 0) + 1
        raw, holm = fixed_verdicts(assignments, ratings, order[:cut])
        oracle_raw.append(raw == fixed_raw)
        oracle_holm.append(holm == fixed_holm)
    fractions, agree = np.array(fractions), np.array(agree)
    hits_ratio = float(np.quantile(fractions, ORDERS_SHARE))
    share = float(agree.mean())
    print(f"\nstopping rule over {args.orders} orders: fired at a median {np.median(fractions):.3f} of the HITs "
          f"(90th percentile {hits_ratio:.3f}; only at the last HIT in {np.mean(fractions >= 1.0):.1%}); "
          f"verdicts equal the full data's in {share:.1%} of orders; both (<= {SHARE:.0%} and agree) "
          f"in {np.mean((fractions <= SHARE) & agree):.1%}")
    print(f"oracle bound: the fixed-sample analysis of the first {cut} HITs ({SHARE:.0%}) gives exactly the "
          f"full-data fixed-sample verdicts in {np.mean(oracle_raw):.1%} of the orders uncorrected, "
          f"{np.mean(oracle_holm):.1%} Holm-adjusted")
    reached = np.array(reached)
    print(f"the same bound for the confidence sequences: their verdicts at exactly {cut} HITs equal the full "
          f"data's in {np.mean(at_cut):.1%} of the orders, and at some look up to {cut} HITs in "
          f"{np.mean(reached <= SHARE):.1%}; the first look at which they equal the full data's comes at a "
          f"median {np.median(reached):.3f} of the HITs, 90th percentile {np.quantile(reached, ORDERS_SHARE):.3f} "
          "(no rule that stops at a look and reports these intervals' verdicts can stop sooner and agree)")
    by_pair = {(i.a, i.b): i for i in full_found}

    def described(pair):
        i = by_pair.get(pair) or by_pair.get(pair[::-1])
        return (f"{pair[0]} vs {pair[1]}: full data {i.estimate:+.3f} in [{i.low:+.3f}, {i.high:+.3f}], "
                f"|estimate| / half-width {abs(i.estimate) / ((i.high - i.low) / 2):.2f}")

    if missed:
        print("pairs whose verdict at the rule's stop differed from the full data's (orders):")
        for pair, count in sorted(missed.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  {count:4d}  {described(pair)}")
    if differ_at_cut:
        print(f"pairs whose confidence-sequence verdict at {cut} HITs differs from the full data's, by share of "
              "orders (the borderline pairs: near 1 the full data's verdict is itself a close call):")
        for pair, count in sorted(differ_at_cut.items(), key=lambda kv: -kv[1])[:10]:
            print(f"  {count / args.orders:6.1%}  {described(pair)}")
    met = hits_ratio <= SHARE and share >= ORDERS_SHARE
    print(f"bar (<= {SHARE:.0%} of HITs in >= {ORDERS_SHARE:.0%} of orders, same verdicts): "
          f"{'met' if met else 'NOT met'}; runtime {time.monotonic() - started:.0f} s")
    if not met and np.mean(reached <= SHARE) < ORDERS_SHARE:
        print(f"why: the bar is out of reach on this run for any rule on these intervals: only in "
              f"{np.mean(reached <= SHARE):.1%} of the orders do the verdicts of some look within {SHARE:.0%} "
              "of the HITs equal the full data's, because the full data's verdicts on the borderline pairs "
              "above are themselves close calls that need (nearly) every HIT; the paper's own fixed-sample "
              f"matrix is likewise reproduced by {SHARE:.0%} of the HITs in {np.mean(oracle_raw):.1%} "
              f"(uncorrected) / {np.mean(oracle_holm):.1%} (Holm) of the orders")
    elif not met:
        print("why: the intervals reach the full data's verdicts within the bar's share in enough orders, "
              "but the rule waits for the open pairs to settle (differ or futile) past it")
    print(f"RESULT hits_ratio={hits_ratio:.3f} agree={share:.3f}")


if __name__ == "__main__":
    main()
