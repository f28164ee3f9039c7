"""``hitkit init``: a commented example study a coordinator edits rather than writes from nothing."""
from __future__ import annotations

import json
from pathlib import Path

from hitkit.errors import HitkitError

STUDY_YAML = """\
# A pairwise A/B study (ChatEval style). Every field is documented in the README, section "The study
# file"; paths are relative to this file. Check it with `hitkit launch study.yaml --dry-run`.
study: my-ab-study          # unique name: lower-case letters, digits, '-' and '_'
task: pairwise              # pairwise | live_chat | spot_the_bot | rating
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

schedule:
  wave_size: 5                # HITs posted per wave
  max_concurrent: 10          # HITs open at once
  per_worker_cap: 3           # HITs one worker may take
  interval_s: 1               # scheduler tick
  # qc_failures: hold         # work of workers who fail QC: hold (for your review) | pay | reject
  #                           # (default: hold on prolific and mturk, pay on simulated and local)

provider:
  kind: simulated             # simulated | local | prolific | panel | mturk (see the README: Providers)
  currency: USD
  # fee_rate: "0.333"         # Prolific's fee on rewards; settings under provider.prolific

simulated:                    # the dry-run crowd; ignored by other providers
  workers:
    - {profile: diligent, count: 8}
    - {profile: noisy, count: 3}
    - {profile: spammer, count: 1}
  quality: {alpha: 0.8, beta: 0.5, gamma: 0.2}   # how good each system looks to diligent workers
  concurrency: 6
"""

SAMPLE = [
    ("p1", "Any tips for staying focused while working from home?",
     {"alpha": "Keep a fixed start time, work in a spot you only use for work, and take a short walk at lunch.",
      "beta": "Working from home can be hard sometimes.", "gamma": "I like pizza."}),
    ("p2", "What should I cook tonight?",
     {"alpha": "How about a quick vegetable stir-fry with rice? It takes twenty minutes.",
      "beta": "You could cook something you like.", "gamma": "Tonight tonight tonight."}),
    ("p3", "I just adopted a cat!",
     {"alpha": "Congratulations! What's the cat's name, and how is it settling in?",
      "beta": "That is nice.", "gamma": "That is nice."}),
]


def scaffold(directory: Path) -> list[Path]:
    """Write ``study.yaml`` and ``responses.jsonl`` into ``directory`` (refuses to overwrite)."""
    directory.mkdir(parents=True, exist_ok=True)
    study, responses = directory / "study.yaml", directory / "responses.jsonl"
    for path in (study, responses):
        if path.exists():
            raise HitkitError(f"{path} already exists; choose an empty folder for `hitkit init`")
    study.write_text(STUDY_YAML, encoding="utf-8")
    with responses.open("w", encoding="utf-8") as fh:
        for item_id, prompt, replies in SAMPLE:
            fh.write(json.dumps({"id": item_id, "prompt": prompt, "responses": replies}) + "\n")
    return [study, responses]
