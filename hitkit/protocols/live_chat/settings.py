"""The ``live_chat:`` section of a study file, and the rules it sets for the study's systems."""

from __future__ import annotations

import math
from typing import Literal, Optional

from pydantic import Field, ValidationError, field_validator, model_validator

from hitkit.errors import ConfigError
from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA, Criterion, check_criteria
from hitkit.study.sections import Model


def _default_criteria() -> list["CriterionConfig"]:
    return [CriterionConfig(name=c.name, statement=c.statement, polarity=c.polarity, qc=c.qc) for c in DEFAULT_CRITERIA]


class CriterionConfig(Model):
    """One Likert statement of live chat, rated on a 0–100 slider; ``qc`` marks those the QC test uses."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    statement: str = Field(min_length=1)
    polarity: Literal["positive", "negative"]
    qc: bool


def valid_criteria(criteria: list[CriterionConfig]) -> list[CriterionConfig]:
    """``criteria`` unchanged, or ValueError (a pydantic validator's) saying what is wrong with them."""
    try:
        check_criteria(list(criterion_tuple(criteria)))
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return criteria


def criterion_tuple(criteria: list[CriterionConfig]) -> tuple[Criterion, ...]:
    """The criteria as the analysis takes them (:class:`hitkit.protocols.live_chat.criteria.Criterion`)."""
    return tuple(Criterion(c.name, c.polarity, c.statement, c.qc) for c in criteria)


class LiveChatConfig(Model):
    """Live chat + Direct Assessment (Ji et al. 2022; METHODS.md §1): six blind chats per HIT, rated.

    The quality-control bot is the entry of ``systems:`` named by ``control`` (default ``qc``): it
    needs an endpoint like any bot, so it is listed with them, and this section says which one it
    is. Every HIT has ``slots_per_hit`` − 1 distinct real systems and one control slot. Give the
    study size as ``hits`` or as ``conversations_per_system`` (one, not both); either way each real
    system gets the same number of conversations, so hits × (slots_per_hit − 1) must be a multiple
    of the number of real systems. With ``icebreaker`` the topic is prescribed: a statement drawn
    from ``personas[system]`` (every system, the control bot included, so the topic cannot give
    the control away) instead of typed by the worker.
    """

    hits: Optional[int] = Field(None, gt=0, le=100_000, description="number of HITs")
    conversations_per_system: Optional[int] = Field(
        None, gt=0, le=100_000, description="conversations each real system gets"
    )
    slots_per_hit: int = Field(6, ge=2, le=20, description="chats per HIT, the control slot included")
    min_inputs: int = Field(10, ge=1, le=200, description="worker messages before a chat may be rated")
    criteria: list[CriterionConfig] = Field(default_factory=_default_criteria, min_length=1)
    control: str = Field("qc", description="name of the quality-control system in 'systems'")
    icebreaker: bool = False
    personas: dict[str, list[str]] = Field(
        default_factory=dict, description="system -> persona statements (icebreaker)"
    )
    feedback: bool = Field(True, description="offer an optional free-text comment per conversation")

    @field_validator("criteria")
    @classmethod
    def _valid_criteria(cls, criteria: list[CriterionConfig]) -> list[CriterionConfig]:
        return valid_criteria(criteria)

    @model_validator(mode="after")
    def _one_size(self) -> "LiveChatConfig":
        if (self.hits is None) == (self.conversations_per_system is None):
            raise ValueError("give exactly one of 'hits' and 'conversations_per_system'")
        return self

    def hit_count(self, real_systems: int) -> int:
        """The number of HITs for ``real_systems`` systems (the control bot not counted)."""
        if self.hits is not None:
            return self.hits
        if self.conversations_per_system is None:
            raise ConfigError("live_chat: give exactly one of 'hits' and 'conversations_per_system'")
        return self.conversations_per_system * real_systems // (self.slots_per_hit - 1)

    def criterion_list(self) -> tuple[Criterion, ...]:
        """The criteria as the analysis takes them (:class:`hitkit.protocols.live_chat.criteria.Criterion`)."""
        return criterion_tuple(self.criteria)

    def check_against(self, systems: list[str]) -> None:
        """Raise ValueError unless the systems can fill balanced HITs under this section."""
        if self.control not in systems:
            raise ValueError(
                f"live_chat.control is '{self.control}', which is not in 'systems'; "
                f"add the quality-control bot there or name it in live_chat.control"
            )
        real = len(systems) - 1
        per_hit = self.slots_per_hit - 1
        if real < per_hit:
            raise ValueError(
                f"live_chat.slots_per_hit = {self.slots_per_hit} needs {per_hit} real systems "
                f"besides '{self.control}' (each at most once per HIT); there are {real} — list more systems or "
                f"lower live_chat.slots_per_hit to {real + 1}"
            )
        if self.hits is not None and self.hits * per_hit % real:
            step = real // math.gcd(real, per_hit)
            raise ValueError(
                f"live_chat.hits = {self.hits} gives {self.hits * per_hit} conversations, which "
                f"{real} systems cannot share equally; use a multiple of {step}"
            )
        if self.conversations_per_system is not None and self.conversations_per_system * real % per_hit:
            step = per_hit // math.gcd(real, per_hit)
            raise ValueError(
                f"live_chat.conversations_per_system = {self.conversations_per_system} does not "
                f"fill whole HITs of {per_hit} real systems; use a multiple of {step}"
            )
        if self.icebreaker:
            missing = [s for s in systems if not self.personas.get(s)]
            if missing:
                raise ValueError(
                    f"live_chat.icebreaker needs persona statements for every system; "
                    f"none for {', '.join(missing)} in live_chat.personas; add them, or turn icebreaker off"
                )
        unknown = sorted(set(self.personas) - set(systems))
        if unknown:
            raise ValueError(
                f"live_chat.personas names systems that are not in 'systems': {', '.join(unknown)}; "
                f"remove them from live_chat.personas or add them to 'systems'"
            )


def check_study(config) -> None:
    """Raise ValueError unless the study's systems can fill the section's HITs, each with an endpoint."""
    config.live_chat.check_against([s.name for s in config.systems])
    for i, system in enumerate(config.systems):
        if not system.has_endpoint(served=config.bots is not None and config.bots.serve is not None):
            raise ValueError(
                f"systems.{i} ('{system.name}'): a live-chat system needs 'url' (an "
                f"OpenAI-compatible endpoint, or none with bots.serve) and 'model'; add them"
            )
        try:
            system.checked_bot_config()
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(
                f"systems.{i} ('{system.name}') options: {problems} — use the bot client "
                f"settings listed under systems.options in the study file reference"
            ) from None
