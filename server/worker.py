"""Worker-facing routes: arrive, read instructions, answer, submit, be handed back."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from flask import Blueprint, current_app, jsonify, redirect, render_template, request, url_for
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session

from hitkit.db.session import session_scope
from hitkit.errors import AnswerError, FlowError, HitkitError
from hitkit.i18n import N_
from hitkit.providers.base import CompletionKind
from hitkit.study.stored import StudyContext
from hitkit.worker import admission, bounds, flow, screener, validation
from server import i18n

bp = Blueprint("worker", __name__)
_contexts: dict[tuple[str, str], StudyContext] = {}
_contexts_lock = threading.Lock()
DB_RETRY_AFTER_S = 2
"""What a worker page is told to wait (Retry-After) while the database cannot be reached."""
HELD_COOKIE = "hitkit_assignment"
"""The cookie keeping the worker's latest assignment token for a study (path ``/s/STUDY/``): the proof
a returning panel participant shows (:func:`hitkit.worker.admission._check_returning`)."""
JSON_ENDPOINTS = {
    "worker.state",
    "worker.answer",
    "worker.screen",
    "chat.state",
    "chat.message",
    "chat.retry",
    "chat.topic",
}
"""Routes the page calls with fetch: their errors are JSON whatever the request's Accept header."""


@contextmanager
def db() -> Iterator[Session]:
    with session_scope(current_app.config["HITKIT_DATABASE_URL"]) as session:
        yield session


def context(session: Session, study: str) -> StudyContext:
    """The study's context, loaded once per process (a study's config never changes once launched)."""
    key = (current_app.config["HITKIT_DATABASE_URL"], study)
    with _contexts_lock:
        if key not in _contexts:
            try:
                _contexts[key] = StudyContext.load(session, study, current_app.config["HITKIT_SECRET"])
            except HitkitError:
                raise FlowError(
                    N_("there is no study '%(study)s' on this server; check the link", study=study), 404
                ) from None
        ctx = _contexts[key]
    i18n.use(ctx)
    return ctx


def use_known_study() -> None:
    """The request's study's language, if this process has loaded the study already (no database query):
    a refusal made before the route runs (rate limit, CSRF) speaks it too."""
    study = (request.view_args or {}).get("study")
    if not isinstance(study, str):
        return
    with _contexts_lock:
        ctx = _contexts.get((current_app.config["HITKIT_DATABASE_URL"], study))
    if ctx is not None:
        i18n.use(ctx)


def _wants_json() -> bool:
    return request.is_json or request.accept_mimetypes.best == "application/json" or request.endpoint in JSON_ENDPOINTS


@bp.app_errorhandler(FlowError)
def _flow_error(exc: FlowError):
    if _wants_json():
        return jsonify(error=i18n.error_text(exc)), exc.status
    return render_template("error.html", message=i18n.error_text(exc)), exc.status


@bp.app_errorhandler(AnswerError)
def _answer_error(exc: AnswerError):
    if _wants_json():
        return jsonify(error=i18n.error_text(exc)), 400
    return render_template("error.html", message=i18n.error_text(exc)), 400


@bp.app_errorhandler(OperationalError)
@bp.app_errorhandler(PoolTimeout)
@bp.app_errorhandler(InterfaceError)
def _database_unavailable(exc: Exception):
    """The database is down, restarting or saturated: the request's transaction was rolled back and
    nothing it carried was stored or acknowledged, so the page may send it again (503, Retry-After)."""
    if isinstance(exc, InterfaceError) and not exc.connection_invalidated:
        raise exc  # a driver misuse, not an outage: let it be the logged 500 it is
    current_app.logger.warning(
        "database unavailable on %s: %s (%s)",
        request.endpoint,
        type(exc).__name__,
        type(getattr(exc, "orig", None)).__name__,
    )
    message = i18n.words().text(
        N_(
            "the study's database is briefly unavailable; please try again in a moment "
            "(everything the page already confirmed is saved)"
        )
    )
    if _wants_json():
        response = jsonify(error=message, retry=True)
    else:
        response = current_app.make_response(render_template("error.html", message=message))
    response.status_code = 503
    response.headers["Retry-After"] = str(DB_RETRY_AFTER_S)
    return response


