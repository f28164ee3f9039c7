"""A reverse proxy for tests that forwards the way ops/nginx/hitkit.conf does (no nginx needed).

Per request it sets what the recipe's ``location /`` sets: ``Host`` passed on,
``X-Forwarded-For: $proxy_add_x_forwarded_for`` (the client's header, if any, then the address the
proxy saw) and ``X-Forwarded-Proto: https``. It reads each request whole before passing it on, as
nginx does with ``proxy_request_buffering on``, and never follows redirects.
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


class ForwardingProxy:
    """``with ForwardingProxy(upstream_port) as proxy: proxy.port`` serves on loopback."""

    def __init__(self, upstream_port: int):
        upstream = upstream_port

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in HOP_BY_HOP and k.lower() not in ("x-forwarded-for", "x-forwarded-proto")
                }
                seen = self.headers.get("X-Forwarded-For")
                headers["X-Forwarded-For"] = f"{seen}, {self.client_address[0]}" if seen else self.client_address[0]
                headers["X-Forwarded-Proto"] = "https"
                conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                    self.send_response(response.status)
                    for key, value in response.getheaders():
                        if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_POST = _forward

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )  # shutdown() waits for the next look

    def __enter__(self) -> ForwardingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


class Client:
    """An HTTP client that connects from one loopback address (127.0.0.x) and keeps its cookies."""

    def __init__(self, port: int, source_ip: str):
        self.port, self.source_ip, self.cookies = port, source_ip, {}

    def request(
        self, method: str, path: str, form: dict | None = None, headers: dict | None = None
    ) -> tuple[int, dict[str, str], str]:
        from urllib.parse import urlencode

        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30, source_address=(self.source_ip, 0))
        try:
            sent = dict(headers or {})
            if self.cookies:
                sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
            body = None
            if form is not None:
                body = urlencode(form)
                sent["Content-Type"] = "application/x-www-form-urlencoded"
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
            for key, value in response.getheaders():
                if key.lower() == "set-cookie":
                    name, _, rest = value.partition("=")
                    self.cookies[name] = rest.split(";", 1)[0]
            return response.status, {k.lower(): v for k, v in response.getheaders()}, text
        finally:
            conn.close()
