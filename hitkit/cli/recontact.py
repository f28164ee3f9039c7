"""Commands that reach a study's participants on the platform: ``hitkit workers`` (re-contact) and
``hitkit message``; and the set-up of ``hitkit launch --test-participant`` (Prolific's test study)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hitkit.cli.app import FILE, main


def _launched(study_file: Path):
    from hitkit.study.loading import load_study
    from hitkit.study.served import require_launched

    config = load_study(study_file)
    require_launched(config, study_file)
    return config


@main.command()
@click.option(
    "--passed-qc",
    "passed_qc",
    required=True,
    type=FILE,
    metavar="STUDY_FILE",
    help="The study whose workers who passed quality control are listed.",
)
@click.option(
    "--to-group",
    "group",
    default=None,
    metavar="NAME",
    help="Add them to this Prolific participant group (made if absent), e.g. for a second wave's "
    "provider.prolific.allowlist.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def workers(passed_qc: Path, group: str | None, as_json: bool) -> None:
    """List the workers who passed a study's quality control, or put them into a participant group."""
    from hitkit.running import recontact

    config = _launched(passed_qc)
    if group is None:
        ctx = recontact.context(config.database_url, config.study)
        passed = sorted(w for w, ok in recontact.qc_outcomes(config.database_url, ctx).items() if ok)
        click.echo(json.dumps({"passed_qc": passed}) if as_json else "\n".join(passed))
        return
    group_id, added = recontact.passed_to_group(config.database_url, config.study, group)
    if as_json:
        click.echo(json.dumps({"group": group, "group_id": group_id, "added": added}))
    else:
        click.echo(
            f"{len(added)} worker(s) who passed quality control in '{config.study}' are in the participant "
            f"group '{group}' ({group_id}); a study with provider.prolific.allowlist: {group} invites only "
            f"its members"
        )


@main.command()
@click.argument("study_file", type=FILE)
@click.option("--to", "to", multiple=True, metavar="PARTICIPANT_ID", help="A participant (repeat for several).")
@click.option("--everyone", is_flag=True, help="Everyone who took part in the study.")
@click.option("--text", required=True, help="The message.")
def message(study_file: Path, to: tuple[str, ...], everyone: bool, text: str) -> None:
    """Write to a participant of the study (or everyone in it) through the platform's messages."""
    from hitkit.running import recontact

    if everyone == bool(to):
        raise click.UsageError("give --to PARTICIPANT_ID (once or more) or --everyone, not both")
    config = _launched(study_file)
    n = recontact.message(config.database_url, config.study, None if everyone else list(to), text)
    click.echo(f"message sent to {n} participant(s) of '{config.study}'")


def test_run_setup(study_file: Path) -> None:
    """``--test-participant``: this process (and its in-process scheduler) runs Prolific's test study."""
    import logging
    import os

    from hitkit.providers.prolific import test_run
    from hitkit.study.loading import load_study

    if load_study(study_file).provider.kind != "prolific":
        raise click.UsageError("--test-participant is Prolific's test study; this study's provider is not prolific")
    os.environ[test_run.ENV] = "1"
    logging.getLogger(test_run.__name__).addHandler(logging.StreamHandler())
    click.echo("Test run: the Prolific study is created but not published; take it at the address logged below.")
