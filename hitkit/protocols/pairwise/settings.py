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
    """Cross-section rules of a pairwise study (none beyond the section's own)."""
