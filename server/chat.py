"""Live-chat routes: a chat slot's state, the worker's message with the bot's reply, retry, topic,
and the same exchange streamed (``/stream``: :mod:`hitkit.worker.chat_stream`)."""

from __future__ import annotations

import threading

from flask import Blueprint, Response, current_app, jsonify, request

from hitkit.errors import FlowError
from hitkit.study.stored import StudyContext
from hitkit.worker import chat, chat_stream, chat_turns
from hitkit.worker.chat import BotReplyError, Reply
from hitkit.worker.streams import Lease, StreamLimits
from server.worker import context, db

bp = Blueprint("chat", __name__)
_clients: dict[tuple[str, str], dict[str, Reply]] = {}
_clients_lock = threading.Lock()
LIMITS = StreamLimits()
"""This process's bound on requests that wait on a bot (hitkit.worker.streams): no worker holds all threads."""


def _admit(ctx: StudyContext, token: str) -> Lease:
    return chat.admit(current_app.config["HITKIT_DATABASE_URL"], ctx, token, LIMITS)


def _bots(ctx: StudyContext) -> dict[str, Reply]:
    """The study's bot clients, made once per process and shared by every request (they pool)."""
    key = (current_app.config["HITKIT_DATABASE_URL"], ctx.name)
    with _clients_lock:
        if key not in _clients:
            _clients[key] = chat.bot_clients(ctx)
        return _clients[key]


def _ctx(study: str) -> StudyContext:
    with db() as session:
        ctx = context(session, study)
    if not ctx.task.has_chat:  # before any bot client is made: other tasks' systems have no url
        raise FlowError(f"study '{study}' runs task '{ctx.config.task}', which has no live chat", 404)
    return ctx


def _reply_or_wait(ctx: StudyContext, token: str, run):
    """Run one chat step, if admitted (429 if not); a bot that gives no reply yields 502 with the saved
    state to resume from."""
    lease = _admit(ctx, token)
    try:
        return jsonify(run().as_dict())
    except BotReplyError as exc:
        return jsonify(error=str(exc), waiting=True), 502
    finally:
        lease.release()


@bp.get("/a/<study>/<token>/chat/<unit_id>")
def state(study: str, token: str, unit_id: str):
    with db() as session:
        return jsonify(chat_turns.conversation_state(session, context(session, study), token, unit_id).as_dict())


@bp.post("/a/<study>/<token>/chat/<unit_id>/message")
def message(study: str, token: str, unit_id: str):
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        return jsonify(error="send JSON with the message as 'text'"), 400
    ctx = _ctx(study)
    url = current_app.config["HITKIT_DATABASE_URL"]
    return _reply_or_wait(
        ctx, token, lambda: chat.send(url, ctx, token, unit_id, body["text"], _bots(ctx), signals=body.get("signals"))
    )


@bp.post("/a/<study>/<token>/chat/<unit_id>/retry")
def retry(study: str, token: str, unit_id: str):
    ctx = _ctx(study)
    url = current_app.config["HITKIT_DATABASE_URL"]
    return _reply_or_wait(ctx, token, lambda: chat.bot_reply(url, ctx, token, unit_id, _bots(ctx)))


@bp.post("/a/<study>/<token>/chat/<unit_id>/stream")
def stream(study: str, token: str, unit_id: str):
    """The worker's message (``text``) and the bot's reply streamed; without ``text``, the owed reply
    streamed (a retry or a resume). A refused message is a plain JSON error, before any stream."""
    body = request.get_json(silent=True)
    body = {} if body is None else body
    if not isinstance(body, dict) or ("text" in body and not isinstance(body["text"], str)):
        return jsonify(error="send JSON with the message as 'text', or {} to resume the owed reply"), 400
    ctx = _ctx(study)
    url = current_app.config["HITKIT_DATABASE_URL"]
    bots = _bots(ctx)
    lease = _admit(ctx, token)  # before anything is stored: a refused message is the page's to send again
    try:
        if "text" in body:
            owed = chat.store_message(url, ctx, token, unit_id, body["text"], body.get("signals"))
            exchange = lambda on_text: chat.answer(url, ctx, bots, owed, on_text)  # noqa: E731
        else:
            with db() as session:  # a wrong token or slot is refused before the stream starts
                chat_turns.conversation_state(session, ctx, token, unit_id)
            exchange = lambda on_text: chat.bot_reply(url, ctx, token, unit_id, bots, on_text=on_text)  # noqa: E731
    except BaseException:
        lease.release()
        raise
    return Response(
        chat_stream.relay(exchange, deadline_s=chat.stream_deadline_s(ctx), on_end=lease.release),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@bp.post("/a/<study>/<token>/chat/<unit_id>/topic")
def topic(study: str, token: str, unit_id: str):
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or body.get("by") not in ("worker", "bot"):
        return jsonify(error="send JSON with 'by' (worker or bot) and optionally the new 'topic'"), 400
    new_topic = body.get("topic")
    with db() as session:
        change = chat_turns.change_topic(
            session,
            context(session, study),
            token,
            unit_id,
            body["by"],
            new_topic if isinstance(new_topic, str) and new_topic.strip() else None,
        )
    return jsonify(change)
