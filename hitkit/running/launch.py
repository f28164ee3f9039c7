"""``hitkit launch``: validate → build units → estimate cost → confirm → post → serve → schedule →
watch progress → approve → export → analyse, on one machine. ``resume=True`` continues a study
that an earlier launch left (stopped, crashed or killed) from what the database holds."""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Protocol

from sqlalchemy import select

from hitkit.db.migrate import upgrade
from hitkit.db.models import Study
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.events import add_event
from hitkit.money.ledger import estimate_cost
from hitkit.progress import StatusLine
from hitkit.running.bots import check_material_before_generating, needs_bot_server, study_bots, with_bot_server
from hitkit.running.launch_judging import judge_crowd_work, judge_material, judges_before
from hitkit.running.launch_watch import watch
from hitkit.running.monitor import qc_outcome_line
from hitkit.running.resume import apply_resume_changes
from hitkit.study.config import StudyConfig
from hitkit.study.loading import load_study
from hitkit.study.served import dashboard_hint, record_served, served_url
from hitkit.study.stored import StudyContext, create_study, resolve_secret
from hitkit.tables.export import export_study

if TYPE_CHECKING:
    from hitkit.simulation.crowd import SimulatedCrowd

log = logging.getLogger(__name__)


@dataclass
class LaunchResult:
    study: str
    status: str
    out_dir: Path
    exported: list[Path] = field(default_factory=list)
    analysis: list[Path] = field(default_factory=list)
    crowd_errors: list[str] = field(default_factory=list)
    qc_line: str = ""
    stop_line: str = ""
    """The stopping rule's outcome (:func:`hitkit.running.stopping.outcome_line`), where the study has a rule."""
    judged: bool = True
    """False where a judge that labels the crowd's work (:func:`hitkit.running.launch_judging.judge_crowd_work`) failed on some of it: the
    export lacks those labels until `hitkit judge` asks again."""


class WebTier(Protocol):
    """The worker pages served in the background: what :func:`launch` needs of the web tier."""

    url: str

    def stop(self) -> None: ...


WebFactory = Callable[[str, str, int, int, str], WebTier]
"""Starts the worker pages of ``(database_url, host, port, threads, secret)`` and returns them serving
(``server.embedded.WebServer.serve``): the CLI hands it to :func:`launch`, so the library never
imports the web tier."""


def _prepare(
    config: StudyConfig, config_path: Path, resume: bool, confirm: Callable[[str], bool], echo: Callable[[str], None]
) -> StudyContext:
    url = config.database_url
    upgrade(url)
    secret = resolve_secret(url)
    with session_scope(url) as session:
        existing = session.scalar(select(Study).where(Study.name == config.study))
        if resume:
            if existing is None:
                raise HitkitError(f"there is no study '{config.study}' to resume in {url}; launch it without --resume")
            changed = apply_resume_changes(existing, config)
            if changed:
                echo(f"Updated from {config_path.name}: {', '.join(changed)}.")
                add_event(session, existing.id, "study_config_changed", "cli", {"fields": changed})
            ctx = StudyContext.of(existing, secret)
            if existing.status == "stopped" or (existing.status == "draft" and not judges_before(config)):
                existing.status = "running"  # a draft judged study opens once its judge is done (judge_material)
            add_event(session, ctx.study_id, "study_resumed", "cli", {})
            echo(f"Resuming study '{config.study}' ({existing.status}). {estimate_cost(session, ctx).describe()}.")
            return ctx
        ctx = create_study(session, config, config_path, secret)
        estimate = estimate_cost(session, ctx)
        echo(f"Study '{config.study}': {config.task} on {config.provider.kind}. {estimate.describe()}.")
        if not estimate.within_budget:
            echo(
                f"The budget covers {estimate.hits_covered} of {estimate.hits} HITs; the scheduler posts HITs only "
                f"while the worst-case spend stays within {estimate.budget} {estimate.currency}."
            )
        if not confirm("Post this study?"):
            session.rollback()
            raise HitkitError("launch cancelled; nothing was saved")
        # A judged study stays a draft, posting nothing, until every item has its judge label (judge_material).
        session.get_one(Study, ctx.study_id).status = "draft" if judges_before(config) else "running"
        add_event(session, ctx.study_id, "study_launched", "cli", {"estimate": estimate.describe()})
        return ctx


class Stopped(KeyboardInterrupt):
    """The launch was stopped by Ctrl-C or SIGTERM; everything it started has been stopped."""


