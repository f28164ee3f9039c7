"""The study file's ``screener:`` section: a few questions before consent, and what a screen-out pays.

Plain pydantic, no other hitkit import: :mod:`hitkit.study.config` puts it into the study file, and the rules
that depend on the provider (Prolific's floor and ceiling on screen-out pay) are checked there, at load.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Optional

from pydantic import Field, model_validator

from hitkit.study.sections import Model, Money

SCREEN_OUT_FLOOR = {"GBP": Decimal("0.10"), "USD": Decimal("0.14")}
"""Prolific's least screen-out payment (PLATFORMS.md, screen-outs: "about £0.10 / $0.14")."""


class ScreenerQuestion(Model):
    """One multiple-choice question; answering anything outside ``accept`` screens the participant out."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    text: str = Field(min_length=1, max_length=500)
    options: list[str] = Field(min_length=2, max_length=12)
    accept: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _accept_among_options(self) -> "ScreenerQuestion":
        strangers = [a for a in self.accept if a not in self.options]
        if strangers:
            raise ValueError(
                f"screener question '{self.name}': accept names {strangers}, which are not among its "
                f"options {self.options}"
            )
        if len(set(self.options)) != len(self.options):
            raise ValueError(f"screener question '{self.name}' repeats an option")
        return self


class ScreenerConfig(Model):
    """Questions asked before consent (a language check, an attention question, the device...): a participant
    who fails is screened out, paid ``screen_out_reward``, and never counted as a worker."""

    questions: list[ScreenerQuestion] = Field(min_length=1, max_length=5, description="a short screener: 1 to 5")
    screen_out_reward: Money = Field(gt=0, description="what a screened-out participant is paid")
    slots: int = Field(gt=0, le=100_000, description="most screen-outs paid (Prolific pauses the study after them)")
    intro: str = Field("A few short questions first, to check that this study suits you.", max_length=1000)
    screen_out_url: Optional[str] = Field(
        None, description=("panel: where a screened-out participant is sent; may contain {code} and {session_id}")
    )
    screen_out_code: Optional[str] = Field(
        None, pattern=r"^[A-Za-z0-9_\-]{1,64}$", description="panel: the code a screened-out participant is shown"
    )

    @model_validator(mode="after")
    def _unique(self) -> "ScreenerConfig":
        names = [q.name for q in self.questions]
        if len(set(names)) != len(names):
            raise ValueError("screener question names must be unique")
        return self


def reward_problems(screener: ScreenerConfig, reward: Decimal, currency: str, provider: str) -> list[str]:
    """What breaks the screen-out pay rules (Prolific's, and below the task's own reward anywhere)."""
    problems = []
    so = screener.screen_out_reward
    if so >= reward:
        problems.append(
            f"screener.screen_out_reward {so} must be less than hit.reward {reward} (Prolific: "
            f"fixed_screen_out_reward must be below the study reward); lower it"
        )
    floor = SCREEN_OUT_FLOOR.get(currency.upper())
    if provider == "prolific" and floor is not None and so < floor:
        problems.append(
            f"screener.screen_out_reward {so} {currency} is under Prolific's floor of {floor} "
            f"{currency} for a screen-out; raise it to at least {floor}"
        )
    return problems
