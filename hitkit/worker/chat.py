"""Live chat as database operations (METHODS.md §1): the worker's turns, the bot's replies, topics.

No HTTP here; the web tier calls these. One assignment's conversation in one chat slot is a
:class:`~hitkit.db.models.Conversation` of kind ``human_bot`` whose key is
:func:`~hitkit.protocols.live_chat.task.conversation_key` (assignment × unit), created at the first message
or topic change. Turns alternate: after a worker turn the bot owes a reply, and the worker's next
turn is refused until the reply is stored.

The order of one exchange, and why:

1. :func:`~hitkit.worker.chat_turns.add_worker_turn` stores the worker's message, and the caller commits
   it, *before* the bot is asked: a failed or slow bot must never cost the worker what they typed.
2. The bot is asked with no transaction open. On SQLite every transaction takes the write lock
   (``BEGIN IMMEDIATE``), so holding one across a bot call of seconds would stall every worker.
3. :func:`~hitkit.worker.chat_turns.add_bot_turn` stores the reply if it is still owed (a retry may have
   raced it).

One owed reply is generated once, however many retries arrive at once: the request that owes
the bot's call *claims* it (``Conversation.reply_claim``, set with the conversation's row locked)
before calling the bot, and the others wait for the reply it stores. A claim is released when
the bot fails, and abandoned once older than the bot's whole time budget (a web process killed
mid-call), so a conversation is never stuck.

A chat slot is named by its unit's public key (:attr:`~hitkit.db.models.Unit.public_key`), never by
its row id: the order of ids would tell the control slot from the others.

:func:`send` and :func:`bot_reply` do these steps with their own short transactions, taking the
database URL rather than a session for that reason. The bot itself is injected as ``reply``, a
callable ``reply(history) -> str`` over OpenAI-style messages (``BotClient.reply`` fits), or a
mapping from system name to such callables. Any failure of the call raises :class:`BotReplyError`
and leaves the worker's turn stored and the reply owed; calling :func:`bot_reply` again resumes.

Streaming: :func:`answer` (and :func:`send`, :func:`bot_reply`) take ``on_text``, told the reply so
far as the bot generates it; the turn is still stored once, whole, with the milliseconds to its
first text and to the whole reply (``Turn.first_token_ms``, ``Turn.reply_ms``).
:mod:`hitkit.worker.chat_stream` relays it to the page. A streamed control reply (answered whole by the
degraded bot) is released in pieces on the measured shape of a real bot's stream (:mod:`hitkit.worker.pieces`),
so the page sees it appear as the others do.

A slot may be rated ("Next chatbot") only after ``live_chat.min_inputs`` worker turns; the task
type enforces that in the shared answer and submit flow. Before the first message the slot's ``topic`` and ``topic_sentiment``
must be answered, as the protocol asks; once the slot has a rating, its chat is closed.

Topic changes are kept in ``Conversation.meta["topic_changes"]``: a list of
``{"by": "worker" | "bot", "at_turn": turns so far, "topic": new topic or None, "time": ISO UTC}``.
Not a Response: a response holds one answer per question, and a chat may change topic many
times; the meta also travels with the conversation into ``conversations.jsonl``.

The steps in the caller's transaction are in :mod:`hitkit.worker.chat_turns`, their SQL in :mod:`hitkit.worker.chat_sql`.
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import update

from hitkit import timing
from hitkit.db.models import Conversation, utcnow
from hitkit.db.session import session_scope
from hitkit.errors import FlowError, HitkitError
from hitkit.i18n import N_
from hitkit.study.bot_sections import PacingConfig
from hitkit.study.stored import StudyContext
from hitkit.worker import chat_sql, chat_turns, flow, pacing, pieces, streams, tokens
from hitkit.worker.chat_turns import ChatState

Reply = Callable[..., str]
"""A bot: OpenAI-style history (``{"role": "user" | "assistant", "content": ...}``) in, reply text out;
one that takes an ``on_text`` keyword streams (``BotClient.reply`` does)."""
OnText = Callable[[str], None]
"""Told the reply so far, each time it grows."""


class BotReplyError(FlowError):
    """The bot gave no reply; the worker's turn is stored and the reply still owed (HTTP 502)."""

    def __init__(self, message: str):
        super().__init__(message, 502)