@bp.app_errorhandler(IntegrityError)
def _lost_race(exc: IntegrityError):
    """Two requests raced to store the same row and this one lost: its transaction was rolled back,
    nothing it carried is half-stored, and sending it again gives the idempotent answer (409, not 500)."""
    current_app.logger.warning("lost a race on %s: %s", request.endpoint, type(getattr(exc, "orig", exc)).__name__)
    message = i18n.words().text(N_("this was saved by another request at the same moment; reload the page to see it"))
    if _wants_json():
        return jsonify(error=message, retry=True), 409
    return render_template("error.html", message=message), 409


@bp.get("/health")
def health():
    return jsonify(status="ok")


@bp.get("/s/<study>/hit/<int:hit_id>")
def enter_hit(study: str, hit_id: int):
    return _enter(study, hit_id)


@bp.get("/s/<study>/enter")
def enter_study(study: str):
    return _enter(study, None)


def _enter(study: str, hit_id: int | None):
    with db() as session:
        ctx = context(session, study)
    # The provider is asked who arrived with no transaction open (admission.admit; hitkit.worker.arrivals).
    try:
        entry = admission.admit(
            current_app.config["HITKIT_DATABASE_URL"],
            ctx,
            hit_id,
            request.args,
            client=request.remote_addr or "",
            held_token=request.cookies.get(HELD_COOKIE),
        )
    except FlowError as exc:
        # A participant the marketplace let in but hitkit cannot use holds a place there: say how to free it.
        hint = getattr(ctx.provider, "refusal_hint", None)
        if exc.status == 409 and hint and "no work left" in str(exc):
            raise FlowError(N_("%(refusal)s — %(hint)s", refusal=exc.args[0], hint=hint), 409) from None
        raise
    if entry.preview:
        if entry.hit is None:
            raise FlowError(N_("this study has no HITs yet"), 404)
        return render_template(
            ctx.task.template,
            study=ctx.config,
            units=i18n.localised(entry.views),
            preview=True,
            answers={},
            token=None,
            instructions=ctx.task.instructions_template,
        )
    if entry.token is None:  # enter() hands every worker it admits a token; only a preview has none
        raise FlowError("this arrival was admitted without an assignment token; please open the task again", 500)
    response = redirect(url_for("worker.page", study=study, token=entry.token))
    if ctx.provider.resume_needs_proof:
        # Kept by the worker's browser only, for this study's entry links: it lets them back in.
        response.set_cookie(
            HELD_COOKIE,
            entry.token,
            max_age=int(ctx.config.hit.assignment_minutes * 60) + 3600,
            path=f"/s/{study}/",
            secure=request.is_secure,
            httponly=True,
            samesite="Lax",
        )
    return response


@bp.get("/a/<study>/<token>/")
def page(study: str, token: str):
    with db() as session:
        ctx = context(session, study)
        assignment = flow.assignment_for(session, ctx, token)
        if assignment.status in ("submitted", "approved"):
            return render_template("done.html", study=ctx.config, code=None)
        if assignment.status != "accepted":
            raise FlowError(N_("this assignment is %(status)s", status=flow.status_word(assignment.status)), 410)
        if screener.pending(session, ctx, assignment):
            return render_template(
                "screener.html",
                study=ctx.config,
                token=token,
                questions=screener.questions(ctx),
                intro=screener.section(ctx).intro,
            )
        if assignment.consented_at is None:
            return render_template(ctx.task.instructions_template, study=ctx.config, token=token, preview=False)
        st = flow.state(session, ctx, assignment)
        return render_template(
            ctx.task.template,
            study=ctx.config,
            units=i18n.localised(st["units"]),
            answers=st["answers"],
            preview=False,
            token=token,
            instructions=ctx.task.instructions_template,
        )


@bp.post("/a/<study>/<token>/consent")
def consent(study: str, token: str):
    with db() as session:
        ctx = context(session, study)
        screener.require_passed(session, ctx, token)
        flow.consent(session, ctx, token)
    return redirect(url_for("worker.page", study=study, token=token))


