"""The ``hitkit`` command line. Commands are thin: they parse, call the library, and print."""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from hitkit.errors import HitkitError


class _Group(click.Group):
    """Turns hitkit's own errors into one clear line and exit status 1, not a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except HitkitError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Group)
@click.option("-v", "--verbose", is_flag=True, help="Log what the scheduler and server do.")
@click.version_option(package_name="hitkit")
def main(verbose: bool) -> None:
    """hitkit: human evaluation of chatbots with crowdworkers, from study file to ranked results."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def init(directory: Path) -> None:
    """Scaffold a study in DIRECTORY: a commented study.yaml and a small responses file."""
    from hitkit.scaffold import scaffold

    for path in scaffold(directory):
        click.echo(f"wrote {path}")
    click.echo(f"Try it: hitkit launch {directory / 'study.yaml'} --yes")


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--yes", is_flag=True, help="Post without asking for confirmation.")
@click.option("--resume", is_flag=True, help="Continue a study this database already holds.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
@click.option("--timeout", type=float, default=None, help="Stop watching after this many seconds.")
def launch(study_file: Path, yes: bool, resume: bool, no_progress: bool, timeout: float | None) -> None:
    """Validate, build, post, serve, schedule, and export and analyse a study when it is done."""
    from hitkit.launch import launch as run

    run(study_file, yes=yes, resume=resume, show_progress=not no_progress, timeout_s=timeout,
        confirm=lambda q: click.confirm(q, default=False))


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def generate(study_file: Path, no_progress: bool) -> None:
    """Generate the study's bot-bot conversations (resumable: finished ones are kept and skipped)."""
    from hitkit.config import load_study
    from hitkit.generation import generate as run
    from hitkit.launch import study_bots

    config = load_study(study_file)
    with study_bots(config, click.echo):
        report = run(config, show_progress=not no_progress)
    click.echo(f"{report.planned} conversations planned: {report.already_done} were already done, "
               f"{report.generated} generated now; in {config.bot_bot_path}")


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(study_file: Path, as_json: bool) -> None:
    """Show a study's progress, HITs, assignments and spend."""
    from hitkit.config import load_study
    from hitkit.status import study_status

    config = load_study(study_file)
    info = study_status(config.database_url, config.study)
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    click.echo(f"{info['study']} ({info['task']} on {info['provider']}): {info['status']}")
    click.echo(f"  answers {info['answers_done']}/{info['answers_needed']}")
    click.echo("  HITs " + ", ".join(f"{k} {v}" for k, v in info["hits"].items()))
    click.echo("  assignments " + ", ".join(f"{k} {v}" for k, v in info["assignments"].items()))
    click.echo(f"  spent {info['spent']} of budget {info['budget']} {info['currency']}; workers {info['workers']}")


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the CSVs (default: OUT/STUDY/export).")
def export(study_file: Path, out: Path | None) -> None:
    """Write the study's tidy tables (CSV) and conversations.jsonl."""
    from hitkit.config import load_study
    from hitkit.db.session import session_scope
    from hitkit.export import export_study
    from hitkit.study import StudyContext, resolve_secret

    config = load_study(study_file)
    with session_scope(config.database_url) as session:
        ctx = StudyContext.load(session, config.study, resolve_secret(config.database_url))
        for path in export_study(session, ctx, out or config.out_dir / "export"):
            click.echo(f"wrote {path}")


@main.command()
@click.argument("task", type=click.Choice(["pairwise", "live_chat", "spot_the_bot"]))
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Folder for the results.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every resampling.")
@click.option("--replicate", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="live_chat: a second run's tables; adds run-to-run correlations (replication.csv).")
@click.option("--stability", is_flag=True,
              help="spot_the_bot: add the ranking stability over 3-45 conversations per pair, "
                   "1000 subsamples each, and without each system (stability.csv, "
                   "stability.png; ~5 minutes per variant for 6 pairs of 45 conversations).")
def analyze(task: str, directory: Path, out: Path, seed: int, replicate: Path | None,
            stability: bool) -> None:
    """Analyse exported tables in DIRECTORY (e.g. votes.csv and assignments.csv) into OUT."""
    from hitkit.analysis import run_analysis

    if replicate is not None and task != "live_chat":
        raise HitkitError("--replicate compares two live-chat runs; it applies to `analyze live_chat` only")
    if stability and task != "spot_the_bot":
        raise HitkitError("--stability subsamples Spot The Bot conversations; it applies to "
                          "`analyze spot_the_bot` only")
    result = run_analysis(task, directory, seed=seed, replicate_dir=replicate, stability=stability)
    for path in result.write(out):
        click.echo(f"wrote {path}")
    if "ranking" in result.tables:
        click.echo(result.tables["ranking"].to_string(index=False))


def _database_option(f):
    return click.option("--db", "database_url", envvar="HITKIT_DATABASE_URL", required=True,
                        help="Database URL (or HITKIT_DATABASE_URL), e.g. postgresql://user@host/db.")(f)


@main.command()
@_database_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--threads", default=16, show_default=True, type=int)
def serve(database_url: str, host: str, port: int, threads: int) -> None:
    """Serve the worker pages of every study in the database (waitress; use gunicorn in production)."""
    from waitress import serve as waitress_serve

    from server import create_app

    click.echo(f"Serving on http://{host}:{port}")
    waitress_serve(create_app(database_url), host=host, port=port, threads=threads)


@main.command()
@_database_option
def scheduler(database_url: str) -> None:
    """Run the scheduler for every running study whose jobs are in the database."""
    from hitkit.scheduler import make_scheduler

    sched = make_scheduler(database_url, blocking=True)
    click.echo("Scheduler running; Ctrl-C stops it (jobs stay in the database).")
    try:
        sched.start()
    except (KeyboardInterrupt, SystemExit):
        sched.shutdown(wait=True)


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-n", "count", type=int, default=5, show_default=True, help="How many links.")
@click.option("--base-url", default=None, help="Address the annotators reach the server at.")
def invites(study_file: Path, count: int, base_url: str | None) -> None:
    """Print N signed invite links for in-house annotators (provider: local)."""
    from hitkit.config import load_study
    from hitkit.providers.local import LocalProvider
    from hitkit.study import resolve_secret

    config = load_study(study_file)
    if config.provider.kind != "local":
        raise HitkitError(f"{study_file}: invites are for provider.kind 'local'; this study uses '{config.provider.kind}'")
    provider = LocalProvider(config, resolve_secret(config.database_url))
    base = (base_url or config.server.public_url or f"http://{config.server.host}:{config.server.port or 8000}").rstrip("/")
    for i in range(1, count + 1):
        click.echo(f"{base}/s/{config.study}/enter?invite={provider.invite_token(f'annotator-{i:03d}')}")


@main.group()
def db() -> None:
    """Database schema management."""


@db.command("upgrade")
@_database_option
@click.option("--revision", default="head", show_default=True)
def db_upgrade(database_url: str, revision: str) -> None:
    """Apply the migrations in migrations/ up to REVISION."""
    from hitkit.db.migrate import current, upgrade

    upgrade(database_url, revision)
    click.echo(f"database at revision {current(database_url)}")


@db.command("current")
@_database_option
def db_current(database_url: str) -> None:
    """Print the revision the database is at."""
    from hitkit.db.migrate import current

    click.echo(current(database_url) or "empty (run `hitkit db upgrade`)")


def _add_bots_group() -> None:
    try:
        from hitkit.bots.cli import bots
    except ImportError:  # the bots layer is optional at import time; its heavy deps are lazy
        return
    main.add_command(bots)


_add_bots_group()

if __name__ == "__main__":
    sys.exit(main())
