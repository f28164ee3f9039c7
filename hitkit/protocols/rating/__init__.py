"""Direct Assessment of single responses (Graham et al. 2013/2017; Ji et al. 2022): a prompt and one
system's response, rated on 0–100 sliders, with degraded copies as quality control."""

from hitkit.protocols.base import Protocol
from hitkit.protocols.rating.scores import DA_COLUMNS, TABLE

PROTOCOL = Protocol(
    name="rating",
    title="Direct Assessment of responses (Graham et al. 2017; Ji et al. 2022)",
    table=TABLE,
    columns=DA_COLUMNS,
    analysis_marker="degraded",
    cluster_units=("worker", "response", "rating"),
    analysis_options=frozenset({"unit", "judge_labels"}),
    significance_units=("worker", "rating", "conversation"),
    gold_sources=("degraded",),
)
