"""``hitkit replay`` on simulated Spot The Bot data with clear differences: does the rule settle every
clear pair correctly by 70 % of the units, and never claim the opposite of the full data?

The data (:func:`write_spot_the_bot`): bots of distinct "humanness" (0, 0.8, 1.6, 2.4 logits: every pair
differs clearly), bot–bot conversations of every pair, each cut into segments of 2, 3 and 5 exchanges;
every segment annotated once, both speakers labelled human / unsure / bot by an ordered logit on the
bot's humanness + a conversation effect (sd 0.5, shared by the conversation's segments) + the
worker's leniency (sd 0.5, the same for both speakers) and taste for the bot (sd 0.3). Segments are
shuffled into HITs of five, each taken by a worker drawn from the long-tailed crowd (30 workers, Zipf,
:mod:`hitkit.simulation.activity`). The tables are written as an export folder (``assignments.csv``,
``annotations.csv``) and read back by ``hitkit replay``'s own path
(:func:`hitkit.running.replay.read_study`, :func:`~hitkit.running.replay.replay`).

Each pair is replayed as its own ``pair`` decision at α = 0.05 over 200 seeded orders, by the rule the
protocol runs live: the group-sequential worker sign-flip test (:mod:`hitkit.analysis.signflip`; a
conversation counts for the worker who reached it first, every annotation of theirs on it counts, whole
workers are flipped). A pair is *clear* when the data are (:func:`margins`): the bounded interval over all
its answers, each conversation's mean annotation one observation, has a margin |estimate − ½| / half-width
≥ 1.5 (the reading the issue's bar was set with, whatever rule is replayed). Per clear pair: the share of
orders in which it settles with the full data's winner by 70 % of the study's units (``by70``; the bar:
≥ 0.9 for every clear pair); over all pairs and orders, the claims opposite to the full data's direction
(the bar: none); ``full_claims``: the pairs the rule claims on all the data in the study's order.
``null_claims``: the rule's level on the same design with four equal bots (every worker's taste sd
``--null-taste``, 1.13 by default), the share of pair × study claims over ``--null-studies`` simulated
studies, each replayed in one order (the bar: ≤ α). With 30 Zipf workers the rule still misses the bar
on some pairs (the worker is the unit, and 30 workers hold little information about a crowd; benchmarks/
README.md gives the figures, with larger crowds: ``--workers``).

Usage: ``python benchmarks/replay_clear.py [--orders 200] [--seed 0] [--conversations 150] [--workers 30]
[--null-studies 200] [--null-taste 1.13]``
(seconds). The last line is::

    RESULT clear_pairs=… full_claims=… by70_min=… by70_mean=… opposite=… null_claims=… units=… seconds=…
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hitkit.analysis.sequential import bounded_interval  # noqa: E402
from hitkit.running.replay import read_study, replay  # noqa: E402
from hitkit.simulation.activity import hit_workers  # noqa: E402

STRENGTHS = {"alpha": 0.0, "beta": 0.8, "gamma": 1.6, "delta": 2.4}
"""Each bot's humanness (logits): neighbours differ by 0.8."""
SEGMENTS = (2, 3, 5)
"""The exchanges of each conversation's segments (one annotation each)."""
PER_HIT = 5
WORKERS = 30
ALPHA = 0.05
SHARE = 0.70
ORDERS_SHARE = 0.90
CLEAR = 1.5


def _label(latent: np.ndarray) -> np.ndarray:
    """Ordered logit's cut points at ±0.5: bot, unsure, human."""
    return np.where(latent < -0.5, "bot", np.where(latent < 0.5, "unsure", "human"))


