"""``hitkit init --task pairwise``: a commented, runnable pairwise study and its responses file."""

from __future__ import annotations

from hitkit.i18n import N_
from hitkit.protocols.kit.starter import (
    HOLD_NOTE,
    SAMPLE_HELP,
    SAMPLE_RESPONSES,
    head,
    hit_section,
    responses_material,
    sample_sections,
    sample_systems,
)

WORKER_TEXT = (
    N_("Which response is the better reply?"),
    N_("Which chatbot reply is better?"),
    N_("Read a message and two chatbot replies, and pick the better one."),
)
"""The starter's words a worker reads (its HIT and question), put into ``hitkit init --language``'s language."""

STUDY_YAML = (
    head(
        "# A pairwise A/B study (ChatEval style): workers read a prompt and two responses and pick the better.\n"
        + SAMPLE_HELP,
        study="my-ab-study",
        task="pairwise",
        task_note="pairwise | live_chat | spot_the_bot | rating | arena",
        seeds="seeds packing, A/B order and every resampling in the analysis",
        budget="30.00",
    )
    + """\
# database: postgresql://user@host/hitkit   # default: SQLite file in runs/<study>/

"""
    + sample_systems("compared")
    + """
pairwise:
  responses: responses.jsonl  # one line per prompt: {"id", "prompt", "responses": {system: text}}
  prompts_per_hit: 10         # comparisons in one HIT
  votes_per_prompt: 3         # workers who judge each comparison
  question: Which response is the better reply?

"""
    + hit_section(*WORKER_TEXT[1:], reward="0.60", minutes=20, column=30, minutes_note=HOLD_NOTE, lifetime_hours=24)
    + sample_sections(wave_size=5, max_concurrent=10, interval_s=1, crowd={"diligent": 8, "noisy": 3, "spammer": 1})
)


def material() -> dict[str, str]:
    """The files the study reads, by name: three prompts, each answered by the three systems (the
    third's bland and off-topic replies alike)."""
    item_id, prompt, replies = SAMPLE_RESPONSES[2]
    return responses_material([*SAMPLE_RESPONSES[:2], (item_id, prompt, {**replies, "gamma": "That is nice."})])
