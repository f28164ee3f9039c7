"""``hitkit plan``: how many HITs a study needs for the decisions it exists for, before paying anyone.

For each size on a grid the protocol's plan (``hitkit/protocols/NAME/plan.py``) simulates the whole
study many times through the statistics layer, without HTTP: the same units and packing as a launch,
workers drawn from the study's simulated crowd (profiles, counts, and ``simulated.activity``: long-tailed by
default, :func:`hitkit.simulation.staffing.staff`), their answers from the task type's own simulated-worker
model with the assumed effect sizes of ``simulated.quality``, and the tables of the protocol's own analysis
that its decisions read (made by the same functions with the same defaults; the agreement, evidence and
figures a plan never reads are left out, which makes a simulated study two to five times cheaper). The share of simulated studies in which a decision comes out right is its power at that size; the
cost is every place of every HIT paid with the provider's fee (:mod:`hitkit.money.amounts`). Everything is seeded from the study's ``seed``: a plan run twice prints the
same table.

A protocol's plan module offers ``size_of(config)`` (the study file's own size), ``sizes(config)`` (the grid, in its own unit: e.g. votes per prompt),
``with_size(config, size)`` (the study file at that size), ``DECISIONS`` (name -> what it means) and
``decide(config, result, profiles)`` (which decisions an analysis of the protocol's, as ``hitkit analyze``
makes it, got right; ``profiles``: worker id -> simulated profile), ``replicate(config, seed, n_boot)`` ->
{decision: True/False/None} (None: the decision does not
apply, e.g. no single best system when two share the top quality), and may set ``REPLICATES`` (simulated
studies per size by default) where its analysis is slow.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable

import pandas as pd

from hitkit.analysis.base import console_table
from hitkit.errors import HitkitError
from hitkit.money.amounts import hit_cost
from hitkit.progress import progress
from hitkit.protocols import PROTOCOLS, task_for
from hitkit.study.config import StudyConfig

DECISIONS = {
    "closest_pair": "the two systems of closest quality differ (corrected test)",
    "every_pair": "every pair of systems of different quality differs (corrected tests)",
    "best": "the best system is ranked first",
    "clusters": "adjacent systems' 95 % intervals separate",
    "no_false_difference": "no two systems of equal quality are called different",
}
"""The decisions a ranking study exists for, the same words for every protocol that ranks systems."""

POWER = 0.8
"""The share of simulated studies a decision must come out right in for a size to be recommended."""


@dataclass
class Plan:
    """The plan's table (one row per size) and, per decision, the smallest size that reaches :data:`POWER`."""

    table: pd.DataFrame
    decisions: dict[str, str]
    unit: str
    replicates: int
    seconds: float
    smallest: dict[str, int | None] = field(default_factory=dict)
    precision: float = 0.0
    """The widest 95 % Monte Carlo half-width of the table's powers: each is within it of the power that
    infinitely many simulated studies would give."""
    budget_s: float | None = None
    """The time budget the replicates were fitted in (None: a fixed ``--replicates``)."""


def plan_module(config: StudyConfig):
    """The study's protocol's plan module, or a HitkitError naming the protocols that have one."""
    import importlib.util

    proto = PROTOCOLS[config.task]
    if importlib.util.find_spec(f"{proto.package}.plan") is None:
        have = [p.name for p in PROTOCOLS.values() if importlib.util.find_spec(f"{p.package}.plan")]
        raise HitkitError(
            f"hitkit plan is not available for {config.task} studies yet; it plans {', '.join(have)} studies"
        )
    return proto.module("plan")


def design_cost(config: StudyConfig) -> tuple[int, int, Decimal]:
    """(HITs, assignments, worst-case cost) of the study as its file packs it: every place paid, with
    the provider's fee on each reward."""
    import random

    from hitkit.judges.human_subset import crowd_units
    from hitkit.providers import make_provider

    task = task_for(config)
    hits = task.pack(crowd_units(config, task.build().units), random.Random(config.seed))
    provider = make_provider(config, "")
    reward = config.hit.reward
    cost = sum((hit_cost(reward, h.max_assignments, provider.fee(reward, h.max_assignments)) for h in hits), Decimal(0))
    return len(hits), sum(h.max_assignments for h in hits), cost


