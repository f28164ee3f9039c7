"""Commands that look after a running study: its status, syncing with the platform, confirming a
panel's completions, pausing, resuming, stopping, settling bonuses, deciding held work, the database
and shell completion."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from hitkit.cli.app import EXISTING_FILE, FILE, database_option, main
from hitkit.errors import HitkitError


@main.command()
@click.argument("study_file", type=FILE)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(study_file: Path, as_json: bool) -> None:
    """Show a study's progress, HITs, assignments and spend."""
    from hitkit.running.status import study_status
    from hitkit.study.loading import load_study
    from hitkit.study.served import require_launched

    config = load_study(study_file)
    require_launched(config, study_file)
    info = study_status(config.database_url, config.study)
    if as_json:
        click.echo(json.dumps(info, indent=2, default=str))
        return
    click.echo(f"{info['study']} ({info['task']} on {info['provider']}): {info['status']}")
    click.echo(f"  answers {info['answers']}")
    if "chat" in info:
        click.echo(f"  chat messages {info['chat']}")
    click.echo("  HITs " + ", ".join(f"{k} {v}" for k, v in info["hits"].items()))
    click.echo("  assignments " + ", ".join(f"{k} {v}" for k, v in info["assignments"].items()))
    click.echo(f"  spent {info['spent']} of budget {info['budget']} {info['currency']}; workers {info['workers']}")
    lead = info.get("leader")
    click.echo(
        f"  leader: {lead['role']} on {lead['host']} (pid {lead['pid']}) since {lead['since']}"
        if lead
        else "  leader: none (no scheduler or command acts on this study now)"
    )
    if "webhooks" in info:
        from hitkit.running.hook_refusals import health_line

        click.echo(f"  webhooks: {health_line(info['webhooks'])}")
    if "stopped_by_rule" in info:
        click.echo(f"  {info['stopped_by_rule']['line']}")


@main.command()
@click.argument("study_file", type=FILE)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "--wait",
    "wait_s",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds to wait for the study's lease (a running scheduler hands it over after its tick).",
)
def sync(study_file: Path, as_json: bool, wait_s: float) -> None:
    """Make the database agree with the provider: decisions, approvals, pending payments, mismatches."""
    from hitkit.running.sync import describe, sync_study
    from hitkit.study.loading import load_study
    from hitkit.study.served import require_launched

    config = load_study(study_file)
    require_launched(config, study_file)
    report = sync_study(config.database_url, config.study, wait_s=wait_s)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        click.echo(describe(report))
    if report.errors:
        sys.exit(1)


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]), default="bash")
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(hitkit completion bash)" (or zsh, fish)."""
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    if cls is None:
        raise click.BadParameter(f"click has no completion for shell '{shell}'", param_hint="SHELL")
    click.echo(cls(main, {}, "hitkit", "_HITKIT_COMPLETE").source())


@main.group()
def db() -> None:
    """Database schema management."""


@db.command("upgrade")
@database_option
@click.option("--revision", default="head", show_default=True)
def db_upgrade(database_url: str, revision: str) -> None:
    """Apply the migrations in migrations/ up to REVISION."""
    from hitkit.db.migrate import current, upgrade

    upgrade(database_url, revision)
    click.echo(f"database at revision {current(database_url)}")


@db.command("current")
@database_option
def db_current(database_url: str) -> None:
    """Print the revision the database is at."""
    from hitkit.db.migrate import current

    click.echo(current(database_url) or "empty (run `hitkit db upgrade`)")


