"""Studies that stop when the answer is settled: the adaptive + sequential pairwise design against uniform
allocation in a long-tailed crowd, and the stopping rule's false claims under nulls where workers differ
and where a few workers do most of the HITs.

The study (simulated, seeded): 8 systems s0 … s7 with Bradley–Terry strengths 0, 0.15, …, 1.05 logits
(s7 best). A HIT is one worker giving 10 votes on one pair (hitkit packs an adaptive pairwise design one
pair per HIT). The worker answers at random with probability 0.15 (each vote a or b with probability ½)
and otherwise by Bradley–Terry, P(x beats y) = 1 / (1 + exp(−(s_x − s_y))); no ties. Who does each HIT
is drawn from a pool of ``WORKERS`` = 10,000 workers with zipf activity
(:func:`hitkit.simulation.activity.worker_shares`, the simulated crowd's default: the 5 busiest do a
third of the HITs). Each vote is scored as :mod:`hitkit.protocols.pairwise.sequential` scores it: the
x-over-y score, x the system first by name, 1 for a win and 0 for a loss; as hitkit's rule does, each
pair's sequence takes one observation per worker, the mean score of their first HIT on the pair (their
later HITs on it are spent and add nothing).

The stopping rule is hitkit's (:mod:`hitkit.analysis.sequential`), looked at after every HIT: one bounded
comparison per pair (the hedged betting confidence sequence over those observations in [0, 1], null ½,
bets tuned at ``PLANNED`` / 10 = 1,000 HITs a pair, what the uniform fixed design of 280,000 votes gives
each pair), ``intervals(…, alpha=0.05)`` (Bonferroni over the 28 pairs) and ``settle(…, "best", …)``:
a study stops when one system's interval against every other excludes ½ in its favour. Two allocations:

- **adaptive**: the next HIT goes to the open pair with the largest ``RuleState.weights`` (ties: the first
  pair by name), hitkit's own policy: the current leader against the systems it has not beaten yet,
  fewest observations first;
- **uniform**: the 28 pairs in turn (a random order per study), with the same rule.

A worker adds one observation to a pair however many HITs they do, so with a zipf crowd the uniform
design needs more than its fixed design's 280,000 votes: both designs give up at ``CAP_FACTOR`` = 3 times
that; a study that has not stopped by then has made no decision.

N95(design) is the number of votes by which ≥ 95 % of studies have stopped naming s7 (a study that named
another system, or never stopped, counts against it); ``votes_ratio`` = N95(adaptive) / N95(uniform);
``p_correct`` is the share of adaptive studies that stopped naming s7. For context only, not the headline:
the fixed-sample uniform design that names the system with the highest mean win score (no error
guarantee, no look before the end, every HIT a new worker) and the votes it needs to name s7 in 95 % of
studies.

**The nulls where every HIT is a new worker** (one comparison, α = 0.05, a look after every cluster; the
share of studies whose interval ever excluded the null within the cap is a false claim):

- *pairwise*: two systems the crowd finds equal (win rate ½), each 10-vote HIT one worker with their own
  taste, a logit of N(0, sd²) for x over y, sd = 0, 0.5 and 1.13, up to 20,000 votes (2,000 HITs).
  The earlier per-vote exact sequence (Robbins, variance ¼, n counting votes) against hitkit's
  bounded one (here one HIT = one worker);
- *ratings* (live chat and the rating protocol): each HIT one worker who rates x and y, with a
  worker × system effect and skewed scores: the worker's chance p_x, p_y ~ Beta(1, 9) (mean 0.1) for
  each system, x's slider all or nothing (1 with probability p_x, a Bernoulli 0.1 on average), y's a
  Beta(5p_y, 5(1 − p_y)) (the same mean, little skew); the observation is the within-HIT difference, up
  to 600 HITs. The asymptotic sequence on the differences (variance estimated, the 20-observation
  floor) against the bounded one;
- *Spot The Bot*: two equal bots, conversations of 6 annotations each whose win scores are Bernoulli
  with the conversation's own chance logistic(N(0, 1.5²)), each annotation a new annotator's, up to 600
  conversations. The asymptotic sequence per annotation with the conversation-clustered variance
  against hitkit's bounded one over fresh annotators on fresh conversations (a conversation's first
  annotation).

**The heavy-worker nulls** (:mod:`benchmarks.heavy_nulls`, ``HEAVY_STUDIES`` = 400 studies a world): two
equal systems, 300 HITs of 10 votes, item effects sd 0.5, 10 % ties, α = 0.05; 5 workers doing 70 % of
the HITs or 20 doing 50 %, at worker-taste sd 0.3, 0.8 and 1.13, the rest new workers; the arena also
with a pool of 20 returning workers (sd 0.5), 10 battles a HIT; and the adaptive design's own null, 3 equal
systems with decision ``best``, each HIT's pair picked by hitkit's adaptive policy (which depends on the
answers, so the exact guarantee does not cover it). The earlier per-HIT (pairwise, adaptive) and
per-battle exact (arena) sequences against hitkit's per-worker one.

``false_claims`` is the largest false-claim rate of the per-observation (earlier) sequences over the
first nulls, ``false_claims_clustered`` that of the sequences hitkit uses now there,
``false_claims_heavy`` the largest over the pairwise heavy-worker worlds, ``arena_false_claims`` over
the arena's and ``adaptive_false_claims`` over the adaptive design's (the bars: ≤ 0.05 each); each null's
figures are printed.

For speed the rule is re-implemented over numpy arrays (studies × pairs): :func:`best_rule`. Its
statistics are hitkit's own (:func:`hitkit.analysis.sequential.bounded_step` and
:func:`~hitkit.analysis.sequential.bounded_excludes`, the sequence at the null), and
``tests/test_adaptive_benchmark.py`` checks it against ``intervals`` + ``settle`` on random states
(``tests/test_sequential_workers.py`` the heavy-worker one against the pairwise comparisons).

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/adaptive.py [--studies N] [--uniform-studies M]
[--null-studies K] [--heavy-studies H] [--workers W] [--cap-factor F] [--seed S]`` (defaults 1000
adaptive and fixed-sample studies, 200 uniform ones, 2000 studies per first null, 400 per heavy-worker
world, seed 0; 113 s measured on the shared 2-core machine at a load average of about 8). Last line:
``RESULT p_correct=… false_claims=… adaptive_false_claims=… false_claims_clustered=… false_claims_heavy=…
arena_false_claims=… votes_ratio=…``.
"""

