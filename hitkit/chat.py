"""Live chat as database operations (METHODS.md §1): the worker's turns, the bot's replies, topics.

No HTTP here; the web tier calls these. One assignment's conversation in one chat slot is a
:class:`~hitkit.db.models.Conversation` of kind ``human_bot`` whose key is
:func:`~hitkit.protocols.live_chat.task.conversation_key` (assignment × unit), created at the first message
or topic change. Turns alternate: after a worker turn the bot owes a reply, and the worker's next
turn is refused until the reply is stored.

The order of one exchange, and why:

1. :func:`add_worker_turn` stores the worker's message, and the caller commits it, *before* the bot
   is asked: a failed or slow bot must never cost the worker what they typed.
2. The bot is asked with no transaction open. On SQLite every transaction takes the write lock
   (``BEGIN IMMEDIATE``), so holding one across a bot call of seconds would stall every worker.
3. :func:`add_bot_turn` stores the reply if it is still owed (a retry may have raced it).

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

A slot may be rated ("Next chatbot") only after ``live_chat.min_inputs`` worker turns; the task
type enforces that in the shared answer and submit flow. Before the first message the slot's ``topic`` and ``topic_sentiment``
must be answered, as the protocol asks; once the slot has a rating, its chat is closed.

Topic changes are kept in ``Conversation.meta["topic_changes"]``: a list of
``{"by": "worker" | "bot", "at_turn": turns so far, "topic": new topic or None, "time": ISO UTC}``.
Not a Response: a response holds one answer per question, and a chat may change topic many
times; the meta also travels with the conversation into ``conversations.jsonl``.
"""
from __future__ import annotations

import datetime as dt
import functools
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from sqlalchemy import Row, bindparam, case, exists, func, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hitkit import flow, timing
from hitkit.db.models import (
    Assignment,
    Conversation,
    HitUnit,
    Response,
    System,
    Turn,
    Unit,
    utcnow,
)
from hitkit.db.session import session_scope
from hitkit.errors import AnswerError, FlowError, HitkitError
from hitkit.study import StudyContext
from hitkit.protocols.live_chat.task import SCORE_PREFIX, conversation_key
from hitkit.validation import check_topic_change

Reply = Callable[[list[dict[str, str]]], str]
"""A bot: OpenAI-style history (``{"role": "user" | "assistant", "content": ...}``) in, reply text out."""

_BEFORE_CHAT = ("topic", "topic_sentiment")


class BotReplyError(FlowError):
    """The bot gave no reply; the worker's turn is stored and the reply still owed (HTTP 502)."""

    def __init__(self, message: str):
        super().__init__(message, 502)


@dataclass(frozen=True)
class ChatState:
    """What the chat page shows of one slot: blind (speakers are ``worker`` and ``bot``)."""

    unit_id: str
    """The slot's public key."""
    conversation_id: str
    """The slot's conversation as the page names it (the public key again: no row id leaves the server)."""
    turns: list[dict[str, Any]]
    bot_owes_reply: bool
    inputs: int
    min_inputs: int
    can_rate: bool
    topic_changes: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form for the page."""
        return asdict(self)


# Statements of the chat turn, built once per process -----------------------------------------------
# Every chat turn runs these. Their values are bound parameters, so each is built (and its cache key
# computed) once instead of on every request: that construction was a fifth of a turn's CPU.
@functools.cache
def _unit_query(by_key: bool, progress: bool):
    """A HIT's unit by public key (or row id); with ``progress``, whether it has a rating, a topic, a sentiment."""
    named = Unit.public_key == bindparam("b_unit") if by_key else Unit.id == bindparam("b_unit")
    flags = []
    if progress:
        given = select(Response.id).where(Response.assignment_id == bindparam("b_assignment_id"),
                                          Response.unit_id == Unit.id)
        flags = [exists(given.where(Response.question.startswith(SCORE_PREFIX, autoescape=True))),
                 *(exists(given.where(Response.question == q)) for q in _BEFORE_CHAT)]
    return (select(Unit, *flags).join(HitUnit, HitUnit.unit_id == Unit.id)
            .where(HitUnit.hit_id == bindparam("b_hit_id"), named))


def _named_conversation():
    return (Conversation.study_id == bindparam("b_study_id"), Conversation.key == bindparam("b_key"))


@functools.cache
def _conversation_query():
    return select(Conversation).where(*_named_conversation()).with_for_update()


