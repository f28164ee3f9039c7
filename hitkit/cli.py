"""The ``hitkit`` command line. Commands are thin: they parse, call the library, and print."""
from __future__ import annotations

import json
import logging
import os
import sys
from contextlib import nullcontext
from pathlib import Path

import click

from hitkit.errors import HitkitError
from hitkit.protocols import PROTOCOLS


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


PLAIN_LINE_EVERY_S = 30.0
"""Seconds between the plain progress lines written where there is no terminal (logs) or with --no-progress."""


def _on_terminal() -> bool:
    return sys.stderr.isatty()


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--yes", is_flag=True, help="Post without asking for confirmation.")
@click.option("--resume", is_flag=True, help="Continue a study this database already holds.")
@click.option("--dry-run", is_flag=True, help="Validate, pack and price the study; post and save nothing.")
@click.option("--no-progress", is_flag=True, help="No redrawn status line; a plain line every 30 s instead.")
@click.option("--timeout", type=float, default=None, help="Stop watching after this many seconds.")
def launch(study_file: Path, yes: bool, resume: bool, dry_run: bool, no_progress: bool,
           timeout: float | None) -> None:
    """Validate, build, post, serve, schedule, and export and analyse a study when it is done."""
    from hitkit.dry_run import dry_run as plan
    from hitkit.launch import launch as run
    from hitkit.progress import showing_progress
    from server.embedded import WebServer  # the CLI composes the library and the web tier

    if dry_run:
        plan(study_file, echo=click.echo)
        return
    bar = not no_progress and _on_terminal()
    try:
        with showing_progress(bar):  # the export's and analysis' bars, on a terminal only
            run(study_file, web=WebServer.serve, yes=yes, resume=resume, show_progress=bar, timeout_s=timeout,
                lines_every_s=None if bar else PLAIN_LINE_EVERY_S,
                confirm=lambda q: click.confirm(q, default=False))
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM: the launch has stopped its bot server, web server and scheduler.
        click.echo("\n" + _stopped_message(study_file), err=True)
        sys.exit(130)


def _stopped_message(study_file: Path) -> str:
    """What to do after Ctrl-C: resume a study the database holds, or launch one that never got there."""
    from hitkit.config import load_study
    from hitkit.served import launched_studies

    try:
        config = load_study(study_file)
        launched = config.study in (launched_studies(config.database_url) or [])
    except (HitkitError, KeyboardInterrupt):
        launched = True
    if launched:
        return f"Stopped; everything acknowledged is saved. Continue with `hitkit launch {study_file} --resume`."
    return f"Stopped before the study was saved; nothing was posted. Start again with `hitkit launch {study_file}`."


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def generate(study_file: Path, no_progress: bool) -> None:
    """Generate the study's bot-bot conversations (resumable: finished ones are kept and skipped)."""
    from hitkit.config import load_study
    from hitkit.generation import generate as run
    from hitkit.generation import pending
    from hitkit.launch import sigterm_stops, study_bots

    config = load_study(study_file)
    bar = not no_progress and _on_terminal()
    # With everything written there is no bot server to start, and no model to load.
    try:
        with sigterm_stops(), (study_bots(config, click.echo) if pending(config) else nullcontext()):
            report = run(config, show_progress=bar, lines_every_s=None if bar else PLAIN_LINE_EVERY_S)
    except KeyboardInterrupt:
        click.echo(f"\nStopped; finished conversations are kept. Continue with `hitkit generate {study_file}`.",
                   err=True)
        sys.exit(130)
    click.echo(f"{report.planned} conversations planned: {report.already_done} were already done, "
               f"{report.generated} generated now; in {config.bot_bot_path}")


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--human-ranking", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="CSV with 'system' and 'rank' (1 = best) or 'score': the human ranking to compare with.")
@click.option("--study-analysis", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A finished study's analysis folder (ranking.csv or systems.csv) to compare with.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: the summary.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def prescreen(study_file: Path, human_ranking: Path | None, study_analysis: Path | None, as_json: bool,
              no_progress: bool) -> None:
    """Automatic pre-screening: a ChatMatch bot-bot tournament and ChatEval metrics (OUT/STUDY/prescreen)."""
    from hitkit.config import load_study
    from hitkit.launch import sigterm_stops, study_bots
    from hitkit.prescreen import agreement
    from hitkit.prescreen.run import prescreen as run
    from hitkit.prescreen.run import ranking_text

    if human_ranking and study_analysis:
        raise HitkitError("give --human-ranking or --study-analysis, not both")
    human, source = None, ""
    if human_ranking:
        human, source = agreement.human_ranking_from_csv(human_ranking), str(human_ranking)
    elif study_analysis:
        human, source = agreement.human_ranking_from_analysis(study_analysis), str(study_analysis)
    config = load_study(study_file)
    with sigterm_stops(), study_bots(config, lambda line: None if as_json else click.echo(line)):
        result = run(config, human=human, human_source=source,
                     show_progress=not no_progress and not as_json and _on_terminal())
    if as_json:
        click.echo(json.dumps(result.summary, indent=2, default=str))
        return
    click.echo(ranking_text(result))
    click.echo(f"Tables and report section in {config.out_dir / 'prescreen'}")


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(study_file: Path, as_json: bool) -> None:
    """Show a study's progress, HITs, assignments and spend."""
    from hitkit.config import load_study
    from hitkit.served import require_launched
    from hitkit.status import study_status

    config = load_study(study_file)
    require_launched(config, study_file)
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
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def sync(study_file: Path, as_json: bool) -> None:
    """Make the database agree with the provider: decisions, approvals, pending payments, mismatches."""
    from hitkit.config import load_study
    from hitkit.served import require_launched
    from hitkit.sync import describe, sync_study

    config = load_study(study_file)
    require_launched(config, study_file)
    report = sync_study(config.database_url, config.study)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        click.echo(describe(report))
    if report.errors:
        sys.exit(1)


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the tables (default: OUT/STUDY/export).")
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet", "both"]), default="both", show_default=True,
              help="Table format(s); docs/COLUMNS.md documents every column.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def export(study_file: Path, out: Path | None, fmt: str, no_progress: bool) -> None:
    """Write the study's tidy tables (CSV and/or Parquet), conversations.jsonl and study.json."""
    from hitkit.config import load_study
    from hitkit.db.session import session_scope
    from hitkit.export import export_study
    from hitkit.progress import showing_progress
    from hitkit.served import require_launched
    from hitkit.study import StudyContext, resolve_secret

    config = load_study(study_file)
    require_launched(config, study_file)
    with session_scope(config.database_url) as session, showing_progress(not no_progress and _on_terminal()):
        ctx = StudyContext.load(session, config.study, resolve_secret(config.database_url))
        for path in export_study(session, ctx, out or config.out_dir / "export", fmt):
            click.echo(f"wrote {path}")


