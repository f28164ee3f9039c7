"""The SQL of a live chat: statements built once per process, and a conversation's rows read and written.

Every chat turn runs these. Their values are bound parameters, so each statement is built (and its
cache key computed) once instead of on every request: that construction was a fifth of a turn's CPU.
Nothing here checks who may do what: :mod:`hitkit.worker.chat_turns` does, then calls these.
"""

from __future__ import annotations

import functools
from typing import Literal, overload

from sqlalchemy import Row, Table, bindparam, case, exists, func, insert, literal, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Conversation, HitUnit, Response, System, Turn, Unit, utcnow
from hitkit.study.stored import StudyContext


@functools.cache
def unit_query(by_key: bool, progress: bool, closing: str = "", opening: tuple[str, ...] = ()):
    """A HIT's unit by public key (or row id); with ``progress``, whether it has an answer whose question
    starts with ``closing`` (the chat is over), then whether each of ``opening`` is answered."""
    named = Unit.public_key == bindparam("b_unit") if by_key else Unit.id == bindparam("b_unit")
    flags = []
    if progress:
        given = select(Response.id).where(
            Response.assignment_id == bindparam("b_assignment_id"), Response.unit_id == Unit.id
        )
        flags = [
            exists(given.where(Response.question.startswith(closing, autoescape=True))),
            *(exists(given.where(Response.question == q)) for q in opening),
        ]
    return (
        select(Unit, *flags)
        .join(HitUnit, HitUnit.unit_id == Unit.id)
        .where(HitUnit.hit_id == bindparam("b_hit_id"), named)
    )


def _named_conversation():
    return (Conversation.study_id == bindparam("b_study_id"), Conversation.key == bindparam("b_key"))


@functools.cache
def _conversation_query():
    return select(Conversation).where(*_named_conversation()).with_for_update()


@functools.cache
def _claiming_update():
    """Lock the conversation and claim its next owed reply, unless one is owed now (then leave the claim)."""
    last = (
        select(Turn.speaker)
        .where(Turn.conversation_id == Conversation.id)
        .order_by(Turn.index.desc())
        .limit(1)
        .scalar_subquery()
    )
    owed_now = func.coalesce(last, "") == "worker"
    claimed_at = bindparam("b_now", type_=Conversation.reply_claimed_at.type)
    return (
        update(Conversation)
        .where(*_named_conversation())
        .values(
            reply_claim=case((owed_now, Conversation.reply_claim), else_=bindparam("b_claim")),
            reply_claimed_at=case((owed_now, Conversation.reply_claimed_at), else_=claimed_at),
        )
        .returning(Conversation)
        .execution_options(synchronize_session=False, populate_existing=True)
    )


@functools.cache
def releasing_update(claimed: bool):
    """Lock the conversation by id and let go of this request's claim (``claimed``), if it still holds it."""
    mine = Conversation.reply_claim == bindparam("b_claim") if claimed else Conversation.id.is_(None)
    return (
        update(Conversation)
        .where(Conversation.id == bindparam("b_conversation_id"))
        .values(
            reply_claim=case((mine, None), else_=Conversation.reply_claim),
            reply_claimed_at=case((mine, None), else_=Conversation.reply_claimed_at),
        )
        .returning(Conversation)
        .execution_options(synchronize_session=False, populate_existing=True)
    )


@functools.cache
def _turns_query():
    return select(*TURN_COLUMNS).where(Turn.conversation_id == bindparam("b_conversation_id")).order_by(Turn.index)


def _system_id():
    """The study's system named ``:system``, as a subquery: one statement, not a lookup and an insert."""
    return (
        select(System.id)
        .where(System.study_id == bindparam("b_study_id"), System.name == bindparam("b_system"))
        .scalar_subquery()
    )


def _turns_table() -> Table:
    """The turns' Core table (a mapped class's ``__table__`` is typed as any FROM clause, so it is checked)."""
    table = Turn.__table__
    if not isinstance(table, Table):
        raise TypeError(f"Turn is mapped to {table!r}, not a table; the chat's Core statements need one")
    return table


@functools.cache
def _turn_insert(by_system: bool):
    """Insert one turn (``by_system``: a bot's, with the system's id) and return its id."""
    table = _turns_table()
    statement = insert(table)
    if by_system:
        statement = statement.values(system_id=_system_id())
    return statement.returning(table.c.id)


@functools.cache
def reply_insert_if_owed():
    """Insert the bot's reply only if turn ``:reply_to`` is the worker's and still the last."""
    table = _turns_table()
    turns_of = select(table.c.id).where(table.c.conversation_id == bindparam("b_conversation_id"))
    owed_now = exists(turns_of.where(table.c.index == bindparam("b_reply_to"), table.c.speaker == "worker")) & ~exists(
        turns_of.where(table.c.index > bindparam("b_reply_to"))
    )
    row = select(
        bindparam("b_conversation_id", type_=table.c.conversation_id.type),
        bindparam("b_index", type_=table.c.index.type),
        literal("bot"),
        bindparam("b_text", type_=table.c.text.type),
        bindparam("b_now", type_=table.c.created_at.type),
        _system_id(),
        bindparam("b_first_token_ms", type_=table.c.first_token_ms.type),
        bindparam("b_reply_ms", type_=table.c.reply_ms.type),
    ).where(owed_now)
    return (
        insert(table)
        .from_select(
            ["conversation_id", "index", "speaker", "text", "created_at", "system_id", "first_token_ms", "reply_ms"],
            row,
        )
        .returning(table.c.id)
    )


