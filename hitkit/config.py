"""The study file: one YAML document per study, validated once, here, into typed objects.

Everything downstream receives a :class:`StudyConfig`, never a dict. Paths in the file are
relative to the file's own folder; :func:`load_study` resolves them. A file that does not
validate raises :class:`~hitkit.errors.ConfigError` naming the file, the field and the fix.
"""
from __future__ import annotations

import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hitkit.errors import ConfigError

TASK_TYPES = ("pairwise", "live_chat", "spot_the_bot")
PROVIDERS = ("simulated", "local", "prolific", "mturk")
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
    approve_after_s: float = Field(0, ge=0, description="auto-approve submitted work after this delay")


class ServerConfig(_Model):
    """Where the worker pages are served, and the address workers reach them at."""

    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535, description="0 picks a free port")
    public_url: Optional[str] = None
    threads: int = Field(16, gt=0)


class ProviderConfig(_Model):
    """Which crowd does the work."""

    kind: Literal["simulated", "local", "prolific", "mturk"] = "simulated"
    currency: str = "USD"
    fee_rate: Decimal = Field(Decimal("0"), ge=0, le=1, description="provider fee on rewards")


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
    base_dir: Path = Field(Path("."), exclude=True, description="folder of the study file")

    @field_validator("systems")
    @classmethod
    def _unique_systems(cls, systems: list[SystemConfig]) -> list[SystemConfig]:
        names = [s.name for s in systems]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"system names must be unique; repeated: {', '.join(dupes)}")
        return systems

    @model_validator(mode="after")
    def _task_section_present(self) -> "StudyConfig":
        if getattr(self, self.task, None) is None and self.task in ("pairwise",):
            raise ValueError(f"task '{self.task}' needs a '{self.task}:' section (see `hitkit init`)")
        unknown = sorted(set(self.simulated.quality) - {s.name for s in self.systems})
        if unknown:
            raise ValueError(f"simulated.quality names systems that are not in 'systems': {', '.join(unknown)}")
        return self

    # Resolved locations -------------------------------------------------------------------
    def path(self, p: Path) -> Path:
        """A path from the study file, resolved against the file's folder."""
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    @property
    def out_dir(self) -> Path:
        """The study's own output folder: ``OUT/STUDY``."""
        return self.path(self.out) / self.study

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
    "less_than_equal": "use a smaller number",
    "decimal_parsing": "write an amount such as 12.50",
    "decimal_max_places": "use at most two decimal places",
    "too_short": "add more entries",
}


def _describe(error: dict) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "(top level)"
    fix = _FIX_HINTS.get(error["type"], "")
    line = f"  {where}: {error['msg']}"
    if error["type"] not in ("missing",) and "input" in error and not isinstance(error["input"], (dict, list)):
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
