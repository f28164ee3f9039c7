"""hitkit's OpenAI-compatible bot server: several chat models behind one threaded HTTP server.

Routes: ``POST /v1/chat/completions`` (whole, or streamed as server-sent events with ``stream: true``:
see :mod:`hitkit.bots.streaming`), ``GET /v1/models``, ``GET /health`` (status
plus the health counters), ``GET /v1/hitkit/stats`` (health counters and per-model engine counters)
and ``GET /metrics`` (per-model engine counters). Each hosted model is a
:class:`~hitkit.bots.base.Backend`; local models batch concurrent chats on their own worker thread
(llama.cpp for GGUF files by default, :mod:`hitkit.bots.llamacpp`; or transformers,
:mod:`hitkit.bots.engine`), so the HTTP layer is a plain thread per connection (stdlib
``ThreadingHTTPServer``) that parses, waits and answers.

While it waits, the handler watches its client: a client that disconnected or whose deadline
(``X-Hitkit-Deadline-S``) passed no longer gets a generation, which is cancelled at the engine's
next step; a retry carrying the same ``Idempotency-Key`` re-attaches to the running generation
(:mod:`hitkit.bots.jobs`). Successful replies carry ``X-Hitkit-Tokens-Per-S``, the recent per-chat
decode rate, from which clients size their timeouts. Which models it hosts, on which engine, is
:mod:`hitkit.bots.backends`.
"""

from __future__ import annotations

