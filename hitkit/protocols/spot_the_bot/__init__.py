"""Spot The Bot (Deriu et al., EMNLP 2020): label each speaker of a conversation human, bot or unsure."""

from hitkit.protocols.base import Protocol
from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS

PROTOCOL = Protocol(
    name="spot_the_bot",
    title="Spot The Bot (Deriu et al. 2020)",
    table="annotations",
    columns=ANNOTATION_COLUMNS,
    analysis_marker="win_rates",
    cluster_units=("conversation", "worker", "annotation"),
    analysis_options=frozenset({"stability", "resample", "rank_by", "trueskill", "judge_labels"}),
    needs_section=False,
    uses_generation=True,
    judged=True,
    gold_sources=("human",),
)
