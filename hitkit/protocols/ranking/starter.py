"""``hitkit init --task ranking``: a commented, runnable ranking study and its responses file (the shared sample)."""

from __future__ import annotations

from hitkit.i18n import N_
from hitkit.protocols.kit.starter import hit_section, responses_material, sample_study

__all__ = ["STUDY_YAML", "WORKER_TEXT", "material"]

WORKER_TEXT = (
    N_("Put chatbot replies in order"),
    N_("Read a message and several chatbots' replies, and order the replies from best to worst."),
)
"""The starter's words a worker reads (its HIT's title and description), put into ``hitkit init --language``'s language."""

STUDY_YAML = sample_study(
    """\
# A ranking study: each worker reads a prompt and several chatbots' replies to it and puts the replies in
# order, best first (ties allowed); some prompts carry a degraded copy of a reply, which a careful worker
# ranks last. The analysis fits Plackett-Luce strengths and writes preferences.jsonl for RLHF/DPO.
""",
    task="ranking",
    verb="ranked",
    section="""
ranking:
  responses: responses.jsonl  # one line per prompt: {"id", "prompt", "responses": {system: text}}
  prompts_per_hit: 4          # prompts ranked in one HIT
  rankings_per_prompt: 5      # workers who take each HIT
  degraded_per_hit: 3         # prompts per HIT that also show a degraded copy (quality control): a
                              # worker passes when the copies are ranked last more often than chance
                              # (p < 0.05), which needs 3 copies with 4 replies shown; in a real study
                              # spread them over more prompts per HIT
  # systems_per_item: 3       # responses per prompt (2-6 shown, the copy included); default every system
  # ties: true                # may a worker put replies level?

""",
    hit=hit_section(*WORKER_TEXT, reward="0.60", minutes=15, column=30),
)

material = responses_material
"""The files the study reads: four prompts, each answered by the three systems."""