def write_spot_the_bot(
    folder: Path,
    *,
    seed: int = 0,
    conversations: int = 60,
    strengths: dict[str, float] | None = None,
    workers: int = WORKERS,
    taste_sd: float = 0.3,
) -> Path:
    """Write a simulated Spot The Bot export (the module's docstring) into ``folder``; returns it."""
    strengths = strengths or STRENGTHS
    rng = np.random.default_rng(seed)
    segments = []
    for x, y in combinations(sorted(strengths), 2):
        for i in range(conversations):
            effect = rng.normal(0.0, 0.5, size=2)
            for k in SEGMENTS:
                segments.append((f"bb:{x}-{y}-{i}", k, (x, y), effect))
    order = rng.permutation(len(segments))
    hits = [order[i : i + PER_HIT] for i in range(0, len(order), PER_HIT)]
    who = hit_workers(len(hits), workers, "zipf", rng)
    leniency = rng.normal(0.0, 0.5, size=workers)
    taste = {s: rng.normal(0.0, taste_sd, size=workers) for s in strengths}
    rows, assignments = [], []
    for h, members in enumerate(hits):
        worker = f"w{who[h]:03d}"
        assignment = f"a{h:05d}"
        assignments.append(("sim-clear", f"h{h:05d}", assignment, worker, "approved", 60.0))
        for s in members:
            conversation, exchanges, pair, effect = segments[s]
            latent = np.array(
                [strengths[b] + effect[e] + leniency[who[h]] + taste[b][who[h]] for e, b in enumerate(pair)]
            ) + rng.logistic(size=2)
            for entity, (system, label) in enumerate(zip(pair, _label(latent))):
                rows.append(
                    (
                        "sim-clear",
                        f"h{h:05d}",
                        assignment,
                        worker,
                        conversation,
                        exchanges,
                        entity,
                        system,
                        label,
                        0,
                        0,
                        0,
                        30.0,
                    )
                )
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        assignments, columns=["study", "hit_id", "assignment_id", "worker_id", "status", "work_time_s"]
    ).to_csv(folder / "assignments.csv", index=False)
    pd.DataFrame(rows, columns=list(ANNOTATION_COLUMNS)).to_csv(folder / "annotations.csv", index=False)
    return folder


def margins(data) -> dict[tuple[str, str], float]:
    """Each pair's full-data margin, how clear the data are whatever rule is replayed: |estimate − ½| /
    half-width of the bounded interval (α each, as the ``pair`` decision) over all its answers, each
    conversation's mean annotation one observation, conversations in the study's order (the per-HIT
    rule's reading, which the issue's bar was set with)."""
    out = {}
    for pair in data.pairs:
        if not len(pair.value):
            continue
        sums = np.bincount(pair.cluster, weights=pair.value)
        means = sums / np.bincount(pair.cluster)
        first = np.full(len(means), len(data.units))
        np.minimum.at(first, pair.cluster, pair.unit)
        x = means[np.lexsort((np.arange(len(means)), first))]
        out[(pair.a, pair.b)] = _margin(x, pair.planned)
    return out


def _margin(x: np.ndarray, planned: float) -> float:
    low, high = bounded_interval(x, 0.0, 1.0, ALPHA, planned, 0.5)
    return abs(float(x.mean()) - 0.5) / ((high - low) / 2)


def evaluate(folder: Path, orders: int, seed: int) -> dict:
    """The replay's figures on a study folder (the module's docstring)."""
    data = read_study("spot_the_bot", folder)
    result = replay(data, orders_count=orders, seed=seed, decision="pair", alpha=ALPHA)
    margin = margins(data)
    rows, summary = result.rows, result.summary.set_index(["system_a", "system_b"])
    clear = [p for p, m in margin.items() if m >= CLEAR]
    by70 = {}
    for a, b in clear:
        own = rows[(rows["system_a"] == a) & (rows["system_b"] == b)]
        right = summary.loc[(a, b), "full_direction"]
        by70[(a, b)] = float(((own["winner"] == right) & (own["stop_share"] <= SHARE)).mean())
    opposite = 0
    for (a, b), row in summary.iterrows():
        if row["full_direction"]:
            wrong = b if row["full_direction"] == a else a
            own = rows[(rows["system_a"] == a) & (rows["system_b"] == b)]
            opposite += int((own["winner"] == wrong).sum())
    return {
        "data": data,
        "margin": margin,
        "by70": by70,
        "opposite": opposite,
        "summary": result.summary,
    }


