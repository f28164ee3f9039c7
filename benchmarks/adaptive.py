"""Studies that stop when the answer is settled: the adaptive + sequential pairwise design against uniform allocation.

The study (simulated, seeded): 8 systems s0 … s7 with Bradley–Terry strengths 0, 0.15, …, 1.05 logits
(s7 best). A HIT is one worker giving 10 votes on one pair (hitkit packs an adaptive pairwise design one
pair per HIT). The worker answers at random with probability 0.15 (each vote a or b with probability ½)
and otherwise by Bradley–Terry, P(x beats y) = 1 / (1 + exp(−(s_x − s_y))); no ties. Each vote is scored
as :mod:`hitkit.protocols.pairwise.sequential` scores it: the x-over-y score, x the system first by name,
1 for a win and 0 for a loss.

The stopping rule is hitkit's (:mod:`hitkit.analysis.sequential`), looked at after every HIT: one exact
comparison per pair (variance ¼, null ½, ``planned`` = ``PLANNED`` = 10,000 votes for every pair, what the
uniform fixed design of 280,000 votes gives each pair), ``intervals(…, alpha=0.05)`` (Bonferroni over the
28 pairs) and ``settle(…, "best", …)``: a study stops when one system's interval against every other
excludes ½ in its favour. Two allocations:

- **adaptive**: the next HIT goes to the open pair with the largest ``RuleState.weights`` (ties: the first
  pair by name), hitkit's own policy: the current leader against the systems it has not beaten yet,
  fewest votes first;
- **uniform**: the 28 pairs in turn (a random order per study), with the same rule.

Either design gives up at the fixed design's 280,000 votes; a study that has not stopped by then has made
no decision.

N95(design) is the number of votes by which ≥ 95 % of studies have stopped naming s7 (a study that named
another system, or never stopped, counts against it); ``votes_ratio`` = N95(adaptive) / N95(uniform);
``p_correct`` is the share of adaptive studies that stopped naming s7. For context only, not the headline:
the fixed-sample uniform design that names the system with the highest mean win score (no error
guarantee, no look before the end) and the votes it needs to name s7 in 95 % of studies.

The null: two identical systems, decision ``pairs`` on their one pair (K = 1, α = 0.05), a look after
every HIT of 10 votes up to 20,000 votes (``planned`` = 20,000). ``false_claims`` is the share of studies
in which the interval ever excluded ½ within the cap (ignoring that the futility half of the rule would
have stopped many of them earlier); the rule's own false claims, stopping at the first settled look,
winner or futile, are printed beside it.

For speed the rule is re-implemented over numpy arrays (studies × pairs): :func:`best_rule` and
:func:`futile`. Its boundary is hitkit's own, tabulated once by ``radius`` with ``rho_for``'s ρ, and
``tests/test_adaptive_benchmark.py`` checks it against ``intervals`` + ``settle`` on random states.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/adaptive.py [--studies N] [--uniform-studies M]
[--seed S]`` (defaults 4000 adaptive, fixed-sample and null studies, 2000 uniform ones, seed 0; about a
minute on one core). Last line:
``RESULT votes_ratio=… p_correct=… false_claims=…``.
"""
from __future__ import annotations

import argparse
import math
import time
from itertools import combinations

import numpy as np

from hitkit.analysis.sequential import radius, rho_for

N_SYSTEMS = 8
GAP = 0.15             # logits between neighbouring systems
RANDOM_SHARE = 0.15    # workers who answer at random
VOTES_PER_HIT = 10
ALPHA = 0.05
VARIANCE = 0.25        # a win score in [0, 1]: the exact sequence's bound
NULL = 0.5
PLANNED = 10_000       # votes per pair in the uniform fixed design (ρ is tuned there)
NULL_CAP = 20_000      # votes on the null's one pair
TARGET = 0.95

