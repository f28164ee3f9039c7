"""Commands that run a study: scaffold it, launch it, generate its material, pre-screen its bots, serve
its pages, run its scheduler, hand out invite links."""

from __future__ import annotations

import json
import logging
import os
import sys
from contextlib import nullcontext
from pathlib import Path

import click

from hitkit.cli.app import EXISTING_FILE, FILE, PLAIN_LINE_EVERY_S, database_option, main, on_terminal
from hitkit.errors import HitkitError
from hitkit.protocols import names as protocol_names


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--task",
    type=click.Choice(protocol_names()),
    default=protocol_names()[0],
    show_default=True,
    help="The protocol of the study to scaffold.",
)
@click.option(
    "--language",
    default="en",
    show_default=True,
    help="The workers' language (ui_language, a BCP 47 tag: en, de, fr, es, zh, ar, hi): the starter's "
    "instructions are written in it.",
)
def init(directory: Path, task: str, language: str) -> None:
    """Scaffold a study in DIRECTORY: a commented, runnable study.yaml and the material it reads."""
    from hitkit.study.scaffold import scaffold

    for path in scaffold(directory, task, language):
        click.echo(f"wrote {path}")
    click.echo(f"Check it: hitkit launch {directory / 'study.yaml'} --dry-run")
    click.echo(f"Run it on the simulated crowd: hitkit launch {directory / 'study.yaml'} --yes")


@main.command()
@click.argument("study_file", type=FILE)
@click.option("--yes", is_flag=True, help="Post without asking for confirmation.")
@click.option("--resume", is_flag=True, help="Continue a study this database already holds.")
@click.option("--dry-run", is_flag=True, help="Validate, pack and price the study; post and save nothing.")
@click.option("--no-progress", is_flag=True, help="No redrawn status line; a plain line every 30 s instead.")
@click.option("--timeout", type=float, default=None, help="Stop watching after this many seconds.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the worker pages on this port (default: server.port; 0 or unset there: a free port, printed).",
)
@click.option(
    "--bot-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the study's own bots (bots.serve) on this port (default: bots.serve.port; 0: a free port, printed).",
)
@click.option(
    "--test-participant",
    is_flag=True,
    help=(
        "Prolific: create the study but do not publish it; Prolific makes a test study you take yourself "
        "(its address is logged). Launch again with --resume, without this flag, to publish."
    ),
)
def launch(
    study_file: Path,
    yes: bool,
    resume: bool,
    dry_run: bool,
    no_progress: bool,
    timeout: float | None,
    port: int | None,
    bot_port: int | None,
    test_participant: bool,
) -> None:
    """Validate, build, post, serve, schedule, and export and analyse a study when it is done."""
    from hitkit.progress import showing_progress
    from hitkit.running.dry_run import dry_run as plan
    from hitkit.running.launch import launch as run
    from server.embedded import WebServer  # the CLI composes the library and the web tier

    if dry_run:
        plan(study_file, echo=click.echo)
        return
    if test_participant:
        from hitkit.cli.recontact import test_run_setup

        test_run_setup(study_file)
    bar = not no_progress and on_terminal()
    try:
        with showing_progress(bar):  # the export's and analysis' bars, on a terminal only
            run(
                study_file,
                web=WebServer.serve,
                yes=yes,
                resume=resume,
                show_progress=bar,
                timeout_s=timeout,
                lines_every_s=None if bar else PLAIN_LINE_EVERY_S,
                confirm=lambda q: click.confirm(q, default=False),
                port=port,
                bot_port=bot_port,
            )
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: the launch has stopped its bot server, web server and scheduler.
        click.echo("\n" + _stopped_message(study_file), err=True)
        sys.exit(130)


def _stopped_message(study_file: Path) -> str:
    """What to do after Ctrl-C: resume a study the database holds, or launch one that never got there."""
    from hitkit.study.loading import load_study
    from hitkit.study.served import launched_studies

    try:
        config = load_study(study_file)
        launched = config.study in (launched_studies(config.database_url) or [])
    except (HitkitError, KeyboardInterrupt):
        launched = True
    if launched:
        return f"Stopped; everything acknowledged is saved. Continue with `hitkit launch {study_file} --resume`."
    return f"Stopped before the study was saved; nothing was posted. Start again with `hitkit launch {study_file}`."


@main.command()
@click.argument("study_file", type=FILE)
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def generate(study_file: Path, no_progress: bool) -> None:
    """Generate the study's bot-bot conversations (resumable: finished ones are kept and skipped)."""
    from hitkit.material.generation import generate as run
    from hitkit.material.generation import pending
    from hitkit.running.bots import study_bots, with_bot_server
    from hitkit.running.launch import sigterm_stops
    from hitkit.study.loading import load_study

    config = with_bot_server(load_study(study_file))  # systems without a url: the study's own bots
    bar = not no_progress and on_terminal()
    # With everything written there is no bot server to start, and no model to load.
    try:
        with sigterm_stops(), study_bots(config, click.echo) if pending(config) else nullcontext():
            report = run(config, show_progress=bar, lines_every_s=None if bar else PLAIN_LINE_EVERY_S)
    except KeyboardInterrupt:
        click.echo(
            f"\nStopped; finished conversations are kept. Continue with `hitkit generate {study_file}`.", err=True
        )
        sys.exit(130)
    click.echo(
        f"{report.planned} conversations planned: {report.already_done} were already done, "
        f"{report.generated} generated now; in {config.bot_bot_path}"
    )


