"""``hitkit init --task spot_the_bot``: a commented, runnable Spot The Bot study (Deriu et al. 2020)."""

from __future__ import annotations

import json

from hitkit.i18n import N_
from hitkit.protocols.kit.starter import head, hit_section, served_bots, shared_sections

WORKER_TEXT = (
    N_("Is each speaker a person or a bot?"),
    N_("Read the beginnings of short conversations and say whether each speaker is a person or a bot."),
)
"""The starter's words a worker reads (its HIT and question), put into ``hitkit init --language``'s language."""

STUDY_YAML = (
    head(
        """\
# A Spot The Bot study (Deriu et al. 2020): the systems talk to each other (generation:), and workers
# read the first 2, 3 or 5 exchanges of those conversations, mixed with human-human ones, and say
# whether each speaker is a person or a bot. Every field is in the docs' study-file reference
# (`hitkit schema` gives your editor the same). Check it with `hitkit launch study.yaml --dry-run`;
# run it with `hitkit launch study.yaml --yes` (needs the bots extra, as ops/quickstart.sh installs).
""",
        task="spot_the_bot",
        seeds="seeds generation, packing, the simulated crowd and every resampling",
        budget="40.00",
        out="results go to runs/<study>/ (bot_bot.jsonl, database, export/, analysis/)",
    )
    + """\

"""
    + served_bots()
    + """\

systems:                    # no url: the study's own bot server above; or url: any OpenAI-compatible endpoint
  - name: warm
    model: smollm
    options: {temperature: 0.7, max_tokens: 24}
  - name: cold
    model: smollm
    options: {temperature: 0.1, max_tokens: 24}
  - name: hot
    model: smollm
    options: {temperature: 1.6, max_tokens: 24}

generation:                 # bot-bot conversations, written to runs/<study>/bot_bot.jsonl (resumable)
  conversations_per_pair: 4 # |S_ij|: conversations per pair of systems
  exchanges: 5              # exchanges per conversation, the seed exchange included
  self_chat: false          # true: each system also talks to itself

spot_the_bot:
  human_conversations: human.jsonl  # human-human dialogues, one JSON object a line (default: chatterbot-corpus)
  segment_lengths: [2, 3, 5]        # k: a segment is the first k exchanges of a conversation
  segments_per_hit: 8               # segments in one HIT
  annotations_per_segment: 2        # workers who label each segment

"""
    + hit_section(*WORKER_TEXT, reward="1.00", minutes=20)
    + shared_sections(
        wave_size=4,
        max_concurrent=6,
        per_worker_cap=3,
        interval_s=0.5,
        cap_note="(no one sees two segments of one conversation)",
        crowd={"diligent": 9, "noisy": 3, "spammer": 2},
        quality={"warm": 0.6, "cold": 0.4, "hot": 0.2},
        quality_means="how human each system seems to diligent workers",
        concurrency=6,
    )
)

HUMAN = [
    [
        "Hi! Have you been to the new bakery on the corner?",
        "Not yet, is it any good?",
        "The rye bread is great, and they open at seven.",
        "Then I'll go on Saturday morning.",
        "Bring me a loaf if you go!",
        "Deal. Do you want the seeded one?",
        "Yes please, the seeded one.",
        "Noted. How was your week, by the way?",
        "Busy, but the weekend will fix that.",
        "Same here. See you Saturday!",
    ],
    [
        "How was the trip to the coast?",
        "Long drive, but worth it.",
        "Did the weather hold?",
        "Two sunny days and one storm.",
        "Did you swim?",
        "Only once, the water was freezing.",
        "Brave. Any good food?",
        "Fish and chips on the pier, every evening.",
        "Now I'm hungry.",
        "Then let's get lunch tomorrow.",
    ],
    [
        "I finally started learning the guitar.",
        "Nice! Acoustic or electric?",
        "Acoustic, my uncle's old one.",
        "How are your fingertips holding up?",
        "They hurt, honestly.",
        "That passes after a couple of weeks.",
        "Good to know. Any songs for beginners?",
        "Try anything with G, C and D.",
        "I'll look some up tonight.",
        "Play me one when you're ready!",
    ],
]


def material() -> dict[str, str]:
    """The files the study reads: three human-human dialogues of five exchanges (replace with yours)."""
    lines = [json.dumps({"id": f"h{i + 1}", "turns": turns}) for i, turns in enumerate(HUMAN)]
    return {"human.jsonl": "\n".join(lines) + "\n"}
