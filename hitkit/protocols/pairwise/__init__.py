"""Pairwise A/B (ChatEval, ACUTE-Eval style): a prompt or conversation and two replies, pick the better."""

from hitkit.protocols.base import Protocol
from hitkit.protocols.pairwise.votes import VOTE_COLUMNS

PROTOCOL = Protocol(
    name="pairwise",
    title="Pairwise A/B (ChatEval)",
    table="votes",
    columns=VOTE_COLUMNS,
    analysis_marker="pairs",
    cluster_units=("worker", "item", "vote"),
    mturk_rules=True,
    judged=True,
    analysis_options=frozenset({"unit", "judge_labels"}),
    significance_units=("worker", "vote"),
    gold_sources=("degraded", "file"),
)