REPLICATES = 40
"""Simulated studies per size, unless the protocol's plan module sets its own ``REPLICATES``."""
MIN_REPLICATES = 3
"""Simulated studies per size a time budget never goes below, however slow the machine: with fewer a power
is hardly more than a coin (the printed precision says how little it is even at this floor)."""
BUDGET_S = 20.0
"""``hitkit plan``'s default time budget, counted from the command's start (its imports, the study file and
every size's design included): rounds of one simulated study per size run while the next round is expected
to end within it (up to the protocol's replicates), so that a loaded machine answers within about 30 s,
with the precision it reached printed; ``--replicates`` fixes the count instead."""
FEW_REPLICATES = 10
"""Below this many simulated studies per size the plan says how to get a steadier answer."""


def monte_carlo_half_width(power: float | None, n: int) -> float:
    """The 95 % half-width of a power estimated from ``n`` simulated studies (normal approximation, at least
    the width at a power of 0.5 / n away from the ends, so 0 and 1 are not shown as exact)."""
    if power is None or n < 1:
        return 0.0
    p = min(max(power, 0.5 / n), 1 - 0.5 / n)
    return 1.96 * math.sqrt(p * (1 - p) / n)


def rounds_fit(elapsed_s: float, round_s: float, budget_s: float) -> bool:
    """Whether one more round of simulated studies, expected to take ``round_s`` seconds (the mean of the
    rounds so far), still ends within ``budget_s`` after ``elapsed_s`` seconds of the command."""
    return elapsed_s + round_s <= budget_s


def plan(
    config: StudyConfig,
    *,
    replicates: int | None = None,
    n_boot: int = 100,
    sizes: list[int] | None = None,
    budget_s: float | None = None,
    started: float | None = None,
    clock: Callable[[], float] | None = None,
) -> Plan:
    """Power and cost of every size on the grid (``sizes`` overrides the protocol's), ``replicates``
    simulated studies a size (default: the protocol's, else :data:`REPLICATES`), each analysed with
    ``n_boot`` bootstrap resamples. With ``budget_s`` and no ``replicates``, rounds of one study per size run
    while the next round is expected to end within the budget (at least :data:`MIN_REPLICATES`, at most the
    default count); the budget counts from ``started`` (a ``clock()`` reading, e.g. the process's start;
    default: now; ``clock``: :func:`time.monotonic` unless given), so every size's design and cost count in it. Each size's design is built once and reused
    by all its studies. Study ``r`` of a size has the same seed either way, so a budget that fits N rounds
    gives exactly what ``replicates=N`` gives."""
    clock = clock or time.monotonic
    began = clock() if started is None else started
    module = plan_module(config)
    most = replicates if replicates is not None else getattr(module, "REPLICATES", REPLICATES)
    if most < 1 or n_boot < 1:
        raise HitkitError("give at least one replicate and one bootstrap resample")
    timed = budget_s is not None and replicates is None
    grid = sorted(set(sizes)) if sizes else module.sizes(config)
    designs = {size: module.with_size(config, size) for size in grid}  # once a size, not once a study
    costs = {size: design_cost(sized) for size, sized in designs.items()}
    outcomes: dict[int, list[dict]] = {size: [] for size in grid}
    jobs = [(size, r) for r in range(most) for size in grid]  # round by round: every size has as many
    simulating, ran = clock(), 0
    for size, r in progress(jobs, "plan", total=len(jobs), unit="study"):
        if size == grid[0]:
            if timed and r >= MIN_REPLICATES:
                now = clock()
                if not rounds_fit(now - began, (now - simulating) / r, float(budget_s or 0)):
                    break
            ran = r + 1
        seed = config.seed * 100_003 + size * 1_009 + r
        outcomes[size].append(module.replicate(designs[size], seed, n_boot))
    rows = []
    for size in grid:
        hits, assignments, cost = costs[size]
        row: dict[str, Any] = {module.UNIT: size, "hits": hits, "assignments": assignments, "cost": str(cost)}
        for decision in module.DECISIONS:
            seen = [o[decision] for o in outcomes[size] if o.get(decision) is not None]
            row[decision] = round(sum(seen) / len(seen), 3) if seen else None
        rows.append(row)
    table = pd.DataFrame(rows)
    smallest = {
        d: next((int(r[module.UNIT]) for r in rows if r[d] is not None and r[d] >= POWER), None)
        for d in module.DECISIONS
    }
    precision = max(
        (monte_carlo_half_width(r[d], ran) for r in rows for d in module.DECISIONS if r[d] is not None), default=0.0
    )
    return Plan(
        table,
        dict(module.DECISIONS),
        module.UNIT,
        ran,
        round(clock() - began, 1),
        smallest,
        precision=round(precision, 3),
        budget_s=budget_s if timed else None,
    )