@functools.cache
def _claiming_update():
    """Lock the conversation and claim its next owed reply, unless one is owed now (then leave the claim)."""
    last = (select(Turn.speaker).where(Turn.conversation_id == Conversation.id).order_by(Turn.index.desc())
            .limit(1).scalar_subquery())
    owed_now = func.coalesce(last, "") == "worker"
    claimed_at = bindparam("b_now", type_=Conversation.reply_claimed_at.type)
    return (update(Conversation).where(*_named_conversation())
            .values(reply_claim=case((owed_now, Conversation.reply_claim), else_=bindparam("b_claim")),
                    reply_claimed_at=case((owed_now, Conversation.reply_claimed_at), else_=claimed_at))
            .returning(Conversation).execution_options(synchronize_session=False, populate_existing=True))


@functools.cache
def _releasing_update(claimed: bool):
    """Lock the conversation by id and let go of this request's claim (``claimed``), if it still holds it."""
    mine = Conversation.reply_claim == bindparam("b_claim") if claimed else Conversation.id.is_(None)
    return (update(Conversation).where(Conversation.id == bindparam("b_conversation_id"))
            .values(reply_claim=case((mine, None), else_=Conversation.reply_claim),
                    reply_claimed_at=case((mine, None), else_=Conversation.reply_claimed_at))
            .returning(Conversation).execution_options(synchronize_session=False, populate_existing=True))


@functools.cache
def _turns_query():
    return select(*_TURN_COLUMNS).where(Turn.conversation_id == bindparam("b_conversation_id")).order_by(Turn.index)


def _system_id():
    """The study's system named ``:system``, as a subquery: one statement, not a lookup and an insert."""
    return (select(System.id).where(System.study_id == bindparam("b_study_id"), System.name == bindparam("b_system"))
            .scalar_subquery())


@functools.cache
def _turn_insert(by_system: bool):
    """Insert one turn (``by_system``: a bot's, with the system's id) and return its id."""
    table = Turn.__table__
    statement = insert(table)
    if by_system:
        statement = statement.values(system_id=_system_id())
    return statement.returning(table.c.id)


@functools.cache
def _reply_insert_if_owed():
    """Insert the bot's reply only if turn ``:reply_to`` is the worker's and still the last."""
    table = Turn.__table__
    turns_of = select(table.c.id).where(table.c.conversation_id == bindparam("b_conversation_id"))
    owed_now = (exists(turns_of.where(table.c.index == bindparam("b_reply_to"), table.c.speaker == "worker"))
                & ~exists(turns_of.where(table.c.index > bindparam("b_reply_to"))))
    row = select(bindparam("b_conversation_id", type_=table.c.conversation_id.type),
                 bindparam("b_index", type_=table.c.index.type), literal("bot"),
                 bindparam("b_text", type_=table.c.text.type), bindparam("b_now", type_=table.c.created_at.type),
                 _system_id()).where(owed_now)
    return (insert(table).from_select(["conversation_id", "index", "speaker", "text", "created_at", "system_id"], row)
            .returning(table.c.id))


# Lookups ------------------------------------------------------------------------------------------
def _slot(session: Session, ctx: StudyContext, token: str, unit_id: int | str, *,
          writable: bool) -> tuple[Assignment, Unit]:
    """The assignment and chat unit a request names; ``unit_id`` is the public key (or, from Python, the row id).

    ``writable`` locks the assignment's row first (a chat turn and a submit of one assignment take
    turns) and refuses a chat that is closed, past its time limit or not consented to.
    """
    assignment, unit, _ = _slot_and_progress(session, ctx, token, unit_id, writable=writable, progress=False)
    return assignment, unit


def _slot_and_progress(session: Session, ctx: StudyContext, token: str, unit_id: int | str, *, writable: bool,
                       progress: bool) -> tuple[Assignment, Unit, set[str]]:
    """:func:`_slot`, and with ``progress`` which of the answers a chat depends on are given (a rating,
    the topic, its sentiment), read in the same statement as the unit: this runs on every chat turn."""
    if not ctx.task.has_chat:
        raise FlowError(f"study '{ctx.name}' runs task '{ctx.config.task}', which has no live chat", 404)
    assignment = flow.assignment_for(session, ctx, token, lock=writable)
    if writable:
        if assignment.status != "accepted":
            raise FlowError(f"this assignment is {assignment.status}; its chats can no longer change", 409)
        flow.writable(ctx, assignment)
    params = {"b_unit": unit_id, "b_hit_id": assignment.hit_id}
    if progress:
        params["b_assignment_id"] = assignment.id
    row = session.execute(_unit_query(isinstance(unit_id, str), progress), params).first()
    if row is None:
        raise AnswerError(f"unit {str(unit_id)[:40]!r} is not part of this HIT; reload the page")
    answered = {name for name, given in zip((SCORE_PREFIX, *_BEFORE_CHAT), row[1:]) if given}
    return assignment, row[0], answered


