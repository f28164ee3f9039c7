"""``hitkit launch``: validate → build units → estimate cost → confirm → post → serve → schedule →
watch progress → approve → export → analyse, on one machine. ``resume=True`` continues a study
that an earlier launch left (stopped, crashed or killed) from what the database holds."""
from __future__ import annotations

import logging
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
from hitkit.study import StudyContext, create_study, estimate_cost, resolve_secret, unit_answer_counts

log = logging.getLogger(__name__)


@dataclass
class LaunchResult:
    study: str
    status: str
    out_dir: Path
    exported: list[Path] = field(default_factory=list)
    analysis: list[Path] = field(default_factory=list)
    crowd_errors: list[str] = field(default_factory=list)


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


def launch(config_path: str | Path, *, yes: bool = False, resume: bool = False, show_progress: bool = True,
           confirm: Callable[[str], bool] | None = None, echo: Callable[[str], None] = print,
           timeout_s: float | None = None, analyse: bool = True) -> LaunchResult:
    """Run a study from its file to its exports and analysis; see the module docstring."""
    config_path = Path(config_path)
    config = load_study(config_path)
    from hitkit.providers import make_provider

    make_provider(config, "").check_posting()  # e.g. MTurk's closure: refused before anything is saved or posted
    confirm = (lambda _q: True) if yes else (confirm or (lambda _q: False))
    with study_bots(config, echo) if needs_bot_server(config) else nullcontext():
        if config.generation is not None:
            from hitkit.generation import generate

            report = generate(config, show_progress=show_progress)
            echo(f"Bot-bot conversations: {report.planned} planned, {report.already_done} already done, "
                 f"{report.generated} generated ({config.bot_bot_path})")
        ctx = _prepare(config, config_path.resolve(), resume, confirm, echo)
        return _run(config, config_path, ctx, show_progress, echo, timeout_s, analyse)


def needs_bot_server(config: StudyConfig) -> bool:
    """Whether a launch uses the study's bots: live chat talks to them, other tasks only generate with them.

    A resumed study whose bot–bot conversations are all written starts no bot server (and loads no model).
    """
    if config.task == "live_chat":
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
    server = BotServerProcess(config.bots.serve, config.seed, config.out_dir / "bots.log").start()
    echo(f"Bots served at {server.url}")
    try:
        yield
    finally:
        server.stop()


def _run(config: StudyConfig, config_path: Path, ctx: StudyContext, show_progress: bool,
         echo: Callable[[str], None], timeout_s: float | None, analyse: bool) -> LaunchResult:
    from tqdm import tqdm

    from hitkit.crowd import SimulatedCrowd
    from hitkit.scheduler import budget_blocked, make_scheduler, posting_blocked, schedule_study

    url = config.database_url
    out_dir = config.out_dir
    web = WebServer(url, config.server.host, config.server.port, config.server.threads, ctx.secret).start()
    base_url = config.server.public_url or web.url
    echo(f"Worker pages at {base_url}")
    scheduler = make_scheduler(url)
    schedule_study(scheduler, url, config.study, base_url, config.schedule.interval_s)
    scheduler.start()
    crowd = None
    if config.provider.kind == "simulated":
        ack_log = out_dir / "acks.jsonl" if config.simulated.ack_log else None
        out_dir.mkdir(parents=True, exist_ok=True)
        crowd = SimulatedCrowd(url, ctx, web.url, ack_log=ack_log).start()
    elif config.provider.kind == "panel":
        echo(f"Give {config.provider.panel.name} this study link: {ctx.provider.entry_link(base_url)}; confirm "
             f"who completed with `hitkit confirm {config_path} --completed FILE.csv`")
    elif config.provider.kind == "local":
        echo(f"Give annotators links from `hitkit invites {config_path} -n N`; entry: {base_url}/s/{config.study}/enter")

    started = time.monotonic()
    done, total = progress(url, ctx.study_id)
    bar = tqdm(total=total, initial=done, desc="answers", unit="ans", disable=not show_progress)
    try:
        while True:
            done, total = progress(url, ctx.study_id)
            bar.total = total
            bar.update(done - bar.n)
            with session_scope(url) as session:
                status = session.get(Study, ctx.study_id).status
                blocked = budget_blocked(session, ctx) if status == "running" else 0
                refused = posting_blocked(session, ctx.study_id) if status == "running" else None
                nothing_posted = refused and not session.scalar(select(Hit.id).where(
                    Hit.study_id == ctx.study_id, Hit.status != "pending").limit(1))
                if config.task == "live_chat":  # answers count once a HIT is in; the chat shows sooner
                    bar.set_postfix_str(f"{chat_turns(session, ctx.study_id)} chat messages", refresh=False)
            if status == "completed":
                break
            if nothing_posted:
                raise HitkitError(f"{config.provider.kind} refused to post the study: {refused}. Nothing was "
                                  f"posted; fix it in {config_path}, then `hitkit resume {config_path}` and "
                                  f"`hitkit launch --resume {config_path}`")
            if blocked:
                raise HitkitError(
                    f"the budget ({config.budget} {config.provider.currency}) is committed with {done} of {total} "
                    f"answers collected and {blocked} HIT(s) unposted; raise 'budget:' in {config_path} "
                    f"and continue with `hitkit launch --resume`")
            if crowd is not None and crowd.finished and done < total:
                raise HitkitError(
                    f"the simulated crowd ran out of workers with {done} of {total} answers collected; "
                    f"add workers under simulated.workers or raise schedule.per_worker_cap, then `launch --resume`")
            if timeout_s is not None and time.monotonic() - started > timeout_s:
                raise HitkitError(f"stopped after {timeout_s:.0f} s with {done} of {total} answers; "
                                  f"continue with `hitkit launch --resume {config_path}`")
            time.sleep(0.3)
    finally:
        bar.close()
        if crowd is not None:
            crowd.stop()
        scheduler.shutdown(wait=True)
        web.stop()

    result = LaunchResult(config.study, "completed", out_dir, crowd_errors=list(crowd.stats.errors) if crowd else [])
    with session_scope(url) as session:
        result.exported = export_study(session, ctx, out_dir / "export")
    echo(f"Exported {', '.join(p.name for p in result.exported)} to {out_dir / 'export'}")
    if analyse:
        from hitkit.analysis import run_analysis

        analysis = run_analysis(config.task, out_dir / "export", seed=config.seed, config=config)
        result.analysis = analysis.write(out_dir / "analysis")
        echo(f"Analysis written to {out_dir / 'analysis'}")
        for name in ("ranking", "systems"):
            if name in analysis.tables:
                echo(analysis.tables[name].to_string(index=False))
    return result
