"""The coordinator dashboard's pages under ``/dashboard``: live progress, workers, conversations,
systems, side by side, events. Routes only read the request and call :mod:`hitkit.dashboard`.

The blueprint, login and the session and CSRF checks every page passes are in :mod:`server.dashboard_login`.
"""

from __future__ import annotations

import math
import secrets
from functools import wraps

from flask import abort, current_app, jsonify, redirect, render_template, request, url_for
from flask.blueprints import BlueprintSetupState

from hitkit import dashboard as dash
from hitkit.dashboard import glossary
from hitkit.errors import HitkitError
from hitkit.protocols import PROTOCOLS
from hitkit.worker import tokens
from server.dashboard_login import bp, database_url, secret, wants_json
from server.worker import context, db

__all__ = ["bp"]

REFRESH_MS = 3000


@bp.record_once
def _configure(state: BlueprintSetupState) -> None:
    app = state.app
    app.jinja_env.filters["seconds"] = dash.fmt_seconds
    app.jinja_env.filters["pct"] = lambda x: (
        "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.0f} %"
    )
    app.jinja_env.filters["when"] = lambda t: t.strftime("%Y-%m-%d %H:%M:%S") if t else "–"
    app.jinja_env.filters["event_label"] = glossary.event_label
    app.jinja_env.filters["detail_label"] = glossary.detail_label


@bp.context_processor
def _page_globals() -> dict[str, int]:
    return {"refresh_ms": REFRESH_MS}


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
            its_secret = resolve_secret(url)
            out += [dash.study_progress(session, StudyContext.of(s, its_secret), url) for s in dash.studies(session)]
    return out


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
        return render_template(
            "dashboard/workers.html", s=progress, workers=rows, bonus_key=secrets.token_hex(12), outcome=_read_outcome()
        )


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
        if wants_json():
            return jsonify(message=message, ok=category == "ok"), 200 if category == "ok" else 400
        # The outcome rides on the redirect signed, so nobody can put words in the dashboard's mouth.
        signed = tokens.sign(secret(), "dashboard-outcome", f"{category}:{message}")
        return redirect(url_for("dashboard.workers", study=study, outcome=signed))

    return wrapper


def _read_outcome() -> tuple[str, str] | None:
    text = tokens.verify(secret(), "dashboard-outcome", request.args.get("outcome") or "")
    if text is None:
        return None
    category, _, message = text.partition(":")
    return category, message


@bp.post("/study/<study>/workers/<int:worker_id>/bonus")
@_action
def bonus(ctx, worker_id: int):
    amount = dash.parse_amount(request.form.get("amount"))
    return dash.bonus_worker(
        database_url(), ctx, worker_id, amount, request.form.get("reason", ""), request.form.get("key", "")
    )


@bp.post("/study/<study>/workers/<int:worker_id>/block")
@_action
def block(ctx, worker_id: int):
    return dash.block_worker(database_url(), ctx, worker_id, request.form.get("reason", ""))


@bp.post("/study/<study>/workers/<int:worker_id>/unblock")
@_action
def unblock(ctx, worker_id: int):
    return dash.unblock_worker(database_url(), ctx, worker_id)


@bp.post("/study/<study>/assignments/<int:assignment_id>/approve")
@_action
def approve(ctx, assignment_id: int):
    return dash.approve_assignment(database_url(), ctx, assignment_id)


@bp.post("/study/<study>/assignments/<int:assignment_id>/reject")
@_action
def reject(ctx, assignment_id: int):
    return dash.reject_assignment(database_url(), ctx, assignment_id, request.form.get("reason", ""))


@bp.post("/study/<study>/message")
@_action
def message(ctx):
    """Write to one participant (``to``) or, with ``to`` empty, everyone in the study (hitkit.running.recontact)."""
    from hitkit.running import recontact

    to = (request.form.get("to") or "").strip()
    n = recontact.message(
        database_url(), ctx.name, [to] if to else None, request.form.get("text", ""), actor="dashboard"
    )
    return f"message sent to {n} participant(s)"


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
        return render_template(
            "dashboard/conversations.html",
            study=study,
            task=ctx.config.task,
            listing=listing,
            system=system,
            systems=systems,
        )


@bp.get("/study/<study>/conversations/<int:conversation_id>")
def conversation(study: str, conversation_id: int):
    with db() as session:
        ctx = context(session, study)
        try:
            detail = dash.conversation_detail(session, ctx, conversation_id)
        except dash.ActionError:
            abort(404)
        return render_template(
            "dashboard/conversation.html", study=study, task=ctx.config.task, words=_words(ctx), **detail
        )


@bp.get("/study/<study>/systems/<system>")
def system_profile(study: str, system: str):
    with db() as session:
        ctx = context(session, study)
        try:
            profile = dash.system_profile(session, ctx, system)
        except dash.ActionError:
            abort(404)
        return render_template(
            "dashboard/system.html",
            study=study,
            task=ctx.config.task,
            systems=[s.name for s in ctx.config.systems],
            **profile,
        )


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
        return render_template(
            "dashboard/compare.html", study=study, task=ctx.config.task, systems=systems, words=_words(ctx), **view
        )


# Events -------------------------------------------------------------------------------------------
@bp.get("/events")
def events():
    name = request.args.get("study") or None
    with db() as session:
        study_id = context(session, name).study_id if name else None
        listing = dash.events(session, study_id, _page())
        return render_template(
            "dashboard/events.html", listing=listing, study=name, studies=[s.name for s in dash.studies(session)]
        )


def _words(ctx) -> dict[str, str]:
    """How the shared dashboard pages speak of the study's protocol (its views module's ``WORDS``)."""
    return PROTOCOLS[ctx.config.task].module("views").WORDS