def _conversation(session: Session, ctx: StudyContext, assignment: Assignment, unit: Unit, *,
                  create: bool, claim: str | None = None) -> Conversation | None:
    """The slot's conversation, row-locked so that two requests on one chat take turns.

    With ``claim``, the reply the conversation is about to owe is claimed in the same statement
    that locks the row (an UPDATE … RETURNING, not a SELECT … FOR UPDATE and an UPDATE): a chat
    turn stays at the round trips it had. If the turn is then refused, the rollback undoes it.
    """
    named = {"b_study_id": ctx.study_id, "b_key": conversation_key(assignment.id, unit.id)}
    if claim is not None:
        # Claimed only if no reply is owed now (the last turn is not the worker's): otherwise the
        # turn is refused below and another request's claim must stand, whoever commits this.
        conversation = session.scalars(_claiming_update(), {**named, "b_claim": claim, "b_now": utcnow()}).first()
    else:
        conversation = session.scalar(_conversation_query(), named)
    if conversation is None and create:
        try:
            with session.begin_nested():
                conversation = Conversation(
                    study_id=ctx.study_id, key=conversation_key(assignment.id, unit.id), kind="human_bot",
                    meta={"assignment_id": assignment.id, "unit_id": unit.id, "system": unit.payload["system"],
                          "is_control": bool(unit.payload["is_control"]), "topic_changes": []},
                    reply_claim=claim, reply_claimed_at=utcnow() if claim else None)
                session.add(conversation)
        except IntegrityError:  # the same chat's first message arrived twice at once
            conversation = session.scalar(_conversation_query(), named)
    return conversation


TurnLike = Turn | Row
"""A turn as read (a row of :data:`_TURN_COLUMNS`) or as just stored (a detached Turn)."""
_TURN_COLUMNS = (Turn.id, Turn.index, Turn.speaker, Turn.text, Turn.created_at)


def _turns(session: Session, conversation: Conversation | None) -> list[Row]:
    """The conversation's turns in order, as plain rows (``.index``, ``.speaker``, ``.text``, ...).

    Rows, not Turn entities: every chat turn reads the whole conversation twice, and the ORM's
    identity map and instance state are work that nothing here needs.
    """
    if conversation is None:
        return []
    return list(session.execute(_turns_query(), {"b_conversation_id": conversation.id}))


def _insert_turn(session: Session, conversation_id: int, index: int, speaker: str, text: str,
                 system: tuple[int, str] | None = None) -> Turn:
    """Insert one turn with a single statement (no unit-of-work flush); the stored turn, detached.

    ``system`` is (study id, system name) for a bot's turn, whose system id the statement looks up.
    """
    now = utcnow()
    values = {"conversation_id": conversation_id, "index": index, "speaker": speaker, "text": text,
              "created_at": now}
    if system is not None:
        values.update(b_study_id=system[0], b_system=system[1])
    turn_id = session.execute(_turn_insert(system is not None), values).scalar_one()
    return Turn(id=turn_id, conversation_id=conversation_id, index=index, speaker=speaker, text=text,
                created_at=now)


def _inputs(turns: Sequence[TurnLike]) -> int:
    return sum(t.speaker == "worker" for t in turns)


def _message(ctx: StudyContext, text: Any, what: str) -> str:
    text = flow.storable_text(str(text).strip(), what)
    if not text:
        raise AnswerError(f"the {what} is empty; type something first")
    limit = ctx.config.hit.max_answer_chars
    if len(text) > limit:
        raise AnswerError(f"the {what} is {len(text)} characters; the limit is {limit}")
    return text


def _state(ctx: StudyContext, assignment: Assignment, unit: Unit, conversation: Conversation | None,
           turns: Sequence[TurnLike]) -> ChatState:
    return _state_of(ctx, unit.public_key, conversation, turns)


