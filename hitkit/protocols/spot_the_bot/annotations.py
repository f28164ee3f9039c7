"""Spot The Bot's vocabulary: the annotations table's columns, the labels and the features.

Free of numpy and scipy, so the web tier imports it cheaply.
"""

from __future__ import annotations

ANNOTATION_COLUMNS = (
    "study",
    "hit_id",
    "assignment_id",
    "worker_id",
    "conversation_id",
    "segment_exchanges",
    "entity",
    "system",
    "label",
    "fluency",
    "sensibleness",
    "specificity",
    "elapsed_s",
)
LABELS = ("human", "unsure", "bot")
# A system wins a segment when its label ranks higher (human > unsure > bot).
LABEL_RANK = {"human": 2, "unsure": 1, "bot": 0}
FEATURES = ("fluency", "sensibleness", "specificity")
HUMAN = "human"
SEGMENT_KEY = ["study", "assignment_id", "conversation_id", "segment_exchanges"]
