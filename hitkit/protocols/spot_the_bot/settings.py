"""The ``spot_the_bot:`` section of a study file, and the rules it sets for the rest of the study."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from pydantic import Field, field_validator

from hitkit.material.gold import gold_total
from hitkit.study.sections import Model


class TrueSkillConfig(Model):
    """TrueSkill settings of the Spot The Bot ranking (METHODS.md §2, docs/INFERENCE.md).

    Used by every analysis of the study (the launch's, ``hitkit report STUDY.yaml``, ``hitkit
    analyze --study STUDY.yaml``, where the ``--trueskill-*`` options override them one by one)
    and recorded in summary.json and the report's methods paragraph. Defaults follow the original
    Spot The Bot code and Dušek et al. (2018), not the ``trueskill`` package.
    """

    mu: float = Field(25.0, allow_inf_nan=False, description="prior mean")
    sigma: Optional[float] = Field(None, gt=0, allow_inf_nan=False, description="prior sd (default mu / 3)")
    beta: Optional[float] = Field(None, gt=0, allow_inf_nan=False, description="performance spread (default sigma / 2)")
    tau: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description=(
            "dynamics: 0 = none, as the original code (the trueskill package's 25/300 lets late games "
            "outweigh early ones)"
        ),
    )
    draw_probability: float | Literal["observed"] = Field(
        "observed", description=("prior probability of a draw in [0, 1), or 'observed': the tie rate of the games")
    )

    @field_validator("draw_probability")
    @classmethod
    def _probability(cls, value: float | str) -> float | str:
        if not isinstance(value, str) and not 0 <= value < 1:  # a str is 'observed' (the field's Literal)
            raise ValueError(f"draw_probability is {value}; give a number in [0, 1) or 'observed' (the tie rate)")
        return value

    def settings(self):
        """The settings as the analysis takes them (:class:`hitkit.analysis.trueskill_vec.TrueSkillSettings`)."""
        from hitkit.analysis.trueskill_vec import TrueSkillSettings

        p = None if self.draw_probability == "observed" else float(self.draw_probability)
        return TrueSkillSettings(mu=self.mu, sigma=self.sigma, beta=self.beta, tau=self.tau, draw_probability=p)


class SpotTheBotConfig(Model):
    """Spot The Bot (Deriu et al. 2020; METHODS.md §2): label the speakers of conversation segments.

    Bot–bot conversations come from ``bot_conversations`` (default: the generated
    ``OUT/STUDY/bot_bot.jsonl``, in :class:`GenerationConfig`'s format); ``human_count`` human–human
    dialogues (default: as many as one pair of systems has) are mixed in from
    ``human_conversations`` (JSONL, :func:`hitkit.bots.corpus.load_jsonl`'s format; default:
    chatterbot-corpus). Every conversation must reach the longest segment length. A HIT holds up
    to ``segments_per_hit`` segments and is taken by ``annotations_per_segment`` workers.
    ``trueskill`` sets the ranking's TrueSkill (:class:`TrueSkillConfig`).
    """

    bot_conversations: Optional[Path] = Field(None, description="bot–bot JSONL (default: OUT/STUDY/bot_bot.jsonl)")
    human_conversations: Optional[Path] = Field(
        None, description="human–human dialogues, JSONL (default: chatterbot-corpus)"
    )
    human_count: Optional[int] = Field(
        None,
        gt=0,
        le=100_000,
        description=(
            "human–human conversations to mix in (default: the mean number of bot–bot conversations per pair)"
        ),
    )
    segment_lengths: list[int] = Field(
        default_factory=lambda: [2, 3, 5], min_length=1, description="segment lengths k, in exchanges"
    )
    segments_per_hit: int = Field(20, gt=1, le=200)
    annotations_per_segment: int = Field(2, gt=0, le=20)
    trueskill: TrueSkillConfig = Field(default_factory=TrueSkillConfig, description="TrueSkill settings of the ranking")

    @field_validator("segment_lengths")
    @classmethod
    def _valid_lengths(cls, lengths: list[int]) -> list[int]:
        if any(k < 1 for k in lengths) or len(set(lengths)) != len(lengths):
            raise ValueError(
                f"segment lengths must be distinct whole numbers of exchanges >= 1; got {lengths} — "
                f"write e.g. [2, 3, 5]"
            )
        return sorted(lengths)


def gold_human_count(config, bot_bot: int) -> int | None:
    """Human–human conversations to mix with ``bot_bot`` bot–bot ones: with a ``gold:`` section, gold.rate
    of all conversations (they are its gold items), else ``human_count`` (None: the default)."""
    spot = config.spot_the_bot or SpotTheBotConfig()
    return gold_total(bot_bot, config.gold.rate) if config.gold is not None else spot.human_count


def check_study(config) -> None:
    """Raise ValueError where the rest of a Spot The Bot study cannot serve its section (which may be
    left out: every setting has a default)."""
    spot = config.spot_the_bot or SpotTheBotConfig()
    if config.gold is not None and spot.human_count is not None:
        raise ValueError(
            f"spot_the_bot.human_count = {spot.human_count} and gold.rate = {config.gold.rate:g} both set how many "
            f"human–human conversations are mixed in; with gold: the rate does — remove spot_the_bot.human_count"
        )
    longest = max(spot.segment_lengths)
    crowd = sum(g.count for g in config.simulated.workers)
    needed = len(spot.segment_lengths) * spot.annotations_per_segment
    if config.provider.kind == "simulated" and crowd < needed:
        # A worker takes at most one HIT of a block (they would see a conversation twice).
        raise ValueError(
            f"the simulated crowd has {crowd} workers, but each block of "
            f"{len(spot.segment_lengths)} Spot The Bot HITs needs {needed} different "
            f"workers; add workers under simulated.workers"
        )
    if config.generation is not None and config.generation.exchanges < longest:
        raise ValueError(
            f"generation.exchanges is {config.generation.exchanges} but spot_the_bot.segment_lengths "
            f"reach {longest} exchanges; generate at least {longest} exchanges"
        )
