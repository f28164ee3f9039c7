"""Who takes the places of simulated HITs when a study is planned (``hitkit plan``): the simulated crowd's
workers, and more of the same mix where they are too few."""
from __future__ import annotations

from hitkit.config import StudyConfig


def staff(config: StudyConfig, places: list[int], rng) -> list[list[tuple[str, str]]]:
    """For HITs of ``places`` places each, the workers (id, profile) who take them: distinct within a HIT,
    at most ``schedule.per_worker_cap`` HITs each. The simulated crowd's workers come first, then more in
    the same mix of profiles where they are too few (a real crowd is larger than the simulated one)."""
    mix = [(g.answers_as, g.count) for g in config.simulated.workers]
    cap = config.schedule.per_worker_cap
    workers: list[tuple[str, str]] = []
    taken: dict[tuple[str, str], int] = {}
    staffed = []
    for need in places:
        free = [w for w in workers if taken[w] < cap]
        while len(free) < need:  # another round of the crowd's mix
            fresh = [(f"plan-{profile}-{len(workers)}-{i}", profile) for profile, count in mix for i in range(count)]
            workers += fresh
            taken.update({w: 0 for w in fresh})
            free += fresh
        chosen = rng.sample(free, need)
        for w in chosen:
            taken[w] += 1
        staffed.append(chosen)
    return staffed
