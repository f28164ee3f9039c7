"""``hitkit init --task pairwise``: a commented, runnable pairwise study and its responses file."""

from __future__ import annotations

import json

from hitkit.i18n import N_
from hitkit.study.starter_sections import shared_sections

WORKER_TEXT = (
    N_("Which response is the better reply?"),
    N_("Which chatbot reply is better?"),
    N_("Read a message and two chatbot replies, and pick the better one."),
)
"""The starter's words a worker reads (its HIT and question), put into ``hitkit init --language``'s language."""

STUDY_YAML = """\
# A pairwise A/B study (ChatEval style): workers read a prompt and two responses and pick the better.
# Every field is in the docs' study-file reference (`hitkit schema` gives your editor the same);
# paths are relative to this file. Check it with `hitkit launch study.yaml --dry-run`, run it on the
# simulated crowd with `hitkit launch study.yaml --yes`, then set provider.kind to prolific.
study: my-ab-study          # unique name: lower-case letters, digits, '-' and '_'
task: pairwise              # pairwise | live_chat | spot_the_bot | rating | arena
seed: 1                     # seeds packing, A/B order and every resampling in the analysis
budget: "30.00"             # hard ceiling on worst-case spend, rewards plus fees
out: runs                   # results go to runs/<study>/ (database, export/, analysis/)
# database: postgresql://user@host/hitkit   # default: SQLite file in runs/<study>/

systems:                    # the chatbots compared; names must match the responses file
  - name: alpha
  - name: beta
  - name: gamma

pairwise:
  responses: responses.jsonl  # one line per prompt: {"id", "prompt", "responses": {system: text}}
  prompts_per_hit: 10         # comparisons in one HIT
  votes_per_prompt: 3         # workers who judge each comparison
  question: Which response is the better reply?

hit:
  title: Which chatbot reply is better?
  description: Read a message and two chatbot replies, and pick the better one.
  reward: "0.60"              # per assignment, in provider.currency
  lifetime_hours: 24
  assignment_minutes: 20      # a worker who holds a HIT longer loses it

""" + shared_sections(
    wave_size=5,
    max_concurrent=10,
    per_worker_cap=3,
    interval_s=1,
    crowd={"diligent": 8, "noisy": 3, "spammer": 1},
    quality={"alpha": 0.8, "beta": 0.5, "gamma": 0.2},
    quality_means="how good each system looks to diligent workers",
    concurrency=6,
)

SAMPLE = [
    (
        "p1",
        "Any tips for staying focused while working from home?",
        {
            "alpha": "Keep a fixed start time, work in a spot you only use for work, and take a short walk at lunch.",
            "beta": "Working from home can be hard sometimes.",
            "gamma": "I like pizza.",
        },
    ),
    (
        "p2",
        "What should I cook tonight?",
        {
            "alpha": "How about a quick vegetable stir-fry with rice? It takes twenty minutes.",
            "beta": "You could cook something you like.",
            "gamma": "Tonight tonight tonight.",
        },
    ),
    (
        "p3",
        "I just adopted a cat!",
        {
            "alpha": "Congratulations! What's the cat's name, and how is it settling in?",
            "beta": "That is nice.",
            "gamma": "That is nice.",
        },
    ),
]


def material() -> dict[str, str]:
    """The files the study reads, by name: three prompts, each answered by the three systems."""
    lines = [json.dumps({"id": item_id, "prompt": prompt, "responses": replies}) for item_id, prompt, replies in SAMPLE]
    return {"responses.jsonl": "\n".join(lines) + "\n"}
