"""The degraded quality-control bot of Ji et al. (ACL 2022), exactly as METHODS.md §1 gives it.

Each reply ignores the worker's input: it is a response sampled at random from the training
dialogues, then meaning-distorted by replacing a random run of r consecutive words with r
consecutive words from a *different* training dialogue. For a response of n ≥ 3 words the run
never touches the first or the last word, so the reply still opens and closes naturally and the
damage is in the meaning; r grows with n by :func:`replacement_length`.

Choices the paper leaves open, made here and documented:

* words are whitespace-separated tokens, and the reply is re-joined with single spaces;
* a "response" is any turn after the first of a dialogue (the first turn answers nothing);
* the donor words come from one utterance of the donor dialogue when any utterance there has at
  least r words (so the inserted phrase is itself natural text); only if no donor utterance is that
  long are the donor dialogue's turns read as one running text.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hitkit.bots.base import Backend, Completion, FinishReason
from hitkit.bots.batching import first_stop
from hitkit.bots.corpus import CorpusError, Dialogue, load_chatterbot_english, load_jsonl
from hitkit.bots.protocol import ChatCompletionRequest


def replacement_length(n: int) -> int:
    """Number of words r replaced in an n-word response (1–3→1, 4–5→2, 6–8→3, 9–15→4, 16–29→5, ≥30→⌊n/5⌋)."""
    if n < 1:
        raise ValueError(f"a response needs at least one word, got n={n}")
    for upper, r in ((3, 1), (5, 2), (8, 3), (15, 4), (29, 5)):
        if n <= upper:
            return r
    return n // 5


@dataclass(frozen=True)
class Distortion:
    """A distorted response and exactly what was replaced (for audits and tests)."""

    text: str
    start: int
    length: int
    donor_id: str
    donor_words: tuple[str, ...]


def _donor_runs(
    donors: Sequence[Dialogue], r: int, *, utterances: bool = True, running: bool = True
) -> list[tuple[str, list[str]]]:
    """The donor word runs of at least r words: the donors' utterances that long, else (none being that
    long) the donors' whole dialogues read as running text. ``utterances``/``running`` pick one kind."""
    found = [(d.id, words) for d in donors for t in d.turns if len(words := t.split()) >= r] if utterances else []
    if found or not running:
        return found
    return [(d.id, words) for d in donors if len(words := " ".join(d.turns).split()) >= r]


class _DonorRuns:
    """:func:`_donor_runs` of a whole corpus less one dialogue, with the corpus split into words once per r
    (splitting every turn of the corpus again for each reply was a tenth of a live-chat study's CPU)."""

    def __init__(self, dialogues: Sequence[Dialogue]) -> None:
        self._dialogues = dialogues
        self._by_r: dict[int, tuple[list[tuple[str, list[str]]], list[tuple[str, list[str]]]]] = {}

    def without(self, dialogue_id: str) -> Callable[[int], list[tuple[str, list[str]]]]:
        """The runs of every dialogue but ``dialogue_id``, as ``_donor_runs(donors, r)`` gives them."""

        def runs(r: int) -> list[tuple[str, list[str]]]:
            if r not in self._by_r:
                self._by_r[r] = (
                    _donor_runs(self._dialogues, r, running=False),
                    _donor_runs(self._dialogues, r, utterances=False),
                )
            utterances, running = self._by_r[r]
            return [c for c in utterances if c[0] != dialogue_id] or [c for c in running if c[0] != dialogue_id]

        return runs


def distort(response: str, donor_dialogues: Sequence[Dialogue], rng: random.Random) -> Distortion:
    """Replace a random run of r words of ``response`` with r consecutive words of a donor dialogue.

    ``donor_dialogues`` must already exclude the dialogue ``response`` came from. For n ≥ 3 the run
    excludes the first and last word. Raises ValueError for an empty response or when no donor
    has r words.
    """
    return _distort(response, lambda r: _donor_runs(donor_dialogues, r), rng)


def _distort(response: str, donor_runs: Callable[[int], list[tuple[str, list[str]]]], rng: random.Random) -> Distortion:
    """:func:`distort` with the donors' runs of r words given by ``donor_runs(r)``."""
    words = response.split()
    n = len(words)
    r = replacement_length(n)
    candidates = donor_runs(r)
    if not candidates:
        raise ValueError(
            f"no donor dialogue has {r} consecutive words to replace a run of an "
            f"{n}-word response; add longer dialogues to the corpus"
        )
    # For n >= 3 the run [start, start + r) must lie inside words[1 : n - 1].
    lo, hi = (1, n - 1 - r) if n >= 3 else (0, n - r)
    start = rng.randint(lo, hi)
    donor_id, donor_words = rng.choice(candidates)
    offset = rng.randint(0, len(donor_words) - r)
    inserted = tuple(donor_words[offset : offset + r])
    new_words = words[:start] + list(inserted) + words[start + r :]
    return Distortion(text=" ".join(new_words), start=start, length=r, donor_id=donor_id, donor_words=inserted)


