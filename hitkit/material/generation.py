"""Bot–bot conversations for Spot The Bot (METHODS.md §2), generated in parallel and resumable.

For every pair of systems (and, with ``self_chat``, each system with itself) the plan holds
``conversations_per_pair`` jobs. Each job is seeded with the first exchange of a test-set dialogue
drawn at random (seeded), and the two bots continue it turn by turn to ``exchanges`` exchanges over
the OpenAI-compatible protocol. Speaker 0 is ``systems[0]``: the seed's first turn is attributed to
it and the seed's reply to speaker 1, so each bot continues a conversation it appears to have begun.

A finished conversation is appended to ``bot_bot.jsonl`` as one line, flushed and fsynced, and
nothing is written for an unfinished one. A rerun skips the ids already in the file, so an
interrupted generation resumes without duplicating a conversation. A line torn by a crash
mid-write is cut off and its conversation generated again.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from hitkit.errors import ConfigError, HitkitError
from hitkit.study.config import StudyConfig
from hitkit.study.sections import GenerationConfig

Reply = Callable[[list[dict[str, str]]], str]


@dataclass(frozen=True)
class Job:
    """One bot–bot conversation to generate."""

    id: str
    systems: tuple[str, str]
    seed_dialogue: str
    seed: tuple[str, str]


@dataclass
class GenerationReport:
    planned: int
    already_done: int
    generated: int = 0
    failed: list[str] = field(default_factory=list)


def plan(systems: Sequence[str], per_pair: int, self_chat: bool, dialogues: Sequence, rng: random.Random) -> list[Job]:
    """Every job of a generation, in a fixed order; the same seed gives the same seeds and ids."""
    seeds = [d for d in dialogues if len(d.turns) >= 2 and d.turns[0].strip() and d.turns[1].strip()]
    if not seeds:
        raise HitkitError("no test dialogue has a first exchange (two non-empty turns) to seed conversations with")
    pairs = list(itertools.combinations(systems, 2)) + ([(s, s) for s in systems] if self_chat else [])
    jobs = []
    for a, b in pairs:
        for k in range(per_pair):
            d = rng.choice(seeds)
            jobs.append(Job(f"{a}~{b}#{k:03d}", (a, b), d.id, (d.turns[0].strip(), d.turns[1].strip())))
    return jobs


def history_for(speaker: int, turns: Sequence[dict]) -> list[dict[str, str]]:
    """The conversation as ``speaker``'s bot sees it: its own turns are the assistant's."""
    return [{"role": "assistant" if t["speaker"] == speaker else "user", "content": t["text"]} for t in turns]


def converse(job: Job, bots: Mapping[str, Reply], exchanges: int) -> list[dict]:
    """The job's turns: the seed exchange, then the two bots in alternation to ``exchanges`` exchanges."""
    turns = [
        {"speaker": 0, "system": job.systems[0], "text": job.seed[0]},
        {"speaker": 1, "system": job.systems[1], "text": job.seed[1]},
    ]
    while len(turns) < 2 * exchanges:
        speaker = len(turns) % 2
        system = job.systems[speaker]
        text = bots[system](history_for(speaker, turns)).strip()
        turns.append({"speaker": speaker, "system": system, "text": text})
    return turns


class ConversationFile:
    """``bot_bot.jsonl``: one finished conversation a line, appended atomically enough to resume."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def done_ids(self) -> set[str]:
        """Ids of the complete lines; a torn last line (a crash mid-write) is cut off the file."""
        if not self.path.exists():
            return set()
        ids, good_bytes = set(), 0
        with self.path.open("rb") as fh:
            for raw in fh:
                try:
                    if not raw.endswith(b"\n"):
                        raise ValueError("torn line")
                    ids.add(json.loads(raw)["id"])
                except (ValueError, KeyError):
                    break
                good_bytes += len(raw)
        if good_bytes < self.path.stat().st_size:
            with self.path.open("r+b") as fh:
                fh.truncate(good_bytes)
        return ids

    def append(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())


def generation_section(config: StudyConfig) -> GenerationConfig:
    """The study's ``generation:`` section; ConfigError when it has none."""
    if config.generation is None:
        raise ConfigError("the study file has no 'generation:' section; add one to generate bot–bot conversations")
    return config.generation


def load_test_dialogues(config: StudyConfig):
    """The dialogues whose first exchanges seed the conversations."""
    from hitkit.bots.corpus import load_chatterbot_english, load_jsonl

    gen = generation_section(config)
    return load_jsonl(config.path(gen.test_dialogues)) if gen.test_dialogues else load_chatterbot_english()


def bots_for(config: StudyConfig, names: Sequence[str]) -> dict[str, Reply]:
    """A shared bot client per generating system, patient as offline work can afford to be."""
    from hitkit.bots.client import BotClient

    by_name = {s.name: s for s in config.systems}
    missing = [n for n in names if not (by_name[n].url and by_name[n].model)]
    if missing:
        raise ConfigError(f"generation needs 'url' and 'model' for system(s) {', '.join(missing)}")
    gen = generation_section(config)
    clients: dict[str, Reply] = {}
    for n in names:
        bot = by_name[n].bot_config()
        # Every conversation in flight may be waiting on the same system: give it that many slots.
        bot = bot.model_copy(
            update={
                "timeout_s": max(bot.timeout_s, gen.timeout_s),
                "max_concurrency": max(bot.max_concurrency, gen.parallel),
            }
        )
        clients[n] = BotClient(bot).reply
    return clients


