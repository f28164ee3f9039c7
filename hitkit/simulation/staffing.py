"""A simulated study as ``hitkit plan`` starts it: its HITs packed as a launch packs them, and who takes
their places: the simulated crowd's workers, and more of the same mix where they are too few."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import pandas as pd

from hitkit.protocols.base import HitSpec, TaskType, UnitSpec
from hitkit.simulation.activity import activity_weights
from hitkit.study.config import StudyConfig
from hitkit.tables.schema import ASSIGNMENT_COLUMNS


def staff(
    config: StudyConfig,
    places: list[int],
    rng,
    apart: Sequence[Hashable] | None = None,
) -> list[list[tuple[str, str]]]:
    """For HITs of ``places`` places each, the workers (id, profile) who take them: distinct within a HIT,
    at most ``schedule.per_worker_cap`` HITs each, and at most one HIT of each ``apart`` group (HITs
    whose ``apart`` values are equal: e.g. Spot The Bot's blocks, which show the same conversations).
    The simulated crowd's workers come first, then more in the same mix of profiles where they are too
    few (a real crowd is larger than the simulated one). Who takes a place follows ``simulated.activity``
    (:mod:`hitkit.simulation.activity`): with ``zipf`` (the default) or ``lognormal`` each worker has a
    weight of that law and a HIT's places go to free workers drawn in proportion to it, so a few workers
    do most HITs up to the cap; with ``uniform`` every free worker is as likely."""
    from hitkit.protocols import task_for

    task = task_for(config)
    mix = [(task.answering_as(g.answers_as), g.count) for g in config.simulated.workers]
    cap = config.schedule.per_worker_cap
    law = config.simulated.activity
    workers: list[tuple[str, str]] = []
    taken: dict[tuple[str, str], int] = {}
    weight: dict[tuple[str, str], float] = {}
    seen: set[tuple[tuple[str, str], Hashable]] = set()
    staffed = []
    for h, need in enumerate(places):
        group = apart[h] if apart is not None else h
        free = [w for w in workers if taken[w] < cap and (w, group) not in seen]
        while len(free) < need:  # another round of the crowd's mix
            fresh = [(f"plan-{profile}-{len(workers)}-{i}", profile) for profile, count in mix for i in range(count)]
            workers += fresh
            taken.update({w: 0 for w in fresh})
            if law != "uniform":
                weight.update(zip(fresh, activity_weights(len(fresh), law, rng)))
            free += fresh
        chosen = rng.sample(free, need) if law == "uniform" else _weighted_sample(free, weight, need, rng)
        for w in chosen:
            taken[w] += 1
            seen.add((w, group))
        staffed.append(chosen)
    return staffed


def _weighted_sample(free: list, weight: dict, need: int, rng) -> list:
    """``need`` distinct members of ``free`` drawn one after another in proportion to ``weight``."""
    pool, chosen = list(free), []
    for _ in range(need):
        pick = rng.choices(range(len(pool)), weights=[weight[w] for w in pool])[0]
        chosen.append(pool.pop(pick))
    return chosen


@dataclass
class SimulatedStudy:
    """A simulated study before its answers: the seeded generator the answers draw from next, the task
    type, its units by key, each place of each packed HIT (the HIT, the assignment's ids as the export
    writes them, the worker's profile) and the systems' quality as the simulated crowd perceives it."""

    rng: random.Random
    task: TaskType
    units: dict[str, UnitSpec]
    places: list[tuple[HitSpec, dict[str, str], str]]
    quality: dict[str, float]
    """Each system's quality as the simulated crowd perceives it."""

    @property
    def assignments(self) -> pd.DataFrame:
        """The assignments table (the export's columns), every place submitted."""
        table = pd.DataFrame(
            [{**ids, "status": "submitted", "work_time_s": None} for _, ids, _ in self.places],
            columns=list(ASSIGNMENT_COLUMNS),
        )
        table.attrs["duplicates"] = {}
        return table

    @property
    def profiles(self) -> dict[str, str]:
        """Each worker's profile."""
        return {ids["worker_id"]: profile for _, ids, profile in self.places}


def simulated_study(
    config: StudyConfig, seed: int, apart: Callable[[HitSpec, dict[str, UnitSpec]], Hashable] | None = None
) -> SimulatedStudy:
    """The study's units packed as a launch packs them and its places filled by :func:`staff`, all drawn
    from one generator seeded with ``seed``; ``apart(hit, units)`` names the group of HITs a worker takes
    one of at most."""
    from hitkit.judges.human_subset import crowd_units
    from hitkit.protocols import task_for

    rng = random.Random(seed)
    task = task_for(config)
    units = {u.key: u for u in crowd_units(config, task.build().units)}  # with a judge, the crowd's share
    hits = task.pack(list(units.values()), rng)
    groups = [apart(hit, units) for hit in hits] if apart is not None else None
    places = [
        (hit, {"study": config.study, "hit_id": f"h{h}", "assignment_id": f"h{h}-{w}", "worker_id": worker}, profile)
        for h, (hit, workers) in enumerate(zip(hits, staff(config, [hit.max_assignments for hit in hits], rng, groups)))
        for w, (worker, profile) in enumerate(workers)
    ]
    return SimulatedStudy(rng, task, units, places, task.perceived_quality())
