"""The simulated crowd's workers taking HITs from a live provider's fake, over real HTTP.

:class:`hitkit.simulation.crowd.SimulatedCrowd` arrives with the ``simulated`` provider's parameters; a study
on MTurk or Prolific needs each worker to arrive as that marketplace sends them and to be handed
back to it. :func:`take_hit` plays one worker through one HIT with the same profiles and answers
(:meth:`TaskType.simulate`); the caller says how the worker arrives and how the hand-back lands.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import requests

from hitkit.simulation.crowd import SimWorker
from hitkit.study.stored import StudyContext


def take_hit(
    ctx: StudyContext, sim_context: Any, worker: SimWorker, entry_url: str, params: dict[str, str]
) -> requests.Response | None:
    """Arrive at ``entry_url`` with ``params``, consent, answer as the profile does, submit.

    Returns the submit response (redirects not followed), or None when the server refused the
    arrival (no place, cap reached).
    """
    http = requests.Session()
    page = http.get(entry_url, params=params, timeout=30)
    if page.status_code in (403, 409, 410):
        return None
    page.raise_for_status()
    base = page.url.split("?")[0].rstrip("/")
    http.post(f"{base}/consent", timeout=30).raise_for_status()
    state = http.get(f"{base}/state", timeout=30).json()
    rng = random.Random(f"{worker.worker_id}:{base}")
    for view in state["units"]:
        for question, value in ctx.task.simulate(worker.profile, view, rng, sim_context, worker.worker_id).items():
            http.post(
                f"{base}/answer", json={"unit_id": view["unit_id"], "question": question, "value": value}, timeout=30
            ).raise_for_status()
    done = http.post(f"{base}/submit", allow_redirects=False, timeout=30)
    assert done.status_code in (200, 302), done.text
    return done


def run_rounds(rounds: int, one_round: Callable[[], int], tick: Callable[[], Any], finished: Callable[[], bool]) -> int:
    """Alternate crowd rounds and scheduler ticks until ``finished``; return the HITs taken."""
    taken = 0
    for _ in range(rounds):
        if finished():
            return taken
        taken += one_round()
        tick()
    return taken