@main.command()
@click.argument("study_file", type=FILE)
@click.option("--no-progress", is_flag=True, help="No progress line (for logs).")
def judge(study_file: Path, no_progress: bool) -> None:
    """Have the study's LLM judge (judge:) label whatever is not labelled yet: resumable, mid-run or after a
    failure (live chat: every finished conversation; pairwise: the material)."""
    from sqlalchemy import select

    from hitkit.db.models import Study
    from hitkit.db.session import session_scope
    from hitkit.judges.judging import judge_study
    from hitkit.running.bots import study_bots, with_bot_server
    from hitkit.running.launch import sigterm_stops
    from hitkit.study.loading import load_study
    from hitkit.study.served import require_launched

    config = with_bot_server(load_study(study_file))  # systems without a url: the study's own bots
    if config.judge is None:
        raise HitkitError(f"{study_file} has no judge: section; add one to have an LLM judge label the study")
    require_launched(config, study_file)
    with session_scope(config.database_url) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == config.study))
    if study_id is None:
        raise HitkitError(f"{study_file}: study '{config.study}' is not in the database; launch it before judging")
    bar = not no_progress and on_terminal()
    try:
        with sigterm_stops(), study_bots(config, click.echo):
            report = judge_study(
                config,
                config.database_url,
                study_id,
                show_progress=bar,
                lines_every_s=None if bar else PLAIN_LINE_EVERY_S,
            )
    except KeyboardInterrupt:
        click.echo(f"\nStopped; every label stored is kept. Continue with `hitkit judge {study_file}`.", err=True)
        sys.exit(130)
    click.echo(report.line())
    if report.failed:
        raise HitkitError(
            f"the judge ({config.judge.model} at {config.judge.url}) failed on {len(report.failed)} "
            f"of {report.planned}; check it, then `hitkit judge {study_file}` asks only for those"
        )
    click.echo(f"Export and analyse to include the labels: `hitkit export {study_file}`, then `hitkit analyze`.")


@main.command()
@click.argument("study_file", type=FILE)
@click.option(
    "--human-ranking",
    type=EXISTING_FILE,
    default=None,
    help="CSV with 'system' and 'rank' (1 = best) or 'score': the human ranking to compare with.",
)
@click.option(
    "--study-analysis",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A finished study's analysis folder (ranking.csv or systems.csv) to compare with.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: the summary.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def prescreen(
    study_file: Path, human_ranking: Path | None, study_analysis: Path | None, as_json: bool, no_progress: bool
) -> None:
    """Automatic pre-screening: a ChatMatch bot-bot tournament and ChatEval metrics (OUT/STUDY/prescreen)."""
    from hitkit.prescreen import agreement
    from hitkit.prescreen.run import prescreen as run
    from hitkit.prescreen.run import ranking_text
    from hitkit.running.bots import study_bots, with_bot_server
    from hitkit.running.launch import sigterm_stops
    from hitkit.study.loading import load_study

    if human_ranking and study_analysis:
        raise HitkitError("give --human-ranking or --study-analysis, not both")
    human, source = None, ""
    if human_ranking:
        human, source = agreement.human_ranking_from_csv(human_ranking), str(human_ranking)
    elif study_analysis:
        human, source = agreement.human_ranking_from_analysis(study_analysis), str(study_analysis)
    config = with_bot_server(load_study(study_file))  # systems without a url: the study's own bots
    with sigterm_stops(), study_bots(config, lambda line: None if as_json else click.echo(line)):
        result = run(
            config, human=human, human_source=source, show_progress=not no_progress and not as_json and on_terminal()
        )
    if as_json:
        click.echo(json.dumps(result.summary, indent=2, default=str))
        return
    click.echo(ranking_text(result))
    click.echo(f"Tables and report section in {config.out_dir / 'prescreen'}")


@main.command()
@click.option(
    "--db",
    "databases",
    envvar="HITKIT_DATABASE_URL",
    multiple=True,
    required=True,
    help="Database URL or SQLite file path (or HITKIT_DATABASE_URL); repeat it, or give a runs folder "
    "(every STUDY/hitkit.db in it), to serve several studies' databases under one dashboard.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--threads", default=16, show_default=True, type=int)