def _analysis_option(name: str) -> str:
    """The :attr:`~hitkit.protocols.base.Protocol.analysis_options` entry a ``hitkit analyze`` option belongs to."""
    return "trueskill" if name.startswith("trueskill_") or name == "draw_probability" else name


@main.command()
@click.argument("task", type=click.Choice(list(PROTOCOLS)))
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Folder for the results.")
@click.option("--study", "study_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The study file the tables come from: its settings apply (live-chat criteria, Spot The Bot "
                   "spot_the_bot.trueskill, the seed); the options below override them.")
@click.option("--seed", type=int, default=None, help="Seed of every resampling (default: the study's, else 0).")
@click.option("--replicate", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="live_chat: a second run's tables; adds run-to-run correlations (replication.csv).")
@click.option("--stability", is_flag=True,
              help="spot_the_bot: add the ranking stability over 3-45 conversations per pair, "
                   "1000 subsamples each, and without each system (stability.csv, "
                   "stability.png; ~5 minutes per variant for 6 pairs of 45 conversations).")
@click.option("--correction", type=click.Choice(["bonferroni", "holm", "none"]), default="bonferroni",
              show_default=True, help="Multiple-comparison correction of every table of p-values (p_adjusted).")
@click.option("--duplicates", type=click.Choice(["first", "last", "drop", "error"]), default="first",
              show_default=True, help="Repeated annotations/ratings/votes: keep the first or last, drop all "
                                      "copies, or stop with an error. The count is reported either way.")
@click.option("--cluster", default=None,
              help="Unit a clustered bootstrap resamples (and, spot_the_bot, the robust log-rank/Cox "
                   "variances cluster on): spot_the_bot conversation (default) | worker | annotation "
                   "(none); live_chat worker (default) | conversation | rating; pairwise worker (default) "
                   "| item | vote.")
@click.option("--n-boot", type=click.IntRange(min=0), default=None,
              help="Bootstrap resamples of every interval and rank range (default 1000).")