def _plan_for(config: StudyConfig) -> tuple[list[str], list[Job], list[Job], ConversationFile]:
    """The systems that converse, every planned job, those not yet written, and the output file."""
    gen = generation_section(config)
    known = [s.name for s in config.systems]
    systems = gen.systems or known
    unknown = sorted(set(systems) - set(known))
    if unknown:
        raise ConfigError(f"generation.systems names systems that are not in 'systems': {', '.join(unknown)}")
    jobs = plan(
        systems,
        gen.conversations_per_pair,
        gen.self_chat,
        load_test_dialogues(config),
        random.Random(f"{config.seed}:generation"),
    )
    config.bot_bot_path.parent.mkdir(parents=True, exist_ok=True)
    out = ConversationFile(config.bot_bot_path)
    done = out.done_ids()
    todo = [j for j in jobs if j.id not in done]
    return systems, jobs, todo, out


def planned_pairs(config: StudyConfig) -> tuple[int, int]:
    """(bot–bot conversations the generation plans, pairs of systems), computed without any bot."""
    gen = generation_section(config)
    systems = gen.systems or [s.name for s in config.systems]
    n = len(systems)
    pairs = n * (n - 1) // 2 + (n if gen.self_chat else 0)
    return pairs * gen.conversations_per_pair, pairs


def pending(config: StudyConfig) -> int:
    """How many of the study's bot–bot conversations are still to generate (0: no bot is needed)."""
    return len(_plan_for(config)[2])


def generate(
    config: StudyConfig,
    bots: Mapping[str, Reply] | None = None,
    *,
    show_progress: bool = True,
    stop: threading.Event | None = None,
    lines_every_s: float | None = 30.0,
) -> GenerationReport:
    """Generate the study's missing bot–bot conversations into ``config.bot_bot_path``.

    Progress counts bot replies, so it moves from the first reply of a slow local model: one line
    redrawn on a terminal (``show_progress`` and stderr a TTY), else a plain line every
    ``lines_every_s`` seconds (None: silent).
    """
    import time

    from hitkit.progress import StatusLine, eta_text

    gen = generation_section(config)
    systems, jobs, todo, out = _plan_for(config)
    report = GenerationReport(planned=len(jobs), already_done=len(jobs) - len(todo))
    if not todo:
        return report
    bots = bots if bots is not None else bots_for(config, systems)
    stop = stop or threading.Event()
    replies_needed = len(todo) * max(0, 2 * gen.exchanges - 2)
    counter = {"replies": 0}
    lock = threading.Lock()

    def counted(reply: Reply) -> Reply:
        def wrapped(history):
            text = reply(history)
            with lock:
                counter["replies"] += 1
            return text

        return wrapped

    counting = {name: counted(bot) for name, bot in bots.items()}

    def run(job: Job) -> Job:
        if stop.is_set():
            raise InterruptedError("generation stopped")
        turns = converse(job, counting, gen.exchanges)
        out.append({"id": job.id, "systems": list(job.systems), "seed_dialogue": job.seed_dialogue, "turns": turns})
        return job

    tty = show_progress and sys.stderr.isatty()
    line = StatusLine(tty, None if tty else lines_every_s)
    started = time.monotonic()

    def show() -> None:
        fraction = counter["replies"] / replies_needed if replies_needed else 1.0
        eta = eta_text(fraction, time.monotonic() - started)
        line.show(
            f"bot-bot conversations {report.already_done + report.generated}/{len(jobs)} · bot replies "
            f"{counter['replies']}/{replies_needed} ({100 * fraction:.0f} %)" + (f" · {eta}" if eta else "")
        )

    if not tty and lines_every_s is not None:
        sys.stderr.write(
            f"Generating {len(todo)} bot-bot conversations ({replies_needed} bot replies); "
            f"a progress line every {lines_every_s:.0f} s\n"
        )
    # Not a `with` block: on Ctrl-C its exit would wait for every reply in flight (minutes for a slow
    # model); here the queued conversations are cancelled and the launch goes on to stop the bot server,
    # which ends the replies in flight.
    pool = ThreadPoolExecutor(gen.parallel)
    interrupted = False
    try:
        futures = {pool.submit(run, job): job for job in todo}
        pending = set(futures)
        while pending:
            finished = {f for f in pending if f.done()}
            for future in finished:
                try:
                    future.result()
                    report.generated += 1
                except Exception as exc:  # one failed conversation is reported; the rest go on
                    report.failed.append(f"{futures[future].id}: {exc}")
            pending -= finished
            show()
            if pending:
                wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
    except BaseException:
        interrupted = True
        stop.set()  # Ctrl-C: finish nothing new, keep what is written
        raise
    finally:
        line.close()
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    if report.failed:
        raise HitkitError(
            f"{len(report.failed)} of {len(todo)} conversations failed (first: {report.failed[0]}); "
            f"the {report.generated} finished ones are kept — run again to resume"
        )
    return report
