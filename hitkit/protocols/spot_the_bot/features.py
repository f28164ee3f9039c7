"""Spot The Bot's preference questions (after Deriu et al. 2020, Appendix A), in the words a worker reads."""

from __future__ import annotations

from dataclasses import dataclass

from hitkit.i18n import N_


@dataclass(frozen=True)
class Feature:
    """A preference question: its name, how it is asked, what the quality means (after Appendix A) and the
    quality's name as a worker reads it."""

    name: str
    question: str
    definition: str
    label: str


FEATURES = (
    Feature(
        "fluency",
        N_("Whose messages read more fluently?"),
        N_(
            "Fluent messages are well formed and grammatical and read naturally, as a competent speaker of "
            "the language would write them. Ignore whether they make sense; look only at the language."
        ),
        N_("Fluency"),
    ),
    Feature(
        "sensibleness",
        N_("Whose messages make more sense?"),
        N_(
            "A sensible message fits the conversation so far: it follows logically from what was said, does "
            "not contradict the speaker's earlier messages or common sense, and replies to what it answers."
        ),
        N_("Sensibleness"),
    ),
    Feature(
        "specificity",
        N_("Whose messages are more specific to this conversation?"),
        N_(
            "A specific message takes up what this particular conversation is about. A generic message, such "
            "as \"I don't know\" or \"That's nice\", could follow almost anything and is not specific."
        ),
        N_("Specificity"),
    ),
)
