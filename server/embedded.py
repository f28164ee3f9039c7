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
- Overall: above :data:`SHED_ABOVE` connections (below ``connection_limit``, so the server never
  stops accepting), each new connection closes the idle ones that matter least — those that never
  carried a request first, from the address holding the most connections, longest-idle first
  (:func:`shed`). 1,200 slow connections from 20 addresses (60 each, under the per-address cap)
  thus cost each other, not the crowd's new connections.
- :data:`REQUEST_TIMEOUT_S`: a request's headers and body must arrive whole within this long of its
  first byte, else the connection is closed — a client trickling a byte every few seconds keeps
  its connection "active" for ``channel_timeout`` forever, but not past this.
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

import functools
import resource
import threading
import time
from collections import Counter
from dataclasses import dataclass

from waitress import create_server, wasyncore
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
SHED_ABOVE = 900
"""Connections held before each new one closes an idle one (below CONNECTION_LIMIT: always accepting)."""
REQUEST_TIMEOUT_S = 15
"""Longest a request's headers and body may take to arrive, from its first byte (64 KiB at 10 KB/s: 7 s)."""


@dataclass(frozen=True)
class Held:
    """What :func:`shed` needs to know of one open connection."""

    key: int
    host: str
    busy: bool
    """A request of it is being answered (never closed for room)."""
    served: bool
    """It has carried a request before (a worker's keep-alive connection)."""
    last_activity: float


def shed(held: list[Held], room_for: int) -> list[int]:
    """The keys of the connections to close so that at most ``room_for`` stay open.

    Never a busy one. First those that never carried a request, then the others; within each,
    connections of the address holding the most go first, longest-idle first. Pure policy.
    """
    excess = len(held) - room_for
    if excess <= 0:
        return []
    per_host = Counter(h.host for h in held)
    idle = sorted((h for h in held if not h.busy), key=lambda h: (h.served, -per_host[h.host], h.last_activity))
    return [h.key for h in idle[:excess]]


class _FairChannel(HTTPChannel):
    """A waitress connection that makes room for itself among its own address's connections."""

    per_address = PER_ADDRESS_CONNECTIONS
    overall = SHED_ABOVE
    served = False
    request_started: float | None = None

    def __init__(self, server, sock, addr, adj, map=None):
        super().__init__(server, sock, addr, adj, map)
        host = _host(addr)
        others = [c for c in list(server.active_channels.values()) if c is not self and not c.will_close]
        mine = [c for c in others if _host(c.addr) == host]
        # Closed by the I/O loop on its next pass, as waitress's own cleanup does.
        for channel in _pick(mine, self.per_address - 1) + _pick(others, self.overall - 1):
            channel.will_close = True

    def received(self, data):
        if data and self.request is None and self.request_started is None:
            self.request_started = time.monotonic()  # the first byte of a request
        try:
            return super().received(data)
        finally:
            if self.request is None:  # no request half-received: complete, or none begun
                self.request_started = None

    def service(self):
        self.served = True
        return super().service()


def _pick(channels: list, room_for: int) -> list:
    """The channels :func:`shed` closes so that ``room_for`` of ``channels`` stay open."""
    if len(channels) <= room_for:
        return []
    by_key = {id(c): c for c in channels}
    held = [Held(id(c), _host(c.addr), bool(c.requests), c.served, c.last_activity) for c in channels]
    return [by_key[k] for k in shed(held, room_for)]


ACCEPT_BURST = 64
"""Connections taken from the listening backlog per readiness (waitress takes one per loop pass)."""


def _accept_burst(server) -> None:
    """Take up to :data:`ACCEPT_BURST` waiting connections at once. One per loop pass, as waitress
    does, drains a flood of 1,200 slow connections only after seconds (each pass polls every
    socket), while a worker's new connection waits its turn in the backlog behind them."""
    for _ in range(ACCEPT_BURST):
        if len(server._map) >= server.adj.connection_limit:
            return
        try:
            pair = server.accept()
            if pair is None:  # nothing more waiting
                return
            conn, addr = pair
            server.set_socket_options(conn)
        except OSError:  # a connection gone before it was taken (see waitress's handle_accept)
            return
        server.channel_class(server, conn, server.fix_addr(addr), server.adj, map=server._map)


def _maintenance(server, now: float, request_timeout_s: float) -> None:
    """waitress's cleanup (idle connections), plus: a request that has not arrived whole within
    ``request_timeout_s`` of its first byte closes its connection (slow headers or body)."""
    BaseWSGIServer.maintenance(server, now)
    cutoff = time.monotonic() - request_timeout_s
    for channel in list(server.active_channels.values()):
        started = getattr(channel, "request_started", None)
        if not channel.requests and started is not None and started < cutoff:
            channel.will_close = True


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


def make_server(
    app,
    host: str,
    port: int,
    threads: int,
    per_address: int = PER_ADDRESS_CONNECTIONS,
    overall: int = SHED_ABOVE,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    cleanup_interval_s: float = CLEANUP_INTERVAL_S,
):
    """A waitress server for ``app`` on ``host:port``, not yet running (call ``.run()``). The
    keyword arguments exist for tests (smaller caps and timeouts); hitkit serves with the defaults."""
    _raise_open_files(CONNECTION_LIMIT + 256)  # + the database pool, log files, bot clients
    server = create_server(app, host=host, port=port, **waitress_options(threads))
    channel = type("FairChannel", (_FairChannel,), {"per_address": per_address, "overall": overall})
    servers = (
        [server]
        if isinstance(server, BaseWSGIServer)
        else [s for s in server.map.values() if isinstance(s, BaseWSGIServer)]
    )
    for each in servers:
        each.channel_class = channel
        each.adj.cleanup_interval = cleanup_interval_s
        each.maintenance = functools.partial(_maintenance, each, request_timeout_s=request_timeout_s)
        each.handle_accept = functools.partial(_accept_burst, each)
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
        """Stop serving. The serving thread, woken at once through waitress's trigger, closes the listening
        socket and every connection with nothing in progress (kept-alive ones included), and its loop ends;
        closed from here, the loop would notice only at its next 1 s poll timeout, or for a client's
        kept-alive connection when that times out."""
        self._stopping.set()
        trigger = self._server.trigger
        if not trigger._closed:  # closed already when the serving loop has ended (CI saw it once, under load)
            try:
                trigger.pull_trigger(self._close_idle)
            except OSError:  # closed by the serving thread between the check and the pull: its loop is ending
                pass
        self._thread.join(5)
        self._server.close()  # the trigger too, where a request was in progress (or the thread never ran)

    def _close_idle(self) -> None:
        wasyncore.dispatcher.close(self._server)  # the listening socket (BaseWSGIServer.close would take the trigger)
        busy = False
        for channel in list(self._server._map.values()):
            if isinstance(channel, HTTPChannel):
                if channel.requests or channel.total_outbufs_len:
                    busy = True  # its response is still being made or sent: left to finish
                else:
                    channel.handle_close()
        if not busy:
            self._server.trigger.close()  # nothing left in the loop's map: it ends