@overload
def locked_conversation(
    session: Session,
    ctx: StudyContext,
    assignment: Assignment,
    unit: Unit,
    *,
    create: Literal[True],
    claim: str | None = None,
    side: str = "",
) -> Conversation: ...
@overload
def locked_conversation(
    session: Session,
    ctx: StudyContext,
    assignment: Assignment,
    unit: Unit,
    *,
    create: bool,
    claim: str | None = None,
    side: str = "",
) -> Conversation | None: ...
def locked_conversation(
    session: Session,
    ctx: StudyContext,
    assignment: Assignment,
    unit: Unit,
    *,
    create: bool,
    claim: str | None = None,
    side: str = "",
) -> Conversation | None:
    """The slot's conversation, row-locked so that two requests on one chat take turns; with ``create``,
    made if it does not exist yet, so never None.

    With ``claim``, the reply the conversation is about to owe is claimed in the same statement
    that locks the row (an UPDATE … RETURNING, not a SELECT … FOR UPDATE and an UPDATE): a chat
    turn stays at the round trips it had. If the turn is then refused, the rollback undoes it.
    ``side`` names one of a unit's conversations where it has several (the arena's two systems).
    """
    key = ctx.task.chat_key(assignment.id, unit.id, side)
    named = {"b_study_id": ctx.study_id, "b_key": key}
    if claim is not None:
        # Claimed only if no reply is owed now (the last turn is not the worker's): otherwise the
        # turn is refused below and another request's claim must stand, whoever commits this.
        conversation = session.scalars(_claiming_update(), {**named, "b_claim": claim, "b_now": utcnow()}).first()
    else:
        conversation = session.scalar(_conversation_query(), named)
    if conversation is None and create:
        try:
            with session.begin_nested():
                system = ctx.task.chat_system(unit, side)
                meta = {
                    "assignment_id": assignment.id,
                    "unit_id": unit.id,
                    "system": system,
                    "is_control": system in ctx.task.control_systems(),
                    "topic_changes": [],
                }
                conversation = Conversation(
                    study_id=ctx.study_id,
                    key=key,
                    kind="human_bot",
                    meta={**meta, "side": side} if side else meta,
                    reply_claim=claim,
                    reply_claimed_at=utcnow() if claim else None,
                )
                session.add(conversation)
        except IntegrityError:  # the same chat's first message arrived twice at once: the other made it
            conversation = session.execute(_conversation_query(), named).scalar_one()
    return conversation


TurnLike = Turn | Row
"""A turn as read (a row of :data:`TURN_COLUMNS`) or as just stored (a detached Turn)."""
TURN_COLUMNS = (Turn.id, Turn.index, Turn.speaker, Turn.text, Turn.created_at)


def turns_of(session: Session, conversation: Conversation | None) -> list[Row]:
    """The conversation's turns in order, as plain rows (``.index``, ``.speaker``, ``.text``, ...).

    Rows, not Turn entities: every chat turn reads the whole conversation twice, and the ORM's
    identity map and instance state are work that nothing here needs.
    """
    if conversation is None:
        return []
    return list(session.execute(_turns_query(), {"b_conversation_id": conversation.id}))


def insert_turn(
    session: Session,
    conversation_id: int,
    index: int,
    speaker: str,
    text: str,
    system: tuple[int, str] | None = None,
    signals: dict[str, int] | None = None,
    timing: tuple[int | None, int | None] = (None, None),
) -> Turn:
    """Insert one turn with a single statement (no unit-of-work flush); the stored turn, detached.

    ``system`` is (study id, system name) for a bot's turn, whose system id the statement looks up;
    ``signals``, how the worker entered the message (already checked by :func:`hitkit.worker.authenticity.clean_signals`);
    ``timing``, a bot reply's (first text, whole reply) in milliseconds.
    """
    now = utcnow()
    values = {
        "conversation_id": conversation_id,
        "index": index,
        "speaker": speaker,
        "text": text,
        "created_at": now,
        "first_token_ms": timing[0],
        "reply_ms": timing[1],
    }
    if signals is not None:
        values["signals"] = signals
    if system is not None:
        values.update(b_study_id=system[0], b_system=system[1])
    turn_id = session.execute(_turn_insert(system is not None), values).scalar_one()
    return Turn(
        id=turn_id,
        conversation_id=conversation_id,
        index=index,
        speaker=speaker,
        text=text,
        created_at=now,
        signals=signals,
        first_token_ms=timing[0],
        reply_ms=timing[1],
    )