def null_claims(tmp: Path, studies: int, seed: int, workers: int, taste_sd: float) -> float:
    """The share of pair × study claims when the four bots are equal (the module's docstring)."""
    claims = pairs = 0
    equal = dict.fromkeys(STRENGTHS, 0.0)
    for s in range(studies):
        folder = write_spot_the_bot(
            tmp / f"null{s}",
            seed=10_000 + 1_000 * seed + s,
            conversations=60,
            strengths=equal,
            workers=workers,
            taste_sd=taste_sd,
        )
        rows = replay(read_study("spot_the_bot", folder), orders_count=1, seed=s, decision="pair", alpha=ALPHA).rows
        claims += int(rows["winner"].notna().sum())
        pairs += len(rows)
    return claims / max(pairs, 1)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--conversations", type=int, default=150, help="bot-bot conversations per pair")
    parser.add_argument("--workers", type=int, default=WORKERS, help="the crowd's size (Zipf activity)")
    parser.add_argument("--null-studies", type=int, default=200, help="equal-bot studies for the level")
    parser.add_argument("--null-taste", type=float, default=1.13, help="workers' taste sd (logits) there")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_spot_the_bot(
            Path(tmp) / "export", seed=args.seed, conversations=args.conversations, workers=args.workers
        )
        found = evaluate(folder, args.orders, args.seed)
        null = null_claims(Path(tmp), args.null_studies, args.seed, args.workers, args.null_taste)
    seconds = time.monotonic() - started
    data = found["data"]
    print(
        f"{len(data.units)} assignments ({PER_HIT} segments each) by {args.workers} workers (Zipf), "
        f"{len(data.systems)} bots, {args.conversations} conversations a pair x {len(SEGMENTS)} segments; "
        f"{args.orders} orders, decision pair, alpha {ALPHA}"
    )
    print(f"{'pair':<14} {'margin':>6} {'full':>6} {'obs':>4} {'settled':>7} {'median':>6} {'agree':>6} {'by70':>5}")
    for row in found["summary"].to_dict("records"):
        pair = (row["system_a"], row["system_b"])
        print(
            f"{pair[0] + '-' + pair[1]:<14} {found['margin'].get(pair, float('nan')):>6.2f} "
            f"{(row['full_winner'] or '-')[:6]:>6} {row['observations']:>4} {row['settled']:>7.2f} "
            f"{row['median_stop_share']:>6.3f} {row['agree']:>6.2f} {found['by70'].get(pair, float('nan')):>5.2f}"
        )
    by70 = list(found["by70"].values())
    result = {
        "clear_pairs": len(by70),
        "full_claims": int(found["summary"]["full_winner"].notna().sum()),
        "by70_min": min(by70) if by70 else 0.0,
        "by70_mean": float(np.mean(by70)) if by70 else 0.0,
        "opposite": found["opposite"],
        "null_claims": null,
        "units": len(data.units),
        "seconds": seconds,
    }
    print(
        f"level: {null:.3f} of pair x study claims among four equal bots ({args.null_studies} studies, one order "
        f"each, taste sd {args.null_taste}, {args.workers} Zipf workers; the bar: <= {ALPHA})"
    )
    met = bool(by70) and result["by70_min"] >= ORDERS_SHARE and result["opposite"] == 0
    print(
        f"bar (every clear pair settled with the full data's winner by {SHARE:.0%} of the units in >= "
        f"{ORDERS_SHARE:.0%} of orders; no claim opposite to the full data): {'met' if met else 'NOT met'}"
    )
    print("RESULT " + " ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()))
    return result


if __name__ == "__main__":
    main()
