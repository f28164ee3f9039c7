"""``hitkit plan``: before paying anyone, how many HITs a study needs for the decisions it exists for, and
with an LLM judge, the crowd's share; ``--confirm`` runs the recommendation once on the simulated crowd."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click

from hitkit.cli.app import EXISTING_FILE, main, on_terminal
from hitkit.errors import HitkitError


@main.command()
@click.argument("study_file", type=EXISTING_FILE)
@click.option(
    "--replicates",
    type=click.IntRange(1, 10_000),
    default=None,
    help="Simulated studies per size, whatever the time they take [default: as many as --seconds fits, up "
    "to 40; Spot The Bot and arena: 20; the share plans of Spot The Bot and live chat: 20].",
)
@click.option(
    "--seconds",
    "budget_s",
    type=click.FloatRange(min=1),
    default=None,
    help="Time budget without --replicates, counted from the command's start (its imports and each size's "
    "design included): simulated studies are added, one per size at a time, while the next round is expected "
    "to end within it (at least 3 per size, however slow the machine); the precision reached is printed. "
    "[default: 20]",
)
@click.option(
    "--n-boot",
    type=click.IntRange(1, 10_000),
    default=100,
    show_default=True,
    help="Bootstrap resamples in each simulated study's analysis (not used with judge:, whose PPI intervals "
    "are jackknife ones).",
)
@click.option("--sizes", default=None, help="The grid, comma-separated (pairwise: votes per prompt), e.g. 1,2,4,8.")
@click.option(
    "--confirm",
    "confirm_run",
    is_flag=True,
    help="Then run the study once for real at the recommended size (with judge: share, the study file's "
    "judge labelling): real HTTP, the simulated crowd (whatever the file's provider), its own database "
    "in OUT/STUDY/plan/confirm/.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--shares",
    default=None,
    help="With judge: the crowd's shares to plan, comma-separated, e.g. "
    "0.1,0.2,0.5 [default: 0.05 to 1 and the study's own].",
)
@click.option(
    "--judge-agreement",
    type=float,
    default=None,
    help="With judge (pairwise, Spot The Bot): the assumed chance that the judge names the crowd's majority "
    "winner of an item (pairwise; 0.5 = a coin) or the crowd's most frequent label of a speaker (Spot "
    "The Bot; 1/3 = a die) [default: 0.7].",
)
@click.option(
    "--judge-correlation",
    type=float,
    default=None,
    help="With judge (live chat): the assumed correlation, within a system, of the judge's rating with the "
    "worker's z rating (0 = useless, 1 = the worker's) [default: 0.5].",
)
@click.option(
    "--judge-bias",
    "judge_bias",
    multiple=True,
    metavar="SYSTEM=B",
    help="With judge: the judge's assumed bias for SYSTEM (repeatable): its win rate B higher than the "
    "crowd's (pairwise), its speakers labelled human B more often (Spot The Bot), its mean z B higher "
    "(live chat).",
)
@click.option(
    "--pilot",
    type=click.Path(path_type=Path),
    default=None,
    help="With judge: a previous export (judge.csv with votes.csv, annotations.csv or ratings.csv) to "
    "measure the judge's agreement (correlation) and bias on, instead of assuming them.",
)
@click.option(
    "--width",
    type=float,
    default=None,
    help="With judge: the target mean half-width of the win rates' 95 % intervals (live chat: of the "
    "systems' mean z), instead of the decisions' 80 % power.",
)
def plan(
    study_file: Path,
    replicates: int | None,
    budget_s: float | None,
    n_boot: int,
    sizes: str | None,
    confirm_run: bool,
    as_json: bool,
    shares: str | None,
    judge_agreement: float | None,
    judge_correlation: float | None,
    judge_bias: tuple[str, ...],
    pilot: Path | None,
    width: float | None,
) -> None:
    """Before paying anyone: power and cost of the study's decisions over a grid of sizes, from simulated
    studies of the simulated crowd with simulated.quality as the effect sizes (no HTTP). Writes
    OUT/STUDY/plan/plan.csv. With --confirm, one real run at the recommended size (share) checks them. A study with
    judge: (pairwise, Spot The Bot, live chat) is planned over the crowd's share of the items instead (--shares,
    --judge-agreement or --judge-correlation, --judge-bias, --pilot, --width)."""
    from hitkit.study.loading import load_study

    config = load_study(study_file)
    judged = {
        "--shares": shares,
        "--judge-agreement": judge_agreement,
        "--judge-correlation": judge_correlation,
        "--judge-bias": judge_bias or None,
        "--pilot": pilot,
        "--width": width,
    }
    if config.judge is not None:
        if sizes:
            raise HitkitError(
                f"{study_file} has an LLM judge (judge:): plan sizes the crowd's share of the items, "
                f"votes per prompt stay the study's; give --shares (e.g. 0.1,0.2,0.5), not --sizes"
            )
        _plan_share(
            config,
            study_file,
            replicates,
            confirm_run,
            as_json,
            shares,
            judge_agreement,
            judge_bias,
            pilot,
            width,
            judge_correlation,
        )
        return
    given = [name for name, value in judged.items() if value is not None]
    if given:
        raise HitkitError(
            f"{', '.join(given)}: for a study with an LLM judge (judge:); {study_file} has none, "
            f"so plan sizes its votes (--sizes)"
        )
    _plan_sizes(config, study_file, replicates, budget_s, n_boot, _sizes_grid(sizes), confirm_run, as_json)


def _sizes_grid(sizes: str | None) -> list[int] | None:
    """``--sizes`` as whole numbers of at least 1 (None: the plan's own grid)."""
    try:
        grid = [int(x) for x in sizes.split(",")] if sizes else None
    except ValueError:
        raise HitkitError(f"--sizes {sizes!r}: give whole numbers separated by commas, e.g. 1,2,4,8") from None
    if grid is not None and min(grid) < 1:
        raise HitkitError(f"--sizes {sizes!r}: every size must be at least 1")
    return grid


def _plan_sizes(
    config,
    study_file: Path,
    replicates: int | None,
    budget_s: float | None,
    n_boot: int,
    grid: list[int] | None,
    confirm_run: bool,
    as_json: bool,
) -> None:
    """``hitkit plan`` of a study without a judge: power and cost over a grid of sizes (``grid``, else the
    plan's), written to OUT/STUDY/plan/plan.csv and printed (``as_json``: as JSON); with ``confirm_run``,
    one real run at the recommended size."""
    from hitkit.progress import showing_progress
    from hitkit.simulation.plan_confirm import confirm, confirm_text
    from hitkit.simulation.planning import BUDGET_S, plan_text
    from hitkit.simulation.planning import plan as make_plan

    with showing_progress(not as_json and on_terminal()):
        result = make_plan(
            config,
            replicates=replicates,
            n_boot=n_boot,
            sizes=grid,
            budget_s=BUDGET_S if budget_s is None else budget_s,
            started=process_started(),
        )
    out = config.out_dir / "plan"
    out.mkdir(parents=True, exist_ok=True)
    result.table.to_csv(out / "plan.csv", index=False)
    if not as_json:
        click.echo(plan_text(config, result))
        click.echo(f"wrote {out / 'plan.csv'}")
    confirmation = None
    if confirm_run:
        from server.embedded import WebServer  # the CLI composes the library and the web tier

        if not as_json:
            click.echo("")
        confirmation = confirm(
            config,
            study_file,
            result,
            web=WebServer.serve,
            n_boot=n_boot,
            echo=(lambda _line: None) if as_json else click.echo,
        )
        if not as_json:
            click.echo(confirm_text(result, confirmation))
    if as_json:
        click.echo(
            json.dumps(
                {
                    "unit": result.unit,
                    "decisions": result.decisions,
                    "smallest": result.smallest,
                    "replicates": result.replicates,
                    "precision": result.precision,
                    "seconds": result.seconds,
                    "budget_s": result.budget_s,
                    "table": json.loads(result.table.to_json(orient="records")),
                    "file": str(out / "plan.csv"),
                    "confirm": _confirmation_json(confirmation, "size"),
                },
                indent=2,
            )
        )


def process_started() -> float:
    """When the command started, on :func:`time.monotonic`'s clock, so that ``plan``'s time budget counts the
    interpreter's start and the imports too: the process's start where the process was started as ``hitkit
    plan`` (Linux: ``/proc``), else now (plan invoked within a longer-lived process: a test, a notebook)."""
    now = time.monotonic()
    if "plan" not in sys.argv[1:3]:
        return now
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        age_s = uptime_s - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in clock ticks
    except (OSError, ValueError, IndexError):
        return now
    return now - min(max(age_s, 0.0), 600.0)


def _confirmation_json(confirmation, size_key: str) -> dict | None:
    """The confirming run of `plan --confirm` for `--json` (``size_key``: what the plan sized, "size" or "share")."""
    if confirmation is None:
        return None
    return {
        size_key: confirmation.size,
        "hits": confirmation.hits,
        "assignments": confirmation.assignments,
        "workers": confirmation.workers,
        "folder": str(confirmation.folder),
        "database": confirmation.database,
        "provider": "simulated",
        "study_provider": confirmation.provider,
        "outcome": confirmation.outcome,
        "seconds": confirmation.seconds,
    }


def _numbers(option: str, text: str, example: str) -> list[float]:
    """A comma-separated option's numbers, or an error naming the option and an example."""
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise HitkitError(f"{option} {text!r}: give numbers separated by commas, e.g. {example}") from None


def _plan_share(
    config,
    study_file: Path,
    replicates: int | None,
    confirm_run: bool,
    as_json: bool,
    shares: str | None,
    agreement: float | None,
    bias: tuple[str, ...],
    pilot: Path | None,
    width: float | None,
    correlation: float | None = None,
) -> None:
    """``hitkit plan`` for a study with an LLM judge: the crowd's share (the protocol's ``judge_plan``:
    pairwise, Spot The Bot, live chat; the shared parts in hitkit.simulation.judge_planning), and with ``--confirm`` one
    real run at the recommended share (a protocol whose ``judge_plan`` has no ``decide_export`` refuses it)."""
    from hitkit.progress import showing_progress
    from hitkit.simulation import judge_planning
    from hitkit.simulation.plan_confirm import confirm_text

    judge_plan, judge = _share_judge(config, agreement, correlation, bias, pilot)
    if confirm_run and not hasattr(judge_plan, "decide_export"):
        raise HitkitError(
            f"--confirm: a confirming run of the crowd's share is not there for {config.task} studies "
            f"yet; launch the study at the recommended share (judge.human_share) instead"
        )
    grid = _numbers("--shares", shares, "0.1,0.2,0.5") if shares else None
    with showing_progress(not as_json and on_terminal()):
        result = judge_plan.plan(config, judge, replicates=replicates, shares=grid, width=width)
    out = config.out_dir / "plan"
    out.mkdir(parents=True, exist_ok=True)
    result.table.to_csv(out / "plan.csv", index=False)
    if not as_json:
        click.echo(judge_plan.plan_text(config, result))
        click.echo(f"wrote {out / 'plan.csv'}")
    confirmation = None
    if confirm_run:
        from server.embedded import WebServer  # the CLI composes the library and the web tier

        if not as_json:
            click.echo("")
        confirmation = judge_planning.confirm(
            config,
            study_file,
            result,
            judge_plan.decide_export,
            web=WebServer.serve,
            echo=(lambda _line: None) if as_json else click.echo,
        )
        if not as_json:
            click.echo(confirm_text(result, confirmation))
    if as_json:
        click.echo(
            json.dumps(
                {
                    "unit": result.unit,
                    "decisions": result.decisions,
                    "target": result.target,
                    "recommended": result.recommended,
                    "people_only": result.people_only,
                    "own_share": result.own_share,
                    "judge": result.judge.as_json()
                    if hasattr(result.judge, "as_json")
                    else {
                        "agreement": result.judge.agreement,
                        "source": result.judge.source,
                        "lean": {f"{a} vs {b}": x for (a, b), x in result.judge.lean.items()},
                    },
                    "estimator": judge_plan.ESTIMATOR,
                    "formula": judge_planning.FORMULA,
                    "table": json.loads(result.table.to_json(orient="records")),
                    "file": str(out / "plan.csv"),
                    "confirm": _confirmation_json(confirmation, "share"),
                },
                indent=2,
            )
        )


def _share_judge(config, agreement: float | None, correlation: float | None, bias: tuple[str, ...], pilot: Path | None):
    """The study's share-plan module (its protocol's ``judge_plan``) and its simulated judge: measured on
    ``--pilot``, else assumed from the module's option (--judge-agreement or --judge-correlation) and
    --judge-bias."""
    from importlib.util import find_spec

    from hitkit.protocols import PROTOCOLS

    planned = [p for p in PROTOCOLS.values() if p.judged and find_spec(f"{p.package}.judge_plan") is not None]
    if config.task not in {p.name for p in planned}:
        raise HitkitError(
            f"hitkit plan sizes the crowd's share for {', '.join(p.name for p in planned)} studies with "
            f"judge:, not {config.task}"
        )
    module = PROTOCOLS[config.task].module("judge_plan")
    given = {"--judge-agreement": agreement, "--judge-correlation": correlation}
    value = given.pop(module.JUDGE_OPTION)
    wrong = next((name for name, v in given.items() if v is not None), None)
    if wrong is not None:
        raise HitkitError(
            f"{wrong} is not for {config.task} studies: give {module.JUDGE_OPTION} (the judge's {module.JUDGE_MEANS})"
        )
    systems = [s.name for s in config.systems]
    if pilot is not None:
        if value is not None or bias:
            raise HitkitError(
                f"--pilot measures the judge's {module.JUDGE_MEANS} and bias: give it, or "
                f"{module.JUDGE_OPTION} and --judge-bias, not both"
            )
        return module, module.pilot_judge(pilot, config)
    leans = {}
    for item in bias:
        name, _, number = item.partition("=")
        try:
            leans[name.strip()] = float(number)
        except ValueError:
            raise HitkitError(
                f"--judge-bias {item!r}: give SYSTEM=B, B the judge's {module.BIAS_MEANS} minus the "
                f"crowd's, e.g. {systems[0]}=0.05"
            ) from None
    return module, module.assumed(module.DEFAULT_JUDGE if value is None else value, leans, systems)
