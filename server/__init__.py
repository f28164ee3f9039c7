"""hitkit's web application: worker pages and the JSON API they use. No business logic lives here:
routes read the request, call :mod:`hitkit.worker.flow`, and render or serialise what it returns; the
security policy applied to every request is :mod:`hitkit.worker.security` (see docs/THREAT_MODEL.md)."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from flask import Flask, g, jsonify, make_response, render_template, request
from werkzeug.exceptions import HTTPException
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.routing import IntegerConverter

import hit_templates
from hitkit import timing
from hitkit.errors import ConfigError
from hitkit.i18n import N_
from hitkit.secret import check_secret
from hitkit.study.stored import resolve_secret
from hitkit.worker import bounds, security, tokens, validation

MAX_BODY_BYTES = 64 * 1024
"""Largest request body a worker page may send (an answer, a chat turn, a submission)."""


class BoundedIntConverter(IntegerConverter):
    """``<int:…>`` in every route: 0..2^31-1 written with at most 10 ASCII digits, else the route does
    not match (404). A larger id is no row on any backend, and reaching the database with one made
    PostgreSQL (integer) and SQLite (64-bit) fail with a 500; a 5000-digit one failed in ``int()``."""

    regex = r"[0-9]{1,10}"  # ASCII only: \d would also match other scripts' digits

    def __init__(self, map, **kwargs):
        kwargs.setdefault("max", validation.MAX_DB_ID)
        super().__init__(map, **kwargs)


class _App(Flask):
    def log_exception(self, exc_info) -> None:
        # Flask's own message names request.path, which holds the worker's token.
        self.logger.error("Exception on %s [%s]", security.redact_path(request.path), request.method, exc_info=exc_info)


def create_app(database_url: str, secret: str | None = None) -> Flask:
    """The Flask app serving every study in the database at ``database_url``.

    Reads HITKIT_FRAME_ANCESTORS, HITKIT_RATE_LIMIT (per worker token), HITKIT_ENTRY_RATE_LIMIT
    (per client address) and HITKIT_PROXY_HOPS (reverse proxies to trust for the client's address)
    from the environment; see :mod:`hitkit.worker.security` and docs/THREAT_MODEL.md.
    """
    templates = Path(hit_templates.__file__).parent
    app = _App(
        __name__, template_folder=str(templates), static_folder=str(templates / "static"), static_url_path="/static"
    )
    app.url_map.converters["int"] = BoundedIntConverter  # before any route is registered
    app.config.update(
        HITKIT_DATABASE_URL=database_url,
        HITKIT_SECRET=check_secret(secret) if secret is not None else resolve_secret(database_url),
        MAX_CONTENT_LENGTH=MAX_BODY_BYTES,
    )
    from server import i18n
    from server.chat import bp as chat_bp
    from server.dashboard import bp as dashboard_bp
    from server.webhooks import bp as webhooks_bp
    from server.worker import bp as worker_bp

    i18n.install(app)
    app.register_blueprint(worker_bp)
    app.register_blueprint(webhooks_bp)
    app.register_blueprint(chat_bp)
    app.register_blueprint(dashboard_bp)
    app.add_url_rule("/", "index", lambda: render_template("index.html"))  # what this server is
    _guard(app)
    hops = proxy_hops()
    if hops:
        # Behind nginx every request comes from nginx: trust its X-Forwarded-For for the client's
        # address (the per-address rate limit), and only as many hops as there are proxies.
        # Flask's documented way to wrap the app in WSGI middleware; its stubs declare wsgi_app a method.
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops)  # type: ignore[method-assign]
    return app


def proxy_hops() -> int:
    """HITKIT_PROXY_HOPS: how many reverse proxies stand in front (ops/nginx: 1), 0 when unset."""
    hops = os.environ.get("HITKIT_PROXY_HOPS", "0").strip() or "0"
    if not (hops.isascii() and hops.isdigit()) or int(hops) > 5:
        raise ConfigError(
            f"HITKIT_PROXY_HOPS is {hops!r}; give the number of reverse proxies in front, "
            "e.g. 1 behind ops/nginx/hitkit.conf, 0 without a proxy"
        )
    return int(hops)


def _guard(app: Flask) -> None:
    """Rate limits and the CSRF rule before every request; security headers on every response."""
    secret = app.config["HITKIT_SECRET"]
    headers = security.security_headers(security.frame_ancestors(os.environ.get("HITKIT_FRAME_ANCESTORS")))
    dashboard_headers = security.security_headers(("'none'",))  # coordinator pages are never framed
    per_token = security.TokenBuckets(
        security.RateLimit.parse(os.environ.get("HITKIT_RATE_LIMIT"), security.TOKEN_LIMIT, "HITKIT_RATE_LIMIT")
    )
    per_address = security.TokenBuckets(
        security.RateLimit.parse(
            os.environ.get("HITKIT_ENTRY_RATE_LIMIT"), security.ENTRY_LIMIT, "HITKIT_ENTRY_RATE_LIMIT"
        )
    )
    app.jinja_env.globals["csrf_value"] = lambda token: security.csrf_value(secret, token)
    app.jinja_env.globals["CSRF_FIELD"] = security.CSRF_FIELD

    @app.before_request
    def _limit_and_check():
        if timing.enabled():
            g.timing_began = time.perf_counter()
            timing.start()
        why = _unreadable()
        if why:
            return _refusal(why, 400)
        token = (request.view_args or {}).get("token")
        genuine = tokens.read_assignment_token(secret, token) if token is not None else None
        if genuine is not None:
            # Keyed by what the token means, not how it is spelt (decoding is canonical anyway).
            wait = per_token.take("t:%d:%s" % genuine)
        elif token is not None or request.path.startswith("/s/"):
            wait = per_address.take("a:" + (request.remote_addr or ""))  # arrivals and forged tokens
        else:
            wait = 0.0
        if wait:
            return _refusal(
                N_("too many requests; please wait a moment and try again"), 429, {"Retry-After": str(math.ceil(wait))}
            )
        # The dashboard checks its own CSRF field, bound to the coordinator's session (server/dashboard_login.py);
        # a webhook is a platform's server-to-server call, checked by its signature (server/webhooks.py).
        if (
            request.method == "POST"
            and request.url_rule is not None
            and request.blueprint not in ("dashboard", "webhooks")
        ):
            form_value = (
                request.form.get(security.CSRF_FIELD) if request.mimetype in security.FORM_CONTENT_TYPES else None
            )
            why = security.csrf_refusal(
                secret,
                token,
                request.content_type,
                request.headers.get("Origin"),
                request.headers.get("Sec-Fetch-Site"),
                form_value,
            )
            if why:
                return _refusal(why, 403)
        return None

    @app.after_request
    def _headers(response):
        response.headers.update(dashboard_headers if request.blueprint == "dashboard" else headers)
        if "timing_began" in g:  # HITKIT_SERVER_TIMING=1 (benchmarks/load.py): where the request's time went
            value = timing.header((time.perf_counter() - g.timing_began) * 1000)
            if value:
                response.headers["Server-Timing"] = value
        return response


def _unreadable() -> str | None:
    """Why this request cannot be taken before any route parses it: a path or query string that is
    not UTF-8 or holds a NUL, a body that cannot be read (a malformed chunked body: the server's
    reader raises), or a JSON body nested deeper than :data:`hitkit.worker.bounds.MAX_JSON_DEPTH`
    (Python's parser would recurse until RecursionError). None when it may go on."""
    try:
        path = request.environ.get("PATH_INFO", "").encode("latin-1")
    except UnicodeEncodeError:
        return "the path of this request is not valid; check the link"
    why = bounds.text_refusal(path, request.environ.get("QUERY_STRING", "").encode("latin-1", "replace"))
    if why or request.method not in ("POST", "PUT", "PATCH", "DELETE"):
        return why
    try:
        raw = request.get_data(cache=True)  # at most MAX_BODY_BYTES (413 beyond), kept for the route
    except HTTPException:
        raise  # 413 for a body over the limit, 400 for a client gone mid-body: werkzeug's own answers
    except Exception:  # noqa: BLE001 - the server's reader failed on the client's bytes (gunicorn's
        # InvalidChunkSize, ChunkMissingTerminator, NoMoreData...): the body is unreadable, not a server fault
        return "the request body could not be read; send it again"
    return bounds.json_refusal(raw) if request.is_json else None


def _refusal(message: str, status: int, extra: dict[str, str] | None = None):
    from server.i18n import words
    from server.worker import JSON_ENDPOINTS, use_known_study

    use_known_study()  # a refusal before the route: in the study's language when this process knows it
    message = words().text(message)
    if request.is_json or request.accept_mimetypes.best == "application/json" or request.endpoint in JSON_ENDPOINTS:
        response = jsonify(error=message)
    else:
        response = make_response(render_template("error.html", message=message, study=None))
    response.status_code = status
    response.headers.update(extra or {})
    return response
