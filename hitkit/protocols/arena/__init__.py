"""Arena (Chiang et al. 2024; LMArena/FastChat): a worker's prompt, two anonymous systems answering side by
side as they generate, a vote; a Bradley–Terry leaderboard with style control."""

from hitkit.protocols.arena.columns import BATTLE_COLUMNS, TABLE
from hitkit.protocols.base import Protocol

PROTOCOL = Protocol(
    name="arena",
    title="Arena: side-by-side battles of anonymous systems (Chiang et al. 2024)",
    table=TABLE,
    columns=BATTLE_COLUMNS,
    analysis_marker="leaderboard",
    cluster_units=("worker", "battle"),
    judged=True,
    analysis_options=frozenset({"ties", "include_leaks", "add", "inverse_sampling", "judge_labels"}),
    gold_sources=("degraded",),
)
