"""``hitkit replay``: what a stopping rule would have done on a finished study or a released data set
(:mod:`hitkit.running.replay`)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hitkit.analysis.replay import DECISION_CHOICES
from hitkit.cli.app import EXISTING, EXISTING_FILE, FOLDER, main
from hitkit.errors import HitkitError
from hitkit.protocols import PROTOCOLS

CHECKED_LOOKS = 6
"""Looks of the first order recomputed through the protocol's live rule (each costs one ``comparisons``)."""


@main.command("replay")
@click.argument("task", type=click.Choice(list(PROTOCOLS)))
@click.argument("directory", type=EXISTING)
@click.option(
    "--out",
    type=FOLDER,
    default=Path("replay"),
    show_default=True,
    help="Folder for replay.csv, replay_summary.csv and replay_summary.json.",
)
@click.option("--orders", type=click.IntRange(min=1), default=200, show_default=True, help="Random orders of the HITs.")
@click.option("--seed", type=int, default=None, help="Seed of the orders (default: the export's study seed, else 0).")
@click.option(
    "--decision",
    type=click.Choice(DECISION_CHOICES),
    default=None,
    help="pair: every pair of systems its own study with stop: decision: pair on it (alpha each); "
    "pairs | clear | best: that study-level decision over every pair (alpha shared by Bonferroni), each "
    "pair's row its state when the rule fires. Default: the --study file's stop: decision, else pair.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    default=None,
    help="The rule's level. Default: the --study file's stop: alpha, else 0.05.",
)
@click.option(
    "--study",
    "study_file",
    type=EXISTING_FILE,
    default=None,
    help="The study file the tables come from: its settings apply (live-chat and rating criteria, the seed, "
    "and its stop: decision and alpha unless --decision or --alpha says otherwise).",
)
@click.option(
    "--check/--no-check",
    default=True,
    show_default=True,
    help="Recompute a few looks of the first order through the protocol's live stopping rule and "
    "stop with an error if the replay differs.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: the files and the summary.")
def replay_command(
    task: str,
    directory: Path,
    out: Path,
    orders: int,
    seed: int | None,
    decision: str | None,
    alpha: float | None,
    study_file: Path | None,
    check: bool,
    as_json: bool,
) -> None:
    """Replay a stopping rule over random orders of the HITs of a finished study in DIRECTORY.

    DIRECTORY is an export folder or the output of `hitkit import` (the task's table and, when there,
    assignments.csv: its counted assignments, in the file's order, are the units; hitkit's own exports
    list them by HIT). In
    each order the rule looks after every unit; replay.csv says, per order and pair of systems, the
    share of the units seen when the pair settled (empty if never) and the system it claimed (empty
    if none). The summary gives per pair the share of orders settled, the median share, the share
    claiming each system and the agreement with the direction of the full data.
    """
    from hitkit.analysis.replay import orders as make_orders
    from hitkit.cli.results import _export_seed
    from hitkit.running.replay import check_against_rule, console_lines, read_study, replay

    config = None
    if study_file is not None:
        from hitkit.study.loading import load_study

        config = load_study(study_file)
        if config.task != task:
            raise HitkitError(f"{study_file} is a {config.task} study; run `hitkit replay {config.task} …`")
    if seed is None:
        seed = config.seed if config is not None else (_export_seed(directory) if directory.is_dir() else 0)
    stop = config.stop if config is not None else None
    decision = decision or (stop.decision if stop is not None else "pair")
    alpha = alpha if alpha is not None else (stop.alpha if stop is not None else 0.05)
    data = read_study(task, directory, config)
    if check:
        total = len(data.units)
        looks = sorted({int(round(k * (total - 1) / (CHECKED_LOOKS - 1))) for k in range(CHECKED_LOOKS)})
        problems = check_against_rule(data, make_orders(total, 1, seed)[0], decision, alpha, looks, config)
        if problems:
            raise HitkitError(
                "the replay differs from the protocol's stopping rule (hitkit/analysis/replay.py must follow "
                f"its sequence): {problems[0]}" + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            )
    result = replay(data, orders_count=orders, seed=seed, decision=decision, alpha=alpha)
    result.info["directory"] = str(directory)
    written = result.write(out)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "files": [str(p) for p in written],
                    **result.info,
                    "pairs": json.loads(result.summary.to_json(orient="records")),
                },
                indent=2,
                default=str,
            )
        )
        return
    for path in written:
        click.echo(f"wrote {path}")
    for line in console_lines(result):
        click.echo(line)
