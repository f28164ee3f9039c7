"""``hitkit plan --confirm``: one real run of the recommended size (real HTTP through the embedded web server,
the simulated crowd, its own database), scored by which of the plan's decisions it got right; and the same
run for a share plan (:mod:`hitkit.simulation.judge_planning`)."""

from __future__ import annotations

import math
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

from hitkit.errors import HitkitError
from hitkit.simulation.planning import Plan, design_cost, plan_module
from hitkit.study.config import StudyConfig
from hitkit.study.sections import CrowdGroup


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
    """The smallest size reaching :data:`hitkit.simulation.planning.POWER` for the study's first decision that applies to its systems,
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
