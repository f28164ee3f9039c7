"""The coordinator dashboard under ``/dashboard``: login, live progress, workers, conversations,
systems, side by side, events. Routes only read the request and call :mod:`hitkit.dashboard`.

Off unless HITKIT_DASHBOARD_USER and a password are set (see :func:`server.auth.credentials_from_env`).
Every page needs the signed session cookie (HttpOnly, SameSite=Lax, path /dashboard); every POST
needs the CSRF field bound to that cookie, which the app-wide CSRF rule leaves to this module.
"""
from __future__ import annotations

import math
import os
import secrets
from functools import wraps

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

from hitkit import dashboard as dash
from hitkit.errors import HitkitError
from hitkit.protocols import PROTOCOLS
from hitkit.worker import security, tokens
from server import auth
from server.worker import context, db

bp = Blueprint("dashboard", __name__, url_prefix="/dashboard")
SESSION_COOKIE = "hitkit_dashboard"
LOGIN_COOKIE = "hitkit_dashboard_login"
LOGIN_LIMIT = security.RateLimit(0.2, 5)
"""Login attempts per client address: five at once, then one every five seconds."""
REFRESH_MS = 3000


@bp.record_once
def _configure(state) -> None:
    app = state.app
    app.config["HITKIT_DASHBOARD_CREDENTIALS"] = auth.credentials_from_env(os.environ)
    app.config["HITKIT_DASHBOARD_LOGINS"] = security.TokenBuckets(LOGIN_LIMIT)
    app.jinja_env.filters["seconds"] = dash.fmt_seconds
    app.jinja_env.filters["pct"] = lambda x: "–" if x is None or (isinstance(x, float) and math.isnan(x)) \
        else f"{100 * x:.0f} %"
    app.jinja_env.filters["when"] = lambda t: t.strftime("%Y-%m-%d %H:%M:%S") if t else "–"


def _secret() -> str:
    # Several databases under one dashboard (server/multi.py) share one secret for its login.
    return current_app.config.get("HITKIT_DASHBOARD_SECRET") or current_app.config["HITKIT_SECRET"]


def _all_progress() -> list[dash.StudyProgress]:
    """Every study of every database this dashboard shows (one, or several under ``hitkit serve``)."""
    from hitkit.db.session import session_scope
    from hitkit.study.stored import StudyContext, resolve_secret

    own = current_app.config["HITKIT_DATABASE_URL"]
    out = []
    for url in current_app.config.get("HITKIT_DASHBOARD_DATABASES") or [own]:
        if url == own:
            with db() as session:
                out += [_progress(session, s.name) for s in dash.studies(session)]
            continue
        with session_scope(url) as session:
            secret = resolve_secret(url)
            out += [dash.study_progress(session, StudyContext.of(s, secret), url) for s in dash.studies(session)]
    return out


def _creds() -> auth.Credentials | None:
    return current_app.config["HITKIT_DASHBOARD_CREDENTIALS"]


def _wants_json() -> bool:
    return request.is_json or request.accept_mimetypes.best == "application/json"


@bp.before_request
def _gate():
    creds = _creds()
    if creds is None:
        return make_response(render_template("dashboard/disabled.html"), 404)
    if request.endpoint in ("dashboard.login", "dashboard.login_post"):
        g.bound_to = request.cookies.get(LOGIN_COOKIE)
    else:
        token = request.cookies.get(SESSION_COOKIE)
        if not token or not auth.session_valid(_secret(), creds, token, auth.session_generation(_login_url(), creds)):
            if _wants_json() or request.method != "GET":
                return jsonify(error="log in to the dashboard first"), 401
            return redirect(url_for("dashboard.login", next=request.full_path if request.args else request.path))
        g.bound_to = token
    if request.method == "POST":
        given = request.form.get(security.CSRF_FIELD) or request.headers.get("X-CSRF-Token")
        if not auth.csrf_ok(_secret(), g.bound_to, given):
            message = "this form is out of date or did not come from the dashboard; reload the page and try again"
            if _wants_json():
                return jsonify(error=message), 403
            return make_response(render_template("dashboard/message.html", title="Refused", message=message), 403)
    return None


@bp.after_request
def _no_store(response):
    # Coordinator pages hold worker data: never cached, never framed.
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    return response


@bp.context_processor
def _template_globals():
    bound = getattr(g, "bound_to", None)
    return {"dash_csrf": auth.csrf_token(_secret(), bound) if bound else "", "CSRF_FIELD": security.CSRF_FIELD,
            "refresh_ms": REFRESH_MS}