def _state_of(ctx: StudyContext, unit_key: str, conversation: Conversation | None,
              turns: Sequence[TurnLike]) -> ChatState:
    inputs, least = _inputs(turns), ctx.task.chat_turns_needed(1)
    return ChatState(
        unit_id=unit_key, conversation_id=unit_key,
        turns=[{"index": t.index, "speaker": t.speaker, "text": t.text, "time": t.created_at.isoformat()}
               for t in turns],
        bot_owes_reply=bool(turns) and turns[-1].speaker == "worker",
        inputs=inputs, min_inputs=least, can_rate=inputs >= least,
        topic_changes=list((conversation.meta if conversation else {}).get("topic_changes", [])),
    )


# The database steps (caller commits) ---------------------------------------------------------------
def conversation_state(session: Session, ctx: StudyContext, token: str, unit_id: int | str) -> ChatState:
    """The slot's turns, whether the bot owes a reply, inputs typed and whether it may be rated."""
    assignment, unit = _slot(session, ctx, token, unit_id, writable=False)
    conversation = session.scalar(select(Conversation).where(
        Conversation.study_id == ctx.study_id, Conversation.key == conversation_key(assignment.id, unit.id)))
    return _state(ctx, assignment, unit, conversation, _turns(session, conversation))


def add_worker_turn(session: Session, ctx: StudyContext, token: str, unit_id: int | str, text: str) -> Turn:
    """Store the worker's message; refused while the bot owes a reply, or before the topic is given."""
    return _store_worker_turn(session, ctx, token, unit_id, text)[0]


def _store_worker_turn(session: Session, ctx: StudyContext, token: str, unit_id: int | str,
                       text: str) -> tuple[Turn, _Owed]:
    """:func:`add_worker_turn`, also returning the reply the bot now owes (all the exchange's next step needs)."""
    assignment, unit, answered = _slot_and_progress(session, ctx, token, unit_id, writable=True, progress=True)
    text = _message(ctx, text, "message")
    if SCORE_PREFIX in answered:
        raise FlowError("this conversation is over (it has been rated); go on to the next chatbot", 409)
    missing = [q for q in _BEFORE_CHAT if q not in answered]
    if missing:
        raise FlowError(f"before chatting, answer {' and '.join(missing)} for this chatbot", 409)
    # The reply this turn will make owed is this request's to ask the bot for: claimed as the row is locked.
    claim = secrets.token_hex(8)
    conversation = _conversation(session, ctx, assignment, unit, create=True, claim=claim)
    turns = _turns(session, conversation)
    if turns and turns[-1].speaker == "worker":
        raise FlowError("the chatbot has not replied to your last message yet; wait for its reply", 409)
    turn = _insert_turn(session, conversation.id, len(turns), "worker", text)
    return turn, _owed(assignment, unit, conversation, [*turns, turn], claim)


def _history(turns: Sequence[TurnLike]) -> list[dict[str, str]]:
    return [{"role": "user" if t.speaker == "worker" else "assistant", "content": t.text} for t in turns]


def add_bot_turn(session: Session, ctx: StudyContext, token: str, unit_id: int | str, text: str,
                 reply_to: int) -> Turn | None:
    """Store the bot's reply to the worker turn ``reply_to``; None if that turn is no longer owed one.

    Stored whatever the assignment's status by now: a reply asked for while it was open is part of
    the conversation's record.
    """
    assignment, unit = _slot(session, ctx, token, unit_id, writable=False)
    conversation = _conversation(session, ctx, assignment, unit, create=False)
    if conversation is None:
        return None
    owed = _Owed(conversation.id, unit.public_key, unit.payload["system"], [], reply_to, None)
    return _store_reply(session, ctx, owed, text)[0]


@dataclass(frozen=True)
class _Owed:
    """A reply the bot owes, as read by the transaction that found it owed: all the next one needs.

    The second transaction of an exchange locks the conversation by id and stores the reply if that
    turn is still owed one; it need not check the worker's token again (the first one did, and a
    reply asked for while the assignment was open is part of the record whatever happens next).
    """

    conversation_id: int
    unit_key: str
    system: str
    history: list[dict[str, str]]
    reply_to: int
    claim: str | None
    """The nonce this request holds in ``Conversation.reply_claim`` (None: it claimed nothing)."""
    turns: tuple[TurnLike, ...] | None = None
    """The conversation up to and including turn ``reply_to``, as the first transaction read it (turns
    are never changed or removed, so if that turn is still the last, these are still the turns)."""


