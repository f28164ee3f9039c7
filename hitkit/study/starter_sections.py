"""The sections every ``hitkit init --task`` starter study ends with: ``schedule:``, ``provider:`` and
``simulated:``, written and commented alike for every protocol.

A protocol's starter (``hitkit/protocols/NAME/starter.py``) writes what is its own (the protocol's
section, its systems, its HIT) and gives here only its numbers: how fast work is posted, and the
simulated crowd that dry-runs it; a starter that shows prompts with responses may take the sample
material here too. Below the protocols (like :mod:`hitkit.study.sections`), so a
starter may import it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

COMMENT_COLUMN = 28
"""Where the comments of these sections start, as in the starters' own sections."""


def _line(text: str, comment: str) -> str:
    """``text`` with ``# comment`` at :data:`COMMENT_COLUMN` (two spaces after a longer text)."""
    return f"{text.ljust(COMMENT_COLUMN - 2)}  # {comment}\n"


def shared_sections(
    *,
    wave_size: int,
    max_concurrent: int,
    per_worker_cap: int,
    interval_s: float,
    crowd: Mapping[str, int],
    quality: Mapping[str, float],
    concurrency: int,
    quality_means: str = "",
    cap_note: str = "",
) -> str:
    """The starter's last three sections as YAML: the schedule's pace (``interval_s`` in seconds), the
    simulated provider, and the dry-run crowd (``crowd``: workers per profile; ``quality``: how each
    system looks to a diligent worker, which ``quality_means`` says in words; ``cap_note``: why the
    per-worker cap is what it is)."""
    cap = "HITs one worker may take" + (f" {cap_note}" if cap_note else "")
    systems = ", ".join(f"{name}: {value:g}" for name, value in quality.items())
    quality_line = f"  quality: {{{systems}}}"
    return (
        "schedule:\n"
        + _line(f"  wave_size: {wave_size}", "HITs posted per wave")
        + _line(f"  max_concurrent: {max_concurrent}", "HITs open at once")
        + _line(f"  per_worker_cap: {per_worker_cap}", cap)
        + _line(f"  interval_s: {interval_s:g}", "scheduler tick, in seconds")
        + _line("  # qc_failures: hold", "work of workers who fail QC: hold (for your review) | pay | reject")
        + _line("  #", "(default: hold on prolific, panel and mturk; pay on simulated and local)")
        + "\nprovider:\n"
        + _line("  kind: simulated", "simulated | local | prolific | panel | mturk (docs: Providers)")
        + "  currency: USD\n"
        + _line('  # fee_rate: "0.333"', "the platform's fee on rewards (Prolific: from provider.prolific if unset)")
        + "\n"
        + _line("simulated:", "the dry-run crowd; ignored by other providers")
        + "  workers:\n"
        + "".join(f"    - {{profile: {profile}, count: {count}}}\n" for profile, count in crowd.items())
        + (_line(quality_line, quality_means) if quality_means else quality_line + "\n")
        + _line("  # activity: zipf", "how much each worker does: zipf (a few do most) | lognormal | uniform")
        + f"  concurrency: {concurrency}\n"
    )


SAMPLE_RESPONSES = [
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
            "gamma": "Cats are animals.",
        },
    ),
    (
        "p4",
        "How do I keep my houseplants alive?",
        {
            "alpha": "Water only when the top inch of soil is dry, and give them bright, indirect light.",
            "beta": "Plants need some care.",
            "gamma": "The weather is nice today.",
        },
    ),
]
"""Four prompts, each answered by alpha (good), beta (bland) and gamma (off topic): starter material."""


def responses_material() -> dict[str, str]:
    """``responses.jsonl`` of :data:`SAMPLE_RESPONSES`: the material of a starter that shows prompts with responses."""
    lines = [
        json.dumps({"id": item_id, "prompt": prompt, "responses": replies})
        for item_id, prompt, replies in SAMPLE_RESPONSES
    ]
    return {"responses.jsonl": "\n".join(lines) + "\n"}
