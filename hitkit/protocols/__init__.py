"""The protocols, by the name a study file gives in ``task:``: one line each in :data:`PROTOCOLS`.

Everything one protocol knows lives in its folder (``hitkit/protocols/NAME/``); shared code looks
the protocol up here and never compares names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hitkit.errors import ConfigError
from hitkit.protocols import arena, live_chat, pairwise, ranking, rating, spot_the_bot
from hitkit.protocols.base import Protocol, TaskType

if TYPE_CHECKING:
    from hitkit.study.config import StudyConfig

PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        pairwise.PROTOCOL,
        live_chat.PROTOCOL,
        spot_the_bot.PROTOCOL,
        rating.PROTOCOL,
        arena.PROTOCOL,
        ranking.PROTOCOL,
    )
}


def names() -> tuple[str, ...]:
    """The registered protocols' names, in registry order."""
    return tuple(PROTOCOLS)


def known_name(name: str) -> str:
    """``name`` if a protocol has it, else a ValueError naming the protocols (a study file's or a
    mapping's ``task:`` validator)."""
    if name not in PROTOCOLS:
        raise ValueError(
            f"task '{name}' is not a protocol of this version of hitkit; use one of {', '.join(PROTOCOLS)}"
        )
    return name


def protocol(name: str) -> Protocol:
    """The protocol called ``name``; a ConfigError listing the available ones if there is none."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ConfigError(
            f"task '{name}' is not available in this version of hitkit; available: {', '.join(PROTOCOLS)}"
        ) from None


def by_table(name: str) -> Protocol | None:
    """The protocol whose export table is called ``name`` (``votes``, ``ratings`` ...), or None."""
    return next((p for p in PROTOCOLS.values() if p.table == name), None)


def task_for(config: "StudyConfig") -> TaskType:
    """The task type a study runs."""
    return protocol(config.task).task_type()(config)