SYSTEMS = [f"s{i}" for i in range(N_SYSTEMS)]
PAIRS = list(combinations(range(N_SYSTEMS), 2))   # (x, y), x first by name
PAIR_A = np.array([a for a, _ in PAIRS])
PAIR_B = np.array([b for _, b in PAIRS])
# For each system, its pairs in the order intervals lists them, and whether it is the pair's x.
SLOTS = np.array([[k for k, (a, b) in enumerate(PAIRS) if s in (a, b)] for s in range(N_SYSTEMS)])
IS_X = PAIR_A[SLOTS] == np.arange(N_SYSTEMS)[:, None]
AS_X = np.eye(N_SYSTEMS, dtype=int)[PAIR_A]   # pairs × systems: the pair's x
AS_Y = np.eye(N_SYSTEMS, dtype=int)[PAIR_B]


def boundary(alpha: float, planned: float, max_n: int) -> np.ndarray:
    """hitkit's interval radius after 0 … max_n observations of one of ``len(PAIRS)`` comparisons
    (Bonferroni), ρ tuned at ``planned``: infinite at 0."""
    each = alpha / len(PAIRS)
    return radius(np.arange(max_n + 1), VARIANCE, each, rho_for(planned, VARIANCE, each))


def best_rule(n: np.ndarray, wins: np.ndarray, bound: np.ndarray):
    """``settle(intervals(…), "best", …)`` for many studies at once: n and x-over-y wins per pair
    (studies × pairs) in, (fired, leader, next pair or −1) per study out."""
    r = bound[n]
    est = np.where(n > 0, wins / np.maximum(n, 1), NULL)
    x_wins = est - r > NULL
    y_wins = est + r < NULL
    lost = (y_wins @ AS_X + x_wins @ AS_Y) > 0
    # leader(): the unbeaten system with the best mean score (est − ½ as x, ½ − est as y) over the
    # pairs it has data on; everyone when all are beaten; ties go to the first.
    has = n[:, SLOTS] > 0
    signed = np.where(IS_X, est[:, SLOTS] - NULL, NULL - est[:, SLOTS])
    count = has.sum(axis=2)
    total = np.where(has, signed, 0.0).sum(axis=2)
    mean = np.where(count > 0, total / np.maximum(count, 1), 0.0)
    alive = ~lost
    alive[~alive.any(axis=1)] = True
    top = np.argmax(np.where(alive, mean, -np.inf), axis=1)
    rows = np.arange(len(n))[:, None]
    slots = SLOTS[top]
    won = np.where(IS_X[top], x_wins[rows, slots], y_wins[rows, slots])
    fired = won.all(axis=1)
    undecided = ~x_wins[rows, slots] & ~y_wins[rows, slots]
    votes = np.where(undecided, n[rows, slots], np.iinfo(np.int64).max)
    pick = np.argmin(votes, axis=1)  # weights 1/(1+n): fewest votes, ties to the first pair
    nxt = np.where(undecided.any(axis=1) & ~fired, slots[np.arange(len(n)), pick], -1)
    return fired, top, nxt


def futile(n: np.ndarray, wins: np.ndarray, bound: np.ndarray, planned: int) -> np.ndarray:
    """``Interval.futile`` for one exact comparison per entry, as ``intervals`` computes it (the ``bound``
    table made with ``planned``, and reaching it)."""
    r = bound[n]
    gap = np.abs(np.where(n > 0, wins / np.maximum(n, 1), NULL) - NULL)
    at = np.maximum(planned, n)
    left = at - n
    sd = math.sqrt(VARIANCE)
    with np.errstate(divide="ignore", invalid="ignore"):
        reach = 2 * sd * np.sqrt(left) / at + 2 * sd / np.sqrt(n) * left / at
    return (n > 0) & (gap < r) & (gap + reach < bound[at])


def x_over_y(gap: float) -> np.ndarray:
    """P(a vote on each pair is a win for x): Bradley–Terry diluted by the random answerers."""
    s = gap * np.arange(N_SYSTEMS)
    return 1 / (1 + np.exp(-(s[PAIR_A] - s[PAIR_B])))


