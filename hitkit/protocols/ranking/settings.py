"""The ``ranking:`` section of a study file and the protocol's vocabulary (no numpy: the web tier imports it)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from hitkit.study.sections import Model

TABLE = "rankings"
"""The export table of the answers: one row per ranked response."""
COLUMNS = ("study", "hit_id", "assignment_id", "worker_id", "item_id", "system", "is_control", "shown", "rank")
"""``shown``: the response's place on the page (0 first); ``rank``: 1 + the responses ranked above it (tied
responses share it); ``is_control`` 1: a degraded copy of ``system``'s response."""
MOST_SHOWN = 6
"""The most responses one prompt shows, a degraded copy included."""


class RankingConfig(Model):
    """Ranking k responses: prompts with each system's response, each worker ordering one prompt's responses.

    ``responses`` has pairwise's format. A prompt shows ``systems_per_item`` systems' responses (taken in
    turn when the study has more systems); ``degraded_per_hit`` prompts of each HIT show one response more,
    a degraded copy of one of their responses made for each worker, which a careful worker ranks last.
    """

    responses: Path = Field(description="prompts with each system's response, pairwise's JSONL format")
    systems_per_item: int | None = Field(
        None, ge=2, le=MOST_SHOWN, description="responses ranked per prompt (k); default every system, up to 6 shown"
    )
    prompts_per_hit: int = Field(8, gt=0, le=100, description="prompts ranked in one HIT")
    rankings_per_prompt: int = Field(3, gt=0, le=50, description="workers who take each HIT")
    degraded_per_hit: int = Field(2, ge=0, le=100, description="prompts per HIT with a degraded copy (quality control)")
    ties: bool = Field(True, description="whether a worker may put responses level with each other")
    question: str = Field("Put the responses in order, best first.", description="the instruction above each list")

    def shown(self, systems: int) -> int:
        """k: the systems' responses each prompt shows (degraded copy not counted)."""
        spare = MOST_SHOWN - (1 if self.degraded_per_hit else 0)
        return self.systems_per_item if self.systems_per_item is not None else min(systems, spare)


def check_study(config) -> None:
    """Raise ValueError, saying what to change, for a prompt that would show too many responses or a
    section this protocol does not take yet."""
    cfg, systems = config.ranking, len(config.systems)
    k = cfg.shown(systems)
    if systems < 2 or k > systems:
        raise ValueError(f"ranking.systems_per_item = {k} needs at least {max(k, 2)} systems; the study has {systems}")
    if k + (1 if cfg.degraded_per_hit else 0) > MOST_SHOWN:
        raise ValueError(
            f"ranking.systems_per_item = {k} plus a degraded copy shows {k + 1} responses; at most {MOST_SHOWN} "
            f"fit on a page: lower systems_per_item or set degraded_per_hit: 0"
        )
    if cfg.degraded_per_hit > cfg.prompts_per_hit:
        raise ValueError(
            f"ranking.degraded_per_hit = {cfg.degraded_per_hit} exceeds ranking.prompts_per_hit = {cfg.prompts_per_hit}"
        )
    if config.stop is not None:
        raise ValueError("ranking studies have no stopping rule yet; remove the stop: section")
