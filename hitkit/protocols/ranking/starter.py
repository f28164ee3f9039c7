"""``hitkit init --task ranking``: a commented, runnable ranking study and its responses file (the shared sample)."""

from __future__ import annotations

from hitkit.study.starter_sections import responses_material, shared_sections

__all__ = ["STUDY_YAML", "material"]

STUDY_YAML = """\
# A ranking study: each worker reads a prompt and several chatbots' replies to it and puts the replies in
# order, best first (ties allowed); some prompts carry a degraded copy of a reply, which a careful worker
# ranks last. The analysis fits Plackett-Luce strengths and writes preferences.jsonl for RLHF/DPO.
# Every field is in the docs' study-file reference (`hitkit schema` gives your editor the same);
# paths are relative to this file. Check it with `hitkit launch study.yaml --dry-run`, run it on the
# simulated crowd with `hitkit launch study.yaml --yes`, then set provider.kind to prolific.
study: my-ranking-study     # unique name: lower-case letters, digits, '-' and '_'
task: ranking
seed: 1                     # seeds packing, order, degraded copies and every resampling
budget: "30.00"             # hard ceiling on worst-case spend, rewards plus fees
out: runs                   # results go to runs/<study>/ (database, export/, analysis/)

systems:                    # the chatbots ranked; names must match the responses file
  - name: alpha
  - name: beta
  - name: gamma

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

hit:
  title: Put chatbot replies in order
  description: Read a message and several chatbots' replies, and order the replies from best to worst.
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
"""The files the study reads: four prompts, each answered by the three systems."""