def hit(rng: np.random.Generator, p_bt: np.ndarray) -> np.ndarray:
    """x-over-y wins in one HIT of VOTES_PER_HIT votes per study, each by a random answerer or not."""
    p = np.where(rng.random(len(p_bt)) < RANDOM_SHARE, 0.5, p_bt)
    return rng.binomial(VOTES_PER_HIT, p)


def sequential_studies(design: str, studies: int, gap: float, planned: int, seed: int):
    """Votes at the stop (inf: no stop by the cap) and the system named, per study, for one design."""
    rng = np.random.default_rng([seed, 1 if design == "adaptive" else 2])
    cap_hits = len(PAIRS) * planned // VOTES_PER_HIT
    bound = boundary(ALPHA, planned, cap_hits * VOTES_PER_HIT)
    p_bt = x_over_y(gap)
    order = np.argsort(rng.random((studies, len(PAIRS))), axis=1)   # uniform: a random turn per study
    n = np.zeros((studies, len(PAIRS)), dtype=np.int64)
    wins = np.zeros_like(n)
    stop = np.full(studies, np.inf)
    named = np.full(studies, -1)
    live = np.arange(studies)
    nxt = np.zeros(studies, dtype=np.int64)
    if design == "adaptive":
        nxt = best_rule(n, wins, bound)[2]
    for h in range(cap_hits):
        pair = nxt[live] if design == "adaptive" else order[live, h % len(PAIRS)]
        n[live, pair] += VOTES_PER_HIT
        wins[live, pair] += hit(rng, p_bt[pair])
        fired, top, nxt_live = best_rule(n[live], wins[live], bound)
        stop[live[fired]] = (h + 1) * VOTES_PER_HIT
        named[live[fired]] = top[fired]
        nxt[live] = nxt_live
        # a study with nothing open and no decision could never move again: it counts as not stopped
        live = live[~fired & ((nxt_live >= 0) | (design == "uniform"))]
        if not len(live):
            break
    return stop, named


def n95(stop: np.ndarray, named: np.ndarray, best: int) -> float:
    """Votes by which TARGET of the studies have stopped naming the best (inf if never)."""
    ok = np.sort(np.where(named == best, stop, np.inf))
    return float(ok[math.ceil(TARGET * len(ok)) - 1])


