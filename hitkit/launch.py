"""``hitkit launch``: validate → build units → estimate cost → confirm → post → serve → schedule →
watch progress → approve → export → analyse, on one machine. ``resume=True`` continues a study
that an earlier launch left (stopped, crashed or killed) from what the database holds."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.config import StudyConfig, load_study
from hitkit.db.migrate import upgrade
from hitkit.db.models import Conversation, Event, Hit, Study, Turn, Unit
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.export import export_study
from hitkit.ledger import estimate_cost
from hitkit.protocols import PROTOCOLS
from hitkit.study import StudyContext, create_study, resolve_secret, unit_answer_counts

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


class WebServer:
    """hitkit's worker pages on a waitress server in a background thread (the embedded default)."""

    def __init__(self, database_url: str, host: str, port: int, threads: int, secret: str):
        from server import create_app
        from server.embedded import make_server

        self._server = make_server(create_app(database_url, secret), host, port, threads)
        self.url = f"http://{host}:{self._server.effective_port}"
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="hitkit-web", daemon=True)

    def _serve(self) -> None:
        try:
            self._server.run()
        except OSError:
            # Closing the listening socket from stop() wakes the select loop on a dead descriptor.
            if not self._stopping.is_set():
                raise

    def start(self) -> "WebServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.close()
        self._thread.join(5)


def progress(database_url: str, study_id: int) -> tuple[int, int]:
    """(answers collected, answers the study needs), counting at most the required number per unit."""
    with session_scope(database_url) as session:
        required = dict(session.execute(select(Unit.id, Unit.required_answers).where(Unit.study_id == study_id)).all())
        counts = unit_answer_counts(session, study_id)
    return sum(min(n, counts.get(uid, 0)) for uid, n in required.items()), sum(required.values())


def chat_turns(session: Session, study_id: int) -> int:
    """Messages workers have typed in the study's live chats so far."""
    return session.scalar(select(func.count()).select_from(Turn).join(Conversation)
                          .where(Conversation.study_id == study_id, Turn.speaker == "worker"))


RESUMABLE_FIELDS = ("budget", "schedule", "simulated", "server", "bots")
"""Study-file fields that may change between launches; the rest define the study and may not."""


def _apply_resume_changes(study: Study, config: StudyConfig) -> list[str]:
    """Take the budget and operational settings from the study file; refuse changes to the design."""
    fresh = config.model_dump(mode="json")
    stored = dict(study.config)
    fixed = sorted(k for k in fresh if k not in RESUMABLE_FIELDS and k != "database" and fresh[k] != stored.get(k))
    if fixed:
        raise HitkitError(f"{', '.join(fixed)} changed since the study was launched; these define the study and "
                          f"cannot change — restore them, or launch a new study under another name")
    changed = [k for k in RESUMABLE_FIELDS if fresh[k] != stored.get(k)]
    if changed:
        study.config = {**stored, **{k: fresh[k] for k in changed}}
        study.budget = config.budget
    return changed