def serve(databases: tuple[str, ...], host: str, port: int, threads: int) -> None:
    """Serve the worker pages and the dashboard of every study in the database(s) (waitress; use gunicorn
    in production)."""
    from sqlalchemy import select

    from hitkit.db.models import Study
    from hitkit.db.session import session_scope
    from hitkit.study.served import dashboard_hint, launched_studies, record_served
    from server.embedded import make_server

    if os.environ.get("HITKIT_SECRET") is not None:  # a weak secret is refused before anything is opened
        from hitkit.secret import check_secret

        check_secret(os.environ["HITKIT_SECRET"])
    urls = expand_databases(databases)
    names: dict[str, list[str]] = {}
    for url in urls:
        found = launched_studies(url)
        if found is None:  # no hitkit tables: nothing was ever launched into it
            raise HitkitError(
                f"no study has been launched into {url}; launch one with `hitkit launch STUDY.yaml` "
                f"(check it first with --dry-run)"
            )
        names[url] = found
    folders = tuple(Path(v) for v in databases if "://" not in v and Path(v).is_dir())
    app = _serve_app(urls, folders)
    server = make_server(app, host, port, threads)
    base = f"http://{host}:{server.effective_port}"
    if host not in ("0.0.0.0", "::", ""):
        # Where invites point; on all interfaces the address workers use is the study's public_url.
        for url in urls:
            with session_scope(url) as session:
                ids = list(session.scalars(select(Study.id).where(Study.name.in_(names[url]))))
            record_served(url, ids, base)
    studies = ", ".join(n for found in names.values() for n in found) or "no study yet"
    click.echo(f"Serving {studies} on {base} (worker pages under /s/STUDY/); {dashboard_hint(base)}")
    try:
        server.run()
    except KeyboardInterrupt:
        logging.getLogger("waitress").setLevel(logging.CRITICAL)
        server.close()
        click.echo("Stopped.", err=True)


def expand_databases(values: tuple[str, ...]) -> list[str]:
    """Database URLs from --db values: URLs, SQLite files, or a runs folder (every OUT/STUDY/hitkit.db in it)."""
    from hitkit.study.served import database_url_of

    urls: list[str] = []
    for value in values:
        path = Path(value)
        if "://" not in value and path.is_dir():
            found = sorted(path.glob("*/hitkit.db")) or sorted(path.glob("hitkit.db"))
            if not found:
                raise HitkitError(
                    f"{value} is a folder without any STUDY/hitkit.db in it; give a study's "
                    f"database file or a database URL"
                )
            urls += [database_url_of(str(p)) for p in found]
        else:
            if "://" not in value and not path.is_file():
                raise HitkitError(
                    f"{value}: no such database file; give runs/STUDY/hitkit.db of a launched study or a database URL"
                )
            urls.append(database_url_of(value))
    return list(dict.fromkeys(urls))


def _serve_app(urls: list[str], folders: tuple[Path, ...] = ()):
    """One WSGI app for one database, or the dispatcher that serves several under one dashboard (and, for a
    runs folder, the studies launched into it later)."""
    if len(urls) == 1 and not folders:
        from server import create_app

        return create_app(urls[0])
    from server.multi import create_multi_app

    return create_multi_app(urls, folders)


@main.command()
@database_option
def scheduler(database_url: str) -> None:
    """Run the scheduler for every running study whose jobs are in the database."""
    from hitkit.running.scheduler import make_scheduler
    from hitkit.study.served import database_url_of

    database_url = database_url_of(database_url)
    sched = make_scheduler(database_url, blocking=True)
    click.echo("Scheduler running; Ctrl-C stops it (jobs stay in the database).")
    try:
        sched.start()
    except (KeyboardInterrupt, SystemExit):
        sched.shutdown(wait=True)


@main.command()
@click.argument("study_file", type=FILE)
@click.option("-n", "count", type=int, default=5, show_default=True, help="How many links.")
@click.option(
    "--base-url",
    default=None,
    help="Address the annotators reach the server at "
    "(default: server.public_url, else where launch or serve last served the study).",
)
def invites(study_file: Path, count: int, base_url: str | None) -> None:
    """Print N signed invite links for in-house annotators (provider: local)."""
    from hitkit.providers.local import LocalProvider
    from hitkit.study.loading import load_study
    from hitkit.study.served import require_launched, served_url
    from hitkit.study.stored import resolve_secret

    config = load_study(study_file)
    if config.provider.kind != "local":
        raise HitkitError(
            f"{study_file}: invites are for provider.kind 'local'; this study uses '{config.provider.kind}'"
        )
    require_launched(config, study_file)
    served = served_url(config.database_url, config.study)
    base = base_url or config.server.public_url or served
    if base is None and config.server.port:
        base = f"http://{config.server.host}:{config.server.port}"
    if base is None:
        raise HitkitError(
            f"'{config.study}' has not been served yet, so its address is not known: run "
            f"`hitkit launch {study_file} --resume` (or `hitkit serve`) first, or give --base-url"
        )
    base = base.rstrip("/")
    provider = LocalProvider(config, resolve_secret(config.database_url))
    for i in range(1, count + 1):
        click.echo(f"{base}/s/{config.study}/enter?invite={provider.invite_token(f'annotator-{i:03d}')}")