def fixed_baseline(studies: int, gap: float, planned: int, seed: int) -> float:
    """Context, not the headline: total votes at which the uniform fixed design's argmax of per-system
    mean win score first names the best in TARGET of studies (inf if not within ``planned`` per pair)."""
    rng = np.random.default_rng([seed, 3])
    p_bt = np.broadcast_to(x_over_y(gap), (studies, len(PAIRS))).ravel()
    wins = np.zeros((studies, len(PAIRS)))
    for h in range(1, planned // VOTES_PER_HIT + 1):
        wins += hit(rng, p_bt).reshape(studies, len(PAIRS))
        score = wins @ AS_X + (h * VOTES_PER_HIT - wins) @ AS_Y   # every system has 7 pairs' votes
        if np.mean(score.argmax(axis=1) == N_SYSTEMS - 1) >= TARGET:
            return float(h * VOTES_PER_HIT * len(PAIRS))
    return math.inf


def null_studies(studies: int, cap: int, seed: int) -> tuple[float, float, float]:
    """Two identical systems, one pair, a look after every HIT up to ``cap`` votes (planned = cap):
    (share whose interval ever excluded ½, share the rule stopped on a claim, mean votes at the rule's stop)."""
    rng = np.random.default_rng([seed, 4])
    hits = cap // VOTES_PER_HIT
    each = ALPHA  # one comparison
    bound = radius(np.arange(cap + 1), VARIANCE, each, rho_for(cap, VARIANCE, each))
    n = np.arange(1, hits + 1) * VOTES_PER_HIT
    ever = claimed = 0
    stopped_at = []
    for chunk in np.array_split(np.arange(studies), max(1, studies // 250)):
        wins = np.cumsum(rng.binomial(VOTES_PER_HIT, 0.5, (len(chunk), hits)), axis=1)
        est = wins / n
        excluded = np.abs(est - NULL) > bound[n]  # strict, as Interval.winner
        fut = futile(np.broadcast_to(n, wins.shape), wins, bound, cap)
        ever += int(excluded.any(axis=1).sum())
        settled = excluded | fut
        first = np.where(settled.any(axis=1), settled.argmax(axis=1), hits - 1)
        claimed += int(excluded[np.arange(len(chunk)), first].sum())
        stopped_at.append(n[first])
    return ever / studies, claimed / studies, float(np.concatenate(stopped_at).mean())


def summary(stop: np.ndarray, named: np.ndarray) -> dict[str, float]:
    right = named == N_SYSTEMS - 1
    done = np.isfinite(stop)
    return {"n95": n95(stop, named, N_SYSTEMS - 1), "p_correct": float(right.mean()),
            "p_wrong": float((done & ~right).mean()), "p_open": float((~done).mean()),
            "mean": float(stop[done].mean()) if done.any() else math.nan,
            "median": float(np.median(stop[done])) if done.any() else math.nan}


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Run the three parts, print their tables and the RESULT line; return the headline figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=4000, help="adaptive, fixed-sample and null studies")
    parser.add_argument("--uniform-studies", type=int, default=2000, help="uniform studies")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gap", type=float, default=GAP, help="logits between neighbouring systems")
    parser.add_argument("--planned", type=int, default=PLANNED, help="votes per pair in the fixed design")
    parser.add_argument("--null-cap", type=int, default=NULL_CAP, help="votes on the null's pair")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cap = len(PAIRS) * args.planned
    print(f"{N_SYSTEMS} systems {args.gap} logits apart, {RANDOM_SHARE:.0%} random answerers, "
          f"{VOTES_PER_HIT} votes per HIT, α = {ALPHA}, planned = {args.planned} votes per pair, "
          f"cap = {cap} votes (both designs); a look after every HIT")
    rows = {}
    for design, studies in (("adaptive", args.studies), ("uniform", args.uniform_studies)):
        t = time.perf_counter()
        rows[design] = summary(*sequential_studies(design, studies, args.gap, args.planned, args.seed))
        rows[design]["studies"] = studies
        rows[design]["seconds"] = time.perf_counter() - t
    print(f"{'design':10s} {'studies':>7s} {'N95':>9s} {'correct':>8s} {'wrong':>6s} {'open':>6s} "
          f"{'mean':>9s} {'median':>9s} {'s':>5s}")
    for design, row in rows.items():
        print(f"{design:10s} {row['studies']:7d} {row['n95']:9.0f} {row['p_correct']:8.3f} "
              f"{row['p_wrong']:6.3f} {row['p_open']:6.3f} {row['mean']:9.0f} {row['median']:9.0f} "
              f"{row['seconds']:5.0f}")
    fixed = fixed_baseline(args.studies, args.gap, args.planned, args.seed)
    print(f"context, not the headline: uniform fixed design, argmax of mean win score names s7 in "
          f"{TARGET:.0%} of {args.studies} studies at {fixed:.0f} votes (no error guarantee, one look)")
    ever, claimed, mean_stop = null_studies(args.studies, args.null_cap, args.seed)
    print(f"null, 2 identical systems, {args.studies} studies, a look every {VOTES_PER_HIT} votes up to "
          f"{args.null_cap}: interval ever excluded 0.5 in {ever:.3f}; the rule (stop when settled, "
          f"futility included) claimed a difference in {claimed:.3f}, stopping at {mean_stop:.0f} votes "
          f"on average")
    ratio = rows["adaptive"]["n95"] / rows["uniform"]["n95"]
    print(f"{time.perf_counter() - start:.0f} s")
    print(f"RESULT votes_ratio={ratio:.3f} p_correct={rows['adaptive']['p_correct']:.3f} "
          f"false_claims={ever:.3f}")
    return {"votes_ratio": ratio, "p_correct": rows["adaptive"]["p_correct"], "false_claims": ever,
            "null_rule_claims": claimed, "fixed_votes": fixed,
            **{f"{d}_{k}": v for d, row in rows.items() for k, v in row.items()}}


if __name__ == "__main__":
    main()
