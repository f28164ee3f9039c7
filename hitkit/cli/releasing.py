"""``hitkit release``: a data set others can load, with a card, pseudonymous and scrubbed of personal data."""

from __future__ import annotations

import json
import secrets
import tempfile
from pathlib import Path

import click

from hitkit.cli.app import EXISTING_FILE, FILE, FOLDER, main
from hitkit.errors import HitkitError

FINISHED = ("completed", "stopped")
"""Study statuses a release is made from without ``--partial``."""


@main.command()
@click.argument("study_file", type=FILE)
@click.option("--out", type=FOLDER, required=True, help="The release folder.")
@click.option("--partial", is_flag=True, help="Release a study that is still running (the card says so).")
@click.option(
    "--review",
    type=FILE,
    default=None,
    help="Write the personal-data spans found to this CSV and stop: mark a span keep to leave it, add rows "
    "for what was missed, then pass the file back with --spans.",
)
@click.option(
    "--spans",
    "spans_file",
    type=EXISTING_FILE,
    default=None,
    help="A reviewed spans CSV (from --review): replace exactly its spans marked replace.",
)
@click.option(
    "--drop-field",
    "drop_fields",
    multiple=True,
    metavar="TABLE.COLUMN",
    help="Leave a whole field out (repeatable), e.g. feedback.feedback or conversations.text.",
)
@click.option(
    "--exclude-worker",
    "exclude_workers",
    multiple=True,
    metavar="WORKER_ID",
    help="Leave out every answer of this worker, e.g. one who withdrew consent (repeatable; the platform's id).",
)
@click.option(
    "--times",
    type=click.Choice(["shift", "day", "drop"]),
    default="shift",
    show_default=True,
    help="shift: move all times so the study starts on 2000-01-01 (durations exact); day: real dates rounded "
    "to the day; drop: no times.",
)
@click.option(
    "--stable-ids",
    is_flag=True,
    help="Give each worker the same pseudonym in every release of this study (default: new ones each release).",
)
@click.option("--license", "licence", default="cc-by-4.0", show_default=True, help="The data's licence (an SPDX id).")
@click.option(
    "--language", default=None, help="The BCP 47 tag of the workers' language (default: the study's, else en)."
)
@click.option(
    "--push",
    "push_repo",
    default=None,
    metavar="REPO",
    help="Also upload the folder to this data-hub dataset repository (needs huggingface_hub and HF_TOKEN).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: the files and release.json.")
def release(
    study_file: Path,
    out: Path,
    partial: bool,
    review: Path | None,
    spans_file: Path | None,
    drop_fields: tuple[str, ...],
    exclude_workers: tuple[str, ...],
    times: str,
    stable_ids: bool,
    licence: str,
    language: str | None,
    push_repo: str | None,
    as_json: bool,
) -> None:
    """Write a release of the study: one Parquet configuration per table, a dataset card and release.json.

    Worker, assignment and HIT ids become keyed pseudonyms; personal data in what workers typed (chat turns,
    prompts, reasons, feedback) becomes [EMAIL], [PHONE], [NAME], [ADDRESS], [CARD] …; payments, authenticity
    signals, excluded work and withdrawn workers are left out. docs/howto/release.md explains each step.
    """
    from hitkit.db.session import session_scope
    from hitkit.release.build import ReleaseOptions
    from hitkit.release.make import make_release
    from hitkit.release.pseudonyms import STABLE_SALT
    from hitkit.report.analyze import run_analysis
    from hitkit.study.loading import load_study
    from hitkit.study.served import require_launched
    from hitkit.study.stored import StudyContext, resolve_secret
    from hitkit.tables.export import export_study

    config = load_study(study_file)
    require_launched(config, study_file)
    secret = resolve_secret(config.database_url)
    with tempfile.TemporaryDirectory(prefix="hitkit-release-") as tmp:
        export_dir, analysis_dir = Path(tmp) / "export", Path(tmp) / "analysis"
        with session_scope(config.database_url) as session:
            ctx = StudyContext.load(session, config.study, secret)
            from hitkit.db.models import Study

            status = session.get_one(Study, ctx.study_id).status
            if status not in FINISHED and not partial:
                raise HitkitError(
                    f"study '{config.study}' is {status}; a release is made from a finished study "
                    "(stop it with `hitkit stop`, or pass --partial to release what is in)"
                )
            export_study(session, ctx, export_dir, "parquet")
        run_analysis(config.task, export_dir, seed=config.seed, config=config).write(analysis_dir)
        options = ReleaseOptions(
            key=secret.encode(),
            salt=STABLE_SALT if stable_ids else secrets.token_hex(16),
            stable_ids=stable_ids,
            times=times,
            drop_fields=drop_fields,
            exclude_workers=frozenset(exclude_workers),
            licence=licence,
            language=language or getattr(config, "ui_language", None) or "en",
            partial=f"released while the study was {status}" if status not in FINISHED else None,
        )
        made = make_release(export_dir, analysis_dir, out, options, review=review, spans_file=spans_file)
    if review is not None:
        click.echo(
            f"wrote {review}: {made.review_rows} span(s) of personal data to check; mark a span keep to leave it, "
            f"add rows for anything missed, then run again with --spans {review}"
        )
        return
    if push_repo is not None:
        _push(out, push_repo)
    if as_json:
        click.echo(json.dumps({"files": [str(p) for p in made.files], "release": made.manifest}, indent=2))
        return
    for path in made.files:
        click.echo(f"wrote {path}")
    replaced = made.manifest["personal_data"]["replaced"]
    click.echo(
        f"released {made.manifest['configs']} to {out}; personal data replaced: "
        + (", ".join(f"{n} {k.lower()}" for k, n in replaced.items()) or "none found")
    )


def _push(folder: Path, repo: str) -> None:
    """Upload the release folder to a data-hub dataset repository (credentials from the environment)."""
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.utils import get_token
    except ImportError:
        raise HitkitError("--push needs huggingface_hub: pip install 'hitkit[release]'") from None
    if not get_token():
        raise HitkitError("--push needs data-hub credentials: set HF_TOKEN or run `huggingface-cli login`")
    api = HfApi()
    api.create_repo(repo, repo_type="dataset", exist_ok=True, private=True)
    api.upload_folder(repo_id=repo, folder_path=str(folder), repo_type="dataset")
    click.echo(f"pushed {folder} to the private dataset {repo}")
