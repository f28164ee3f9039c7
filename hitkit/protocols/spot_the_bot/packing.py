"""Spot The Bot's material and packing (METHODS §2): the bot–bot conversations read from their file, how
many human–human conversations to mix in, and segments packed into HITs so that no worker sees two
segments of one conversation."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from hitkit.errors import ConfigError, InputError
from hitkit.material.jsonl import iter_jsonl


@dataclass(frozen=True)
class SourceConversation:
    """What packing needs to know of a conversation: its key and whether it is human–human."""

    key: str
    human_human: bool


@dataclass(frozen=True)
class Segment:
    """The first ``k`` exchanges of conversation ``conversation``."""

    conversation: str
    k: int


def unit_key(conversation: str, k: int) -> str:
    """The study-unique key of one segment unit."""
    return f"{conversation}#{k}"


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def pack_segments(
    conversations: Sequence[SourceConversation], lengths: Sequence[int], per_hit: int, rng: random.Random
) -> list[list[Segment]]:
    """HITs of at most ``per_hit`` segments in blocks of Latin squares (see the module docstring).

    Raises ConfigError when the material cannot give every HIT all segment lengths and both kinds
    of material. HITs are ordered round-robin over blocks, so HITs posted together rarely conflict.
    """
    lengths = list(lengths)
    n_len = len(lengths)
    keys = [c.key for c in conversations]
    if len(set(keys)) != len(keys) or len(set(lengths)) != n_len or n_len == 0:
        raise ConfigError("conversations must have distinct keys and segment lengths must be distinct and given")
    humans = [c for c in conversations if c.human_human]
    bots = [c for c in conversations if not c.human_human]
    total = len(conversations)
    groups = max(1, math.ceil(total / per_hit))
    if not humans or not bots or len(humans) < groups or len(bots) < groups:
        raise ConfigError(
            f"{len(bots)} bot–bot and {len(humans)} human–human conversations make {groups} group(s) "
            f"of at most {per_hit}; every group needs both kinds, so each kind needs at least "
            f"{groups} conversations — raise spot_the_bot.human_count or add bot–bot conversations"
        )
    smallest = len(humans) // groups + len(bots) // groups
    if smallest < max(n_len, 2):
        raise ConfigError(
            f"{total} conversations in {groups} group(s) leave a group of {smallest}, fewer than the "
            f"{n_len} segment lengths each HIT must mix; add conversations"
        )
    humans, bots = list(humans), list(bots)
    rng.shuffle(humans)
    rng.shuffle(bots)
    # More humans to the first groups, more bots to the last: group sizes differ by at most one.
    human_counts = _split(len(humans), groups)
    bot_counts = _split(len(bots), groups)[::-1]
    blocks: list[list[list[Segment]]] = []
    for h, b in zip(human_counts, bot_counts, strict=True):
        group = [humans.pop() for _ in range(h)] + [bots.pop() for _ in range(b)]
        rng.shuffle(group)
        offset = rng.randrange(n_len)
        blocks.append(
            [[Segment(c.key, lengths[(i + j + offset) % n_len]) for i, c in enumerate(group)] for j in range(n_len)]
        )
    return [block[j] for j in range(n_len) for block in blocks]


def pack_share(
    conversations: Sequence[SourceConversation],
    available: Mapping[str, Sequence[int]],
    lengths: Sequence[int],
    per_hit: int,
    rng: random.Random,
) -> list[list[Segment]]:
    """HITs of at most ``per_hit`` segments of a judged study's crowd share where the full design
    (:func:`pack_segments`) cannot pack it: the share is drawn by whole conversations within each pair,
    so it may lack the blocks' balance of kinds. ``available[key]``: the conversation's segment lengths
    in the share (all of them for a drawn conversation; fewer are packed too).

    The block design of :func:`pack_segments`, filled greedily: each conversation, in an order
    that interleaves human–human and bot–bot material, goes into the current block of
    ``len(lengths)`` HITs under a rotation of the Latin square (segment ``lengths[s]`` into HIT
    ``(s + r) % len(lengths)``) that keeps every HIT within ``per_hit``; when none does, a new block
    starts. So, as in the full design, no HIT holds two segments of one conversation and each
    conversation's segments lie in the HITs of one block, while HITs stay full. Unlike the full design, a HIT is not
    guaranteed both kinds of material or every length: the share is random. Raises ConfigError when
    the share has segments of fewer than two conversations or lacks one kind, too little for a HIT.
    """
    lengths = list(lengths)
    n_len = len(lengths)
    humans = [c for c in conversations if c.human_human and available.get(c.key)]
    bots = [c for c in conversations if not c.human_human and available.get(c.key)]
    if len(humans) + len(bots) < 2 or not humans or not bots:
        raise ConfigError(
            f"the crowd's share of the study (judge.human_share or judge.human_items) has segments of "
            f"{len(bots)} bot–bot and {len(humans)} human–human conversation(s); a HIT needs segments "
            f"of two conversations at least, with both kinds among the HITs — raise the share"
        )
    rng.shuffle(humans)
    rng.shuffle(bots)
    # Interleaved by their place in their own list, so each block gets its share of both kinds.
    order = sorted(
        [(i / len(humans), 0, c) for i, c in enumerate(humans)] + [(i / len(bots), 1, c) for i, c in enumerate(bots)],
        key=lambda t: t[:2],
    )
    blocks: list[list[list[Segment]]] = []
    block: list[list[Segment]] = [[] for _ in lengths]
    for _, _, c in order:
        slots = sorted(lengths.index(k) for k in available[c.key])
        rotations = rng.sample(range(n_len), n_len)
        fit = next((r for r in rotations if all(len(block[(s + r) % n_len]) < per_hit for s in slots)), None)
        if fit is None:
            blocks.append(block)
            block, fit = [[] for _ in lengths], rotations[0]
        for s in slots:
            block[(s + fit) % n_len].append(Segment(c.key, lengths[s]))
    blocks.append(block)
    return [hit for j in range(n_len) for b in blocks if (hit := b[j])]


def conflicts(hit_conversations: Iterable[str], seen: Iterable[str]) -> set[str]:
    """The conversations of a HIT that a worker has already been shown a segment of (the refusal rule)."""
    return set(hit_conversations) & set(seen)


def human_count_for(
    bot_bot: int,
    pairs: int,
    configured: int | None,
    available: int,
    per_hit: int,
    lengths: Sequence[int],
    source: str,
    reaching: dict[int, int],
) -> int:
    """The number of human–human conversations to mix in (pure; see :meth:`SpotTheBotTask.human_plan`).

    Packing puts every conversation in one group of at most ``per_hit`` (a block of HITs), and every
    group needs one human–human conversation at least, so ``h >= ceil((bot_bot + h) / per_hit)``. The
    default is the mean number of bot–bot conversations per pair (the paper's balance), lowered to
    what ``available`` allows as long as every group still gets one. ``reaching[k]`` is how many
    dialogues of the material reach k exchanges, for the advice on shorter segments.
    """
    longest = max(lengths)
    minimum = max(1, math.ceil(bot_bot / (per_hit - 1)))  # smallest h with h >= ceil((bot_bot + h) / per_hit)
    wanted = configured if configured is not None else max(minimum, min(round(bot_bot / max(1, pairs)), available))
    groups = max(1, math.ceil((bot_bot + wanted) / per_hit))
    if wanted <= available and wanted >= groups:
        return wanted
    if wanted > available and configured is not None and available >= minimum:
        raise ConfigError(
            f"spot_the_bot.human_count is {configured}, but {source} has {available} human–human "
            f"conversations of at least {longest} exchanges; lower human_count to between {minimum} "
            f"and {available}, or give more material in spot_the_bot.human_conversations"
        )
    if wanted < groups and available >= minimum:
        raise ConfigError(
            f"spot_the_bot.human_count is {configured}: too few for {bot_bot} bot–bot conversations in "
            f"HITs of at most {per_hit} segments (each block of HITs needs a human–human conversation); "
            f"use at least {minimum}, or leave human_count out"
        )
    fixes = [
        f"give your own human–human dialogues in spot_the_bot.human_conversations (JSONL, one dialogue a line, "
        f'e.g. {{"id": "d1", "turns": ["Hi!", "Hello, how are you?", ...]}}; at least {minimum} reaching '
        f"{longest} exchanges)"
    ]
    shorter = [k for k in sorted(reaching) if reaching[k] >= minimum]
    if shorter:
        usable = [k for k in lengths if k <= max(shorter)] or [max(shorter)]
        if len(usable) < 2:
            usable = sorted({*range(1, max(shorter) + 1)})[-3:]
        fixes.append(
            f"use shorter segments, e.g. spot_the_bot.segment_lengths: {usable} ({source} has "
            f"{reaching[max(shorter)]} dialogues of at least {max(shorter)} exchanges)"
        )
    if available:
        need_per_hit = math.ceil((bot_bot + available) / available)
        if need_per_hit <= 200:
            fixes.append(f"raise spot_the_bot.segments_per_hit to {need_per_hit}")
        per_pair = available * (per_hit - 1) // max(1, pairs)
        if per_pair:
            fixes.append(
                f"generate fewer bot–bot conversations: at most {per_pair} per pair (generation.conversations_per_pair)"
            )
    raise ConfigError(
        f"Spot The Bot cannot pack {bot_bot} bot–bot conversations with the human–human material: "
        f"each block of HITs (at most {per_hit} segments each) needs one human–human conversation "
        f"reaching {longest} exchanges, so at least {minimum} are needed, and {source} has {available}. "
        f"Fix it with one of: " + "; or ".join(fixes)
    )


# Reading material --------------------------------------------------------------------------------
def read_bot_bot(path: Path, systems: Sequence[str], min_exchanges: int) -> list[dict]:
    """Read generated bot–bot conversations (GenerationConfig's JSONL); InputError names file and line."""
    out: list[dict] = []
    seen: dict[str, int] = {}
    missing = "bot–bot conversations not found — generate them (generation:) or set spot_the_bot.bot_conversations"
    for lineno, row in iter_jsonl(path, missing):
        if not isinstance(row, dict) or not isinstance(row.get("turns"), list):
            raise InputError(
                path, 'each line must be {"id", "systems": [a, b], "turns": [{"speaker", "system", "text"}]}', lineno
            )
        pair = row.get("systems")
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(s, str) for s in pair)):
            raise InputError(path, "'systems' must name the two systems, speaker 0's first", lineno)
        unknown = [s for s in pair if s not in systems]
        if unknown:
            raise InputError(path, f"system(s) {', '.join(unknown)} are not in the study's 'systems'", lineno)
        ident = str(row.get("id", lineno))
        if ident in seen:
            raise InputError(path, f"conversation id '{ident}' already used on line {seen[ident]}", lineno)
        seen[ident] = lineno
        texts = []
        for i, turn in enumerate(row["turns"]):
            if not isinstance(turn, dict) or not isinstance(turn.get("text"), str):
                raise InputError(path, f"turn {i} must be an object with a string 'text'", lineno)
            if turn.get("speaker") != i % 2:
                raise InputError(
                    path,
                    f"turn {i} has speaker {turn.get('speaker')!r}; speakers must alternate 0, 1, 0, … starting with 0",
                    lineno,
                )
            texts.append(turn["text"])
        if len(texts) // 2 < min_exchanges:
            raise InputError(
                path,
                f"conversation '{ident}' has {len(texts) // 2} exchanges; the segment "
                f"lengths need {min_exchanges} — generate longer conversations or "
                f"shorten spot_the_bot.segment_lengths",
                lineno,
            )
        out.append({"id": ident, "systems": list(pair), "turns": texts, "seed_dialogue": row.get("seed_dialogue")})
    if not out:
        raise InputError(path, "holds no bot–bot conversations")
    return out