def _prepare(config: StudyConfig, config_path: Path, resume: bool, confirm: Callable[[str], bool],
             echo: Callable[[str], None]) -> StudyContext:
    url = config.database_url
    upgrade(url)
    secret = resolve_secret(url)
    with session_scope(url) as session:
        existing = session.scalar(select(Study).where(Study.name == config.study))
        if resume:
            if existing is None:
                raise HitkitError(f"there is no study '{config.study}' to resume in {url}; launch it without --resume")
            changed = _apply_resume_changes(existing, config)
            if changed:
                echo(f"Updated from {config_path.name}: {', '.join(changed)}.")
                session.add(Event(study_id=existing.id, kind="study_config_changed", actor="cli", data={"fields": changed}))
            ctx = StudyContext.of(existing, secret)
            if existing.status in ("draft", "stopped"):
                existing.status = "running"
            session.add(Event(study_id=ctx.study_id, kind="study_resumed", actor="cli", data={}))
            echo(f"Resuming study '{config.study}' ({existing.status}). {estimate_cost(session, ctx).describe()}.")
            return ctx
        ctx = create_study(session, config, config_path, secret)
        estimate = estimate_cost(session, ctx)
        echo(f"Study '{config.study}': {config.task} on {config.provider.kind}. {estimate.describe()}.")
        if not estimate.within_budget:
            echo(f"The budget covers {estimate.hits_covered} of {estimate.hits} HITs; the scheduler posts HITs only "
                 f"while the worst-case spend stays within {estimate.budget} {estimate.currency}.")
        if not confirm("Post this study?"):
            session.rollback()
            raise HitkitError("launch cancelled; nothing was saved")
        session.get(Study, ctx.study_id).status = "running"
        session.add(Event(study_id=ctx.study_id, kind="study_launched", actor="cli", data={"estimate": estimate.describe()}))
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


def launch(config_path: str | Path, *, yes: bool = False, resume: bool = False, show_progress: bool = True,
           confirm: Callable[[str], bool] | None = None, echo: Callable[[str], None] = print,
           timeout_s: float | None = None, analyse: bool = True, lines_every_s: float | None = None) -> LaunchResult:
    """Run a study from its file to its exports and analysis; see the module docstring.

    ``show_progress`` redraws one status line on a terminal; ``lines_every_s`` writes a plain line
    that often instead (for logs). Ctrl-C and SIGTERM raise :class:`Stopped` (a KeyboardInterrupt)
    after stopping everything the launch started.
    """
    config_path = Path(config_path)
    config = load_study(config_path)
    from hitkit.providers import make_provider

    make_provider(config, "").check_posting()  # e.g. MTurk's closure: refused before anything is saved or posted
    confirm = (lambda _q: True) if yes else (confirm or (lambda _q: False))
    check_material_before_generating(config)
    with sigterm_stops(), (study_bots(config, echo) if needs_bot_server(config) else nullcontext()):
        if config.generation is not None:
            from hitkit.generation import generate

            report = generate(config, show_progress=show_progress, lines_every_s=lines_every_s)
            echo(f"Bot-bot conversations: {report.planned} planned, {report.already_done} already done, "
                 f"{report.generated} generated ({config.bot_bot_path})")
        ctx = _prepare(config, config_path.resolve(), resume, confirm, echo)
        return _run(config, config_path, ctx, show_progress, echo, timeout_s, analyse, lines_every_s)


def check_material_before_generating(config: StudyConfig) -> None:
    """Refuse, before minutes of generation, a plan whose generated material the protocol cannot pack
    (ConfigError with every fix; :meth:`~hitkit.protocols.base.TaskType.check_generation_plan`)."""
    if config.generation is None or not PROTOCOLS[config.task].uses_generation:
        return
    from hitkit.generation import planned_pairs
    from hitkit.protocols import task_for

    task_for(config).check_generation_plan(*planned_pairs(config))


def needs_bot_server(config: StudyConfig) -> bool:
    """Whether a launch uses the study's bots: live chat talks to them, other tasks only generate with them.

    A resumed study whose bot–bot conversations are all written starts no bot server (and loads no model).
    """
    if PROTOCOLS[config.task].has_chat:
        return True
    if config.generation is None:
        return False
    from hitkit.generation import pending

    return pending(config) > 0


@contextmanager
def study_bots(config: StudyConfig, echo: Callable[[str], None] = print) -> Iterator[None]:
    """Serve the study's own bots (``bots.serve``) for the duration of the block, if it asks for any."""
    if config.bots is None or config.bots.serve is None:
        yield
        return
    from hitkit.bots.process import BotServerProcess

    echo("Starting the study's bot server (loading models)…")
    server = BotServerProcess(config.bots.serve, config.seed, config.out_dir / "bots.log")
    try:  # start() inside: Ctrl-C or SIGTERM while the models load must not orphan the server either
        server.start()
        echo(f"Bots served at {server.url}")
        yield
    finally:
        server.stop()


