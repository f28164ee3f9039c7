"""The study file's shared part: every field but the protocol's own section, and the rules between them.

Everything downstream receives a :class:`StudyConfig`, never a dict. Its shared sections are in
:mod:`hitkit.study.sections`. This module knows no protocol: each protocol's section (``pairwise:``,
``live_chat:`` ...) and the rules that need the protocol are added by :mod:`hitkit.study.loading`, which
asks the registry, so the protocols may type their code on :class:`StudyConfig` without a loop. A study
is read with :func:`hitkit.study.loading.load_study`; every object it returns is a :class:`StudyConfig`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from hitkit.i18n.catalogs import parse_tag
from hitkit.study.bot_sections import BotsConfig
from hitkit.study.gold_section import GoldConfig
from hitkit.study.provider_sections import ProviderConfig
from hitkit.study.screener import ScreenerConfig, reward_problems
from hitkit.study.sections import (
    AuthenticityConfig,
    GenerationConfig,
    HitConfig,
    JudgeConfig,
    Model,
    Money,
    PrescreenConfig,
    ScheduleConfig,
    ServerConfig,
    SimulatedConfig,
    StopConfig,
    SystemConfig,
)

REVIEW_WINDOW_S = 24 * 3600.0
"""Default ``schedule.approve_after_s`` on a real crowd: a day for the coordinator to review work."""


class StudyConfig(Model):
    """One evaluation, as written in its study file; each protocol's section is an attribute named after the
    protocol, added by :mod:`hitkit.study.loading` (so a type checker sees it as Any)."""

    study: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]{0,62}$", description="unique name of the study")
    task: str = Field(description="the protocol (the registry's name for it)")
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
    authenticity: AuthenticityConfig = Field(default_factory=AuthenticityConfig)
    bots: Optional[BotsConfig] = None
    generation: Optional[GenerationConfig] = None
    prescreen: Optional[PrescreenConfig] = None
    design: Literal["fixed", "adaptive"] = Field(
        "fixed",
        description=(
            "fixed: post the HITs in their order; adaptive: post first the HITs that most serve the stop rule's open decision"
        ),
    )
    stop: Optional[StopConfig] = None
    judge: Optional[JudgeConfig] = None
    screener: Optional[ScreenerConfig] = None
    gold: Optional[GoldConfig] = Field(
        None, description="items with a known answer mixed into the HITs, and how they count in QC"
    )
    base_dir: Path = Field(Path("."), exclude=True, description="folder of the study file")
    ui_language: str = Field(
        "en",
        description="the language of every page a worker sees, a BCP 47 tag: en, de, fr, es, zh, ar and hi ship "
        "with hitkit; translations/LANG/LC_MESSAGES/messages.po next to the study file adds or overrides one "
        "(docs: Worker pages in other languages). The coordinator's dashboard and reports stay in English",
    )

    @field_validator("ui_language")
    @classmethod
    def _known_language(cls, tag: str) -> str:
        parse_tag(tag)  # ValueError naming the tag if Babel does not know it
        return tag

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            """A protocol's section (``config.pairwise`` ...), added by :mod:`hitkit.study.loading`."""

    @field_validator("systems")
    @classmethod
    def _unique_systems(cls, systems: list[SystemConfig]) -> list[SystemConfig]:
        names = [s.name for s in systems]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"system names must be unique; repeated: {', '.join(dupes)} — rename or remove the copies")
        return systems

    @model_validator(mode="after")
    def _cross_section_rules(self) -> StudyConfig:
        if self.schedule.qc_failures == "reject":
            reason = (self.schedule.qc_reject_reason or "").strip()
            need = 100 if self.provider.kind == "prolific" else 1
            if len(reason) < need:
                raise ValueError(
                    f"schedule.qc_failures is 'reject', so workers must be told why: write "
                    f"schedule.qc_reject_reason ({need}+ characters"
                    f"{', as Prolific requires' if need > 1 else ''}; it has {len(reason)}), "
                    f"or use qc_failures: hold to decide each case yourself"
                )
        if self.design == "adaptive" and self.stop is None:
            raise ValueError(
                "design: adaptive needs a 'stop:' section: the decision it posts for "
                "(best, pairs or pair) and when that decision is made"
            )
        strangers = sorted(set(self.stop.systems or []) - {s.name for s in self.systems}) if self.stop else []
        if strangers:
            raise ValueError(f"stop.systems names systems that are not in 'systems': {', '.join(strangers)}")
        if self.stop is not None and getattr(self, "judge", None) is not None:
            raise ValueError(
                "stop: and judge: cannot be used together yet: the prediction-powered intervals "
                "assume a human sample of fixed size, which a stopping rule ends early"
            )
        unknown = sorted(set(self.simulated.quality) - {s.name for s in self.systems})
        if unknown:
            raise ValueError(
                f"simulated.quality names systems that are not in 'systems': {', '.join(unknown)}; "
                f"remove them there or add them to 'systems'"
            )
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
    def _screener_pay(self) -> StudyConfig:
        if self.screener is not None:
            problems = reward_problems(self.screener, self.hit.reward, self.provider.currency, self.provider.kind)
            if problems:
                raise ValueError("the screener's pay is refused: " + "; ".join(problems))
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
