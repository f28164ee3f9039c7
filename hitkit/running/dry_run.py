"""``hitkit launch --dry-run``: validate the study and its material, pack the HITs and print the cost and
the plan, posting nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sqlalchemy import select

from hitkit.db.migrate import upgrade
from hitkit.db.session import session_scope
from hitkit.money.ledger import estimate_cost
from hitkit.running.bots import check_material_before_generating
from hitkit.study.loading import load_study
from hitkit.study.served import launched_studies
from hitkit.study.stored import create_study


# Dry run -----------------------------------------------------------------------------------------
@dataclass
class Plan:
    """What a launch would do: HITs, assignments, cost, and the material that was checked."""

    lines: list[str]
    hits: int
    assignments: int
    total: str


def dry_run(config_path: str | Path, echo: Callable[[str], None] = print) -> Plan:
    """Validate the study and its material, pack the HITs and price them — in a throwaway database.

    Posts nothing, starts no server, writes nothing a later real launch would trip over: the
    study's own database and output folder are not touched (the packing runs in a temporary
    SQLite file that is deleted afterwards). Bot–bot conversations not generated yet are packed
    as placeholders of the planned number and length, so the HITs and the cost are those of the
    real launch.
    """
    import tempfile
    from collections import Counter

    from hitkit.db.models import Hit

    config_path = Path(config_path)
    config = load_study(config_path)
    lines = [
        f"Study '{config.study}': {config.task} on {config.provider.kind}, {len(config.systems)} systems "
        f"({', '.join(s.name for s in config.systems)}); valid."
    ]
    check_material_before_generating(config)
    tmp = tempfile.TemporaryDirectory(prefix="hitkit-dry-run-")
    if config.generation is not None:
        from hitkit.material.generation import pending, planned_pairs

        # Without a file yet, everything is pending; pending() would create the output folder.
        left = pending(config) if config.bot_bot_path.exists() else planned_pairs(config)[0]
        if left:
            lines.append(
                f"Bot–bot conversations: {left} still to generate into {config.bot_bot_path} (launch does it "
                f"first, or `hitkit generate {config_path}`); the plan below packs placeholders of the "
                f"same number and length."
            )
            from hitkit.protocols import task_for

            config = task_for(config).with_placeholder_material(Path(tmp.name) / "bot_bot.jsonl")
    names = launched_studies(config.database_url)
    if names is not None and config.study in names:
        lines.append(f"Note: '{config.study}' is already in {config.database_url}; a real launch needs --resume.")
    with tmp:
        url = f"sqlite:///{Path(tmp.name) / 'dry-run.db'}"
        upgrade(url)
        with session_scope(url) as session:
            ctx = create_study(session, config, config_path.resolve(), "dry-run-secret")
            estimate = estimate_cost(session, ctx)
            hits = session.scalars(select(Hit).where(Hit.study_id == ctx.study_id).order_by(Hit.index)).all()
            sizes = Counter(len(h.units) for h in hits)
            units = sum(len(h.units) for h in hits)
            session.rollback()
        if config.judge is not None:  # here, while the placeholder material still exists
            from hitkit.judges.judging import judges_after, requests_for

            judge_labels = None if judges_after(config) else len(requests_for(config))
        from hitkit.db.session import get_engine

        get_engine(url).dispose()
    shape = ", ".join(f"{n} HIT(s) of {k} units" for k, n in sorted(sizes.items(), reverse=True))
    lines.append(
        f"Material checked: {units} units packed into {estimate.hits} HITs ({shape}), "
        f"{estimate.assignments} assignments at {config.hit.reward} {config.provider.currency} each."
    )
    if config.judge is not None:
        if judge_labels is None:
            lines.append(
                f"Judge: {config.judge.model} at {config.judge.url} rates every finished conversation "
                f"once the crowd is done (`hitkit judge` before then); the worker rates each of its "
                f"conversations with probability {config.judge.human_share:g} (drawn per slot, seed "
                f"{config.seed}), the QC bot's always."
            )
        else:
            judges = 1 + len(config.judge.also)
            lines.append(
                f"Judge: {judge_labels * judges} labels (every item of the material, each way it is asked"
                + (f", by each of {judges} judges" if judges > 1 else "")
                + f") from {config.judge.model} at {config.judge.url}"
                + (f" and {', '.join(j.name for j in config.judge.also)}" if judges > 1 else "")
                + f" before posting; the crowd labels the {units} units above, "
                + (
                    "a uniform pilot share first and the rest where the judges are unsure"
                    if config.judge.select == "uncertainty"
                    else "a uniformly random share"
                )
                + f" (seed {config.seed})."
            )
    lines.append(f"Cost: {estimate.describe()}.")
    if not estimate.within_budget:
        lines.append(
            f"The budget covers {estimate.hits_covered} of {estimate.hits} HITs: raise 'budget:' to at "
            f"least {estimate.total} to post them all."
        )
    lines.append(
        f"Posting: waves of {config.schedule.wave_size} HITs, at most {config.schedule.max_concurrent} "
        f"open, {config.schedule.per_worker_cap} per worker; QC failures: {config.qc_failures}."
    )
    if config.stop is not None:
        from hitkit.analysis.sequential import DECISIONS

        lines.append(
            f"Stopping rule: {config.stop.decision} ({DECISIONS[config.stop.decision]}) at α = {config.stop.alpha}, "
            f"looked at after every counted assignment (a worker's HIT handed in) from the {config.stop.min_hits}th on; "
            f"{config.design} design. "
            f"The cost above is the most it can spend; when the rule fires the rest is never posted."
        )
    lines.append(f"Nothing was posted or saved. Launch it with `hitkit launch {config_path}`.")
    for line in lines:
        echo(line)
    return Plan(lines, estimate.hits, estimate.assignments, str(estimate.total))