def claim_lease_s(ctx: StudyContext, system: str) -> float:
    """How long a claim on a reply of ``system`` stands: its bot's whole time budget, plus a margin.

    The claimant gives up by then (every attempt timed out), so an older claim belongs to a
    request that died, and another may take it over.
    """
    options = next((s.options for s in ctx.config.systems if s.name == system), {}) or {}
    timeout, retries = float(options.get("timeout_s", 30.0)), int(options.get("retries", 2))
    backoff = float(options.get("backoff_s", 0.5))
    return timeout * (retries + 1) + backoff * (2**retries - 1) + 2.0


def stream_deadline_s(ctx: StudyContext) -> float:
    """Longest a chat request may wait on its reply: the slowest bot's whole time budget, plus the longest a
    reply may be held to its release time. The same for every slot, so it tells none of them apart."""
    settings = _settings(ctx)
    budget = max((claim_lease_s(ctx, s.name) for s in ctx.config.systems), default=WAIT_FOR_CLAIM_S)
    return budget + settings.floor_s + settings.cold_start_s


def admit(database_url: str, ctx: StudyContext, token: str, limits: streams.StreamLimits) -> streams.Lease:
    """A place for one bot-waiting request of the assignment ``token`` names (:mod:`hitkit.worker.streams`):
    FlowError(403) for a bad token, :class:`~hitkit.worker.streams.TooManyStreams` (429) over a bound.

    The assignment's worker is read once and remembered (it never changes), so that a refusal costs no
    database call: a worker hammering the bound must not cost the others database time. Only the token's
    signature is checked here before that; the route checks the token whole, as always."""
    parsed = tokens.read_assignment_token(ctx.secret, token)
    if parsed is None:
        raise FlowError(N_("this link is not valid; please return to the task from the crowd site"), 403)
    key = (database_url, parsed[0])
    worker = _WORKER_OF.get(key)
    if worker is None:
        with session_scope(database_url) as session:
            worker = flow.assignment_for(session, ctx, token).worker_id
        if len(_WORKER_OF) >= _WORKER_OF_MAX:
            _WORKER_OF.clear()  # a bounded memory; refilled one read per assignment
        _WORKER_OF[key] = worker
    return limits.admit((database_url, "assignment", parsed[0]), (database_url, "worker", worker))


_WORKER_OF: dict[tuple[str, int], int] = {}
"""(database URL, assignment id) → its worker's id, as read once (:func:`admit`)."""
_WORKER_OF_MAX = 100_000


# One exchange, each step in its own transaction --------------------------------------------------
def bot_reply(
    database_url: str,
    ctx: StudyContext,
    token: str,
    unit_id: int | str,
    reply: Reply | Mapping[str, Reply],
    on_text: OnText | None = None,
) -> ChatState:
    """Ask the bot for the reply it owes, if any, and store it; BotReplyError if it gives none.

    If another request is already asking the bot for this reply, wait for the reply it stores
    (no transaction open) rather than ask again: one generation per owed reply. ``on_text``: see
    :func:`answer`.
    """
    with session_scope(database_url) as session:
        assignment, unit = chat_turns.slot(session, ctx, token, unit_id, writable=True)
        side = chat_turns.split_side(unit_id)[1]
        conversation = chat_sql.locked_conversation(session, ctx, assignment, unit, create=False, side=side)
        turns = chat_sql.turns_of(session, conversation)
        if conversation is None or not turns or turns[-1].speaker != "worker":  # no conversation: no turns
            return chat_turns.state(ctx, assignment, unit, conversation, turns, side)
        lease = claim_lease_s(ctx, ctx.task.chat_system(unit, side))
        claimed_at = conversation.reply_claimed_at
        free = (
            conversation.reply_claim is None
            or claimed_at is None
            or utcnow() - claimed_at > dt.timedelta(seconds=lease)
        )
        claim = chat_turns.claim_reply(conversation) if free else None
        owed = chat_turns.owed_reply(assignment, unit, conversation, turns, claim, side, ctx)
    if owed.claim is None:
        return _await_reply(database_url, ctx, owed, min(lease, WAIT_FOR_CLAIM_S))
    return answer(database_url, ctx, reply, owed, on_text)


WAIT_FOR_CLAIM_S = 20.0
"""Longest a retry waits for the reply another request is generating before it answers "still waiting"."""


