"""Ranking k responses (RLHF-style): a prompt and 2–6 systems' responses, ordered best to worst (ties
allowed), with degraded copies as quality control; Plackett–Luce strengths."""

from hitkit.protocols.base import Protocol
from hitkit.protocols.ranking.settings import COLUMNS, TABLE

PROTOCOL = Protocol(
    name="ranking",
    title="Ranking k responses (Plackett–Luce)",
    table=TABLE,
    columns=COLUMNS,
    analysis_marker="implied_pairs",
    cluster_units=("worker", "ranking"),
)