@click.option("--resample", type=click.Choice(["game", "conversation", "worker"]), default=None,
              help="spot_the_bot: unit the ranking bootstrap resamples (default game, as Dušek et al.).")
@click.option("--rank-by", type=click.Choice(["mu", "conservative"]), default=None,
              help="spot_the_bot: rank by TrueSkill mu (default) or mu - 3 sigma.")
@click.option("--trueskill-mu", type=float, default=None, help="spot_the_bot: TrueSkill prior mean (default 25).")
@click.option("--trueskill-sigma", type=float, default=None,
              help="spot_the_bot: TrueSkill prior sigma (default mu / 3).")
@click.option("--trueskill-beta", type=float, default=None,
              help="spot_the_bot: TrueSkill performance spread beta (default sigma / 2).")
@click.option("--trueskill-tau", type=float, default=None,
              help="spot_the_bot: TrueSkill dynamics tau (default 0, as the original Spot The Bot code; "
                   "the trueskill package's default is 25/300).")
@click.option("--draw-probability", default=None,
              help="spot_the_bot: TrueSkill draw probability, a number in [0, 1) or 'observed' (default: "
                   "the observed tie rate of the games).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: files, summary, ranking.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def analyze(task: str, directory: Path, out: Path, study_file: Path | None, seed: int | None, replicate: Path | None,
            stability: bool, correction: str, duplicates: str, cluster: str | None, n_boot: int | None,
            resample: str | None, rank_by: str | None, trueskill_mu: float | None,
            trueskill_sigma: float | None, trueskill_beta: float | None, trueskill_tau: float | None,
            draw_probability: str | None, as_json: bool, no_progress: bool) -> None:
    """Analyse exported tables in DIRECTORY (CSV, or Parquet where there is no CSV) into OUT.

    Every setting used is recorded in OUT/summary.json; warnings about the data (repeated rows,
    implausible times, a dominant worker ...) are printed and kept there under "warnings".
    """
    from hitkit.analyze import run_analysis
    from hitkit.progress import showing_progress

    config = None
    if study_file is not None:
        from hitkit.config import load_study

        config = load_study(study_file)
        if config.task != task:
            raise HitkitError(f"{study_file} is a {config.task} study; run `hitkit analyze {config.task} …` "
                              "or give this task's study file")
    if seed is None:
        seed = config.seed if config is not None else 0
    proto = PROTOCOLS[task]
    own = {"replicate": replicate, "stability": stability or None, "resample": resample, "rank_by": rank_by,
           "trueskill_mu": trueskill_mu, "trueskill_sigma": trueskill_sigma, "trueskill_beta": trueskill_beta,
           "trueskill_tau": trueskill_tau, "draw_probability": draw_probability}
    given = {name: value for name, value in own.items() if value is not None}
    foreign = [name for name in given if _analysis_option(name) not in proto.analysis_options]
    if foreign:
        takers = [p.name for p in PROTOCOLS.values() if _analysis_option(foreign[0]) in p.analysis_options]
        raise HitkitError(f"--{foreign[0].replace('_', '-')} applies to `analyze {' / '.join(takers)}` only, "
                          f"not to {task}")
    options: dict = {"correction": correction, "duplicates": duplicates, "cluster": cluster, "n_boot": n_boot}
    analysis = proto.module("analysis")
    if hasattr(analysis, "cli_options"):
        options.update(analysis.cli_options(config, given))
    from hitkit.loading import check_task_folder

    check_task_folder(task, directory)
    with showing_progress(not no_progress and not as_json and _on_terminal()):
        import warnings

        from hitkit.analysis.inference import DuplicateRowsWarning

        try:
            with warnings.catch_warnings():
                # Counted in the summary's warnings and printed below, once.
                warnings.simplefilter("ignore", DuplicateRowsWarning)
                result = run_analysis(task, directory, seed=seed, config=config, replicate_dir=replicate,
                                      stability=stability, options=options)
        except ValueError as exc:  # an option the analysis refused
            raise HitkitError(str(exc)) from None
        written = result.write(out)
    if not as_json:  # with --json they are in the summary's "warnings"
        for line in result.summary.get("warnings", []):
            click.echo(f"warning: {line}", err=True)
    ranking = next((result.tables[n] for n in ("ranking", "systems") if n in result.tables), None)
    if as_json:
        click.echo(json.dumps({"task": task, "files": [str(p) for p in written], "summary": result.summary,
                               "ranking": None if ranking is None else json.loads(ranking.to_json(orient="records"))},
                              indent=2, default=str))
        return
    for path in written:
        click.echo(f"wrote {path}")
    if "passed" in result.summary:  # the analysis applied a per-worker quality control
        s = result.summary
        click.echo(f"{s.get('passed')} of {s.get('workers')} workers passed quality control")
    if ranking is not None:
        click.echo(ranking.to_string(index=False))


