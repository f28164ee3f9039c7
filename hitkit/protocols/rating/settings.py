"""The ``rating:`` section of a study file."""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import Field, field_validator

from hitkit.material.gold import gold_total, spread
from hitkit.protocols.live_chat.criteria import Criterion
from hitkit.protocols.live_chat.settings import CriterionConfig, criterion_tuple, valid_criteria
from hitkit.protocols.rating.scores import DEFAULT_CRITERIA
from hitkit.study.sections import Model


def _default_criteria() -> list[CriterionConfig]:
    return [CriterionConfig(name=c.name, statement=c.statement, polarity=c.polarity, qc=c.qc) for c in DEFAULT_CRITERIA]


class RatingConfig(Model):
    """Direct Assessment of responses: prompts with each system's response, each response rated alone.

    ``responses`` has pairwise's format. A HIT holds ``items_per_hit`` responses (distinct prompts
    where the material allows, the systems mixed) plus ``degraded_per_hit`` degraded copies of
    responses in the same HIT, made for each worker; ``ratings_per_item`` workers take each HIT.
    """

    responses: Path
    items_per_hit: int = Field(10, gt=0, le=200, description="responses rated per HIT, degraded copies not counted")
    ratings_per_item: int = Field(3, gt=0, le=50, description="workers who rate each response (each HIT)")
    degraded_per_hit: int = Field(2, gt=0, le=50, description="degraded copies per HIT, for quality control")
    criteria: list[CriterionConfig] = Field(default_factory=_default_criteria, min_length=1)

    # The same sliders as live chat's, checked the same way.
    @field_validator("criteria")
    @classmethod
    def _valid_criteria(cls, criteria: list[CriterionConfig]) -> list[CriterionConfig]:
        return valid_criteria(criteria)

    def criterion_list(self) -> tuple[Criterion, ...]:
        """The criteria as the analysis takes them (:class:`hitkit.protocols.live_chat.criteria.Criterion`)."""
        return criterion_tuple(self.criteria)

    def hit_count(self, responses: int) -> int:
        """HITs for ``responses`` responses to rate: blocks of ``items_per_hit``, the last one shorter."""
        return math.ceil(responses / self.items_per_hit)

    def degraded_places(self, responses: int) -> list[int]:
        """Degraded places per HIT: ``degraded_per_hit``, fewer in a short last HIT with fewer responses
        (each copy degrades a different response of its HIT)."""
        return [min(self.degraded_per_hit, size) for size in self.hit_sizes(responses)]

    def hit_sizes(self, responses: int) -> list[int]:
        """Responses per HIT: blocks of ``items_per_hit``, the last one shorter."""
        return [min(self.items_per_hit, responses - start) for start in range(0, responses, self.items_per_hit)]


def degraded_counts(config, sizes: list[int]) -> list[int]:
    """Degraded places of HITs of ``sizes`` responses: with a ``gold:`` section, gold.rate of each HIT's
    items (:func:`~hitkit.material.gold.spread`), else ``degraded_per_hit``; never more than a HIT's
    responses (each copy degrades a different one)."""
    cfg = config.rating
    if config.gold is None:
        return [min(cfg.degraded_per_hit, size) for size in sizes]
    counts = spread(sizes, gold_total(sum(sizes), config.gold.rate))
    return [min(n, size) for n, size in zip(counts, sizes)]


def check_study(config) -> None:
    """Raise ValueError when a HIT could not hold its degraded copies' originals, or when both
    ``degraded_per_hit`` and ``gold.rate`` say how many copies a HIT gets."""
    cfg = config.rating
    default = RatingConfig.model_fields["degraded_per_hit"].default
    if config.gold is not None and cfg.degraded_per_hit != default:
        raise ValueError(
            f"rating.degraded_per_hit = {cfg.degraded_per_hit} and gold.rate = {config.gold.rate:g} both set how "
            f"many degraded copies a HIT gets; with gold: the rate does — remove rating.degraded_per_hit"
        )
    if config.gold is not None:
        return
    if cfg.degraded_per_hit > cfg.items_per_hit:
        raise ValueError(
            f"rating.degraded_per_hit = {cfg.degraded_per_hit} exceeds rating.items_per_hit = "
            f"{cfg.items_per_hit}: each degraded copy degrades a different response of its HIT; "
            f"lower degraded_per_hit or raise items_per_hit"
        )