@bp.post("/a/<study>/<token>/screener")
def screen(study: str, token: str):
    """The screener's answers: JSON ``{"answers": {name: option}}`` or form fields ``screener-NAME``."""
    body = request.get_json(silent=True) if request.is_json else None
    if body is not None:
        answers = body.get("answers") if isinstance(body, dict) else None
        if not isinstance(answers, dict):
            return jsonify(error="send JSON with answers: {question name: chosen option}"), 400
    else:
        answers = {k.removeprefix("screener-"): v for k, v in request.form.items() if k.startswith("screener-")}
    with db() as session:
        ctx = context(session, study)
        assignment, passed = screener.answer(session, ctx, token, {str(k): str(v) for k, v in answers.items()})
    if passed:
        if body is not None:
            return jsonify(passed=True)
        return redirect(url_for("worker.page", study=study, token=token))
    completion = screener.handback(ctx, assignment)  # after the commit
    if body is not None:
        return jsonify(
            passed=False, screened_out=True, completion=completion.kind.value, url=completion.url, code=completion.code
        )
    if completion.kind is CompletionKind.REDIRECT:
        return redirect(completion.target)
    return render_template(
        "screened_out.html", study=ctx.config, code=completion.code, reward=screener.section(ctx).screen_out_reward
    )


@bp.get("/a/<study>/<token>/state")
def state(study: str, token: str):
    with db() as session:
        ctx = context(session, study)
        return jsonify(i18n.localised(flow.state(session, ctx, flow.assignment_for(session, ctx, token))))


@bp.post("/a/<study>/<token>/answer")
def answer(study: str, token: str):
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not {"unit_id", "question", "value"} <= body.keys():
        return jsonify(error="send JSON with unit_id, question and value"), 400
    unit_id = validation.unit_key(body["unit_id"], "unit_id")  # an opaque key as /state gives it; 400 otherwise
    elapsed = validation.elapsed_seconds(body.get("elapsed_s"))
    with db() as session:
        flow.save_answer(
            session,
            context(session, study),
            token,
            unit_id,
            str(body["question"]),
            body["value"],
            elapsed,
            signals=body.get("signals"),
        )
    return jsonify(saved=True)


@bp.get("/a/<study>/<token>/reveal/<unit_id>")
def reveal(study: str, token: str, unit_id: str):
    """What the page may show of a unit once it is answered (the arena's two names), or null."""
    unit_key = validation.unit_key(unit_id, "unit_id")
    with db() as session:
        ctx = context(session, study)
        assignment = flow.assignment_for(session, ctx, token)
        return jsonify(revealed=ctx.task.revealed(session, assignment, flow.unit_of(assignment, unit_key)))


@bp.post("/a/<study>/<token>/return")
def give_back(study: str, token: str):
    with db() as session:
        ctx = context(session, study)
        flow.return_assignment(session, ctx, token)
    if _wants_json():
        return jsonify(returned=True)
    return render_template("returned.html", study=ctx.config)


def _form_answers() -> dict[tuple[int | str, str], str]:
    """Answers posted with the submit form: fields named ``answer-UNITKEY-QUESTION`` (the unit's public key)."""
    answers: dict[tuple[int | str, str], str] = {}
    for key, value in request.form.items():
        parts = key.split("-", 2)
        if len(parts) == 3 and parts[0] == "answer" and parts[1]:
            answers[(parts[1], parts[2])] = value
    return answers


def _form_signals() -> Any:
    """The comment's signals posted with the submit form: the field ``feedback_signals``, a JSON object the
    page fills in (authenticity.js). Anything unreadable is None: it must never cost the worker the submission."""
    raw = request.form.get("feedback_signals")
    if not raw or len(raw) > 4096 or bounds.json_refusal(raw):
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


@bp.post("/a/<study>/<token>/submit")
def submit(study: str, token: str):
    with db() as session:
        ctx = context(session, study)
        body = request.get_json(silent=True) if request.is_json else None
        if request.is_json and not isinstance(body, dict):
            body = {}  # a JSON submit needs no body; a malformed or non-object one carries no comment
        feedback = body.get("feedback") if body is not None else request.form.get("feedback")
        signals = body.get("feedback_signals") if body is not None else _form_signals()
        assignment, _ = flow.submit(
            session,
            ctx,
            token,
            _form_answers(),
            feedback=feedback if isinstance(feedback, str) else None,
            feedback_signals=signals,
        )
    completion = flow.handback(ctx, assignment)  # after the commit: it may ask the platform
    if _wants_json():
        return jsonify(submitted=True, completion=completion.kind.value, url=completion.url, code=completion.code)
    if completion.kind is CompletionKind.REDIRECT:
        return redirect(completion.target)
    if completion.kind is CompletionKind.POST_FORM:
        return render_template("handback_form.html", url=completion.url, fields=completion.fields)
    return render_template("done.html", study=ctx.config, code=completion.code)