from __future__ import annotations

import argparse
import math
import time
from itertools import combinations

import numpy as np

from benchmarks import heavy_nulls
from hitkit.analysis.sequential import MIN_ASYMPTOTIC, bounded_excludes, bounded_step, radius, rho_for
from hitkit.simulation.activity import DEFAULT_ACTIVITY, worker_shares

N_SYSTEMS = 8
GAP = 0.15  # logits between neighbouring systems
RANDOM_SHARE = 0.15  # workers who answer at random
VOTES_PER_HIT = 10
ALPHA = 0.05
VARIANCE = 0.25  # a win score in [0, 1]: the exact sequence's bound
NULL = 0.5
PLANNED = 10_000  # votes per pair in the uniform fixed design (the bets are tuned there)
NULL_CAP = 20_000  # votes on the null's one pair
TASTES = (0.0, 0.5, 1.13)  # the pairwise nulls' spread of worker taste (logit sd)
RATING_CAP = 600  # HITs in the ratings null
STB_CAP = 600  # conversations in the Spot The Bot null
STB_ANNOTATIONS = 6  # annotations of a bot pair per conversation
STB_SPREAD = 1.5  # the conversation effect's sd (logit)
TARGET = 0.95
WORKERS = 10_000  # the non-null design's pool, zipf activity: the 5 busiest do a third of the HITs
CAP_FACTOR = 3.0  # both designs give up at 3 × the fixed design's votes (workers repeat: see the docstring)
HEAVY_STUDIES = 400  # studies per heavy-worker world

SYSTEMS = [f"s{i}" for i in range(N_SYSTEMS)]
PAIRS = list(combinations(range(N_SYSTEMS), 2))  # (x, y), x first by name
PAIR_A = np.array([a for a, _ in PAIRS])
PAIR_B = np.array([b for _, b in PAIRS])
# For each system, its pairs in the order intervals lists them, and whether it is the pair's x.
SLOTS = np.array([[k for k, (a, b) in enumerate(PAIRS) if s in (a, b)] for s in range(N_SYSTEMS)])
IS_X = PAIR_A[SLOTS] == np.arange(N_SYSTEMS)[:, None]
AS_X = np.eye(N_SYSTEMS, dtype=int)[PAIR_A]  # pairs × systems: the pair's x
AS_Y = np.eye(N_SYSTEMS, dtype=int)[PAIR_B]
LAYOUTS: dict[int, dict[str, np.ndarray]] = {}