def _owed(assignment: Assignment, unit: Unit, conversation: Conversation, turns: Sequence[TurnLike],
          claim: str | None) -> _Owed:
    return _Owed(conversation.id, unit.public_key, unit.payload["system"], _history(turns), turns[-1].index, claim,
                 tuple(turns))


def _claim(conversation: Conversation) -> str:
    """Claim the conversation's owed reply for this request (the caller holds the row lock)."""
    nonce = secrets.token_hex(8)
    conversation.reply_claim, conversation.reply_claimed_at = nonce, utcnow()
    return nonce


def claim_lease_s(ctx: StudyContext, system: str) -> float:
    """How long a claim on a reply of ``system`` stands: its bot's whole time budget, plus a margin.

    The claimant gives up by then (every attempt timed out), so an older claim belongs to a
    request that died, and another may take it over.
    """
    options = next((s.options for s in ctx.config.systems if s.name == system), {}) or {}
    timeout, retries = float(options.get("timeout_s", 30.0)), int(options.get("retries", 2))
    backoff = float(options.get("backoff_s", 0.5))
    return timeout * (retries + 1) + backoff * (2 ** retries - 1) + 2.0


def _store_reply(session: Session, ctx: StudyContext, owed: _Owed, text: str) -> tuple[Turn | None, ChatState]:
    """Store the bot's reply if ``owed.reply_to`` still awaits one; the slot's state after it."""
    # Lock the row and let go of this request's claim in one statement (a claim held by another
    # request, for a later turn, stays as it is).
    params = {"b_conversation_id": owed.conversation_id, "b_claim": owed.claim}
    conversation = session.scalars(_releasing_update(owed.claim is not None), params).first()
    if owed.turns is not None:
        turn = _insert_reply_if_owed(session, ctx, owed, text)
        if turn is not None:
            return turn, _state_of(ctx, owed.unit_key, conversation, [*owed.turns, turn])
    turns = _turns(session, conversation)
    if not turns or turns[-1].speaker != "worker" or turns[-1].index != owed.reply_to:
        return None, _state_of(ctx, owed.unit_key, conversation, turns)
    turn = _insert_turn(session, conversation.id, len(turns), "bot", str(text), (ctx.study_id, owed.system))
    return turn, _state_of(ctx, owed.unit_key, conversation, [*turns, turn])


def _insert_reply_if_owed(session: Session, ctx: StudyContext, owed: _Owed, text: str) -> Turn | None:
    """Insert the bot's reply in one statement if turn ``owed.reply_to`` is the worker's and still the
    last (INSERT … SELECT … WHERE); None if it is not, and nothing was stored."""
    now, index, text = utcnow(), owed.reply_to + 1, str(text)
    turn_id = session.execute(_reply_insert_if_owed(), {
        "b_conversation_id": owed.conversation_id, "b_reply_to": owed.reply_to, "b_index": index, "b_text": text,
        "b_now": now, "b_study_id": ctx.study_id, "b_system": owed.system}).scalar()
    if turn_id is None:
        return None
    return Turn(id=turn_id, conversation_id=owed.conversation_id, index=index, speaker="bot", text=text,
                created_at=now)


def change_topic(session: Session, ctx: StudyContext, token: str, unit_id: int | str,
                 by: Literal["worker", "bot"], topic: str | None = None) -> dict[str, Any]:
    """Record that ``by`` changed the topic now (after the turns so far), with the new topic if given."""
    if by not in ("worker", "bot"):
        raise AnswerError(f"a topic change is made by 'worker' or 'bot', not {by!r}")
    assignment, unit = _slot(session, ctx, token, unit_id, writable=True)
    conversation = _conversation(session, ctx, assignment, unit, create=True)
    check_topic_change(conversation.meta, topic)
    change = {"by": by, "at_turn": len(_turns(session, conversation)),
              "topic": _message(ctx, topic, "topic") if topic is not None else None,
              "time": utcnow().isoformat()}
    # A new dict, not an in-place append: the JSON column only notices assignment.
    conversation.meta = {**conversation.meta,
                         "topic_changes": [*conversation.meta.get("topic_changes", []), change]}
    session.flush()
    return change