def _await_reply(database_url: str, ctx: StudyContext, owed: chat_turns.Owed, wait_s: float) -> ChatState:
    """Poll, with no transaction open, until the reply another request claimed is stored; 502 if it is not yet."""
    deadline = time.monotonic() + wait_s
    pause = 0.05
    while True:
        with session_scope(database_url) as session:
            conversation = session.get_one(Conversation, owed.conversation_id)
            turns = chat_sql.turns_of(session, conversation)
            if not turns or turns[-1].speaker != "worker" or turns[-1].index != owed.reply_to:
                return chat_turns.state_of(ctx, owed.unit_key, conversation, turns)
            if conversation.reply_claim is None:  # the claimant failed and let go: the page may retry now
                raise BotReplyError(N_("the chatbot did not reply; your message is saved — please try again"))
        if time.monotonic() >= deadline:
            raise BotReplyError(
                N_("the chatbot is still writing its reply; your message is saved — please wait a moment")
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def _release(database_url: str, owed: chat_turns.Owed) -> None:
    """Give up this request's claim (the bot failed), so that the next retry asks again at once."""
    if owed.claim is None:
        return
    with session_scope(database_url) as session:
        session.execute(
            update(Conversation)
            .where(Conversation.id == owed.conversation_id, Conversation.reply_claim == owed.claim)
            .values(reply_claim=None, reply_claimed_at=None)
        )


NOT_ANSWERING = N_("this chatbot is not answering; please wait or go on — your message is saved")
"""The only words a worker sees when a bot fails, whichever bot: no system, address or cause (those go to
the server log and the study's ``bot_*`` events), so a failing control bot looks like any other."""
log = logging.getLogger("hitkit.worker.chat")


def answer(
    database_url: str,
    ctx: StudyContext,
    reply: Reply | Mapping[str, Reply],
    owed: chat_turns.Owed,
    on_text: OnText | None = None,
) -> ChatState:
    """Ask the bot for the reply it owes with no transaction open, then store it if still owed.

    With ``on_text`` the reply is streamed: ``on_text(reply so far)`` is called as it grows (from a
    bot that streams; once, with the whole reply, from one that does not), and the turn is stored
    once, whole, when the reply is complete. If ``on_text`` raises (the reader left), the bot's
    stream is closed, which cancels its generation; the reply stays owed and nothing is stored.
    The milliseconds to the first text and to the whole reply are stored with the turn.
    """
    system = owed.system
    from hitkit.bots.health import watch

    try:
        if isinstance(reply, Mapping):
            if system not in reply:
                raise HitkitError(f"no bot client for system '{system}'; give one for every system of the study")
            reply = reply[system]
        is_control = system in ctx.task.control_systems()
        try:
            started = time.monotonic()
            first: list[float] = []
            marks: list[tuple[float, int]] = []  # a real reply's texts as seen: its stream's shape
            shown = [""]

            def seen(so_far: str) -> None:
                now = time.monotonic()
                if so_far and not first:
                    first.append(now)
                if not is_control:
                    marks.append((now - started, len(so_far)))
                # Only a text that changed goes to the page: the bot client's "" before a stream's first piece
                # would be an event no control reply has.
                if on_text is not None and so_far != shown[0]:
                    shown[0] = so_far
                    on_text(so_far)

            # The control bot answers whole and at once; its reply is released on a real bot's schedule
            # (pacing; streamed: in pieces, pieces.py), so it is asked whole. A real bot streams as it generates.
            settings = _settings(ctx)
            with watch(database_url, ctx.study_id, system), timing.phase("bot"):  # bot_* health events
                if is_control:
                    text = _call(reply, owed.history, lambda _: None, stream=False)
                else:
                    text = _call(reply, owed.history, seen, stream=on_text is not None)
            if isinstance(text, str):
                if is_control and on_text is not None and settings.mode != "off":
                    _release_in_pieces(database_url, ctx, owed, text, started, seen)
                else:
                    _pace(database_url, ctx, owed, time.monotonic() - started, is_control)
                    if is_control:
                        seen(text)
                if not is_control and on_text is not None:
                    _measure(database_url, ctx, marks)
            done = time.monotonic()
            took = (round(((first[0] if first else done) - started) * 1000), round((done - started) * 1000))
        except Exception as exc:  # any failure of the bot, whatever its kind, must leave the chat resumable
            log.warning("bot of system %r gave no reply (study %s): %s", system, ctx.name, exc)
            raise BotReplyError(NOT_ANSWERING) from exc
        if not isinstance(text, str):
            log.warning("bot of system %r replied with %s, not text (study %s)", system, type(text).__name__, ctx.name)
            raise BotReplyError(NOT_ANSWERING)
    except BaseException:
        _release(database_url, owed)
        raise
    with timing.phase("reply"), session_scope(database_url) as session:
        return chat_turns.store_reply(session, ctx, owed, text, took)[1]


def _settings(ctx: StudyContext) -> PacingConfig:
    return ctx.config.bots.pacing if ctx.config.bots is not None else PacingConfig()


def _pace(database_url: str, ctx: StudyContext, owed: chat_turns.Owed, elapsed_s: float, is_control: bool) -> None:
    """Hold the reply until its release time: the control slot is never the fast one."""
    settings = _settings(ctx)
    study = (database_url, ctx.study_id)
    if not is_control:
        pacing.OBSERVED.add(study, elapsed_s, settings.window)
    rng = random.Random(f"{ctx.config.seed}:pace:{owed.conversation_id}:{owed.reply_to}")
    delay = pacing.release_delay(elapsed_s, is_control, pacing.OBSERVED.of(study), settings, rng)
    if delay > 0:
        with timing.phase("pace"):
            time.sleep(delay)


def _measure(database_url: str, ctx: StudyContext, marks: list[tuple[float, int]]) -> None:
    """Keep a real streamed reply's shape, for the control replies to be released on (pieces.py)."""
    shape = pieces.shape_of(marks)
    if shape is not None:
        pieces.SHAPES.add((database_url, ctx.study_id), shape, _settings(ctx).window)


def _release_in_pieces(
    database_url: str, ctx: StudyContext, owed: chat_turns.Owed, text: str, started: float, seen: OnText
) -> None:
    """Release a control reply in pieces on a real streamed reply's shape (seeded per reply), then hold it
    to ``floor_s``. A control bot slower than the drawn first text shifts the whole schedule later."""
    settings = _settings(ctx)
    rng = random.Random(f"{ctx.config.seed}:pieces:{owed.conversation_id}:{owed.reply_to}")
    shape = pieces.draw_shape(pieces.SHAPES.of((database_url, ctx.study_id)), text, settings, rng)
    late = max(0.0, time.monotonic() - started - shape.first_s)
    with timing.phase("pace"):
        for at, so_far in pieces.schedule(text, shape):
            wait = started + late + at - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            seen(so_far)
        hold = started + settings.floor_s - time.monotonic()
        if hold > 0:
            time.sleep(hold)


def _call(reply: Reply, history: list[dict[str, str]], seen: OnText, stream: bool) -> str:
    """Ask ``reply`` for the text after ``history``; with ``stream``, streamed into ``seen`` where the bot can
    stream (otherwise ``seen`` hears the whole reply once)."""
    if stream and "on_text" in inspect.signature(reply).parameters:
        return reply(history, on_text=seen)
    text = reply(history)
    if isinstance(text, str):
        seen(text)  # a bot that cannot stream: its whole reply is the one piece
    return text


def store_message(
    database_url: str, ctx: StudyContext, token: str, unit_id: int | str, text: str, signals: Any = None
) -> chat_turns.Owed:
    """Store and commit the worker's message; the reply the bot now owes (:func:`answer` asks for it).

    ``signals``: how the page saw the message typed, as sent (:func:`hitkit.worker.chat_turns.add_worker_turn`)."""
    with timing.phase("store"), session_scope(database_url) as session:
        return chat_turns.store_worker_turn(session, ctx, token, unit_id, text, signals)[1]


def send(
    database_url: str,
    ctx: StudyContext,
    token: str,
    unit_id: int | str,
    text: str,
    reply: Reply | Mapping[str, Reply],
    signals: Any = None,
    on_text: OnText | None = None,
) -> ChatState:
    """The worker's message, committed first, then the bot's reply to it (see the module docstring)."""
    owed = store_message(database_url, ctx, token, unit_id, text, signals)
    return answer(database_url, ctx, reply, owed, on_text)


def bot_clients(ctx: StudyContext) -> dict[str, Reply]:
    """One shared client per system of a live-chat study, keyed by system name."""
    from hitkit.bots.client import BotClient

    return {system.name: BotClient(system.bot_config()).reply for system in ctx.config.systems}
