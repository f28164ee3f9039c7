"""The dashboard's blueprint and its door: login, logout, and the session and CSRF checks every page passes.

Off unless HITKIT_DASHBOARD_USER and a password are set (see :func:`server.auth.credentials_from_env`).
Every page needs the signed session cookie (HttpOnly, SameSite=Lax, path /dashboard); every POST
needs the CSRF field bound to that cookie, which the app-wide CSRF rule leaves to this module.
The pages themselves are in :mod:`server.dashboard`, on the same blueprint.
"""

from __future__ import annotations

import math
import os
import secrets

from flask import (
    Blueprint,
    abort,
    current_app,
    g,
    jsonify,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.blueprints import BlueprintSetupState
from flask.typing import ResponseReturnValue
from werkzeug.wrappers import Response

from hitkit.worker import security
from server import auth

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard")
SESSION_COOKIE = "hitkit_dashboard"
LOGIN_COOKIE = "hitkit_dashboard_login"
LOGIN_LIMIT = security.RateLimit(0.2, 5)
"""Login attempts per client address: five at once, then one every five seconds."""
MAX_NEXT_CHARS = 2000


@bp.record_once
def _configure(state: BlueprintSetupState) -> None:
    app = state.app
    app.config["HITKIT_DASHBOARD_CREDENTIALS"] = auth.credentials_from_env(os.environ)
    app.config["HITKIT_DASHBOARD_LOGINS"] = security.TokenBuckets(LOGIN_LIMIT)


def secret() -> str:
    """The secret that signs the dashboard's session, CSRF fields and outcomes."""
    # Several databases under one dashboard (server/multi.py) share one secret for its login.
    return current_app.config.get("HITKIT_DASHBOARD_SECRET") or current_app.config["HITKIT_SECRET"]


def database_url() -> str:
    """The database of the app serving this request."""
    return current_app.config["HITKIT_DATABASE_URL"]


def wants_json() -> bool:
    """Whether the caller asked for JSON (a script, or the pages' own fetches) rather than a page."""
    return request.is_json or request.accept_mimetypes.best == "application/json"


def _login_url() -> str:
    # The database that keeps the coordinator's session generation: the first one when several
    # databases share one dashboard (server/multi.py), so a logout ends the session everywhere.
    return current_app.config.get("HITKIT_DASHBOARD_DATABASE") or database_url()


def _creds() -> auth.Credentials | None:
    return current_app.config["HITKIT_DASHBOARD_CREDENTIALS"]


def _known_creds() -> auth.Credentials:
    """The coordinator's credentials; the gate already answered 404 to every request when there are none."""
    creds = _creds()
    if creds is None:
        abort(404)
    return creds


@bp.before_request
def _gate() -> ResponseReturnValue | None:
    creds = _creds()
    if creds is None:
        return make_response(render_template("dashboard/disabled.html"), 404)
    if request.endpoint in ("dashboard.login", "dashboard.login_post"):
        g.bound_to = request.cookies.get(LOGIN_COOKIE)
    else:
        token = request.cookies.get(SESSION_COOKIE)
        if not token or not auth.session_valid(secret(), creds, token, auth.session_generation(_login_url(), creds)):
            if wants_json() or request.method != "GET":
                return jsonify(error="log in to the dashboard first"), 401
            return redirect(url_for("dashboard.login", next=request.full_path if request.args else request.path))
        g.bound_to = token
    if request.method == "POST":
        given = request.form.get(security.CSRF_FIELD) or request.headers.get("X-CSRF-Token")
        if not auth.csrf_ok(secret(), g.bound_to, given):
            message = "this form is out of date or did not come from the dashboard; reload the page and try again"
            if wants_json():
                return jsonify(error=message), 403
            return make_response(render_template("dashboard/message.html", title="Refused", message=message), 403)
    return None


@bp.after_request
def _no_store(response: Response) -> Response:
    # Coordinator pages hold worker data: never cached, never framed.
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    return response


@bp.context_processor
def _csrf_globals() -> dict[str, str]:
    bound = getattr(g, "bound_to", None)
    return {"dash_csrf": auth.csrf_token(secret(), bound) if bound else "", "CSRF_FIELD": security.CSRF_FIELD}


def _cookie(response: Response, name: str, value: str, max_age: int | None) -> None:
    response.set_cookie(
        name, value, max_age=max_age, path="/dashboard", httponly=True, samesite="Lax", secure=request.is_secure
    )


@bp.get("/login")
def login() -> Response:
    nonce = request.cookies.get(LOGIN_COOKIE) or secrets.token_hex(16)
    g.bound_to = nonce
    response = make_response(
        render_template("dashboard/login.html", next=_safe_next(request.args.get("next")), error=None)
    )
    _cookie(response, LOGIN_COOKIE, nonce, 3600)
    return response


@bp.post("/login")
def login_post() -> Response:
    wait = current_app.config["HITKIT_DASHBOARD_LOGINS"].take("login:" + (request.remote_addr or ""))
    if wait:
        response: Response = make_response(
            render_template(
                "dashboard/login.html",
                next=_safe_next(request.form.get("next")),
                error="too many attempts; wait a few seconds and try again",
            ),
            429,
        )
        response.headers["Retry-After"] = str(math.ceil(wait))
        return response
    creds = _known_creds()
    if not creds.check(request.form.get("username", ""), request.form.get("password", "")):
        return make_response(
            render_template(
                "dashboard/login.html", next=_safe_next(request.form.get("next")), error="wrong user name or password"
            ),
            401,
        )
    response = redirect(_safe_next(request.form.get("next")) or url_for("dashboard.overview"))
    _cookie(
        response,
        SESSION_COOKIE,
        auth.session_token(secret(), creds, auth.session_generation(_login_url(), creds)),
        auth.SESSION_HOURS * 3600,
    )
    response.delete_cookie(LOGIN_COOKIE, path="/dashboard")
    return response


@bp.post("/logout")
def logout() -> Response:
    # Server-side: every session made so far ends now, in every process, so a copied or stolen
    # cookie is useless after the coordinator logs out (deleting the cookie alone would not do that).
    auth.revoke_sessions(_login_url(), _known_creds())
    response = redirect(url_for("dashboard.login"))
    response.delete_cookie(SESSION_COOKIE, path="/dashboard")
    return response


def _safe_next(target: str | None) -> str | None:
    """Only a path inside the dashboard: never an open redirect to another site, and only printable
    ASCII (a CR/LF would split the Location header; werkzeug refuses it with a 500)."""
    if (
        target
        and len(target) <= MAX_NEXT_CHARS
        and target.startswith("/dashboard")
        and "\\" not in target
        and not target.startswith("//")
        and all("!" <= ch <= "~" for ch in target)
    ):
        return target.rstrip("?")
    return None
