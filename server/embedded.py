"""The embedded web server (waitress) of ``hitkit serve`` and ``hitkit launch``, set up to survive
slow and idle clients (slowloris) on its own, without a proxy in front.

Why waitress copes at all: it reads every request completely in its single I/O thread before a
worker thread sees it, so a slow or idle client costs a socket, never a thread. What can still run
out is connections, so each setting below is chosen deliberately (docs/THREAT_MODEL.md):

- ``connection_limit`` 1000 with ``asyncore_use_poll`` (``select()`` cannot watch descriptors above
  1023) and the open-files limit raised to fit: a crowd of a few hundred fits with room to spare.
- :data:`PER_ADDRESS_CONNECTIONS`: one client address holds at most this many connections; a new
  one from an address at its cap closes that address's longest-idle connection (one that has never
  carried a request first). One client with thousands of sockets thus only competes with itself.
- ``channel_timeout`` 30 s and ``cleanup_interval`` 5 s: an idle connection (or one stuck half-way
  through its request headers) is closed 30-35 s after its last byte; a worker's page makes a
  request every few seconds, and a browser reopens a closed keep-alive connection unnoticed.
  Requests being answered (a chat turn waiting for its bot) are never cut.
- Request size: headers at most 64 KiB, bodies at most :data:`server.MAX_BODY_BYTES` (refused by
  waitress before they are buffered).
- Proxy headers are left for the app to judge (``HITKIT_PROXY_HOPS``, see :func:`server.create_app`)
  rather than cleared by waitress, so that behind nginx the rate limits see the real client.
"""
from __future__ import annotations

import resource
import threading

from waitress import create_server
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer

from server import MAX_BODY_BYTES, create_app, proxy_hops

CONNECTION_LIMIT = 1000
"""Connections the embedded server holds open at once (idle ones included)."""
PER_ADDRESS_CONNECTIONS = 100
"""Connections one client address may hold; a lab behind one NAT needs one or two per browser."""
CHANNEL_TIMEOUT_S = 30
"""An idle connection is closed this long after its last byte (plus up to CLEANUP_INTERVAL_S)."""
CLEANUP_INTERVAL_S = 5


class _FairChannel(HTTPChannel):
    """A waitress connection that makes room for itself among its own address's connections."""

    per_address = PER_ADDRESS_CONNECTIONS
    served = False

    def __init__(self, server, sock, addr, adj, map=None):
        super().__init__(server, sock, addr, adj, map)
        host = _host(addr)
        mine = [c for c in list(server.active_channels.values()) if c is not self and _host(c.addr) == host]
        excess = len(mine) + 1 - self.per_address
        if excess > 0:
            # Never a connection with a request in progress; first those that never carried one.
            idle = sorted((c for c in mine if not c.requests), key=lambda c: (c.served, c.last_activity))
            for channel in idle[:excess]:
                channel.will_close = True  # closed by the I/O loop on its next pass, as waitress's own cleanup does

    def service(self):
        self.served = True
        return super().service()


def _host(addr) -> str:
    return addr[0] if isinstance(addr, tuple) and addr else str(addr)


def _raise_open_files(needed: int) -> None:
    """Lift the soft open-files limit towards ``needed`` (each connection is one descriptor)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def waitress_options(threads: int) -> dict:
    """The waitress settings hitkit serves with (see the module's docstring for each one's reason)."""
    return {
        "threads": threads,
        "connection_limit": CONNECTION_LIMIT,
        "channel_timeout": CHANNEL_TIMEOUT_S,
        "cleanup_interval": CLEANUP_INTERVAL_S,
        "asyncore_use_poll": True,
        "backlog": 2048,
        "max_request_header_size": 64 * 1024,
        "max_request_body_size": MAX_BODY_BYTES,
        "clear_untrusted_proxy_headers": proxy_hops() == 0,
        "ident": "hitkit",
    }


def make_server(app, host: str, port: int, threads: int, per_address: int = PER_ADDRESS_CONNECTIONS):
    """A waitress server for ``app`` on ``host:port``, not yet running (call ``.run()``)."""
    _raise_open_files(CONNECTION_LIMIT + 256)  # + the database pool, log files, bot clients
    server = create_server(app, host=host, port=port, **waitress_options(threads))
    channel = type("FairChannel", (_FairChannel,), {"per_address": per_address})
    servers = [server] if isinstance(server, BaseWSGIServer) else \
        [s for s in server.map.values() if isinstance(s, BaseWSGIServer)]
    for each in servers:
        each.channel_class = channel
    return server


class WebServer:
    """hitkit's worker pages on a waitress server in a background thread (the embedded default)."""

    def __init__(self, database_url: str, host: str, port: int, threads: int, secret: str):
        self._server = make_server(create_app(database_url, secret), host, port, threads)
        self.url = f"http://{host}:{self._server.effective_port}"
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="hitkit-web", daemon=True)

    def _serve(self) -> None:
        try:
            self._server.run()
        except OSError:
            # Closing the listening socket from stop() wakes the select loop on a dead descriptor.
            if not self._stopping.is_set():
                raise

    def start(self) -> "WebServer":
        self._thread.start()
        return self

    @classmethod
    def serve(cls, database_url: str, host: str, port: int, threads: int, secret: str) -> "WebServer":
        """Started worker pages: the :data:`hitkit.running.launch.WebFactory` the CLI hands to ``launch``."""
        return cls(database_url, host, port, threads, secret).start()

    def stop(self) -> None:
        self._stopping.set()
        self._server.close()
        self._thread.join(5)
