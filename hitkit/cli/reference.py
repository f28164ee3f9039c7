"""References generated from the code: the CLI's (walking the click group) and ``hitkit schema``.

The docs site's "Command line" page is :func:`cli_reference_markdown`, built from the same click
objects that parse the command line, so every command, argument and option is there with its help.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import click

from hitkit.cli.app import FILE, main


def commands(group: click.Group = main, prefix: str = "hitkit") -> list[tuple[str, click.Command]]:
    """Every command under ``group`` with its full name (``hitkit bots serve``), groups before their commands."""
    found: list[tuple[str, click.Command]] = []
    for name in sorted(group.commands):
        command = group.commands[name]
        if command.hidden:
            continue
        found.append((f"{prefix} {name}", command))
        if isinstance(command, click.Group):
            found += commands(command, f"{prefix} {name}")
    return found


def _param_row(param: click.Parameter) -> str:
    if isinstance(param, click.Option):
        names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
        kind = "flag" if param.is_flag else param.type.name
        if isinstance(param.type, click.Choice):
            kind = " \\| ".join(f"`{c}`" for c in param.type.choices)
        default = param.to_info_dict().get("default")
        default = "" if default in (None, False, (), []) or callable(default) or param.is_flag else f"`{default}`"
        extra = [w for w, on in (("required", param.required), ("repeatable", param.multiple)) if on]
        if param.envvar:
            extra.append(f"env `{param.envvar}`")
        help_text = (param.help or "").replace("|", "\\|").replace("\n", " ")
        return f"| {names} | {kind} | {default} | {help_text}{' (' + ', '.join(extra) + ')' if extra else ''} |"
    return f"| `{param.human_readable_name}` | argument ({param.type.name}) | | {'required' if param.required else 'optional'} |"


def cli_reference_markdown() -> str:
    """The "Command line" reference page: usage, help, arguments and options of every command."""
    lines = [
        "# Command line reference",
        "",
        (
            "Generated from hitkit's click commands when the site is built; `hitkit COMMAND --help` "
            "prints the same. The [commands guide](../guide/commands.md) says what each one is for."
        ),
        "",
    ]
    for full_name, command in [("hitkit", main), *commands()]:
        ctx = click.Context(command, info_name=full_name)
        lines += [f"## `{full_name}`", ""]
        help_text = inspect.cleandoc((command.help or "").split("\f")[0])
        if help_text:
            lines += [click.unstyle(help_text), ""]
        pieces = " ".join(command.collect_usage_pieces(ctx))
        lines += ["```text", f"{full_name} {pieces}".rstrip(), "```", ""]
        params = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
        if params:
            lines += ["| parameter | type | default | meaning |", "|---|---|---|---|"]
            lines += [_param_row(p) for p in params]
            lines.append("")
        if isinstance(command, click.Group):
            subs = ", ".join(f"`{n}`" for n in sorted(command.commands))
            lines += [f"Commands: {subs}.", ""]
    return "\n".join(lines)


@main.command()
@click.option("--out", "out", type=FILE, default=None, help="Write the schema to this file (default: print it).")
def schema(out: Path | None) -> None:
    """Write the study file's JSON Schema, for an editor's completion and checking of study.yaml."""
    from hitkit.cli.study_reference import study_schema

    text = json.dumps(study_schema(), indent=2, sort_keys=True) + "\n"
    if out is None:
        sys.stdout.write(text)
        return
    out.write_text(text, encoding="utf-8")
    click.echo(f"wrote {out}; point your editor's YAML extension at it (see the docs: Editor support)")
