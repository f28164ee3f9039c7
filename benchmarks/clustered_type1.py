"""Type-I error of the generalized log-rank test under conversation-level clustering (issue 19).

Simulated null data shaped like Spot The Bot (METHODS §2): two bots, each in ``N_CONV``
conversations; every conversation is cut into segments of 2, 3 and 5 exchanges, each segment
annotated by 2 annotators from a pool of ``N_ANNOTATORS`` who label many segments, so a bot gets
6 annotations per conversation. An annotator spots the bot after a geometric number of exchanges
with per-exchange hazard h = 1 − exp(−λ · frailty), where the frailty is log-normal: one factor
per conversation and bot (how that conversation went for the bot; sd ``sd_conv``) times one per
annotator (how suspicious they are; sd ``sd_ann``). Both bots have the same λ, so every
rejection is a type-I error. Censoring as METHODS §2: spotted within k → (0, k], else (k, inf).

For each data set the benchmark runs the model-based test (``generalized_logrank``, imputation
variance: it takes the 6 annotations of a conversation as independent) and the clustered test
(``clustered_logrank``: sandwich variance summed within conversations), at α = 0.05, under
moderate and strong clustering, and under none (both must hold their level there).

``benchmarks/logrank_validation.py`` imports :func:`rejection_rates` (and so :func:`dataset`) for
its clustered checks: one simulator for both.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/clustered_type1.py [n_datasets]`` (default
400 per scenario, about a minute on a shared 2-core machine; 2000 for the figures in the docs).
Last line: ``RESULT naive_type1=… clustered_type1=… naive_type1_strong=…
clustered_type1_strong=… clustered_type1_independent=…`` (moderate clustering unless named).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from hitkit.protocols.spot_the_bot.logrank import clustered_logrank, generalized_logrank

SEGMENTS = np.array([2.0, 3.0, 5.0])
N_CONV = 60  # conversations per bot
N_ANNOTATORS = 40
ANNOTATORS_PER_SEGMENT = 2
RATE = 0.35  # λ: per-exchange spotting rate before frailty
ALPHA = 0.05
N_IMPUTATIONS = 20
SCENARIOS = {"independent": (0.0, 0.0), "moderate": (0.6, 0.2), "strong": (1.0, 0.3)}
"""(sd of the log conversation frailty, sd of the log annotator frailty)."""


def dataset(rng: np.random.Generator, sd_conv: float, sd_ann: float):
    """left, right, group (bot a), conversation of every bot annotation of one null data set."""
    annotator = np.exp(rng.normal(0, sd_ann, N_ANNOTATORS))
    left, right, group, conversation = [], [], [], []
    for bot in (0, 1):
        frailty = np.exp(rng.normal(0, sd_conv, N_CONV))
        conv = np.repeat(np.arange(N_CONV), len(SEGMENTS) * ANNOTATORS_PER_SEGMENT)
        k = np.tile(np.repeat(SEGMENTS, ANNOTATORS_PER_SEGMENT), N_CONV)
        who = rng.integers(0, N_ANNOTATORS, len(conv))
        hazard = 1 - np.exp(-RATE * frailty[conv] * annotator[who])
        spotted_at = rng.geometric(np.clip(hazard, 1e-9, 1.0))
        spotted = spotted_at <= k
        left.append(np.where(spotted, 0.0, k))
        right.append(np.where(spotted, k, np.inf))
        group.append(np.full(len(conv), bot == 0))
        conversation.append(conv + bot * N_CONV)
    return (np.concatenate(left), np.concatenate(right), np.concatenate(group), np.concatenate(conversation))


def rejection_rates(sd_conv: float, sd_ann: float, n_datasets: int, seed: int) -> tuple[float, float]:
    """(naive, clustered) share of null data sets rejected at ALPHA."""
    rng = np.random.default_rng(seed)
    naive = clustered = 0
    for i in range(n_datasets):
        left, right, group, conv = dataset(rng, sd_conv, sd_ann)
        naive += generalized_logrank(left, right, group, n_imputations=N_IMPUTATIONS, seed=i)[1] < ALPHA
        clustered += clustered_logrank(left, right, group, conv)[1] < ALPHA
    return naive / n_datasets, clustered / n_datasets


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    start = time.perf_counter()
    rates = {}
    for s, (name, (sd_conv, sd_ann)) in enumerate(SCENARIOS.items()):
        rates[name] = rejection_rates(sd_conv, sd_ann, n, seed=1000 + s)
        se = (0.05 * 0.95 / n) ** 0.5
        print(
            f"{name:12s} sd_conv={sd_conv} sd_ann={sd_ann}: naive {rates[name][0]:.3f}, "
            f"clustered {rates[name][1]:.3f} (± {1.96 * se:.3f} around 0.05 by chance; "
            f"{n} data sets)"
        )
    print(f"{time.perf_counter() - start:.0f} s")
    print(
        f"RESULT naive_type1={rates['moderate'][0]:.3f} "
        f"clustered_type1={rates['moderate'][1]:.3f} "
        f"naive_type1_strong={rates['strong'][0]:.3f} "
        f"clustered_type1_strong={rates['strong'][1]:.3f} "
        f"clustered_type1_independent={rates['independent'][1]:.3f}"
    )


if __name__ == "__main__":
    main()
