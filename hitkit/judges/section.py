"""The study file's ``judge:`` section, for code that runs only with one (judging, judge planning)."""

from __future__ import annotations

from hitkit.errors import ConfigError
from hitkit.study.config import StudyConfig
from hitkit.study.sections import JudgeConfig


def judge_section(config: StudyConfig) -> JudgeConfig:
    """The study's ``judge:`` section; ConfigError when the study file has none."""
    if config.judge is None:
        raise ConfigError(
            f"study '{config.study}' has no 'judge:' section; add one to have an LLM judge label the study"
        )
    return config.judge


def human_share(judge: JudgeConfig) -> float:
    """The fraction of the items the crowd also labels, where the study sizes it by ``human_share``;
    ConfigError when it gives ``human_items`` instead."""
    if judge.human_share is None:
        raise ConfigError(
            "judge.human_share is not given (the study gives judge.human_items); this needs the "
            "crowd's share as a fraction of the items: give judge.human_share instead"
        )
    return judge.human_share


def own_share(config: StudyConfig, items: int) -> float:
    """The study file's own share of the items the crowd labels: ``judge.human_share``, or
    ``judge.human_items`` over the ``items``."""
    judge = judge_section(config)
    if judge.human_share is not None:
        return judge.human_share
    if judge.human_items is None:
        raise ConfigError("judge: give exactly one of human_share and human_items")
    return judge.human_items / items