@main.command()
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for report.html, report.md and figures/ (default: OUT/STUDY/report).")
@click.option("--seed", type=int, default=None, help="Seed of every resampling (default: the study's).")
@click.option("--stability", is_flag=True, help="spot_the_bot: add the ranking stability curve (minutes).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: the files and methods paragraph.")
@click.option("--no-progress", is_flag=True, help="No progress bar (for logs).")
def report(source: Path, out: Path | None, seed: int | None, stability: bool, as_json: bool,
           no_progress: bool) -> None:
    """Write an HTML report (one file) and a Markdown summary of SOURCE.

    SOURCE is a study file (exported and analysed afresh from its database), a run folder OUT/STUDY,
    an export folder (analysed here) or an analysis folder.
    """
    from hitkit.progress import showing_progress
    from hitkit.report import report as make_report
    from hitkit.report import summary_json

    if source.is_file():  # a study file: its database must hold the study
        from hitkit.config import load_study
        from hitkit.served import require_launched

        require_launched(load_study(source), source)
    with showing_progress(not no_progress and not as_json and _on_terminal()):
        files = make_report(source, out, seed=seed, stability=stability)
    if as_json:
        click.echo(summary_json(files))
        return
    click.echo(f"wrote {files.html}")
    click.echo(f"wrote {files.markdown} (figures in {files.markdown.parent / 'figures'})")


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]), default="bash")
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(hitkit completion bash)" (or zsh, fish)."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    click.echo(cls(main, {}, "hitkit", "_HITKIT_COMPLETE").source())


def _database_option(f):
    return click.option("--db", "database_url", envvar="HITKIT_DATABASE_URL", required=True,
                        help="Database URL (or HITKIT_DATABASE_URL), e.g. postgresql://user@host/db, "
                             "or the path of a study's SQLite file, e.g. runs/STUDY/hitkit.db.")(f)


@main.command()
@click.option("--db", "databases", envvar="HITKIT_DATABASE_URL", multiple=True, required=True,
              help="Database URL or SQLite file path (or HITKIT_DATABASE_URL); repeat it, or give a runs folder "
                   "(every STUDY/hitkit.db in it), to serve several studies' databases under one dashboard.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--threads", default=16, show_default=True, type=int)
def serve(databases: tuple[str, ...], host: str, port: int, threads: int) -> None:
    """Serve the worker pages and the dashboard of every study in the database(s) (waitress; use gunicorn
    in production)."""
    from sqlalchemy import select

    from hitkit.db.models import Study
    from hitkit.db.session import session_scope
    from hitkit.served import dashboard_hint, launched_studies, record_served
    from server.embedded import make_server

    if os.environ.get("HITKIT_SECRET") is not None:  # a weak secret is refused before anything is opened
        from hitkit.security import check_secret

        check_secret(os.environ["HITKIT_SECRET"])
    urls = _expand_databases(databases)
    names: dict[str, list[str]] = {}
    for url in urls:
        found = launched_studies(url)
        if found is None:  # no hitkit tables: nothing was ever launched into it
            raise HitkitError(f"no study has been launched into {url}; launch one with `hitkit launch STUDY.yaml` "
                              f"(check it first with --dry-run)")
        names[url] = found
    app = _serve_app(urls)
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


def _expand_databases(values: tuple[str, ...]) -> list[str]:
    """Database URLs from --db values: URLs, SQLite files, or a runs folder (every OUT/STUDY/hitkit.db in it)."""
    from hitkit.served import database_url_of

    urls: list[str] = []
    for value in values:
        path = Path(value)
        if "://" not in value and path.is_dir():
            found = sorted(path.glob("*/hitkit.db")) or sorted(path.glob("hitkit.db"))
            if not found:
                raise HitkitError(f"{value} is a folder without any STUDY/hitkit.db in it; give a study's "
                                  f"database file or a database URL")
            urls += [database_url_of(str(p)) for p in found]
        else:
            if "://" not in value and not path.is_file():
                raise HitkitError(f"{value}: no such database file; give runs/STUDY/hitkit.db of a launched study "
                                  f"or a database URL")
            urls.append(database_url_of(value))
    return list(dict.fromkeys(urls))