def _cookie(response, name: str, value: str, max_age: int | None) -> None:
    response.set_cookie(name, value, max_age=max_age, path="/dashboard", httponly=True, samesite="Lax",
                        secure=request.is_secure)


# Login ------------------------------------------------------------------------------------------
@bp.get("/login")
def login():
    nonce = request.cookies.get(LOGIN_COOKIE) or secrets.token_hex(16)
    g.bound_to = nonce
    response = make_response(render_template("dashboard/login.html", next=_safe_next(request.args.get("next")),
                                             error=None))
    _cookie(response, LOGIN_COOKIE, nonce, 3600)
    return response


@bp.post("/login")
def login_post():
    wait = current_app.config["HITKIT_DASHBOARD_LOGINS"].take("login:" + (request.remote_addr or ""))
    if wait:
        response = make_response(render_template("dashboard/login.html", next=_safe_next(request.form.get("next")),
                                                 error="too many attempts; wait a few seconds and try again"), 429)
        response.headers["Retry-After"] = str(math.ceil(wait))
        return response
    creds = _creds()
    if not creds.check(request.form.get("username", ""), request.form.get("password", "")):
        return make_response(render_template("dashboard/login.html", next=_safe_next(request.form.get("next")),
                                             error="wrong user name or password"), 401)
    response = redirect(_safe_next(request.form.get("next")) or url_for("dashboard.overview"))
    _cookie(response, SESSION_COOKIE, auth.session_token(_secret(), creds, auth.session_generation(_login_url(), creds)),
            auth.SESSION_HOURS * 3600)
    response.delete_cookie(LOGIN_COOKIE, path="/dashboard")
    return response


@bp.post("/logout")
def logout():
    # Server-side: every session made so far ends now, in every process, so a copied or stolen
    # cookie is useless after the coordinator logs out (deleting the cookie alone would not do that).
    auth.revoke_sessions(_login_url(), _creds())
    response = redirect(url_for("dashboard.login"))
    response.delete_cookie(SESSION_COOKIE, path="/dashboard")
    return response


MAX_NEXT_CHARS = 2000


def _safe_next(target: str | None) -> str | None:
    """Only a path inside the dashboard: never an open redirect to another site, and only printable
    ASCII (a CR/LF would split the Location header; werkzeug refuses it with a 500)."""
    if (target and len(target) <= MAX_NEXT_CHARS and target.startswith("/dashboard") and "\\" not in target
            and not target.startswith("//") and all("!" <= ch <= "~" for ch in target)):
        return target.rstrip("?")
    return None


# Progress ---------------------------------------------------------------------------------------
def _progress(session, name: str) -> dash.StudyProgress:
    return dash.study_progress(session, context(session, name), current_app.config["HITKIT_DATABASE_URL"])


@bp.get("/")
def overview():
    return render_template("dashboard/overview.html", studies=_all_progress())


@bp.get("/api/progress")
def api_progress():
    only = request.args.get("study")
    if not only:
        return jsonify({"studies": [p.to_json() for p in _all_progress()]})
    with db() as session:
        payload = {"studies": [_progress(session, only).to_json()]}
        if only:
            recent = dash.events(session, context(session, only).study_id, per_page=8)
            payload["events"] = [dash.event_json(e) for e in recent.items]
        return jsonify(payload)


@bp.get("/study/<study>")
def study_page(study: str):
    with db() as session:
        progress = _progress(session, study)
        recent = dash.events(session, context(session, study).study_id, per_page=8)
        return render_template("dashboard/study.html", s=progress, events=recent.items)


# Workers ----------------------------------------------------------------------------------------
@bp.get("/study/<study>/workers")
def workers(study: str):
    with db() as session:
        ctx = context(session, study)
        progress = _progress(session, study)
        rows = dash.worker_rows(session, ctx, progress.qc)
        return render_template("dashboard/workers.html", s=progress, workers=rows,
                               bonus_key=secrets.token_hex(12), outcome=_read_outcome())


def _action(fn):
    """Run an action, flash its outcome, and go back to the worker table."""
    @wraps(fn)
    def wrapper(study: str, **kwargs):
        with db() as session:
            ctx = context(session, study)
        try:
            message = fn(ctx, **kwargs)
            category = "ok"
        except HitkitError as exc:
            message, category = str(exc), "error"
        if _wants_json():
            return jsonify(message=message, ok=category == "ok"), 200 if category == "ok" else 400
        # The outcome rides on the redirect signed, so nobody can put words in the dashboard's mouth.
        signed = tokens.sign(_secret(), "dashboard-outcome", f"{category}:{message}")
        return redirect(url_for("dashboard.workers", study=study, outcome=signed))
    return wrapper