@contextmanager
def sigterm_stops() -> Iterator[None]:
    """Within the block, SIGTERM (``kill``, ``timeout``, systemd) unwinds like Ctrl-C, so every
    ``finally`` runs and the children (bot server, web server, scheduler) are stopped, not orphaned."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(_signum, _frame):
        raise Stopped()

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def launch(
    config_path: str | Path,
    *,
    web: WebFactory,
    yes: bool = False,
    resume: bool = False,
    show_progress: bool = True,
    confirm: Callable[[str], bool] | None = None,
    echo: Callable[[str], None] = print,
    timeout_s: float | None = None,
    analyse: bool = True,
    lines_every_s: float | None = None,
    config: StudyConfig | None = None,
    port: int | None = None,
    bot_port: int | None = None,
) -> LaunchResult:
    """Run a study from its file to its exports and analysis, its worker pages served by ``web``; see the
    module docstring.

    ``show_progress`` redraws one status line on a terminal; ``lines_every_s`` writes a plain line
    that often instead (for logs). Ctrl-C and SIGTERM raise :class:`Stopped` (a KeyboardInterrupt)
    after stopping everything the launch started. ``config`` runs the file's study as changed in
    memory (``hitkit plan --confirm``'s: another size, crowd and database); paths still resolve
    against the file's folder. ``port`` and ``bot_port`` override ``server.port`` and ``bots.serve.port``
    (``--port``, ``--bot-port``; 0 anywhere: a free port, printed).
    """
    config_path = Path(config_path)
    config = with_bot_server(config or load_study(config_path), bot_port)  # systems without a url: its bots
    if port is not None:
        config = config.model_copy(update={"server": config.server.model_copy(update={"port": port})})
    from hitkit.providers import make_provider

    make_provider(config, "").check_posting()  # e.g. MTurk's closure: refused before anything is saved or posted
    confirm = (lambda _q: True) if yes else (confirm or (lambda _q: False))
    check_material_before_generating(config)
    with sigterm_stops(), study_bots(config, echo) if needs_bot_server(config) else nullcontext():
        if config.generation is not None:
            from hitkit.material.generation import generate

            report = generate(config, show_progress=show_progress, lines_every_s=lines_every_s)
            echo(
                f"Bot-bot conversations: {report.planned} planned, {report.already_done} already done, "
                f"{report.generated} generated ({config.bot_bot_path})"
            )
        ctx = _prepare(config, config_path.resolve(), resume, confirm, echo)
        if judges_before(config):
            judge_material(config, config_path, ctx, echo, show_progress, lines_every_s)
        return _run(config, config_path, ctx, web, show_progress, echo, timeout_s, analyse, lines_every_s)


def _start_web(config: StudyConfig, url: str, ctx: StudyContext, web: WebFactory) -> WebTier:
    """The worker pages on the configured port; with port 0, the port of the study's last launch when
    it is free (so invite links already handed out keep working), else any free port."""
    port = config.server.port
    if port == 0:
        previous = served_url(url, config.study)
        if previous and previous.startswith(f"http://{config.server.host}:"):
            try:
                return web(url, config.server.host, int(previous.rsplit(":", 1)[1]), config.server.threads, ctx.secret)
            except (OSError, ValueError):
                pass  # taken by something else now: a fresh port, and the new address is recorded
    return web(url, config.server.host, port, config.server.threads, ctx.secret)


def _quiet_shutdown() -> None:
    """Silence what stopping mid-run makes noisy: waitress' channel errors and the simulated crowd's
    refused requests (409s) from pages that close under it. The run is over; they mean nothing."""
    for name in ("waitress", "waitress.queue", "hitkit.simulation.crowd", "hitkit.bots.client", "apscheduler"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _stop_scheduler(scheduler, wait: bool) -> None:
    """Stop the in-process scheduler without the traceback APScheduler logs when a tick comes due while
    its executor shuts down ("cannot schedule new futures after shutdown"): nothing is lost by it."""
    aps = logging.getLogger("apscheduler")
    level = aps.level
    aps.setLevel(logging.CRITICAL)
    try:
        if scheduler.running:
            scheduler.pause()
            scheduler.shutdown(wait=wait)
    finally:
        aps.setLevel(level)


def _panel_link(config: StudyConfig, ctx: StudyContext, base_url: str) -> tuple[str, str]:
    """The panel's name and the study link to give it. ``provider.kind: panel`` makes a PanelProvider and
    needs a ``panel:`` section (ProviderConfig's validator); TypeError naming the provider otherwise."""
    from hitkit.providers.panel import PanelProvider

    if not isinstance(ctx.provider, PanelProvider) or config.provider.panel is None:
        raise TypeError(f"study '{config.study}' runs on {ctx.provider.name}, not on a panel with a panel: section")
    return config.provider.panel.name, ctx.provider.entry_link(base_url)


def _run(
    config: StudyConfig,
    config_path: Path,
    ctx: StudyContext,
    web_factory: WebFactory,
    show_progress: bool,
    echo: Callable[[str], None],
    timeout_s: float | None,
    analyse: bool,
    lines_every_s: float | None = None,
) -> LaunchResult:
    from hitkit.running.scheduler import make_scheduler, schedule_study

    url = config.database_url
    web = _start_web(config, url, ctx, web_factory)
    base_url = (config.server.public_url or web.url).rstrip("/")
    record_served(url, [ctx.study_id], base_url)
    echo(f"Worker pages at {base_url}; {dashboard_hint(base_url)}")
    scheduler = make_scheduler(url)
    if logging.getLogger().getEffectiveLevel() > logging.INFO:
        # "tick skipped: maximum number of running instances reached" only says a tick outlasted its
        # interval on a busy machine; the next one catches up. Not worth a line per tick in a log.
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
    crowd = None
    status_line = StatusLine(show_progress, lines_every_s)
    stopped = False
    try:
        schedule_study(scheduler, url, config.study, base_url, config.schedule.interval_s)
        scheduler.start()
        crowd = _open_the_work(config, config_path, ctx, web.url, base_url, echo)
        watched = watch(config, config_path, ctx, status_line, echo, crowd, timeout_s)
    except KeyboardInterrupt:
        stopped = True
        raise
    finally:
        status_line.close()
        if stopped:
            _quiet_shutdown()
        if crowd is not None:
            crowd._stop.set()  # every simulated worker stops at its next step, while the rest shuts down
        _stop_scheduler(scheduler, wait=not stopped)
        web.stop()
        if crowd is not None:
            crowd.stop(join_timeout=1.0 if stopped else 10.0)
    result = LaunchResult(
        config.study, watched.ending, config.out_dir, crowd_errors=list(crowd.stats.errors) if crowd else []
    )
    _export_and_analyse(config, config_path, ctx, result, echo, analyse, show_progress, lines_every_s)
    if watched.ending == "held":
        echo(
            f"{watched.held} assignment(s) from workers who fail QC are held for your review (schedule.qc_failures: "
            f"{config.qc_failures}): approve or reject them with `hitkit held {config_path}` or on the dashboard, "
            f"then `hitkit launch {config_path} --resume` completes the study."
        )
    return result


def _open_the_work(
    config: StudyConfig, config_path: Path, ctx: StudyContext, web_url: str, base_url: str, echo: Callable[[str], None]
) -> SimulatedCrowd | None:
    """Start the simulated crowd on the pages (returned), or tell the coordinator where to send people."""
    if config.provider.kind == "simulated":
        from hitkit.simulation.crowd import SimulatedCrowd

        ack_log = config.out_dir / "acks.jsonl" if config.simulated.ack_log else None
        config.out_dir.mkdir(parents=True, exist_ok=True)
        return SimulatedCrowd(config.database_url, ctx, web_url, ack_log=ack_log).start()
    if config.provider.kind == "panel":
        panel, link = _panel_link(config, ctx, base_url)
        echo(
            f"Give {panel} this study link: {link}; confirm who completed with `hitkit confirm {config_path} --completed FILE.csv`"
        )
    elif config.provider.kind == "local":
        echo(
            f"Give annotators links from `hitkit invites {config_path} -n N`; entry: {base_url}/s/{config.study}/enter"
        )
    return None


def _export_and_analyse(
    config: StudyConfig,
    config_path: Path,
    ctx: StudyContext,
    result: LaunchResult,
    echo: Callable[[str], None],
    analyse: bool,
    show_progress: bool,
    lines_every_s: float | None,
) -> None:
    """After the crowd's work: the judge's labels (a judge after the crowd), the export, the analysis and its
    console tables, the QC and stopping lines; the paths written go into ``result``."""
    out_dir = config.out_dir
    if config.judge is not None and not judges_before(config):
        # The crowd's work is done and stored; the judge's labels are added to it before the export.
        result.judged = judge_crowd_work(config, config_path, ctx.study_id, echo, show_progress, lines_every_s)
    with session_scope(config.database_url) as session:
        result.exported = export_study(session, ctx, out_dir / "export")
        result.qc_line = qc_outcome_line(session, ctx)
        from hitkit.running.stopping import outcome_of

        result.stop_line = outcome_of(session, ctx.study_id, has_rule=config.stop is not None) or ""
    echo(f"Exported {', '.join(p.name for p in result.exported)} to {out_dir / 'export'}")
    if analyse:
        from hitkit.report.analyze import run_analysis

        analysis = run_analysis(config.task, out_dir / "export", seed=config.seed, config=config)
        result.analysis = analysis.write(out_dir / "analysis")
        echo(f"Analysis written to {out_dir / 'analysis'}")
        from hitkit.analysis.base import console_table

        for name in ("ranking", "systems", "leaderboard"):
            if name in analysis.tables:
                # Live chat's and rating's n counts criterion ratings: the console says so.
                labels = {"n": "n (criterion ratings)"} if name == "systems" else None
                echo(console_table(analysis.tables[name], labels))
        for line in analysis.summary.get("warnings", []):  # as `hitkit analyze` prints them
            echo(f"warning: {line}")
    echo(result.qc_line)
    if result.stop_line:
        echo(result.stop_line)
