"""The ``pairwise:`` section of a study file."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from hitkit.i18n import default_text
from hitkit.study.sections import Model


class PairwiseConfig(Model):
    """Pairwise A/B (ChatEval): prompts with each system's response, compared two at a time."""

    responses: Path
    prompts_per_hit: int = Field(10, gt=0, le=200)
    votes_per_prompt: int = Field(3, gt=0, le=50)
    question: str = str(default_text("Which response is better?"))  # a plain str: the JSON schema shows it


def check_study(config) -> None:
    """Cross-section rules of a pairwise study: gold comparisons are not yet combined with a judge or a
    stopping rule (both would read the gold votes as comparisons of systems)."""
    if config.gold is None:
        return
    for section in ("judge", "stop"):
        if getattr(config, section) is not None:
            raise ValueError(
                f"gold: and {section}: cannot be used together in a pairwise study yet (the {section} would read "
                f"the gold comparisons as comparisons of systems); remove one of them"
            )
