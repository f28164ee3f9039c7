"""``hitkit plan``: how many HITs a study needs for the decisions it exists for, before paying anyone.

For each size on a grid the protocol's plan (``hitkit/protocols/NAME/plan.py``) simulates the whole
study many times through the statistics layer, without HTTP: the same units and packing as a launch,
workers drawn from the study's simulated crowd (profiles, counts, and ``simulated.activity``: long-tailed by
default, :func:`hitkit.simulation.staffing.staff`), their answers from the task type's own simulated-worker
model with the assumed effect sizes of ``simulated.quality``, and the protocol's own analysis on the
tables. The share of simulated studies in which a decision comes out right is its power at that size; the
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
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pandas as pd

from hitkit.errors import HitkitError
from hitkit.money.amounts import hit_cost
from hitkit.progress import progress
from hitkit.protocols import PROTOCOLS, task_for
from hitkit.study.config import StudyConfig
from hitkit.study.sections import CrowdGroup

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


def plan(
    config: StudyConfig,
    *,
    replicates: int | None = None,
    n_boot: int = 100,
    sizes: list[int] | None = None,
) -> Plan:
    """Power and cost of every size on the grid (``sizes`` overrides the protocol's), ``replicates``
    simulated studies a size (default: the protocol's, else :data:`REPLICATES`), each analysed with
    ``n_boot`` bootstrap resamples."""
    module = plan_module(config)
    if replicates is None:
        replicates = getattr(module, "REPLICATES", REPLICATES)
    if replicates < 1 or n_boot < 1:
        raise HitkitError("give at least one replicate and one bootstrap resample")
    grid = sorted(set(sizes)) if sizes else module.sizes(config)
    started, rows = time.monotonic(), []
    jobs = [(size, r) for size in grid for r in range(replicates)]
    outcomes: dict[int, list[dict]] = {size: [] for size in grid}
    for size, r in progress(jobs, "plan", total=len(jobs), unit="study"):
        sized = module.with_size(config, size)
        outcomes[size].append(module.replicate(sized, config.seed * 100_003 + size * 1_009 + r, n_boot))
    for size in grid:
        hits, assignments, cost = design_cost(module.with_size(config, size))
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
    return Plan(table, dict(module.DECISIONS), module.UNIT, replicates, round(time.monotonic() - started, 1), smallest)


def plan_text(config: StudyConfig, result: Plan) -> str:
    """The plan as the command line prints it: the table, then one line per decision."""
    currency = config.provider.currency
    lines = [
        f"Plan for '{config.study}' ({config.task} on {config.provider.kind}): {result.replicates} simulated "
        f"studies per size from the simulated crowd and simulated.quality, {result.seconds} s.",
        "",
        result.table.to_string(index=False),
        "",
        f"cost: every place paid, with fees ({currency}).",
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
                f"HIT{'' if row['hits'] == 1 else 's'}, {row['cost']} {currency})"
            )
    return "\n".join(lines)


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


@dataclass
class Confirmation:
    """One real run of the study at one size (``hitkit plan --confirm``) and which decisions it got right."""

    size: int | float
    unit: str
    hits: int
    assignments: int
    workers: int
    folder: Path
    database: str
    provider: str
    outcome: dict[str, bool | None]
    seconds: float


def recommended_size(config: StudyConfig, result: Plan) -> int:
    """The smallest size reaching :data:`POWER` for the study's first decision that applies to its systems,
    or the study's own size where none does."""
    first = next((d for d in result.decisions if result.table[d].notna().any()), None)
    size = result.smallest.get(first) if first is not None else None
    return size if size is not None else plan_module(config).size_of(config)


@contextmanager
def _own_database() -> Iterator[None]:
    """HITKIT_DATABASE_URL outranks a study file's database: set it aside while the confirming run runs,
    so that the run cannot reach the study's own database."""
    saved = os.environ.pop("HITKIT_DATABASE_URL", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["HITKIT_DATABASE_URL"] = saved


def confirm(
    config: StudyConfig,
    study_file: str | Path,
    result: Plan,
    *,
    web,
    n_boot: int = 100,
    echo: Callable[[str], None] = print,
    timeout_s: float | None = 600,
) -> Confirmation:
    """Run the study once at :func:`recommended_size` (:func:`confirming_run`), analyse it with ``n_boot``
    resamples and say which decisions it got right."""
    from hitkit.report.analyze import run_analysis
    from hitkit.simulation.crowd import crowd_from_config

    module = plan_module(config)
    size = recommended_size(config, result)
    started = time.monotonic()
    run = confirming_run(config, study_file, module.with_size(config, size), web=web, echo=echo, timeout_s=timeout_s)
    analysis = run_analysis(
        run.config.task, run.folder / "export", seed=run.config.seed, config=run.config, options={"n_boot": n_boot}
    )
    analysis.write(run.folder / "analysis")
    profiles = {w.worker_id: w.profile for w in crowd_from_config(run.config)}
    outcome = module.decide(run.config, analysis, profiles)
    return Confirmation(
        size,
        module.UNIT,
        run.hits,
        run.assignments,
        run.workers,
        run.folder,
        run.database,
        config.provider.kind,
        {d: outcome.get(d) for d in module.DECISIONS},
        round(time.monotonic() - started, 1),
    )


@dataclass
class ConfirmingRun:
    """A finished confirming run: the study file it ran (provider, folder, database and crowd replaced), its
    HITs, assignments and simulated workers, its folder (``export/`` inside) and database."""

    config: StudyConfig
    hits: int
    assignments: int
    workers: int
    folder: Path
    database: str


def enlarged_crowd(groups: Sequence[CrowdGroup], assignments: int, per_worker_cap: int) -> list[CrowdGroup]:
    """The crowd groups of a confirming run: the study's own, repeated whole until the workers could take twice
    the ``assignments`` at their cap (Spot The Bot's refusals leave some capacity unused). Repeating the groups
    whole, not multiplying each count, keeps the workers who arrive first the study's own crowd in its own mix:
    multiplied, every spammer came after all the diligent workers, took no HIT, and "every spammer fails QC"
    was never tried."""
    crowd = sum(g.count for g in groups)
    return list(groups) * max(1, math.ceil(2 * assignments / (per_worker_cap * crowd)))


def confirming_run(
    config: StudyConfig,
    study_file: str | Path,
    sized: StudyConfig,
    *,
    web,
    echo: Callable[[str], None] = print,
    timeout_s: float | None = 600,
) -> ConfirmingRun:
    """Run ``sized`` (the study file at the size to confirm) once as ``hitkit launch`` runs a simulated study:
    real HTTP through ``web``, the launch's web factory, exported, not analysed. The provider is the
    simulated crowd whatever the file says (a plan never posts to a platform), enlarged in the same mix
    where it is too small for the size; the run has its own folder (``OUT/STUDY/plan/confirm/``, made
    afresh), SQLite database, loopback server and a budget that covers it. Bots and an LLM judge the study
    talks to are the study file's: a judge labels the material before posting or, where the protocol's judge
    labels the crowd's work, that work after it (as a launch does); a judge that fails on any of it is an
    error, the run's files kept."""
    import shutil

    from hitkit.db.session import get_engine
    from hitkit.judges.section import judge_section
    from hitkit.running.launch import launch
    from hitkit.study.provider_sections import ProviderConfig

    folder = config.out_dir / "plan" / "confirm"
    shutil.rmtree(
        folder, ignore_errors=True
    )  # the last confirming run's own files: a study name is used once a database
    (folder / config.study).mkdir(parents=True)
    database = f"sqlite:///{folder / config.study / 'hitkit.db'}"
    sized = sized.model_copy(
        update={
            "provider": ProviderConfig(kind="simulated", currency=config.provider.currency),
            "out": folder,
            "database": database,
            "server": config.server.model_copy(update={"host": "127.0.0.1", "port": 0, "public_url": None}),
            # As a simulated study file gets them: no review window, every submission paid (and so counted).
            "schedule": config.schedule.model_copy(update={"approve_after_s": 0.0, "qc_failures": "pay"}),
        }
    )
    hits, assignments, cost = design_cost(sized)
    workers = enlarged_crowd(sized.simulated.workers, assignments, sized.schedule.per_worker_cap)
    sized = sized.model_copy(
        update={
            "budget": max(config.budget, cost),
            "simulated": sized.simulated.model_copy(update={"workers": workers}),
        }
    )
    try:
        with _own_database():
            run = launch(
                study_file,
                web=web,
                yes=True,
                show_progress=False,
                echo=echo,
                timeout_s=timeout_s,
                analyse=False,
                config=sized,
            )
    finally:
        get_engine(database).dispose()  # its SQLite file closed: the next confirming run starts a new one
    if not run.judged:
        judge = judge_section(sized)
        raise HitkitError(
            f"the confirming run's judge ({judge.model} at {judge.url}) did not label all "
            f"of the crowd's work, so its analysis would be short of the judge's labels; the run is in "
            f"{run.out_dir}. Check the judge, then run `hitkit plan {study_file} --confirm` again"
        )
    return ConfirmingRun(sized, hits, assignments, sum(g.count for g in workers), run.out_dir, database)


def confirm_text(result: Plan, confirmation: Confirmation) -> str:
    """The confirming run as the command line prints it: each decision, its simulated power at that size
    and whether the one real run got it right."""
    c = confirmation
    forced = (
        "the study's own provider"
        if c.provider == "simulated"
        else f"provider forced to the simulated crowd instead of {c.provider}: nothing was posted"
    )
    rows = result.table[result.table[result.unit] == c.size]
    lines = [
        f"Confirmed once for real at {c.unit} = {c.size} ({c.hits} HITs, {c.assignments} assignments): real "
        f"HTTP through hitkit's web server, the simulated crowd of {c.workers} workers ({forced}), its own "
        f"database {c.database}; {c.seconds} s. Files in {c.folder}.",
        "",
    ]
    width = max(len(d) for d in result.decisions)
    lines.append(f"{'decision':<{width}}  simulated power  this run")
    for decision, right in c.outcome.items():
        power = rows[decision].iloc[0] if len(rows) else None
        shown = "-" if power is None or (isinstance(power, float) and math.isnan(power)) else f"{power:.3f}"
        verdict = "does not apply" if right is None else ("right" if right else "wrong")
        lines.append(f"{decision:<{width}}  {shown:>15}  {verdict}")
    return "\n".join(lines)