# One exchange, each step in its own transaction --------------------------------------------------
def bot_reply(database_url: str, ctx: StudyContext, token: str, unit_id: int | str,
              reply: Reply | Mapping[str, Reply]) -> ChatState:
    """Ask the bot for the reply it owes, if any, and store it; BotReplyError if it gives none.

    If another request is already asking the bot for this reply, wait for the reply it stores
    (no transaction open) rather than ask again: one generation per owed reply.
    """
    with session_scope(database_url) as session:
        assignment, unit = _slot(session, ctx, token, unit_id, writable=True)
        conversation = _conversation(session, ctx, assignment, unit, create=False)
        turns = _turns(session, conversation)
        if not turns or turns[-1].speaker != "worker":
            return _state(ctx, assignment, unit, conversation, turns)
        lease = claim_lease_s(ctx, unit.payload["system"])
        claimed_at = conversation.reply_claimed_at
        free = (conversation.reply_claim is None or claimed_at is None
                or utcnow() - claimed_at > dt.timedelta(seconds=lease))
        owed = _owed(assignment, unit, conversation, turns, _claim(conversation) if free else None)
    if owed.claim is None:
        return _await_reply(database_url, ctx, owed, min(lease, WAIT_FOR_CLAIM_S))
    return _ask(database_url, ctx, reply, owed)


WAIT_FOR_CLAIM_S = 20.0
"""Longest a retry waits for the reply another request is generating before it answers "still waiting"."""


def _await_reply(database_url: str, ctx: StudyContext, owed: _Owed, wait_s: float) -> ChatState:
    """Poll, with no transaction open, until the reply another request claimed is stored; 502 if it is not yet."""
    deadline = time.monotonic() + wait_s
    pause = 0.05
    while True:
        with session_scope(database_url) as session:
            conversation = session.get(Conversation, owed.conversation_id)
            turns = _turns(session, conversation)
            if not turns or turns[-1].speaker != "worker" or turns[-1].index != owed.reply_to:
                return _state_of(ctx, owed.unit_key, conversation, turns)
            if conversation.reply_claim is None:  # the claimant failed and let go: the page may retry now
                raise BotReplyError("the chatbot did not reply; your message is saved — please try again")
        if time.monotonic() >= deadline:
            raise BotReplyError("the chatbot is still writing its reply; your message is saved — please wait "
                                "a moment")
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def _release(database_url: str, owed: _Owed) -> None:
    """Give up this request's claim (the bot failed), so that the next retry asks again at once."""
    if owed.claim is None:
        return
    with session_scope(database_url) as session:
        session.execute(update(Conversation).where(Conversation.id == owed.conversation_id,
                                                   Conversation.reply_claim == owed.claim)
                        .values(reply_claim=None, reply_claimed_at=None))


def _ask(database_url: str, ctx: StudyContext, reply: Reply | Mapping[str, Reply], owed: _Owed) -> ChatState:
    """Ask the bot for the reply it owes with no transaction open, then store it if still owed."""
    system = owed.system
    from hitkit.bots.health import watch

    try:
        if isinstance(reply, Mapping):
            if system not in reply:
                raise HitkitError(f"no bot client for system '{system}'; give one for every system of the study")
            reply = reply[system]
        try:
            with watch(database_url, ctx.study_id, system), timing.phase("bot"):  # bot_* health events
                text = reply(owed.history)
        except Exception as exc:  # any failure of the bot, whatever its kind, must leave the chat resumable
            raise BotReplyError(f"the chatbot did not reply ({exc}); your message is saved — "
                                "please wait a moment and try again") from exc
        if not isinstance(text, str):
            raise BotReplyError(f"the chatbot's reply was {type(text).__name__}, not text; your message is saved — "
                                "try again")
    except BaseException:
        _release(database_url, owed)
        raise
    with timing.phase("reply"), session_scope(database_url) as session:
        return _store_reply(session, ctx, owed, text)[1]


def send(database_url: str, ctx: StudyContext, token: str, unit_id: int | str, text: str,
         reply: Reply | Mapping[str, Reply]) -> ChatState:
    """The worker's message, committed first, then the bot's reply to it (see the module docstring)."""
    with timing.phase("store"), session_scope(database_url) as session:
        owed = _store_worker_turn(session, ctx, token, unit_id, text)[1]
    return _ask(database_url, ctx, reply, owed)


def bot_clients(ctx: StudyContext) -> dict[str, Reply]:
    """One shared client per system of a live-chat study, keyed by system name."""
    from hitkit.bots.client import BotClient

    return {system.name: BotClient(system.bot_config()).reply for system in ctx.config.systems}
