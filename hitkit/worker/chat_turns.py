"""A live chat's steps in the caller's transaction (the caller commits): read a slot, store a turn, change topic.

Each step checks the worker's token and the slot first (:func:`slot`), then reads and writes the
conversation's rows through :mod:`hitkit.worker.chat_sql`. :mod:`hitkit.worker.chat` strings them into one
exchange, each step in a short transaction of its own; its docstring tells the order and why.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Conversation, Turn, Unit, utcnow
from hitkit.errors import AnswerError, FlowError
from hitkit.i18n import N_
from hitkit.study.stored import StudyContext
from hitkit.worker import authenticity, chat_sql, flow
from hitkit.worker.chat_sql import TurnLike
from hitkit.worker.validation import check_topic_change


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


# Lookups ------------------------------------------------------------------------------------------
def slot(
    session: Session, ctx: StudyContext, token: str, unit_id: int | str, *, writable: bool
) -> tuple[Assignment, Unit]:
    """The assignment and chat unit a request names; ``unit_id`` is the public key (or, from Python, the row id).

    ``writable`` locks the assignment's row first (a chat turn and a submit of one assignment take
    turns) and refuses a chat that is closed, past its time limit or not consented to.
    """
    assignment, unit, _ = _slot_and_progress(session, ctx, token, unit_id, writable=writable, progress=False)
    return assignment, unit


def _slot_and_progress(
    session: Session, ctx: StudyContext, token: str, unit_id: int | str, *, writable: bool, progress: bool
) -> tuple[Assignment, Unit, set[str]]:
    """:func:`slot`, and with ``progress`` which of the answers a chat depends on are given (a rating,
    the topic, its sentiment), read in the same statement as the unit: this runs on every chat turn."""
    if not ctx.task.has_chat:
        raise FlowError(f"study '{ctx.name}' runs task '{ctx.config.task}', which has no live chat", 404)
    assignment = flow.assignment_for(session, ctx, token, lock=writable)
    if writable:
        if assignment.status != "accepted":
            raise FlowError(
                N_(
                    "this assignment is %(status)s; its chats can no longer change",
                    status=flow.status_word(assignment.status),
                ),
                409,
            )
        flow.writable(ctx, assignment)
    named, side = split_side(unit_id)
    params = {"b_unit": named, "b_hit_id": assignment.hit_id}
    if progress:
        params["b_assignment_id"] = assignment.id
    task = ctx.task
    row = session.execute(
        chat_sql.unit_query(isinstance(named, str), progress, task.chat_closing, task.chat_opening), params
    ).first()
    if row is None:
        raise AnswerError(N_("unit %(unit)r is not part of this HIT; reload the page", unit=str(unit_id)[:40]))
    task.chat_system(row[0], side)  # an AnswerError for a side the unit does not have
    answered = {name for name, given in zip((task.chat_closing, *task.chat_opening), row[1:]) if given}
    return assignment, row[0], answered


def split_side(unit_id: int | str) -> tuple[int | str, str]:
    """A chat's name as a page gives it: a unit's public key, or ``KEY-SIDE`` for one of the unit's
    several conversations (the arena's ``a`` and ``b``; public keys are hex, never holding ``-``)."""
    if isinstance(unit_id, str) and "-" in unit_id:
        key, side = unit_id.split("-", 1)
        return key, side
    return unit_id, ""


def chat_name(unit: Unit, side: str) -> str:
    """How the page names one conversation of ``unit`` (:func:`split_side`'s inverse)."""
    return f"{unit.public_key}-{side}" if side else unit.public_key


def _inputs(turns: Sequence[TurnLike]) -> int:
    return sum(t.speaker == "worker" for t in turns)


def _message(ctx: StudyContext, text: Any, what: str) -> str:
    text = flow.storable_text(str(text).strip(), what)
    if not text:
        raise AnswerError(N_("the %(what)s is empty; type something first", what=what))
    limit = ctx.config.hit.max_answer_chars
    if len(text) > limit:
        raise AnswerError(
            N_(
                "the %(what)s is %(length)s characters; the limit is %(limit)s",
                what=what,
                length=len(text),
                limit=limit,
            )
        )
    return text


def state(
    ctx: StudyContext,
    assignment: Assignment,
    unit: Unit,
    conversation: Conversation | None,
    turns: Sequence[TurnLike],
    side: str = "",
) -> ChatState:
    return state_of(ctx, chat_name(unit, side), conversation, turns)


def state_of(
    ctx: StudyContext, unit_key: str, conversation: Conversation | None, turns: Sequence[TurnLike]
) -> ChatState:
    # Messages one conversation needs: a unit's, shared by its sides (each arena message goes to both).
    inputs, least = _inputs(turns), ctx.task.chat_turns_needed(1) // len(ctx.task.chat_sides)
    return ChatState(
        unit_id=unit_key,
        conversation_id=unit_key,
        turns=[
            {"index": t.index, "speaker": t.speaker, "text": t.text, "time": t.created_at.isoformat()} for t in turns
        ],
        bot_owes_reply=bool(turns) and turns[-1].speaker == "worker",
        inputs=inputs,
        min_inputs=least,
        can_rate=inputs >= least,
        topic_changes=list((conversation.meta if conversation else {}).get("topic_changes", [])),
    )


# The database steps (caller commits) ---------------------------------------------------------------
def conversation_state(session: Session, ctx: StudyContext, token: str, unit_id: int | str) -> ChatState:
    """The slot's turns, whether the bot owes a reply, inputs typed and whether it may be rated."""
    assignment, unit = slot(session, ctx, token, unit_id, writable=False)
    side = split_side(unit_id)[1]
    conversation = session.scalar(
        select(Conversation).where(
            Conversation.study_id == ctx.study_id, Conversation.key == ctx.task.chat_key(assignment.id, unit.id, side)
        )
    )
    return state(ctx, assignment, unit, conversation, chat_sql.turns_of(session, conversation), side)


def add_worker_turn(
    session: Session, ctx: StudyContext, token: str, unit_id: int | str, text: str, signals: Any = None
) -> Turn:
    """Store the worker's message; refused while the bot owes a reply, or before the topic is given.

    ``signals`` is what the page says of how the message was typed, as sent: checked and bounded here
    (:func:`hitkit.worker.authenticity.clean_signals`), dropped when unusable, never a reason to refuse the message.
    """
    return store_worker_turn(session, ctx, token, unit_id, text, signals)[0]


def store_worker_turn(
    session: Session, ctx: StudyContext, token: str, unit_id: int | str, text: str, signals: Any = None
) -> tuple[Turn, Owed]:
    """:func:`add_worker_turn`, also returning the reply the bot now owes (all the exchange's next step needs)."""
    assignment, unit, answered = _slot_and_progress(session, ctx, token, unit_id, writable=True, progress=True)
    text = _message(ctx, text, N_("message"))
    if ctx.task.chat_closing in answered:
        raise FlowError(N_("this conversation is over (it has been rated); go on to the next chatbot"), 409)
    missing = [q for q in ctx.task.chat_opening if q not in answered]
    if missing:
        raise FlowError(f"before chatting, answer {' and '.join(missing)} for this chatbot", 409)
    side = split_side(unit_id)[1]
    # The reply this turn will make owed is this request's to ask the bot for: claimed as the row is locked.
    claim = secrets.token_hex(8)
    conversation = chat_sql.locked_conversation(session, ctx, assignment, unit, create=True, claim=claim, side=side)
    turns = chat_sql.turns_of(session, conversation)
    if turns and turns[-1].speaker == "worker":
        raise FlowError(N_("the chatbot has not replied to your last message yet; wait for its reply"), 409)
    ctx.task.check_message(session, assignment, unit, side, text, _inputs(turns))
    turn = chat_sql.insert_turn(
        session, conversation.id, len(turns), "worker", text, signals=authenticity.clean_signals(signals)
    )
    return turn, owed_reply(assignment, unit, conversation, [*turns, turn], claim, side, ctx)


def _history(turns: Sequence[TurnLike]) -> list[dict[str, str]]:
    return [{"role": "user" if t.speaker == "worker" else "assistant", "content": t.text} for t in turns]


def add_bot_turn(
    session: Session, ctx: StudyContext, token: str, unit_id: int | str, text: str, reply_to: int
) -> Turn | None:
    """Store the bot's reply to the worker turn ``reply_to``; None if that turn is no longer owed one.

    Stored whatever the assignment's status by now: a reply asked for while it was open is part of
    the conversation's record.
    """
    assignment, unit = slot(session, ctx, token, unit_id, writable=False)
    side = split_side(unit_id)[1]
    conversation = chat_sql.locked_conversation(session, ctx, assignment, unit, create=False, side=side)
    if conversation is None:
        return None
    owed = Owed(conversation.id, chat_name(unit, side), ctx.task.chat_system(unit, side), [], reply_to, None)
    return store_reply(session, ctx, owed, text)[0]


@dataclass(frozen=True)
class Owed:
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


def owed_reply(
    assignment: Assignment,
    unit: Unit,
    conversation: Conversation,
    turns: Sequence[TurnLike],
    claim: str | None,
    side: str = "",
    ctx: StudyContext | None = None,
) -> Owed:
    system = ctx.task.chat_system(unit, side) if ctx is not None else unit.payload["system"]
    # A Row's stub types ``.index`` as Sequence.index; SQLAlchemy gives the column of that name.
    reply_to: int = turns[-1].index  # type: ignore[assignment]
    return Owed(conversation.id, chat_name(unit, side), system, _history(turns), reply_to, claim, tuple(turns))


def claim_reply(conversation: Conversation) -> str:
    """Claim the conversation's owed reply for this request (the caller holds the row lock)."""
    nonce = secrets.token_hex(8)
    conversation.reply_claim, conversation.reply_claimed_at = nonce, utcnow()
    return nonce


def store_reply(
    session: Session, ctx: StudyContext, owed: Owed, text: str, timing: tuple[int | None, int | None] = (None, None)
) -> tuple[Turn | None, ChatState]:
    """Store the bot's reply if ``owed.reply_to`` still awaits one; the slot's state after it.

    ``timing``: milliseconds to the reply's first text and to the whole reply (:mod:`hitkit.worker.chat`)."""
    # Lock the row and let go of this request's claim in one statement (a claim held by another
    # request, for a later turn, stays as it is).
    params = {"b_conversation_id": owed.conversation_id, "b_claim": owed.claim}
    conversation = session.scalars(chat_sql.releasing_update(owed.claim is not None), params).one()
    if owed.turns is not None:
        turn = _insert_reply_if_owed(session, ctx, owed, text, timing)
        if turn is not None:
            return turn, state_of(ctx, owed.unit_key, conversation, [*owed.turns, turn])
    turns = chat_sql.turns_of(session, conversation)
    if not turns or turns[-1].speaker != "worker" or turns[-1].index != owed.reply_to:
        return None, state_of(ctx, owed.unit_key, conversation, turns)
    turn = chat_sql.insert_turn(
        session, conversation.id, len(turns), "bot", str(text), (ctx.study_id, owed.system), timing=timing
    )
    return turn, state_of(ctx, owed.unit_key, conversation, [*turns, turn])


def _insert_reply_if_owed(
    session: Session, ctx: StudyContext, owed: Owed, text: str, timing: tuple[int | None, int | None]
) -> Turn | None:
    """Insert the bot's reply in one statement if turn ``owed.reply_to`` is the worker's and still the
    last (INSERT … SELECT … WHERE); None if it is not, and nothing was stored."""
    now, index, text = utcnow(), owed.reply_to + 1, str(text)
    turn_id = session.execute(
        chat_sql.reply_insert_if_owed(),
        {
            "b_conversation_id": owed.conversation_id,
            "b_reply_to": owed.reply_to,
            "b_index": index,
            "b_text": text,
            "b_now": now,
            "b_study_id": ctx.study_id,
            "b_system": owed.system,
            "b_first_token_ms": timing[0],
            "b_reply_ms": timing[1],
        },
    ).scalar()
    if turn_id is None:
        return None
    return Turn(
        id=turn_id,
        conversation_id=owed.conversation_id,
        index=index,
        speaker="bot",
        text=text,
        created_at=now,
        first_token_ms=timing[0],
        reply_ms=timing[1],
    )


def change_topic(
    session: Session,
    ctx: StudyContext,
    token: str,
    unit_id: int | str,
    by: Literal["worker", "bot"],
    topic: str | None = None,
) -> dict[str, Any]:
    """Record that ``by`` changed the topic now (after the turns so far), with the new topic if given."""
    if by not in ("worker", "bot"):
        raise AnswerError(f"a topic change is made by 'worker' or 'bot', not {by!r}")
    assignment, unit = slot(session, ctx, token, unit_id, writable=True)
    conversation = chat_sql.locked_conversation(
        session, ctx, assignment, unit, create=True, side=split_side(unit_id)[1]
    )
    check_topic_change(conversation.meta, topic)
    change = {
        "by": by,
        "at_turn": len(chat_sql.turns_of(session, conversation)),
        "topic": _message(ctx, topic, N_("topic")) if topic is not None else None,
        "time": utcnow().isoformat(),
    }
    # A new dict, not an in-place append: the JSON column only notices assignment.
    conversation.meta = {**conversation.meta, "topic_changes": [*conversation.meta.get("topic_changes", []), change]}
    session.flush()
    return change
