"""Direct Assessment's vocabulary: the export table, its columns, the slider questions and the default
criteria for single responses.

Free of numpy and scipy, so the web tier imports it cheaply. The criteria are live chat's
:class:`~hitkit.protocols.live_chat.criteria.Criterion` (a 0–100 statement with a polarity and a QC
flag): the same kind of slider, here rating one response instead of a conversation.
"""

from __future__ import annotations

from hitkit.i18n import default_text
from hitkit.protocols.live_chat.criteria import Criterion

TABLE = "da_ratings"
"""The export table of the answers: one row per rated response × criterion."""
DA_COLUMNS = (
    "study",
    "hit_id",
    "assignment_id",
    "worker_id",
    "item_id",
    "system",
    "is_control",
    "position",
    "criterion",
    "score",
)
"""``is_control`` 1: the worker rated a degraded copy of ``system``'s response to ``item_id``."""
SCORE_PREFIX = "score_"
"""Question name of a criterion's slider: ``score_`` + criterion name (as live chat's)."""

DEFAULT_CRITERIA: tuple[Criterion, ...] = (
    Criterion("fluent", "positive", default_text("The response is fluent, natural English."), qc=True),
    Criterion("sensible", "positive", default_text("The response makes sense as a reply to the message."), qc=True),
    Criterion(
        "specific",
        "positive",
        default_text("The response is specific to the message, not a reply that would fit any message."),
        qc=True,
    ),
    Criterion(
        "robotic",
        "negative",
        default_text("The response sounds as if a chatbot wrote it rather than a person."),
        qc=False,
    ),
)
