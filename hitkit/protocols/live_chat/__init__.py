"""Live chat with Direct Assessment (Ji et al., ACL 2022): chat with each bot, rate on 0–100 sliders."""

from hitkit.protocols.base import Protocol
from hitkit.protocols.live_chat.criteria import RATING_COLUMNS

PROTOCOL = Protocol(
    name="live_chat",
    title="Live chat + Direct Assessment (Ji et al. 2022)",
    table="ratings",
    columns=RATING_COLUMNS,
    analysis_marker="systems",
    cluster_units=("worker", "conversation", "rating"),
    analysis_options=frozenset({"replicate", "unit", "judge_labels"}),
    mturk_rules=True,
    judged=True,
    significance_units=("worker", "rating", "conversation"),
    gold_note="each HIT's chat with the degraded QC bot, live_chat.control, already is its gold item",
)
