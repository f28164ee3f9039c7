"""The ``hitkit`` command group, its error handling and what its commands share."""

from __future__ import annotations

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
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


FILE = click.Path(dir_okay=False, path_type=Path)
"""A command's file argument or option: a path that is no folder (whether it must exist, the command says)."""
EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
"""A file that must exist."""
FOLDER = click.Path(file_okay=False, path_type=Path)
"""A folder, made where it is missing."""
EXISTING = click.Path(exists=True, path_type=Path)
"""A file or a folder that must exist."""


def duplicates_option(help: str):
    """The ``--duplicates`` option of a command that reads answers (what to do with a repeated row: keep
    the first or the last, drop all copies, or stop), ``help`` saying which rows it means."""
    return click.option(
        "--duplicates",
        type=click.Choice(["first", "last", "drop", "error"]),
        default="first",
        show_default=True,
        help=help,
    )


PLAIN_LINE_EVERY_S = 30.0
"""Seconds between the plain progress lines written where there is no terminal (logs) or with --no-progress."""


def on_terminal() -> bool:
    """Whether progress can be redrawn in place (stderr is a terminal)."""
    return sys.stderr.isatty()


# --- end of branch mturk-panel's commands ------------------------------------------------------


# -- study control: pause, resume, stop, settle (every provider) --------------------------------------


# -- end of study control ------------------------------------------------------------------------------


def _add_bots_group() -> None:
    try:
        from hitkit.bots.cli import bots
    except ImportError:  # the bots layer is optional at import time; its heavy deps are lazy
        return
    main.add_command(bots)


_add_bots_group()


def database_option(f):
    """The ``--db`` option of the commands that work on a database rather than a study file."""

    def as_url(_ctx, _param, value: str | None) -> str | None:
        from hitkit.study.served import database_url_of

        return database_url_of(value) if value else value

    return click.option(
        "--db",
        "database_url",
        envvar="HITKIT_DATABASE_URL",
        required=True,
        callback=as_url,
        help="Database URL (or HITKIT_DATABASE_URL), e.g. postgresql://user@host/db, "
        "or the path of a study's SQLite file, e.g. runs/STUDY/hitkit.db.",
    )(f)