def layout(k: int) -> dict[str, np.ndarray]:
    """The index arrays :func:`best_rule` needs for ``k`` systems: each system's pairs in the order
    ``intervals`` lists them (slots), whether it is the pair's x there, and pairs × systems indicators."""
    pairs = list(combinations(range(k), 2))
    a, b = np.array([i for i, _ in pairs]), np.array([j for _, j in pairs])
    slots = np.array([[m for m, (i, j) in enumerate(pairs) if s in (i, j)] for s in range(k)])
    return {
        "slots": slots,
        "is_x": a[slots] == np.arange(k)[:, None],
        "as_x": np.eye(k, dtype=int)[a],
        "as_y": np.eye(k, dtype=int)[b],
    }


def best_rule(n: np.ndarray, state: np.ndarray, alpha: float = ALPHA, systems: int = N_SYSTEMS):
    """``settle(intervals(…), "best", …)`` for many studies at once: observations per pair (studies × pairs)
    and each pair's bounded-sequence state at ½ (studies × pairs × 5, :func:`bounded_step`) in, (fired,
    leader, next pair or −1) per study out; ``systems`` systems, their pairs in ``combinations`` order."""
    lay = LAYOUTS.get(systems) or LAYOUTS.setdefault(systems, layout(systems))
    SLOTS, IS_X, AS_X, AS_Y = lay["slots"], lay["is_x"], lay["as_x"], lay["as_y"]  # noqa: N806
    x_wins, y_wins = bounded_excludes(state, alpha / n.shape[1])
    est = np.where(n > 0, state[..., 1] / np.maximum(n, 1), NULL)
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
    hits = np.where(undecided, n[rows, slots], np.iinfo(np.int64).max)
    pick = np.argmin(hits, axis=1)  # weights 1/(1+n): fewest HITs, ties to the first pair
    nxt = np.where(undecided.any(axis=1) & ~fired, slots[np.arange(len(n)), pick], -1)
    return fired, top, nxt


def x_over_y(gap: float) -> np.ndarray:
    """P(a vote on each pair is a win for x): Bradley–Terry diluted by the random answerers."""
    s = gap * np.arange(N_SYSTEMS)
    return 1 / (1 + np.exp(-(s[PAIR_A] - s[PAIR_B])))


def hit(rng: np.random.Generator, p_bt: np.ndarray) -> np.ndarray:
    """x-over-y wins in one HIT of VOTES_PER_HIT votes per study, each by a random answerer or not."""
    p = np.where(rng.random(len(p_bt)) < RANDOM_SHARE, 0.5, p_bt)
    return rng.binomial(VOTES_PER_HIT, p)