SERVED_EVENT = "served"
"""Event kind holding the address a launch or ``hitkit serve`` serves a study's pages at (for invites)."""


def served_url(database_url: str, study: str) -> str | None:
    """The address the study's pages were last served at, as recorded by ``launch`` or ``serve``."""
    names = launched_studies(database_url)
    if not names or study not in names:
        return None
    with session_scope(database_url) as session:
        study_id = session.scalar(select(Study.id).where(Study.name == study))
        if study_id is None:
            return None
        event = session.scalar(select(Event).where(Event.study_id == study_id, Event.kind == SERVED_EVENT)
                               .order_by(Event.id.desc()).limit(1))
        return event.data.get("url") if event else None


def record_served(database_url: str, study_ids: list[int], url: str) -> None:
    """Record where the pages of these studies are served now."""
    with session_scope(database_url) as session:
        for study_id in study_ids:
            session.add(Event(study_id=study_id, kind=SERVED_EVENT, actor="cli", data={"url": url}))


def _start_web(config: StudyConfig, url: str, ctx: StudyContext) -> WebServer:
    """The worker pages on the configured port; with port 0, the port of the study's last launch when
    it is free (so invite links already handed out keep working), else any free port."""
    port = config.server.port
    if port == 0:
        previous = served_url(url, config.study)
        if previous and previous.startswith(f"http://{config.server.host}:"):
            try:
                return WebServer(url, config.server.host, int(previous.rsplit(":", 1)[1]), config.server.threads,
                                 ctx.secret).start()
            except (OSError, ValueError):
                pass  # taken by something else now: a fresh port, and the new address is recorded
    return WebServer(url, config.server.host, port, config.server.threads, ctx.secret).start()


def dashboard_hint(base_url: str) -> str:
    """The dashboard's address, or how to turn it on."""
    if os.environ.get("HITKIT_DASHBOARD_USER"):
        return f"coordinator dashboard at {base_url}/dashboard/"
    return (f"coordinator dashboard at {base_url}/dashboard/ once HITKIT_DASHBOARD_USER and "
            f"HITKIT_DASHBOARD_PASSWORD are set")


def eta_text(fraction: float, elapsed_s: float) -> str:
    """'ETA 3 min' from the share of the work done and the time it took (pure; '' until it can tell)."""
    if fraction <= 0.01 or fraction >= 1 or elapsed_s < 5:
        return ""
    left = elapsed_s * (1 - fraction) / fraction
    if left < 90:
        return f"ETA {max(5, round(left / 5) * 5):.0f} s"
    if left < 5400:
        return f"ETA {round(left / 60):.0f} min"
    return f"ETA {left / 3600:.1f} h"


@dataclass
class Snapshot:
    """What the progress line shows at one moment."""

    done: int
    total: int
    turns: int | None = None
    turns_needed: int | None = None
    health: str = ""
    held: int = 0

    @property
    def fraction(self) -> float:
        """Share of the work done: chat messages move it from the first turn, answers finish it."""
        answers = self.done / self.total if self.total else 0.0
        if self.turns is None or not self.turns_needed:
            return answers
        return max(answers, 0.9 * min(1.0, self.turns / self.turns_needed) + 0.1 * answers)

    def line(self, elapsed_s: float) -> str:
        """The one-line status: answers, chat messages, ETA, bot health, held work."""
        parts = [f"answers in submitted HITs {self.done}/{self.total}"]
        if self.turns is not None:
            parts.append(f"chat messages {self.turns}/{self.turns_needed}")
        parts.append(f"{100 * self.fraction:.0f} %")
        eta = eta_text(self.fraction, elapsed_s)
        if eta:
            parts.append(eta)
        if self.health:
            parts.append(self.health)
        if self.held:
            parts.append(f"{self.held} held for QC review")
        return " · ".join(parts)