def plan_text(config: StudyConfig, result: Plan) -> str:
    """The plan as the command line prints it: the table, then one line per decision."""
    lines = [
        f"Plan for '{config.study}' ({config.task} on {config.provider.kind}): {result.replicates} simulated "
        f"studies per size from the simulated crowd and simulated.quality, {result.seconds} s"
        + (f" (a budget of {result.budget_s:g} s; --replicates N for more)." if result.budget_s is not None else "."),
        f"Each power below is within ±{result.precision:.2f} of its long-run value (95 %, Monte Carlo).",
        *few_replicates_hint(result),
        "",
        console_table(result.table),
        "",
        f"cost: every place paid, with fees ({config.provider.currency}).",
        "",
    ]
    for decision, meaning in result.decisions.items():
        size = result.smallest[decision]
        if result.table[decision].isna().all():
            lines.append(f"- {meaning}: does not apply to this study's systems and qualities")
        elif size is None:
            lines.append(f"- {meaning}: below {POWER:.0%} at every size on the grid; try larger sizes (--sizes)")
        else:
            row = result.table[result.table[result.unit] == size].iloc[0]
            lines.append(
                f"- {meaning}: {POWER:.0%} power from {result.unit} = {size} ({row['hits']} "
                f"HIT{'' if row['hits'] == 1 else 's'}, {row['cost']} {config.provider.currency})"
            )
    return "\n".join(lines)


def few_replicates_hint(result: Plan) -> list[str]:
    """A line saying how to get steadier powers when the time budget fitted fewer than :data:`FEW_REPLICATES`
    studies per size (none otherwise): other processes share the CPU, so the same budget fits fewer."""
    if result.budget_s is None or result.replicates >= FEW_REPLICATES:
        return []
    load = f" (load average {os.getloadavg()[0]:.1f})" if hasattr(os, "getloadavg") else ""
    wanted = max(1.0, result.seconds) * 20 / max(result.replicates, 1)
    return [
        f"Only {result.replicates} simulated studies per size fitted in {result.budget_s:g} s on this machine "
        f"now{load}: for powers within about ±0.2, give --replicates 20 (about {wanted:.0f} s here) or "
        f"--seconds {max(60, round(wanted, -1)):.0f}."
    ]


def _measured(interval: tuple[float, float] | None) -> bool:
    """An interval that says something: finite and of positive width (one worker's bootstrap is a point)."""
    low, high = interval or (math.nan, math.nan)
    return math.isfinite(low) and math.isfinite(high) and high > low


def decide(
    quality: dict[str, float],
    differs,
    ranked: list[str],
    intervals: dict[str, tuple[float, float]],
) -> dict[str, bool | None]:
    """Which of :data:`DECISIONS` one simulated study's analysis got right, given the true ``quality`` of
    the ranked systems: ``differs(a, b)`` says whether the analysis called a and b different (a claimed
    better than b where its test is one-sided), ``ranked`` is its order (best first) and ``intervals``
    each system's 95 % interval. None where a decision does not apply to these qualities."""
    names = sorted(quality)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    different = [(a, b) if quality[a] > quality[b] else (b, a) for a, b in pairs if quality[a] != quality[b]]
    equal = [(a, b) for a, b in pairs if quality[a] == quality[b]]
    order = sorted(names, key=lambda n: (-quality[n], n))
    adjacent = [(hi, lo) for hi, lo in zip(order, order[1:]) if quality[hi] != quality[lo]]
    closest = min(different, key=lambda p: (quality[p[0]] - quality[p[1]], p), default=None)
    return {
        "closest_pair": differs(*closest) if closest else None,
        "every_pair": all(differs(hi, lo) for hi, lo in different) if different else None,
        "best": (ranked[0] == order[0]) if ranked and quality[order[0]] != quality[order[1]] else None,
        "clusters": all(
            _measured(intervals.get(lo)) and _measured(intervals.get(hi)) and intervals[lo][1] < intervals[hi][0]
            for hi, lo in adjacent
        )
        if adjacent
        else None,
        "no_false_difference": not any(differs(a, b) or differs(b, a) for a, b in equal) if equal else None,
    }


def ranked_nothing(quality: dict[str, float]) -> dict[str, bool | None]:
    """The :data:`DECISIONS` of an analysis that scored not every system (no worker who passed QC rated one):
    it ranked nothing and told no difference, so every decision that applies is wrong but no false difference."""
    applies = decide(quality, lambda a, b: False, [], dict.fromkeys(quality, (0.0, 1.0)))
    return {k: (None if v is None else k == "no_false_difference") for k, v in applies.items()}
