"""``hitkit init --task rating``: a commented, runnable Direct Assessment study and its responses file."""

from __future__ import annotations

from hitkit.i18n import N_
from hitkit.study.starter_sections import responses_material, shared_sections

__all__ = ["STUDY_YAML", "WORKER_TEXT", "material"]

WORKER_TEXT = (
    N_("Rate chatbot replies"),
    N_("Read a message and a chatbot's reply, and rate the reply on four statements."),
)
"""The starter's words a worker reads (its HIT and question), put into ``hitkit init --language``'s language."""

STUDY_YAML = """\
# A rating study (Direct Assessment, Graham et al. 2017): each worker reads a prompt and ONE system's
# response and rates it on sliders; degraded copies of the HIT's own responses test each worker.
# Every field is in the docs' study-file reference (`hitkit schema` gives your editor the same);
# paths are relative to this file. Check it with `hitkit launch study.yaml --dry-run`, run it on the
# simulated crowd with `hitkit launch study.yaml --yes`, then set provider.kind to prolific.
study: my-rating-study      # unique name: lower-case letters, digits, '-' and '_'
task: rating
seed: 1                     # seeds packing, order, degraded copies and every resampling
budget: "30.00"             # hard ceiling on worst-case spend, rewards plus fees
out: runs                   # results go to runs/<study>/ (database, export/, analysis/)

systems:                    # the chatbots rated; names must match the responses file
  - name: alpha
  - name: beta
  - name: gamma

rating:
  responses: responses.jsonl  # one line per prompt: {"id", "prompt", "responses": {system: text}}
  items_per_hit: 6            # responses rated in one HIT
  ratings_per_item: 3         # workers who take each HIT
  degraded_per_hit: 2         # degraded copies per HIT (quality control)
  # criteria: [...]           # the sliders; default: fluent, sensible, specific (QC), robotic (negative)

hit:
  title: Rate chatbot replies
  description: Read a message and a chatbot's reply, and rate the reply on four statements.
  reward: "0.60"              # per assignment, in provider.currency
  assignment_minutes: 15

""" + shared_sections(
    wave_size=4,
    max_concurrent=6,
    per_worker_cap=3,
    interval_s=0.5,
    crowd={"diligent": 8, "noisy": 2, "spammer": 1},
    quality={"alpha": 0.8, "beta": 0.5, "gamma": 0.2},
    quality_means="how good each system looks to diligent workers",
    concurrency=6,
)

material = responses_material
"""The files the study reads, by name: four prompts, each answered by the three systems."""