@dataclass(frozen=True)
class DegradedReply:
    """One QC-bot reply: the sampled source response and its distortion."""

    source_id: str
    source_turn: int
    original: str
    distortion: Distortion

    @property
    def text(self) -> str:
        """The reply shown to the worker."""
        return self.distortion.text


class DegradedBot:
    """The degraded QC bot over a corpus of training dialogues; seeded, thread-safe."""

    def __init__(self, corpus: Sequence[Dialogue] | None = None, seed: int | None = None) -> None:
        """Use ``corpus`` (default: chatterbot-corpus English) and a ``random.Random(seed)``."""
        dialogues = list(corpus) if corpus is not None else load_chatterbot_english()
        if len({d.id for d in dialogues}) < 2:
            raise CorpusError(
                f"the QC bot needs at least two distinct dialogues (donor words must "
                f"come from a different dialogue), got {len(dialogues)}"
            )
        self.dialogues = dialogues
        # Every turn after a dialogue's first is a response; empty ones cannot be distorted.
        self._responses = [
            (i, j) for i, d in enumerate(dialogues) for j in range(1, len(d.turns)) if d.turns[j].split()
        ]
        if not self._responses:
            raise CorpusError(
                "the QC bot's corpus has no responses: every dialogue needs at "
                "least two non-empty turns to sample a reply from"
            )
        self._donors = _DonorRuns(dialogues)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()

    @classmethod
    def from_jsonl(cls, path: str | Path, seed: int | None = None) -> DegradedBot:
        """Build the bot over the dialogues of a JSONL file (see :mod:`hitkit.bots.corpus`)."""
        return cls(load_jsonl(path), seed=seed)

    def sample(self) -> DegradedReply:
        """Draw one distorted reply with its provenance."""
        with self._lock:  # one RNG shared by HTTP threads: keep draws reproducible per seed
            i, j = self._rng.choice(self._responses)
            failed: set[tuple[int, int]] = set()
            while True:
                source = self.dialogues[i]
                try:
                    distortion = _distort(source.turns[j], self._donors.without(source.id), self._rng)
                    return DegradedReply(source.id, j, source.turns[j], distortion)
                except ValueError:
                    # No donor is long enough for this response; redraw uniformly from the rest.
                    failed.add((i, j))
                    pool = [p for p in self._responses if p not in failed]
                    if not pool:
                        raise CorpusError(
                            "no response in the QC bot's corpus can be distorted: the donor dialogues are all too short"
                        ) from None
                    i, j = self._rng.choice(pool)

    def reply(self, history: Sequence[Mapping[str, Any] | Any] = ()) -> str:
        """Return a distorted training response; the history is deliberately ignored."""
        return self.sample().text


class DegradedBackend(Backend):
    """Hosts a :class:`DegradedBot` behind the bot server's OpenAI-compatible API.

    Token counts in ``usage`` are whitespace words, and ``max_tokens`` caps the reply in words,
    since the QC bot has no tokenizer.
    """

    engine_name = "degraded"

    def __init__(self, name: str, bot: DegradedBot) -> None:
        """Serve ``bot`` under the model name ``name``."""
        self.name = name
        self.bot = bot
        self._lock = threading.Lock()
        self._requests = 0

    def complete(self, request: ChatCompletionRequest) -> Completion:
        """Answer with one degraded reply, cut at a stop sequence or at ``max_tokens`` words."""
        text = self.bot.reply(request.messages)
        finish: FinishReason = "stop"
        cut = first_stop(text, request.stop)
        if cut is not None:
            text = text[:cut].rstrip()
        words = text.split()
        if len(words) > request.reply_budget:
            text, finish = " ".join(words[: request.reply_budget]), "length"
        with self._lock:
            self._requests += 1
        prompt_words = sum(len(m.content.split()) for m in request.messages)
        return Completion(
            text=text, finish_reason=finish, prompt_tokens=prompt_words, completion_tokens=len(text.split())
        )

    def stats(self) -> dict[str, Any]:
        """Requests served and corpus size."""
        with self._lock:
            return {"kind": "degraded", "requests": self._requests, "dialogues": len(self.bot.dialogues)}