def _serve_app(urls: list[str]):
    """One WSGI app for one database, or the dispatcher that serves several under one dashboard."""
    if len(urls) == 1:
        from server import create_app

        return create_app(urls[0])
    from server.multi import create_multi_app

    return create_multi_app(urls)


@main.command()
@_database_option
def scheduler(database_url: str) -> None:
    """Run the scheduler for every running study whose jobs are in the database."""
    from hitkit.scheduler import make_scheduler

    from hitkit.served import database_url_of

    database_url = database_url_of(database_url)
    sched = make_scheduler(database_url, blocking=True)
    click.echo("Scheduler running; Ctrl-C stops it (jobs stay in the database).")
    try:
        sched.start()
    except (KeyboardInterrupt, SystemExit):
        sched.shutdown(wait=True)


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-n", "count", type=int, default=5, show_default=True, help="How many links.")
@click.option("--base-url", default=None, help="Address the annotators reach the server at "
              "(default: server.public_url, else where launch or serve last served the study).")
def invites(study_file: Path, count: int, base_url: str | None) -> None:
    """Print N signed invite links for in-house annotators (provider: local)."""
    from hitkit.config import load_study
    from hitkit.served import require_launched, served_url
    from hitkit.providers.local import LocalProvider
    from hitkit.study import resolve_secret

    config = load_study(study_file)
    if config.provider.kind != "local":
        raise HitkitError(f"{study_file}: invites are for provider.kind 'local'; this study uses '{config.provider.kind}'")
    require_launched(config, study_file)
    served = served_url(config.database_url, config.study)
    base = base_url or config.server.public_url or served
    if base is None and config.server.port:
        base = f"http://{config.server.host}:{config.server.port}"
    if base is None:
        raise HitkitError(f"'{config.study}' has not been served yet, so its address is not known: run "
                          f"`hitkit launch {study_file} --resume` (or `hitkit serve`) first, or give --base-url")
    base = base.rstrip("/")
    provider = LocalProvider(config, resolve_secret(config.database_url))
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


# --- MTurk archives and panel confirmations (branch mturk-panel) -------------------------------
@main.group("import")
def import_group() -> None:
    """Bring archives from other platforms into hitkit's tidy tables."""