import json
import logging
import select
import signal
import socket
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hitkit.bots.backends import (  # noqa: F401 - re-exported: who starts a server names its models here
    DegradedSpec,
    ModelSpec,
    build_backends,
    parse_degraded_spec,
    parse_model_spec,
)
from hitkit.bots.base import Backend, BackendClosed, BackendOverloaded, Cancelled
from hitkit.bots.jobs import DEADLINE_HEADER, IDEMPOTENCY_HEADER, JobRegistry, ServerStats
from hitkit.bots.protocol import ProtocolError, completion_body, parse_chat_request
from hitkit.bots.streaming import stream_reply

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 4 * 1024 * 1024
_POLL_S = 0.05  # how often a waiting handler checks its client and deadline


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse one connection per thread
    # One write per reply and no Nagle delay: headers and body written apart, with Nagle on, waited
    # for the client's delayed ACK (20-40 ms on loopback) before the body left. The buffered writer
    # is flushed by the stdlib after each request.
    disable_nagle_algorithm = True
    wbufsize = -1
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(body).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            log.info("client %s left before its reply was sent", self.address_string())

    def _error(self, error: ProtocolError, headers: Mapping[str, str] | None = None) -> None:
        self._send(error.status, error.body(), headers)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        """Serve /health, /v1/models and /metrics."""
        app = self.server.app
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/health":
            ok = not app.closing.is_set()
            self._send(
                200 if ok else 503,
                {"status": "ok" if ok else "shutting down", "models": sorted(app.backends), **app.health()},
            )
        elif path == "/v1/hitkit/stats":
            self._send(200, {**app.health(), "models": {name: b.stats() for name, b in sorted(app.backends.items())}})
        elif path == "/v1/models":
            self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": name, "object": "model", "created": app.started, "owned_by": "hitkit"}
                        for name in sorted(app.backends)
                    ],
                },
            )
        elif path == "/metrics":
            self._send(200, {name: b.stats() for name, b in sorted(app.backends.items())})
        elif path == "/v1/chat/completions":
            self._error(ProtocolError("use POST for /v1/chat/completions", status=405))
        else:
            self._error(
                ProtocolError(
                    f"no route {self.path}; try /v1/chat/completions, /v1/models, /health or /v1/hitkit/stats",
                    status=404,
                )
            )

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        """Serve /v1/chat/completions."""
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            raw = self._read_body()
        except ProtocolError as exc:
            # The unread body would be parsed as the next request on this connection: close it.
            self.close_connection = True
            self._error(exc)
            return
        if path != "/v1/chat/completions":
            self._error(ProtocolError(f"no route POST {self.path}; use /v1/chat/completions", status=404))
            return
        self._chat(raw)

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            raise ProtocolError("a Content-Length header is required", status=411)
        try:
            size = int(length)
        except ValueError:
            raise ProtocolError(f"bad Content-Length {length!r}") from None
        if size < 0 or size > MAX_BODY_BYTES:
            raise ProtocolError(f"request body of {size} bytes exceeds the {MAX_BODY_BYTES}-byte limit", status=413)
        return self.rfile.read(size)

    def _client_gone(self) -> bool:
        """True once the client closed its end of the connection (it gave up on this reply)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _deadline(self, arrived: float) -> float | None:
        value = self.headers.get(DEADLINE_HEADER)
        if value is None:
            return None
        try:
            seconds = float(value)
        except ValueError:
            raise ProtocolError(f"{DEADLINE_HEADER} must be a number of seconds, got {value!r}") from None
        if not seconds > 0:
            raise ProtocolError(f"{DEADLINE_HEADER} must be positive, got {value!r}")
        return arrived + seconds

    def _chat(self, raw: bytes) -> None:
        app = self.server.app
        arrived = time.monotonic()
        app.stats.count("requests")
        try:
            request = parse_chat_request(raw)
            backend = app.backends.get(request.model)
            if backend is None:
                raise ProtocolError(
                    f"model {request.model!r} is not served here; available: "
                    f"{', '.join(sorted(app.backends)) or 'none'}",
                    status=404,
                    param="model",
                    kind="not_found_error",
                )
            if request.logprobs and not backend.gives_logprobs:
                raise ProtocolError(
                    f"logprobs are not available with the {backend.engine_name} backend (model {request.model!r}); "
                    "send logprobs: false",
                    param="logprobs",
                )
            if app.closing.is_set():
                raise BackendClosed("the bot server is shutting down")
            deadline = self._deadline(arrived)
            key = (self.headers.get(IDEMPOTENCY_HEADER) or "").strip()[:200] or None
            job = app.jobs.attach(key, request.model, deadline, lambda: backend.submit(request))
            if request.stream:
                stream_reply(self, job, request, arrived)
                return
            left: str | None = None
            try:
                while not job.ticket.wait(_POLL_S):
                    if job.deadline is not None and time.monotonic() > job.deadline:
                        left = "deadline"
                    elif self._client_gone():
                        left = "disconnected"
                    if left:
                        break
            finally:
                app.jobs.detach(job, left)
            if left == "disconnected":
                self.close_connection = True
                return
            if left == "deadline":
                app.stats.count("timeouts")
                raise ProtocolError(
                    f"no reply within the client's deadline ({DEADLINE_HEADER}); the generation was cancelled",
                    status=504,
                    kind="timeout_error",
                )
            completion = job.ticket.outcome()
        except ProtocolError as exc:
            if exc.status >= 500:
                app.stats.count("failed")
            self._error(exc)
        except BackendOverloaded as exc:
            app.stats.count("failed")
            self._error(ProtocolError(str(exc), status=503, kind="overloaded_error"), {"Retry-After": "1"})
        except (BackendClosed, Cancelled) as exc:
            app.stats.count("failed")
            self._error(ProtocolError(str(exc), status=503, kind="unavailable_error"))
        except Exception as exc:  # noqa: BLE001 - report, never crash the connection thread
            app.stats.count("failed")
            log.exception("chat completion failed")
            self._error(ProtocolError(f"generation failed: {exc}", status=500, kind="server_error"))
        else:
            # From the generation's start, not this attempt's: a retry that joined it waited less.
            latency = time.monotonic() - min(arrived, job.created)
            app.stats.reply(latency, completion.completion_tokens)
            headers = {}
            rate = app.stats.tokens_per_s()
            if rate is not None:
                headers["X-Hitkit-Tokens-Per-S"] = f"{rate:.2f}"
            self._send(200, completion_body(request.model, completion), headers)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default listen backlog is 5: a burst of chats connecting at once overflows it
    # and the kernel makes the extra clients retry their SYN a full second later.
    request_queue_size = socket.SOMAXCONN
    app: BotServer


class BotServer:
    """Hosts named backends over HTTP; start in the background or serve until SIGTERM/SIGINT."""

    def __init__(self, backends: Mapping[str, Backend], host: str = "127.0.0.1", port: int = 8000) -> None:
        """Bind ``host:port`` (port 0 picks a free port) for ``backends`` keyed by model name."""
        if not backends:
            raise ValueError("the bot server needs at least one model (--model or --degraded)")
        self.backends = dict(backends)
        self.stats = ServerStats()
        self.jobs = JobRegistry(self.stats)
        self.closing = threading.Event()
        self.started = int(time.time())
        self._http = _HTTPServer((host, port), _Handler)
        self._http.app = self
        self._thread: threading.Thread | None = None

    def health(self) -> dict[str, Any]:
        """Queue depth, requests in flight and running, cancellations, timeouts, latency, decode rate."""
        queued = running = 0
        for backend in self.backends.values():
            stats = backend.stats()
            queued += int(stats.get("queued", 0))
            running += int(stats.get("running", 0))
        rate = self.stats.tokens_per_s()
        return {
            "queue_depth": queued,
            "running": running,
            **self.stats.snapshot(self.jobs.in_flight()),
            "tokens_per_s": round(rate, 2) if rate is not None else None,
        }

    @property
    def url(self) -> str:
        """Base URL clients use, e.g. ``http://127.0.0.1:8000``."""
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> BotServer:
        """Serve on a background thread and return at once."""
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.1}, name="hitkit-bot-http", daemon=True
        )
        self._thread.start()
        return self

    def shutdown(self) -> None:
        """Refuse new chats, stop accepting connections, stop every backend."""
        self.closing.set()
        if self._thread is not None:
            self._http.shutdown()
            self._thread.join()
            self._thread = None
        for backend in self.backends.values():
            backend.close()
        self._http.server_close()

    def serve_until_signal(self) -> None:
        """Serve in the foreground until SIGTERM or SIGINT, then shut down cleanly."""
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self.start()
            # A timed wait keeps the main thread returning to the interpreter, where signals run.
            while not stop.wait(0.5):
                pass
            log.info("signal received, shutting down")
        finally:
            self.shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def __enter__(self) -> BotServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
