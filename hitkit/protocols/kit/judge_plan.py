"""What the judged protocols' share plans (``hitkit plan`` for a study with ``judge:``, in
``hitkit/protocols/NAME/judge_plan.py``) share: the columns their table shows, and the steps from the
coordinator's options to the plan (:func:`hitkit.simulation.judge_planning.plan_shares`). A protocol gives
its :class:`Target` (how it speaks of what it sizes) and its :class:`Sized` study; the rest is here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hitkit.simulation import judge_planning
from hitkit.study.config import StudyConfig


def shown(*counts: str) -> tuple[str, ...]:
    """The columns a share plan's table shows: the share, the protocol's counts of what people do
    (``counts``), the HITs and their cost, the mean half-widths (people only, PPI and the sizing
    formula's) and the sizes (people's items, and what people and judge together are worth)."""
    widths = ("half_width_human", "half_width_ppi", "half_width_formula", "n_human", "n_effective")
    return (judge_planning.UNIT, *counts, "hits", "cost", *widths)


@dataclass(frozen=True)
class Target:
    """How a protocol's share plan speaks of what it sizes: ``replicates`` simulated studies by default;
    ``interval``, one of its intervals (whose half-width ``--width`` sets, below ``bound`` where there is
    one); ``intervals``, all of them (the recommendation's words); the ``decisions`` it scores."""

    replicates: int
    bound: float | None
    interval: str
    intervals: str
    decisions: dict[str, str]


@dataclass(frozen=True)
class Sized:
    """A study's side of its share plan: its own share, whether a share fits it (a ConfigError where it
    does not), how many items the judge labels, a share's first columns (``cost``: what the crowd does and
    is paid) and one simulated study analysed at every share of a grid (``replicate(grid, seed)``)."""

    own: float
    fits: Callable[[float], Any]
    items: int
    cost: Callable[[float], dict]
    replicate: Callable[[list[float], int], dict[float, dict]]


def share_plan(
    config: StudyConfig,
    judge: Any,
    target: Target,
    sized: Callable[[StudyConfig, Any], Sized],
    replicates: int | None,
    shares: list[float] | None,
    width: float | None,
) -> judge_planning.JudgePlan:
    """The share plan of ``config`` with ``judge``: the options checked (``replicates`` None: the
    target's), the study sized (``sized(config, judge)``), the grid of shares (``shares`` or the default
    with the study's own, less the default's shares that do not fit), then
    :func:`~hitkit.simulation.judge_planning.plan_shares`."""
    replicates = target.replicates if replicates is None else replicates
    judge_planning.check_options(replicates, shares, width, target.bound, target.interval)
    study = sized(config, judge)
    grid, dropped = judge_planning.grid(study.own, shares, study.fits)
    return judge_planning.plan_shares(
        config,
        judge,
        replicates=replicates,
        shares=grid,
        dropped=dropped,
        width=width,
        width_words=target.intervals,
        own=study.own,
        items=study.items,
        decisions=target.decisions,
        replicate=lambda seed: study.replicate(grid, seed),
        cost=study.cost,
    )