@main.command()
@click.argument("study_file", type=FILE)
@click.option(
    "--completed",
    type=EXISTING_FILE,
    required=True,
    help="CSV from the panel listing who completed (session ids where the panel sends them, else worker ids).",
)
@click.option(
    "--column",
    default=None,
    help="Column of the ids (default: the panel's session parameter, "
    "session_id or assignment_id where the panel sends session ids; "
    "else its worker parameter, worker_id, participant_id, id).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def confirm(study_file: Path, completed: Path, column: str | None, as_json: bool) -> None:
    """Confirm the work of the workers or sessions the platform lists as completed (panels, MTurk-style)."""
    from hitkit.db.session import session_scope
    from hitkit.providers.panel import confirm_completed, read_completed
    from hitkit.study.loading import load_study
    from hitkit.study.stored import StudyContext, resolve_secret

    config = load_study(study_file)
    ids = read_completed(completed, column, config)
    with session_scope(config.database_url) as session:
        ctx = StudyContext.load(session, config.study, resolve_secret(config.database_url))
        outcome = confirm_completed(session, ctx, ids, source=completed.name)
    if as_json:
        click.echo(json.dumps(outcome.as_dict(), indent=2))
        return
    click.echo(outcome.describe())


def _control(study_file: Path, action) -> None:
    from hitkit.study.loading import load_study

    config = load_study(study_file)
    click.echo(action(config.database_url, config.study))


@main.command()
@click.argument("study_file", type=FILE)
def pause(study_file: Path) -> None:
    """Stop recruiting (hitkit's pages and the provider's listing) until `hitkit resume`."""
    from hitkit.running.control import pause_study

    _control(study_file, pause_study)


@main.command()
@click.argument("study_file", type=FILE)
def resume(study_file: Path) -> None:
    """Recruit again after `hitkit pause`, or after fixing what made the provider refuse to post."""
    from hitkit.running.control import resume_study

    _control(study_file, resume_study)


@main.command()
@click.argument("study_file", type=FILE)
def stop(study_file: Path) -> None:
    """Stop recruiting for good; submitted work is still reviewed and paid."""
    from hitkit.running.control import stop_study

    _control(study_file, stop_study)


@main.command()
@click.argument("study_file", type=FILE)
@click.argument("assignment", type=int)
@click.option("--pay/--drop", required=True, help="Pay its reward as a bonus, or drop its answers.")
def settle(study_file: Path, assignment: int, pay: bool) -> None:
    """Settle work submitted in hitkit that the provider shows returned or timed out (`hitkit sync` lists it)."""
    from hitkit.running.control import settle_assignment

    _control(study_file, lambda url, study: settle_assignment(url, study, assignment, pay))


@main.command()
@click.argument("study_file", type=FILE)
@click.option("--approve", "approve_ids", type=int, multiple=True, help="Approve (and pay) this held assignment.")
@click.option("--reject", "reject_ids", type=int, multiple=True, help="Reject this held assignment (needs --reason).")
@click.option(
    "--reason",
    default=None,
    help="The message the worker reads (Prolific: at least 100 characters; default: schedule.qc_reject_reason).",
)
def held(study_file: Path, approve_ids: tuple[int, ...], reject_ids: tuple[int, ...], reason: str | None) -> None:
    """List the work held for review because its worker fails QC, or approve / reject it."""
    from hitkit import dashboard as dash
    from hitkit.db.session import session_scope
    from hitkit.money.qc_policy import held_work
    from hitkit.study.loading import load_study
    from hitkit.study.served import require_launched
    from hitkit.study.stored import StudyContext, resolve_secret

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
            click.echo(
                f"assignment {row['assignment']}  worker {row['worker']}  held since {row['since']:%Y-%m-%d %H:%M} UTC"
            )
        click.echo(f"Decide with `hitkit held {study_file} --approve ID` or `--reject ID --reason TEXT`.")
        return
    held_ids = {row["assignment"] for row in rows}
    for aid in approve_ids + reject_ids:
        if aid not in held_ids:
            raise HitkitError(
                f"assignment {aid} is not held for review in '{config.study}'; "
                f"`hitkit held {study_file}` lists those that are"
            )
    text = (reason or config.schedule.qc_reject_reason or "").strip()
    if reject_ids and not text:
        raise HitkitError("give the worker a reason: --reason TEXT (Prolific needs at least 100 characters)")
    for aid in approve_ids:
        click.echo(dash.approve_assignment(url, ctx, aid))
    for aid in reject_ids:
        click.echo(dash.reject_assignment(url, ctx, aid, text))
