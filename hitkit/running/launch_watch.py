"""``hitkit launch`` while the study runs: watch it until it completes, is stopped from another terminal,
or leaves only work held for the coordinator; say why when it cannot go on (a refused post, the budget,
a simulated crowd out of workers, the time limit)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from sqlalchemy import select

from hitkit.db.models import Hit, Study
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.progress import StatusLine
from hitkit.running.control import coordinator_line
from hitkit.running.monitor import Snapshot, only_held_left, progress, snapshot
from hitkit.running.posting import budget_blocked, posting_blocked
from hitkit.study.config import StudyConfig
from hitkit.study.stored import StudyContext

if TYPE_CHECKING:
    from hitkit.simulation.crowd import SimulatedCrowd


@dataclass(frozen=True)
class Watched:
    """How the watch ended: ``completed``, ``stopped`` (by the coordinator) or ``held`` (``held``
    assignments of workers who fail QC wait for the coordinator's decision)."""

    ending: str
    held: int = 0


def stopped_by_rule(database_url: str, study_id: int) -> bool:
    """Whether the study's stopping rule has fired (the crowd then runs out of work by design)."""
    from hitkit.running.stopping import fired_event

    with session_scope(database_url) as session:
        return fired_event(session, study_id) is not None


def watch(
    config: StudyConfig,
    config_path: Path,
    ctx: StudyContext,
    status_line: StatusLine,
    echo: Callable[[str], None],
    crowd: SimulatedCrowd | None,
    timeout_s: float | None,
) -> Watched:
    """Look at the study every 0.3 s, showing its status line, until it ends (:class:`Watched`); a
    HitkitError saying what to do when it cannot go on. ``crowd`` is the simulated crowd, or None."""
    url = config.database_url
    started = time.monotonic()
    snap: Snapshot | None = None
    snapped: float | None = None
    paused_noted = False
    held_only = 0
    while True:
        done, total = progress(url, ctx.study_id)
        with session_scope(url) as session:
            status = session.get_one(Study, ctx.study_id).status
            blocked = budget_blocked(session, ctx) if status == "running" else 0
            refused = posting_blocked(session, ctx.study_id) if status == "running" else None
            nothing_posted = refused and not session.scalar(
                select(Hit.id).where(Hit.study_id == ctx.study_id, Hit.status != "pending").limit(1)
            )
            if snapped is None or time.monotonic() - snapped >= 1.0 or status != "running":
                # Bot health and held work once a second: the loop itself looks every 0.3 s. With no
                # status line to show, the bots are not asked for their health (held work still is).
                snapped = time.monotonic()
                if not status_line.silent:
                    snap = snapshot(session, ctx)
                held_only = only_held_left(session, ctx.study_id) if status == "running" else 0
        if snap is not None:
            status_line.show(snap.line(time.monotonic() - started))
        if status == "completed":
            return Watched("completed")
        if status in ("stopped", "paused") and not (status == "paused" and paused_noted):
            echo(coordinator_line(config.study, status, done, total, config_path))
        if status == "stopped":  # `hitkit stop` from another terminal: what is in is exported and analysed
            return Watched("stopped")
        paused_noted = status == "paused"
        if nothing_posted:
            raise HitkitError(
                f"{config.provider.kind} refused to post the study: {refused}. Nothing was "
                f"posted; fix it in {config_path}, then `hitkit resume {config_path}` and "
                f"`hitkit launch --resume {config_path}`"
            )
        if held_only:  # the rest is the coordinator's decision; the analysis can run on what is in
            return Watched("held", held_only)
        if blocked:
            raise HitkitError(
                f"the budget ({config.budget} {config.provider.currency}) is committed with {done} of {total} "
                f"answers collected and {blocked} HIT(s) unposted; raise 'budget:' in {config_path} "
                f"and continue with `hitkit launch {config_path} --resume`"
            )
        if (
            crowd is not None
            and status == "running"  # a paused study offers no work: its workers wait, they have not run out
            and crowd.finished
            and progress(url, ctx.study_id)[0] < total
            and not stopped_by_rule(url, ctx.study_id)
        ):
            # Counted again: the last workers may have submitted after `done` was read above.
            raise HitkitError(
                f"the simulated crowd ran out of workers with {done} of {total} answers collected; "
                f"add workers under simulated.workers or raise schedule.per_worker_cap, then "
                f"`hitkit launch {config_path} --resume`"
            )
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            raise HitkitError(
                f"stopped after {timeout_s:.0f} s with {done} of {total} answers; "
                f"continue with `hitkit launch {config_path} --resume`"
            )
        time.sleep(0.3)