def snapshot(session: Session, ctx: StudyContext, done: int, total: int) -> Snapshot:
    """The progress figures of a running study (bot health as the dashboard shows it)."""
    from hitkit.dashboard import bot_health
    from hitkit.qc_policy import held_assignment_ids

    config, study_id = ctx.config, ctx.study_id
    snap = Snapshot(done, total, health=bot_health(session, ctx)["summary"],
                    held=len(held_assignment_ids(session, study_id)))
    if PROTOCOLS[config.task].has_chat:
        snap.turns = chat_turns(session, study_id)
        snap.turns_needed = ctx.task.chat_turns_needed(total)
    return snap


class StatusLine:
    """One line redrawn in place on a terminal (stderr), or a plain line every ``every_s`` seconds for
    logs, or nothing. Never a progress bar in a file."""

    def __init__(self, tty: bool, every_s: float | None, stream=None):
        self.stream = stream or sys.stderr
        self.tty, self.every_s = tty, every_s
        self._last_plain = 0.0
        self._width = 0

    def show(self, text: str) -> None:
        if self.tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
            self._width = len(text)
        elif self.every_s is not None and time.monotonic() - self._last_plain >= self.every_s:
            self._last_plain = time.monotonic()
            self.stream.write(time.strftime("%H:%M:%S ") + text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0


def only_held_left(session: Session, study_id: int) -> int:
    """When all that keeps the study open is work held for QC review, how much; else 0."""
    from hitkit.db.models import Assignment, Hit
    from hitkit.qc_policy import held_assignment_ids

    held = held_assignment_ids(session, study_id)
    if not held:
        return 0
    open_hits = session.scalar(select(func.count()).select_from(Hit).where(
        Hit.study_id == study_id, Hit.status.in_(("pending", "posted"))))
    undecided = session.scalar(select(func.count()).select_from(Assignment).join(Hit).where(
        Hit.study_id == study_id, Assignment.status.in_(("submitted", "accepted"))))
    return len(held) if open_hits == 0 and undecided == len(held) else 0


def qc_outcome_line(session: Session, ctx: StudyContext) -> str:
    """'1 of 4 workers failed QC (check): w-003' — the study's quality check over its counted work."""
    from hitkit.dashboard import qc_summary

    qc = qc_summary(session, ctx, cache_key="launch-summary")
    if qc is None or not qc.workers:
        return "QC: no verdict (no counted work to check)"
    failed = sorted(w for w, ok in qc.by_worker.items() if not ok)
    if not failed:
        return f"QC: all {qc.workers} workers passed ({qc.method})"
    shown = ", ".join(failed[:8]) + (f" and {len(failed) - 8} more" if len(failed) > 8 else "")
    return f"{len(failed)} of {qc.workers} workers failed QC: {shown} (check: {qc.method})"


def _quiet_shutdown() -> None:
    """Silence what stopping mid-run makes noisy: waitress' channel errors and the simulated crowd's
    refused requests (409s) from pages that close under it. The run is over; they mean nothing."""
    for name in ("waitress", "waitress.queue", "hitkit.crowd", "hitkit.bots.client", "apscheduler"):
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


def _run(config: StudyConfig, config_path: Path, ctx: StudyContext, show_progress: bool,
         echo: Callable[[str], None], timeout_s: float | None, analyse: bool,
         lines_every_s: float | None = None) -> LaunchResult:
    from hitkit.crowd import SimulatedCrowd
    from hitkit.scheduler import budget_blocked, make_scheduler, posting_blocked, schedule_study

    url = config.database_url
    out_dir = config.out_dir
    web = _start_web(config, url, ctx)
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
    held_noted = False
    stopped = False
    try:
        schedule_study(scheduler, url, config.study, base_url, config.schedule.interval_s)
        scheduler.start()
        if config.provider.kind == "simulated":
            ack_log = out_dir / "acks.jsonl" if config.simulated.ack_log else None
            out_dir.mkdir(parents=True, exist_ok=True)
            crowd = SimulatedCrowd(url, ctx, web.url, ack_log=ack_log).start()
        elif config.provider.kind == "panel":
            echo(f"Give {config.provider.panel.name} this study link: {ctx.provider.entry_link(base_url)}; confirm "
                 f"who completed with `hitkit confirm {config_path} --completed FILE.csv`")
        elif config.provider.kind == "local":
            echo(f"Give annotators links from `hitkit invites {config_path} -n N`; entry: "
                 f"{base_url}/s/{config.study}/enter")
        started = time.monotonic()
        snap, snapped = None, 0.0
        while True:
            done, total = progress(url, ctx.study_id)
            with session_scope(url) as session:
                status = session.get(Study, ctx.study_id).status
                blocked = budget_blocked(session, ctx) if status == "running" else 0
                refused = posting_blocked(session, ctx.study_id) if status == "running" else None
                nothing_posted = refused and not session.scalar(select(Hit.id).where(
                    Hit.study_id == ctx.study_id, Hit.status != "pending").limit(1))
                if snap is None or time.monotonic() - snapped >= 1.0 or status != "running":
                    # Bot health and held work once a second: the loop itself looks every 0.3 s.
                    snap, snapped = snapshot(session, ctx, done, total), time.monotonic()
                    held_only = only_held_left(session, ctx.study_id) if status == "running" else 0
                snap.done, snap.total = done, total
            status_line.show(snap.line(time.monotonic() - started))
            if status == "completed":
                break
            if nothing_posted:
                raise HitkitError(f"{config.provider.kind} refused to post the study: {refused}. Nothing was "
                                  f"posted; fix it in {config_path}, then `hitkit resume {config_path}` and "
                                  f"`hitkit launch --resume {config_path}`")
            if held_only:
                held_noted = True
                break  # the rest is the coordinator's decision; the analysis can run on what is in
            if blocked:
                raise HitkitError(
                    f"the budget ({config.budget} {config.provider.currency}) is committed with {done} of {total} "
                    f"answers collected and {blocked} HIT(s) unposted; raise 'budget:' in {config_path} "
                    f"and continue with `hitkit launch {config_path} --resume`")
            if crowd is not None and crowd.finished and progress(url, ctx.study_id)[0] < total:
                # Counted again: the last workers may have submitted after `done` was read above.
                raise HitkitError(
                    f"the simulated crowd ran out of workers with {done} of {total} answers collected; "
                    f"add workers under simulated.workers or raise schedule.per_worker_cap, then "
                    f"`hitkit launch {config_path} --resume`")
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                raise HitkitError(f"stopped after {timeout_s:.0f} s with {done} of {total} answers; "
                                  f"continue with `hitkit launch {config_path} --resume`")
            time.sleep(0.3)
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

    result = LaunchResult(config.study, "completed" if not held_noted else "held",
                          out_dir, crowd_errors=list(crowd.stats.errors) if crowd else [])
    with session_scope(url) as session:
        result.exported = export_study(session, ctx, out_dir / "export")
        result.qc_line = qc_outcome_line(session, ctx)
    echo(f"Exported {', '.join(p.name for p in result.exported)} to {out_dir / 'export'}")
    if analyse:
        from hitkit.analyze import run_analysis

        analysis = run_analysis(config.task, out_dir / "export", seed=config.seed, config=config)
        result.analysis = analysis.write(out_dir / "analysis")
        echo(f"Analysis written to {out_dir / 'analysis'}")
        for name in ("ranking", "systems"):
            if name in analysis.tables:
                echo(analysis.tables[name].to_string(index=False))
    echo(result.qc_line)
    if held_noted:
        echo(f"{held_only} assignment(s) from workers who fail QC are held for your review (schedule.qc_failures: "
             f"{config.qc_failures}): approve or reject them with `hitkit held {config_path}` or on the dashboard, "
             f"then `hitkit launch {config_path} --resume` completes the study.")
    return result


# Commands on a study that may not be launched yet ------------------------------------------------
def database_url_of(value: str) -> str:
    """A database given as a URL (``sqlite:///…``, ``postgresql://…``) or as the path of a SQLite file."""
    if "://" in value:
        return value
    path = Path(value).expanduser()
    if path.is_dir():
        raise HitkitError(f"{value} is a folder; give the study's database file (e.g. {path / 'hitkit.db'}) "
                          f"or a database URL")
    return f"sqlite:///{path.resolve()}"


def launched_studies(database_url: str) -> list[str] | None:
    """The names of the studies in a database, or None when there is no hitkit database there yet.

    Creates nothing: a SQLite file that does not exist is not created, and no table is made.
    """
    from sqlalchemy import inspect
    from sqlalchemy.engine import make_url

    from hitkit.db.session import get_engine, normalise_url

    parsed = make_url(normalise_url(database_url))
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        if not Path(parsed.database).is_file():
            return None
    try:
        engine = get_engine(database_url)
        if not inspect(engine).has_table("study"):
            return None
    except Exception as exc:  # noqa: BLE001 - a database that cannot be reached is said in one line
        raise HitkitError(f"cannot open the database {database_url}: {str(exc).splitlines()[0]}") from None
    with session_scope(database_url) as session:
        return list(session.scalars(select(Study.name).order_by(Study.id)))


def require_launched(config: StudyConfig, study_file: Path | str) -> None:
    """HitkitError in one line unless the study has been launched into its database (creates nothing)."""
    names = launched_studies(config.database_url)
    if names is None or config.study not in names:
        raise HitkitError(f"study '{config.study}' has not been launched yet (nothing in {config.database_url}); "
                          f"check it with `hitkit launch {study_file} --dry-run`, then run "
                          f"`hitkit launch {study_file}`")


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
    lines = [f"Study '{config.study}': {config.task} on {config.provider.kind}, {len(config.systems)} systems "
             f"({', '.join(s.name for s in config.systems)}); valid."]
    check_material_before_generating(config)
    tmp = tempfile.TemporaryDirectory(prefix="hitkit-dry-run-")
    if config.generation is not None:
        from hitkit.generation import pending, planned_pairs

        # Without a file yet, everything is pending; pending() would create the output folder.
        left = pending(config) if config.bot_bot_path.exists() else planned_pairs(config)[0]
        if left:
            lines.append(f"Bot–bot conversations: {left} still to generate into {config.bot_bot_path} (launch does it "
                         f"first, or `hitkit generate {config_path}`); the plan below packs placeholders of the "
                         f"same number and length.")
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
        from hitkit.db.session import get_engine

        get_engine(url).dispose()
    shape = ", ".join(f"{n} HIT(s) of {k} units" for k, n in sorted(sizes.items(), reverse=True))
    lines.append(f"Material checked: {units} units packed into {estimate.hits} HITs ({shape}), "
                 f"{estimate.assignments} assignments at {config.hit.reward} {config.provider.currency} each.")
    lines.append(f"Cost: {estimate.describe()}.")
    if not estimate.within_budget:
        lines.append(f"The budget covers {estimate.hits_covered} of {estimate.hits} HITs: raise 'budget:' to at "
                     f"least {estimate.total} to post them all.")
    lines.append(f"Posting: waves of {config.schedule.wave_size} HITs, at most {config.schedule.max_concurrent} "
                 f"open, {config.schedule.per_worker_cap} per worker; QC failures: {config.qc_failures}.")
    lines.append(f"Nothing was posted or saved. Launch it with `hitkit launch {config_path}`.")
    for line in lines:
        echo(line)
    return Plan(lines, estimate.hits, estimate.assignments, str(estimate.total))
