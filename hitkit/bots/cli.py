"""``hitkit bots`` commands. Importing this module is cheap: models load only when served."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import click

from hitkit.bots.backends import ENGINES, build_backends, parse_degraded_spec, parse_model_spec
from hitkit.bots.server import BotServer

T = TypeVar("T")


def _specs(parse: Callable[[str], T], values: tuple[str, ...], param: str) -> list[T]:
    try:
        return [parse(v) for v in values]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=param) from None


@click.group("bots")
def bots() -> None:
    """Serve chat bots over an OpenAI-compatible API."""


@bots.command("serve")
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="NAME=PATH[:GGUF_FILE]",
    help="A Hugging Face model directory, or a GGUF file (DIR:FILE.gguf or DIR/FILE.gguf), served as NAME. Repeatable.",
)
@click.option(
    "--degraded",
    "degraded",
    multiple=True,
    metavar="NAME[=CORPUS.jsonl]",
    help="The degraded quality-control bot served as NAME, over a JSONL corpus of "
    "dialogues (default: chatterbot-corpus English). Repeatable.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", default=8000, show_default=True, type=int, help="Port (0: any free port).")
@click.option(
    "--max-batch",
    default=32,
    show_default=True,
    type=click.IntRange(min=1),
    help="Most chats one model decodes together.",
)
@click.option(
    "--batch-window-ms",
    default=5.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="How long an idle model waits for more chats before starting a batch.",
)
@click.option(
    "--device",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "cpu", "cuda"]),
    help="auto: CUDA when present, else CPU.",
)
@click.option(
    "--engine",
    default="auto",
    show_default=True,
    type=click.Choice(ENGINES),
    help="auto: llama.cpp for .gguf files (falls back to transformers if it cannot load), "
    "transformers for model folders.",
)
@click.option(
    "--threads",
    default=None,
    type=click.IntRange(min=1),
    help="CPU threads of the llama.cpp engine (default: all cores).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of sampling and of the QC bot's draws.")
@click.option("-v", "--verbose", is_flag=True, help="Log every request.")
def serve(
    models: tuple[str, ...],
    degraded: tuple[str, ...],
    host: str,
    port: int,
    max_batch: int,
    batch_window_ms: float,
    device: str,
    engine: str,
    threads: int | None,
    seed: int,
    verbose: bool,
) -> None:
    """Serve local models and QC bots at /v1/chat/completions until SIGTERM or Ctrl-C."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    model_specs = _specs(parse_model_spec, models, "--model")
    degraded_specs = _specs(parse_degraded_spec, degraded, "--degraded")
    if not model_specs and not degraded_specs:
        raise click.UsageError("nothing to serve: give at least one --model or --degraded")
    try:
        backends = build_backends(
            model_specs,
            degraded_specs,
            device=device,
            max_batch=max_batch,
            batch_window_ms=batch_window_ms,
            seed=seed,
            engine=engine,
            threads=threads,
        )
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    except ImportError as exc:
        raise click.ClickException(f"{exc}; serving models needs the bots extra: pip install 'hitkit[bots]'") from None
    server = BotServer(backends, host=host, port=port)
    click.echo(f"serving {', '.join(sorted(backends))} at {server.url}/v1/chat/completions (Ctrl-C to stop)")
    server.serve_until_signal()
    click.echo("bot server stopped")
