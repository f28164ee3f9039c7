"""``hitkit init --task rating``: a commented, runnable Direct Assessment study and its responses file."""

from __future__ import annotations

from hitkit.i18n import N_
from hitkit.protocols.kit.starter import hit_section, responses_material, sample_study

__all__ = ["STUDY_YAML", "WORKER_TEXT", "material"]

WORKER_TEXT = (
    N_("Rate chatbot replies"),
    N_("Read a message and a chatbot's reply, and rate the reply on four statements."),
)
"""The starter's words a worker reads (its HIT and question), put into ``hitkit init --language``'s language."""

STUDY_YAML = sample_study(
    """\
# A rating study (Direct Assessment, Graham et al. 2017): each worker reads a prompt and ONE system's
# response and rates it on sliders; degraded copies of the HIT's own responses test each worker.
""",
    task="rating",
    verb="rated",
    section="""
rating:
  responses: responses.jsonl  # one line per prompt: {"id", "prompt", "responses": {system: text}}
  items_per_hit: 6            # responses rated in one HIT
  ratings_per_item: 3         # workers who take each HIT
  degraded_per_hit: 2         # degraded copies per HIT (quality control)
  # criteria: [...]           # the sliders; default: fluent, sensible, specific (QC), robotic (negative)

""",
    hit=hit_section(*WORKER_TEXT, reward="0.60", minutes=15, column=30),
)

material = responses_material
"""The files the study reads, by name: four prompts, each answered by the three systems."""