def sequential_studies(
    design: str, studies: int, gap: float, planned: int, seed: int, workers: int = WORKERS, cap_factor: float = 1.0
):
    """Votes at the stop (inf: no stop by the cap) and the system named, per study, for one design. Each HIT's
    worker is drawn from a pool of ``workers`` with zipf activity (:mod:`hitkit.simulation.activity`); as
    hitkit's rule does, a pair's sequence takes one observation per worker, their first HIT on the pair
    (a worker's later HITs on it are spent but add nothing). The design gives up after ``cap_factor`` times
    the fixed design's HITs."""
    rng = np.random.default_rng([seed, 1 if design == "adaptive" else 2])
    per_pair = planned // VOTES_PER_HIT
    cap_hits = int(cap_factor * len(PAIRS) * per_pair)
    each = ALPHA / len(PAIRS)
    p_bt = x_over_y(gap)
    shares = worker_shares(workers, DEFAULT_ACTIVITY)
    # who has given each (study, pair) an observation: one bit per worker
    seen = np.zeros((studies * len(PAIRS) * workers + 7) // 8, dtype=np.uint8)
    order = np.argsort(rng.random((studies, len(PAIRS))), axis=1)  # uniform: a random turn per study
    n = np.zeros((studies, len(PAIRS)), dtype=np.int64)
    state = np.zeros((studies, len(PAIRS), 5))
    stop = np.full(studies, np.inf)
    named = np.full(studies, -1)
    live = np.arange(studies)
    nxt = np.zeros(studies, dtype=np.int64)
    if design == "adaptive":
        nxt = best_rule(n, state)[2]
    for h in range(cap_hits):
        pair = nxt[live] if design == "adaptive" else order[live, h % len(PAIRS)]
        who = rng.choice(workers, size=len(live), p=shares)
        votes = hit(rng, p_bt[pair])
        key = (live * len(PAIRS) + pair) * workers + who
        byte, bit = key >> 3, (key & 7).astype(np.uint8)
        fresh = (seen[byte] >> bit) & 1 == 0
        seen[byte[fresh]] |= np.left_shift(np.uint8(1), bit[fresh])
        rows, cols = live[fresh], pair[fresh]
        n[rows, cols] += 1
        state[rows, cols] = bounded_step(state[rows, cols], votes[fresh] / VOTES_PER_HIT, each, per_pair)
        fired, top, nxt_live = best_rule(n[live], state[live])
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
        score = wins @ AS_X + (h * VOTES_PER_HIT - wins) @ AS_Y  # every system has 7 pairs' votes
        if np.mean(score.argmax(axis=1) == N_SYSTEMS - 1) >= TARGET:
            return float(h * VOTES_PER_HIT * len(PAIRS))
    return math.inf


def _bounded_ever(x: np.ndarray, planned: int, m: float = 0.5) -> np.ndarray:
    """Per study (rows of ``x``, observations in [0, 1] in order), whether the bounded sequence at α ever
    excluded ``m`` (scaled) at a look after each observation."""
    state = np.zeros((len(x), 5))
    ever = np.zeros(len(x), dtype=bool)
    for t in range(x.shape[1]):
        state = bounded_step(state, x[:, t], ALPHA, planned, m)
        above, below = bounded_excludes(state, ALPHA)
        ever |= above | below
    return ever


def _asymptotic_ever(
    total: np.ndarray, square: np.ndarray, count: np.ndarray, planned: int, clustered: np.ndarray | None = None
) -> np.ndarray:
    """Whether hitkit's asymptotic sequence (variance estimated so far, :data:`MIN_ASYMPTOTIC` floor) ever
    excluded 0 at a look after each cluster: ``total``, ``square`` and ``count`` are running sums of the
    observations, of their squares and their number (studies × looks); ``clustered`` the running
    Σ(cluster total)² when observations share clusters (the sandwich variance), else None."""
    mean = total / count
    if clustered is None:
        variance = (square - count * mean**2) / np.maximum(count - 1, 1)
    else:  # n × the cluster-robust variance of the mean, clusters = the looks so far
        looks = np.arange(1, total.shape[1] + 1)
        correction = looks / np.maximum(looks - 1, 1)
        variance = correction * clustered / count
    variance = np.maximum(variance, 1e-12)
    rho = np.array([rho_for(planned, v, ALPHA) for v in variance[:, -1]])[:, None]
    r = radius(count, variance, ALPHA, rho)
    return ((np.abs(mean) > r) & (count >= MIN_ASYMPTOTIC)).any(axis=1)


def pairwise_null(studies: int, cap: int, taste: float, seed: int) -> tuple[float, float]:
    """Two systems the crowd finds equal, each HIT one worker with a logit taste of sd ``taste``, a look
    after every HIT up to ``cap`` votes: (share of studies the per-vote exact sequence ever claimed a
    difference in, the same for hitkit's per-HIT bounded sequence)."""
    rng = np.random.default_rng([seed, 4, int(taste * 100)])
    hits = cap // VOTES_PER_HIT
    bound = radius(np.arange(cap + 1), VARIANCE, ALPHA, rho_for(cap, VARIANCE, ALPHA))
    n = np.arange(1, hits + 1) * VOTES_PER_HIT
    per_vote = per_hit = 0
    for chunk in np.array_split(np.arange(studies), max(1, studies // 500)):
        wins = rng.binomial(VOTES_PER_HIT, 1 / (1 + np.exp(-rng.normal(0, taste, (len(chunk), hits)))))
        per_vote += int((np.abs(np.cumsum(wins, axis=1) / n - NULL) > bound[n]).any(axis=1).sum())
        per_hit += int(_bounded_ever(wins / VOTES_PER_HIT, hits).sum())
    return per_vote / studies, per_hit / studies


def ratings_null(studies: int, cap: int, seed: int) -> tuple[float, float]:
    """Live chat / rating: within-HIT differences x − y in [−1, 1] with worker × system effects and skewed
    scores (the docstring's), a look after every HIT: (asymptotic sequence's false-claim share, bounded
    sequence's)."""
    rng = np.random.default_rng([seed, 5])
    p_x, p_y = rng.beta(1, 9, (studies, cap)), rng.beta(1, 9, (studies, cap))
    d = (rng.random((studies, cap)) < p_x) - rng.beta(5 * p_y, 5 * (1 - p_y))
    count = np.broadcast_to(np.arange(1, cap + 1, dtype=float), d.shape)
    asymptotic = _asymptotic_ever(np.cumsum(d, axis=1), np.cumsum(d**2, axis=1), count, cap)
    bounded = _bounded_ever((d + 1) / 2, cap)
    return float(asymptotic.mean()), float(bounded.mean())


def stb_null(studies: int, cap: int, seed: int) -> tuple[float, float]:
    """Spot The Bot: two equal bots, conversations of :data:`STB_ANNOTATIONS` Bernoulli win scores with the
    conversation's own chance, each annotation a new annotator's HIT of one segment, a look after every
    conversation: (per-annotation asymptotic sequence with the conversation-clustered variance, hitkit's
    bounded sequence over fresh annotators on fresh conversations: each conversation's first annotation)."""
    rng = np.random.default_rng([seed, 6])
    chance = 1 / (1 + np.exp(-rng.normal(0, STB_SPREAD, (studies, cap))))
    wins = rng.binomial(STB_ANNOTATIONS, chance)
    centred = wins - STB_ANNOTATIONS * NULL  # each conversation's total of (score − ½)
    count = np.broadcast_to(np.arange(1, cap + 1, dtype=float) * STB_ANNOTATIONS, wins.shape)
    total = np.cumsum(centred, axis=1)
    # Σ_c (T_c − m_c·mean)² = ΣT² − 2·mean·ΣT·m + mean²·Σm², m = annotations per conversation
    mean = total / count
    clustered = (
        np.cumsum(centred**2, axis=1)
        - 2 * mean * STB_ANNOTATIONS * total
        + mean**2 * STB_ANNOTATIONS**2 * np.arange(1, cap + 1)
    )
    asymptotic = _asymptotic_ever(total, np.zeros_like(total), count, cap * STB_ANNOTATIONS, clustered)
    bounded = _bounded_ever((rng.random((studies, cap)) < chance).astype(float), cap)
    return float(asymptotic.mean()), float(bounded.mean())


def summary(stop: np.ndarray, named: np.ndarray) -> dict[str, float]:
    right = named == N_SYSTEMS - 1
    done = np.isfinite(stop)
    return {
        "n95": n95(stop, named, N_SYSTEMS - 1),
        "p_correct": float(right.mean()),
        "p_wrong": float((done & ~right).mean()),
        "p_open": float((~done).mean()),
        "mean": float(stop[done].mean()) if done.any() else math.nan,
        "median": float(np.median(stop[done])) if done.any() else math.nan,
    }


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Run the parts, print their tables and the RESULT line; return the headline figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=1000, help="adaptive and fixed-sample studies")
    parser.add_argument("--uniform-studies", type=int, default=200, help="uniform studies")
    parser.add_argument("--null-studies", type=int, default=2000, help="studies per null")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gap", type=float, default=GAP, help="logits between neighbouring systems")
    parser.add_argument("--planned", type=int, default=PLANNED, help="votes per pair in the fixed design")
    parser.add_argument("--null-cap", type=int, default=NULL_CAP, help="votes on the pairwise null's pair")
    parser.add_argument("--rating-cap", type=int, default=RATING_CAP, help="HITs in the ratings null")
    parser.add_argument("--stb-cap", type=int, default=STB_CAP, help="conversations in the Spot The Bot null")
    parser.add_argument("--workers", type=int, default=WORKERS, help="the non-null design's pool (zipf activity)")
    parser.add_argument("--cap-factor", type=float, default=CAP_FACTOR, help="designs give up at this × the fixed one")
    parser.add_argument("--heavy-studies", type=int, default=HEAVY_STUDIES, help="studies per heavy-worker world")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    cap = len(PAIRS) * args.planned
    print(
        f"{N_SYSTEMS} systems {args.gap} logits apart, {RANDOM_SHARE:.0%} random answerers, "
        f"{VOTES_PER_HIT} votes per HIT, α = {ALPHA}, planned = {args.planned} votes per pair, "
        f"cap = {args.cap_factor:g} × {cap} votes (both designs); workers: a pool of {args.workers} with "
        f"{DEFAULT_ACTIVITY} activity; a look after every HIT, one observation per worker and pair"
    )
    rows = {}
    for design, studies in (("adaptive", args.studies), ("uniform", args.uniform_studies)):
        t = time.perf_counter()
        found = sequential_studies(design, studies, args.gap, args.planned, args.seed, args.workers, args.cap_factor)
        rows[design] = summary(*found)
        rows[design]["studies"] = studies
        rows[design]["seconds"] = time.perf_counter() - t
    print(
        f"{'design':10s} {'studies':>7s} {'N95':>9s} {'correct':>8s} {'wrong':>6s} {'open':>6s} "
        f"{'mean':>9s} {'median':>9s} {'s':>5s}"
    )
    for design, row in rows.items():
        print(
            f"{design:10s} {row['studies']:7d} {row['n95']:9.0f} {row['p_correct']:8.3f} "
            f"{row['p_wrong']:6.3f} {row['p_open']:6.3f} {row['mean']:9.0f} {row['median']:9.0f} "
            f"{row['seconds']:5.0f}"
        )
    fixed = fixed_baseline(args.studies, args.gap, args.planned, args.seed)
    print(
        f"context, not the headline: uniform fixed design, argmax of mean win score names s7 in "
        f"{TARGET:.0%} of {args.studies} studies at {fixed:.0f} votes (no error guarantee, one look; every "
        "HIT a new worker)"
    )
    nulls: dict[str, tuple[float, float]] = {}
    for taste in TASTES:
        nulls[f"pairwise, worker taste sd {taste}"] = pairwise_null(args.null_studies, args.null_cap, taste, args.seed)
    nulls["ratings, worker x system effects, skewed scores"] = ratings_null(
        args.null_studies, args.rating_cap, args.seed
    )
    nulls["spot the bot, conversation effects"] = stb_null(args.null_studies, args.stb_cap, args.seed)
    print(
        f"nulls, every HIT a new worker ({args.null_studies} studies each, α = {ALPHA}, a look after every "
        "cluster): share of studies whose interval ever excluded the null"
    )
    print(f"  {'null':50s} {'per observation (earlier)':>26s} {'clustered (hitkit now)':>23s}")
    for name, (old, new) in nulls.items():
        print(f"  {name:50s} {old:26.3f} {new:23.3f}")
    heavy = heavy_nulls.run(args.heavy_studies, args.seed)
    print(
        f"heavy-worker nulls ({args.heavy_studies} studies each, {heavy_nulls.HITS} HITs of {heavy_nulls.PER_HIT} "
        f"votes, item sd {heavy_nulls.ITEM_SD}, {heavy_nulls.TIE:.0%} ties, α = {ALPHA}, a look after every HIT)"
    )
    print(f"  {'world':50s} {'earlier rule':>13s} {'per worker (hitkit now)':>24s}")
    for protocol, earlier in (("pairwise", "per HIT"), ("arena", "per battle"), ("adaptive", "per HIT")):
        print(f"  {protocol} (earlier: {earlier})")
        for name, (old, new) in heavy[protocol].items():
            print(f"    {name:48s} {old:13.3f} {new:24.3f}")
    worst_old = max(old for old, _ in nulls.values())
    worst_new = max(new for _, new in nulls.values())
    worst_heavy = max(new for _, new in heavy["pairwise"].values())
    worst_arena = max(new for _, new in heavy["arena"].values())
    worst_adaptive = max(new for _, new in heavy["adaptive"].values())
    ratio = rows["adaptive"]["n95"] / rows["uniform"]["n95"]
    print(f"{time.perf_counter() - start:.0f} s")
    print(
        f"RESULT p_correct={rows['adaptive']['p_correct']:.3f} false_claims={worst_old:.3f} "
        f"adaptive_false_claims={worst_adaptive:.3f} false_claims_clustered={worst_new:.3f} false_claims_heavy={worst_heavy:.3f} "
        f"arena_false_claims={worst_arena:.3f} votes_ratio={ratio:.3f}"
    )
    return {
        "votes_ratio": ratio,
        "p_correct": rows["adaptive"]["p_correct"],
        "false_claims": worst_old,
        "false_claims_clustered": worst_new,
        "false_claims_heavy": worst_heavy,
        "arena_false_claims": worst_arena,
        "adaptive_false_claims": worst_adaptive,
        "nulls": nulls,
        "heavy": heavy,
        "fixed_votes": fixed,
        **{f"{d}_{k}": v for d, row in rows.items() for k, v in row.items()},
    }


if __name__ == "__main__":
    main()
