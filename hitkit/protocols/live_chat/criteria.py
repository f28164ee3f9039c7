"""Live chat's vocabulary: the rated criteria (Ji et al. 2022, Table 5) and the ratings table's columns.

Free of numpy and scipy, so the web tier and the study file's validation import it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from hitkit.errors import ConfigError
from hitkit.i18n import default_text

Polarity = Literal["positive", "negative"]

RATING_COLUMNS = (
    "study",
    "hit_id",
    "assignment_id",
    "worker_id",
    "conversation_id",
    "slot",
    "system",
    "is_control",
    "criterion",
    "score",
)
# Names the systems table already uses for its own columns; a criterion may not shadow them.
_RESERVED = frozenset({"system", "n", "z", "raw", "rank", "overall"})


@dataclass(frozen=True)
class Criterion:
    """One Likert statement rated 0–100; ``qc`` marks the criteria the QC test compares on."""

    name: str
    polarity: Polarity
    statement: str
    qc: bool

    def __post_init__(self) -> None:
        if self.polarity not in ("positive", "negative"):
            raise ConfigError(f"criterion {self.name!r}: polarity is {self.polarity!r}; use 'positive' or 'negative'")
        if not self.name or self.name in _RESERVED:
            raise ConfigError(
                f"criterion name {self.name!r} is empty or reserved ({', '.join(sorted(_RESERVED))}); rename it"
            )


DEFAULT_CRITERIA: tuple[Criterion, ...] = (
    Criterion(
        "robotic",
        "negative",
        default_text("It was obvious that I was talking to a chatbot as opposed to another human user."),
        qc=False,
    ),
    Criterion("interesting", "positive", default_text("The conversation with the chatbot was interesting."), qc=True),
    Criterion("fun", "positive", default_text("The conversation with the chatbot was fun/enjoyable."), qc=True),
    Criterion(
        "consistent", "positive", default_text("The chatbot was consistent throughout the conversation."), qc=True
    ),
    Criterion(
        "fluent",
        "positive",
        default_text("The chatbot's English was fluent and natural throughout the conversation."),
        qc=True,
    ),
    Criterion(
        "repetitive",
        "negative",
        default_text("I felt that the chatbot kept being repetitive during the conversation."),
        qc=False,
    ),
    Criterion("topic", "positive", default_text("The chatbot stays on topic."), qc=True),
)


def check_criteria(criteria: Sequence[Criterion]) -> None:
    """Raise ConfigError unless the criteria are named once each and at least one is a QC criterion."""
    names = [c.name for c in criteria]
    if not names:
        raise ConfigError("no criteria configured; give at least one Criterion")
    if len(set(names)) != len(names):
        raise ConfigError(f"criterion names repeat: {names}; give each criterion once")
    if not any(c.qc for c in criteria):
        raise ConfigError(f"no criterion has qc=True among {names}; the QC test needs at least one")


def unknown_criteria(ratings, criteria: Sequence[Criterion]) -> list[str]:
    """The criteria a ratings table names that are not among ``criteria``, sorted."""
    known = {c.name for c in criteria}
    return sorted(set(ratings["criterion"].unique()) - known)
