"""The study's own bots during a command: whether a launch needs them, the material check before
minutes of generation, and serving them (``bots.serve``) for the duration of a block."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

from hitkit.protocols import PROTOCOLS
from hitkit.study.config import StudyConfig


def free_port(host: str) -> int:
    """A port nothing listens on now (the OS's choice for a socket bound to port 0)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def with_bot_server(config: StudyConfig, port: int | None = None) -> StudyConfig:
    """The study as this launch serves its bots: ``bots.serve.port`` from ``port`` (``--bot-port``) or the study
    file, 0 meaning a free port chosen now; every system without a ``url`` (and one that named the served port
    the file gave, when ``--bot-port`` moves it) talks to that server. A study without ``bots.serve`` is as it is."""
    serve = config.bots.serve if config.bots is not None else None
    if serve is None:
        if port is not None:
            from hitkit.errors import ConfigError

            raise ConfigError("--bot-port: this study serves no bots of its own (it has no bots.serve section)")
        return config
    chosen = port if port is not None else serve.port
    chosen = chosen or free_port(serve.host)
    before, after = f"http://{serve.host}:{serve.port}", f"http://{serve.host}:{chosen}"
    systems = [
        s.model_copy(update={"url": after})
        if s.url is None or (s.url.rstrip("/") == before and port is not None)
        else s
        for s in config.systems
    ]
    bots = config.bots.model_copy(update={"serve": serve.model_copy(update={"port": chosen})})  # type: ignore[union-attr]
    return config.model_copy(update={"bots": bots, "systems": systems})


def check_material_before_generating(config: StudyConfig) -> None:
    """Refuse, before minutes of generation, a plan whose generated material the protocol cannot pack
    (ConfigError with every fix; :meth:`~hitkit.protocols.base.TaskType.check_generation_plan`)."""
    if config.generation is None or not PROTOCOLS[config.task].uses_generation:
        return
    from hitkit.material.generation import planned_pairs
    from hitkit.protocols import task_for

    task_for(config).check_generation_plan(*planned_pairs(config))


def needs_bot_server(config: StudyConfig) -> bool:
    """Whether a launch uses the study's bots: live chat talks to them, a judge may be one, other tasks only
    generate with them.

    A resumed study whose bot–bot conversations are all written starts no bot server (and loads no model).
    """
    if PROTOCOLS[config.task].has_chat or config.judge is not None:
        return True  # a judge may be one of the study's own bots (its labels are asked for before posting)
    if config.generation is None:
        return False
    from hitkit.material.generation import pending

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