@import_group.command("mturk")
@click.argument("batch", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--mapping", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="YAML mapping of answers to ratings/votes (e.g. examples/ji2022_mturk_mapping.yaml).")
@click.option("--study", required=True, help="Study name written in every row.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for the tables (default: ./STUDY/export).")
@click.option("--duplicates", type=click.Choice(["first", "last", "drop", "error"]), default="first",
              show_default=True, help="A repeated AssignmentId (batch files pasted together): keep the first or "
                                      "last row, drop all copies, or stop with an error. The count is reported.")
def import_mturk_command(batch: Path, mapping: Path, study: str, out: Path | None, duplicates: str) -> None:
    """Turn an MTurk batch-results CSV (BATCH) into assignments.csv and the task's tidy table."""
    import warnings

    from hitkit.analysis.inference import DuplicateRowsWarning, duplicate_warnings
    from hitkit.imports.mturk import import_mturk

    out = out or Path(study) / "export"
    with warnings.catch_warnings():  # printed below, once
        warnings.simplefilter("ignore", DuplicateRowsWarning)
        result = import_mturk(batch, mapping, study, out, duplicates=duplicates)
    for line in duplicate_warnings([("AssignmentId(s) of the batch", result.duplicates)]):
        click.echo(f"warning: {line}", err=True)
    counted = result.assignments["status"].isin(("submitted", "approved")).sum()
    workers = result.assignments["worker_id"].nunique()
    for path in result.files:
        click.echo(f"wrote {path}")
    click.echo(f"{len(result.assignments)} assignments ({counted} counted) by {workers} workers; "
               f"{len(result.table)} rows in {result.table_name}.csv. Next: hitkit analyze "
               f"{_task_of(mapping)} {out} --out {out.parent / 'analysis'}")


def _task_of(mapping: Path) -> str:
    from hitkit.imports.mturk import load_mapping

    return load_mapping(mapping).task


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--completed", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="CSV from the panel listing who completed (worker or session ids).")
@click.option("--column", default=None, help="Column of the ids (default: the panel's parameter names, "
                                             "then worker_id, participant_id, session_id, id).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def confirm(study_file: Path, completed: Path, column: str | None, as_json: bool) -> None:
    """Confirm the work of the workers or sessions the platform lists as completed (panels, MTurk-style)."""
    from hitkit.config import load_study
    from hitkit.db.session import session_scope
    from hitkit.providers.panel import confirm_completed, read_completed
    from hitkit.study import StudyContext, resolve_secret

    config = load_study(study_file)
    ids = read_completed(completed, column, config)
    with session_scope(config.database_url) as session:
        ctx = StudyContext.load(session, config.study, resolve_secret(config.database_url))
        outcome = confirm_completed(session, ctx, ids, source=completed.name)
    if as_json:
        click.echo(json.dumps(outcome.as_dict(), indent=2))
        return
    click.echo(outcome.describe())
# --- end of branch mturk-panel's commands ------------------------------------------------------


# -- study control: pause, resume, stop, settle (every provider) --------------------------------------

def _control(study_file: Path, action) -> None:
    from hitkit.config import load_study

    config = load_study(study_file)
    click.echo(action(config.database_url, config.study))


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
def pause(study_file: Path) -> None:
    """Stop recruiting (hitkit's pages and the provider's listing) until `hitkit resume`."""
    from hitkit.control import pause_study

    _control(study_file, pause_study)


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
def resume(study_file: Path) -> None:
    """Recruit again after `hitkit pause`, or after fixing what made the provider refuse to post."""
    from hitkit.control import resume_study

    _control(study_file, resume_study)


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
def stop(study_file: Path) -> None:
    """Stop recruiting for good; submitted work is still reviewed and paid."""
    from hitkit.control import stop_study

    _control(study_file, stop_study)


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("assignment", type=int)
@click.option("--pay/--drop", required=True, help="Pay its reward as a bonus, or drop its answers.")
def settle(study_file: Path, assignment: int, pay: bool) -> None:
    """Settle work submitted in hitkit that the provider shows returned or timed out (`hitkit sync` lists it)."""
    from hitkit.control import settle_assignment

    _control(study_file, lambda url, study: settle_assignment(url, study, assignment, pay))

# -- end of study control ------------------------------------------------------------------------------


@main.command()
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--approve", "approve_ids", type=int, multiple=True, help="Approve (and pay) this held assignment.")
@click.option("--reject", "reject_ids", type=int, multiple=True, help="Reject this held assignment (needs --reason).")
@click.option("--reason", default=None, help="The message the worker reads (Prolific: at least 100 characters; "
              "default: schedule.qc_reject_reason).")
def held(study_file: Path, approve_ids: tuple[int, ...], reject_ids: tuple[int, ...], reason: str | None) -> None:
    """List the work held for review because its worker fails QC, or approve / reject it."""
    from hitkit import dashboard as dash
    from hitkit.config import load_study
    from hitkit.db.session import session_scope
    from hitkit.served import require_launched
    from hitkit.qc_policy import held_work
    from hitkit.study import StudyContext, resolve_secret

    config = load_study(study_file)
    require_launched(config, study_file)
    url = config.database_url
    with session_scope(url) as session:
        ctx = StudyContext.load(session, config.study, resolve_secret(url))
        rows = held_work(session, ctx)
    if not approve_ids and not reject_ids:
        if not rows:
            click.echo(f"No work held for review in '{config.study}' (schedule.qc_failures: {config.qc_failures}).")
            return
        for row in rows:
            click.echo(f"assignment {row['assignment']}  worker {row['worker']}  held since "
                       f"{row['since']:%Y-%m-%d %H:%M} UTC")
        click.echo(f"Decide with `hitkit held {study_file} --approve ID` or `--reject ID --reason TEXT`.")
        return
    held_ids = {row["assignment"] for row in rows}
    for aid in approve_ids + reject_ids:
        if aid not in held_ids:
            raise HitkitError(f"assignment {aid} is not held for review in '{config.study}'; "
                              f"`hitkit held {study_file}` lists those that are")
    text = (reason or config.schedule.qc_reject_reason or "").strip()
    if reject_ids and not text:
        raise HitkitError("give the worker a reason: --reason TEXT (Prolific needs at least 100 characters)")
    for aid in approve_ids:
        click.echo(dash.approve_assignment(url, ctx, aid))
    for aid in reject_ids:
        click.echo(dash.reject_assignment(url, ctx, aid, text))


def _add_bots_group() -> None:
    try:
        from hitkit.bots.cli import bots
    except ImportError:  # the bots layer is optional at import time; its heavy deps are lazy
        return
    main.add_command(bots)


_add_bots_group()

if __name__ == "__main__":
    sys.exit(main())
