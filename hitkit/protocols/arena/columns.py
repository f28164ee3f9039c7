"""The arena's vocabulary, shared by its task (which writes ``battles.csv``) and its analysis (which reads
it): free of pandas and scipy, so the web tier can import it."""

from __future__ import annotations

TABLE = "battles"
"""The export table of the arena's votes: one row per vote."""

BATTLE_COLUMNS = (
    "study",
    "hit_id",
    "assignment_id",
    "worker_id",
    "battle_id",
    "prompt_id",
    "category",
    "turns",
    "system_a",
    "system_b",
    "vote",
    "reason",
    "tokens_a",
    "tokens_b",
    "header_count_a",
    "list_count_a",
    "bold_count_a",
    "header_count_b",
    "list_count_b",
    "bold_count_b",
    "is_control",
    "leak",
)
"""``battles.csv``'s columns, in order (docs/COLUMNS.md says what each holds)."""

VOTES = ("a", "b", "tie", "both_bad")
"""A vote: the system shown on the left (``a``) or right (``b``) is better, a tie, or both are bad."""

SIDES = ("a", "b")
"""A battle's two conversations: the left one (``a``, ``system_a``) and the right one (``b``)."""