def _read_outcome() -> tuple[str, str] | None:
    text = tokens.verify(_secret(), "dashboard-outcome", request.args.get("outcome") or "")
    if text is None:
        return None
    category, _, message = text.partition(":")
    return category, message


@bp.post("/study/<study>/workers/<int:worker_id>/bonus")
@_action
def bonus(ctx, worker_id: int):
    amount = dash.parse_amount(request.form.get("amount"))
    return dash.bonus_worker(_url(), ctx, worker_id, amount, request.form.get("reason", ""),
                             request.form.get("key", ""))


@bp.post("/study/<study>/workers/<int:worker_id>/block")
@_action
def block(ctx, worker_id: int):
    return dash.block_worker(_url(), ctx, worker_id, request.form.get("reason", ""))


@bp.post("/study/<study>/workers/<int:worker_id>/unblock")
@_action
def unblock(ctx, worker_id: int):
    return dash.unblock_worker(_url(), ctx, worker_id)


@bp.post("/study/<study>/assignments/<int:assignment_id>/approve")
@_action
def approve(ctx, assignment_id: int):
    return dash.approve_assignment(_url(), ctx, assignment_id)


@bp.post("/study/<study>/assignments/<int:assignment_id>/reject")
@_action
def reject(ctx, assignment_id: int):
    return dash.reject_assignment(_url(), ctx, assignment_id, request.form.get("reason", ""))


@bp.post("/study/<study>/message")
@_action
def message(ctx):
    """Write to one participant (``to``) or, with ``to`` empty, everyone in the study (hitkit.running.recontact)."""
    from hitkit.running import recontact

    to = (request.form.get("to") or "").strip()
    n = recontact.message(_url(), ctx.name, [to] if to else None, request.form.get("text", ""), actor="dashboard")
    return f"message sent to {n} participant(s)"


def _url() -> str:
    return current_app.config["HITKIT_DATABASE_URL"]


def _login_url() -> str:
    # The database that keeps the coordinator's session generation: the first one when several
    # databases share one dashboard (server/multi.py), so a logout ends the session everywhere.
    return current_app.config.get("HITKIT_DASHBOARD_DATABASE") or _url()


# Conversations, systems, side by side ---------------------------------------------------------------
def _page() -> int:
    value = request.args.get("page", "1")
    return int(value) if value.isascii() and value.isdigit() and 0 < len(value) <= 6 else 1


@bp.get("/study/<study>/conversations")
def conversations(study: str):
    system = request.args.get("system") or None
    with db() as session:
        ctx = context(session, study)
        listing = dash.conversations(session, ctx.study_id, system, _page())
        systems = [s.name for s in ctx.config.systems]
        return render_template("dashboard/conversations.html", study=study, task=ctx.config.task, listing=listing,
                               system=system, systems=systems)


@bp.get("/study/<study>/conversations/<int:conversation_id>")
def conversation(study: str, conversation_id: int):
    with db() as session:
        ctx = context(session, study)
        try:
            detail = dash.conversation_detail(session, ctx, conversation_id)
        except dash.ActionError:
            abort(404)
        return render_template("dashboard/conversation.html", study=study, task=ctx.config.task,
                               words=_words(ctx), **detail)


@bp.get("/study/<study>/systems/<system>")
def system_profile(study: str, system: str):
    with db() as session:
        ctx = context(session, study)
        try:
            profile = dash.system_profile(session, ctx, system)
        except dash.ActionError:
            abort(404)
        return render_template("dashboard/system.html", study=study, task=ctx.config.task,
                               systems=[s.name for s in ctx.config.systems], **profile)


@bp.get("/study/<study>/compare")
def compare(study: str):
    with db() as session:
        ctx = context(session, study)
        systems = [s.name for s in ctx.config.systems]
        a = request.args.get("a") or systems[0]
        b = request.args.get("b") or systems[1]
        try:
            view = dash.side_by_side(session, ctx, a, b)
        except dash.ActionError:
            abort(404)
        return render_template("dashboard/compare.html", study=study, task=ctx.config.task, systems=systems,
                               words=_words(ctx), **view)


# Events -------------------------------------------------------------------------------------------
@bp.get("/events")
def events():
    name = request.args.get("study") or None
    with db() as session:
        study_id = context(session, name).study_id if name else None
        listing = dash.events(session, study_id, _page())
        return render_template("dashboard/events.html", listing=listing, study=name,
                               studies=[s.name for s in dash.studies(session)])


def _words(ctx) -> dict[str, str]:
    """How the shared dashboard pages speak of the study's protocol (its views module's ``WORDS``)."""
    return PROTOCOLS[ctx.config.task].module("views").WORDS
