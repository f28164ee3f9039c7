"""Which models a bot server hosts: ``--model`` and ``--degraded`` specs parsed, the engine chosen for
each model (llama.cpp or transformers) and every backend loaded, ready for :class:`hitkit.bots.server.BotServer`.

The engines are imported only when a model is actually served, so the web tier can import this package
without them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hitkit.bots.base import Backend

log = logging.getLogger(__name__)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ENGINES = ("auto", "llamacpp", "transformers")


@dataclass(frozen=True)
class ModelSpec:
    """A Hugging Face model to serve: a directory, or a GGUF file inside a directory."""

    name: str
    path: Path
    gguf_file: str | None = None


@dataclass(frozen=True)
class DegradedSpec:
    """A degraded QC bot to serve; ``corpus`` None means the chatterbot-corpus default."""

    name: str
    corpus: Path | None = None


def _split_name(text: str, what: str) -> tuple[str, str | None]:
    name, sep, rest = text.partition("=")
    if not _NAME.match(name):
        raise ValueError(
            f"{what} {text!r}: the model name {name!r} must be letters, digits, '.', "
            "'_' or '-' (e.g. smollm=/models/smollm)"
        )
    return name, (rest if sep else None)


def parse_model_spec(text: str) -> ModelSpec:
    """Parse ``NAME=PATH`` or ``NAME=DIR:FILE.gguf`` or ``NAME=DIR/FILE.gguf``."""
    name, rest = _split_name(text, "--model")
    if not rest:
        raise ValueError(f"--model {text!r}: expected NAME=PATH or NAME=DIR:FILE.gguf")
    head, sep, tail = rest.rpartition(":")
    if sep and tail.endswith(".gguf") and head:
        return ModelSpec(name, Path(head), tail)
    path = Path(rest)
    if path.suffix == ".gguf":
        return ModelSpec(name, path.parent, path.name)
    return ModelSpec(name, path)


def parse_degraded_spec(text: str) -> DegradedSpec:
    """Parse ``NAME`` (default corpus) or ``NAME=CORPUS.jsonl``."""
    name, rest = _split_name(text, "--degraded")
    return DegradedSpec(name, Path(rest) if rest else None)


def pick_engine(spec: ModelSpec, engine: str = "auto", device: str = "auto") -> str:
    """The engine that serves ``spec``: ``auto`` is llama.cpp for a GGUF file when it loads, else
    transformers (the reason is logged); a model folder is always served by transformers."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
    if spec.gguf_file is None:
        if engine == "llamacpp":
            raise ValueError(
                f"--model {spec.name}: the llama.cpp engine serves .gguf files, and "
                f"{spec.path} is a folder; use --engine transformers"
            )
        return "transformers"
    if engine != "auto":
        return engine
    if device == "cuda":
        return "transformers"  # the llama.cpp wheel hitkit installs is CPU-only
    from hitkit.bots.llamacpp_lib import LlamaCppUnavailable, load

    try:
        load()
    except LlamaCppUnavailable as exc:
        log.warning("model %s: serving with transformers, because %s", spec.name, exc)
        return "transformers"
    return "llamacpp"


def build_backends(
    models: Sequence[ModelSpec] = (),
    degraded: Sequence[DegradedSpec] = (),
    *,
    device: str = "auto",
    max_batch: int = 32,
    batch_window_ms: float = 5.0,
    seed: int = 0,
    engine: str = "auto",
    threads: int | None = None,
) -> dict[str, Backend]:
    """Load every requested model (on ``engine``, see :func:`pick_engine`) and QC bot; names must be unique."""
    names = [m.name for m in models] + [d.name for d in degraded]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"model names must be unique; repeated: {', '.join(duplicates)}")
    backends: dict[str, Backend] = {}
    if degraded:
        from hitkit.bots.degraded import DegradedBackend, DegradedBot

        for qc in degraded:
            bot = DegradedBot.from_jsonl(qc.corpus, seed) if qc.corpus else DegradedBot(seed=seed)
            backends[qc.name] = DegradedBackend(qc.name, bot)
    for spec in models:
        chosen = pick_engine(spec, engine, device)
        if chosen == "llamacpp":
            from hitkit.bots.llamacpp import LlamaCppBackend

            assert spec.gguf_file is not None
            backends[spec.name] = LlamaCppBackend(
                spec.name,
                spec.path / spec.gguf_file,
                max_batch=max_batch,
                batch_window_ms=batch_window_ms,
                seed=seed,
                threads=threads,
            )
        else:
            from hitkit.bots.engine import HFBackend  # torch/transformers only when a model is served

            backends[spec.name] = HFBackend.load(
                spec.name,
                spec.path,
                spec.gguf_file,
                device,
                max_batch=max_batch,
                batch_window_ms=batch_window_ms,
                seed=seed,
            )
        log.info("model %s: %s engine", spec.name, chosen)
    return backends
