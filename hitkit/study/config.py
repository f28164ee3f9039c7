"""The study file: one YAML document per study, validated once, here, into typed objects.

Everything downstream receives a :class:`StudyConfig`, never a dict. Its shared sections are in
:mod:`hitkit.study.sections`; each protocol's section (``pairwise:``, ``live_chat:`` ...) comes from the
protocol's folder through the registry, so a new protocol adds its section without touching this
file. Paths in the file are relative to the file's own folder; :func:`load_study` resolves them. A
file that does not validate raises :class:`~hitkit.errors.ConfigError` naming the file, the field
and the fix.
"""

from __future__ import annotations

import os
import re
import string
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Optional

import yaml
from pydantic import Field, ValidationError, create_model, field_validator, model_validator

from hitkit.errors import ConfigError
from hitkit.i18n.catalogs import check_language, parse_tag
from hitkit.protocols import PROTOCOLS, known_name
from hitkit.study.bot_sections import BotsConfig
from hitkit.study.config_errors import describe, section_example
from hitkit.study.gold_section import GoldConfig, check_gold
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


class _StudyBase(Model):
    """One evaluation, as written in its study file (the protocols' sections are added below)."""

    study: str = Field(pattern=r"^[a-z0-9][a-z0-9\-_]{0,62}$", description="unique name of the study")
    task: str = Field(description="the protocol: " + ", ".join(PROTOCOLS))
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

    @field_validator("systems")
    @classmethod
    def _unique_systems(cls, systems: list[SystemConfig]) -> list[SystemConfig]:
        names = [s.name for s in systems]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"system names must be unique; repeated: {', '.join(dupes)} — rename or remove the copies")
        return systems

    @field_validator("task")
    @classmethod
    def _known_task(cls, task: str) -> str:
        return known_name(task)

    @model_validator(mode="after")
    def _task_section_present(self) -> _StudyBase:
        proto = PROTOCOLS[self.task]
        if proto.needs_section and getattr(self, self.task, None) is None:
            raise ValueError(
                f"task '{self.task}' needs a '{self.task}:' section — fix: add it"
                + section_example(self.task, type(self).model_fields[self.task])
                + f" (`hitkit init DIR --task {self.task}` writes a commented one)"
            )
        proto.module("settings").check_study(self)
        check_gold(self, proto)
        if self.judge is not None:
            self._check_judge(proto, self.judge)
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
        if self.stop is not None:
            from hitkit.protocols import task_for

            control = sorted(set(self.stop.systems or []) & set(task_for(_validated(self)).control_systems()))
            if control:
                raise ValueError(
                    f"stop.systems names the quality-control system {', '.join(control)}, which no "
                    f"comparison includes; name two systems under evaluation"
                )
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

    def _check_judge(self, proto, judge: JudgeConfig) -> None:
        if not proto.judged:
            judged = [p.name for p in PROTOCOLS.values() if p.judged]
            raise ValueError(
                f"judge: is available for {', '.join(judged)} studies only in this version of "
                f"hitkit, not for task '{self.task}'; remove the judge: section"
            )
        module = proto.module("judge")
        if judge.human_items is not None and getattr(module, "WHEN", "before") == "after":
            raise ValueError(
                f"judge.human_items cannot size a {self.task} study's human share: its items are made "
                "by the crowd, so each is drawn for rating on its own as it is laid out; give "
                "judge.human_share (the probability that a conversation is rated) instead"
            )
        if judge.human_items is not None and hasattr(module, "cluster"):
            raise ValueError(
                f"judge.human_items cannot size a {self.task} study's human share: it is drawn by "
                f"whole {getattr(module, 'CLUSTER_NAME', 'clusters')}, so a count of items would "
                "not be met; give judge.human_share (the share of each pair's "
                f"{getattr(module, 'CLUSTER_NAME', 'clusters')}) instead"
            )
        if judge.prompt is not None:
            allowed = module.PLACEHOLDERS
            try:
                named = [f for _, f, _, _ in string.Formatter().parse(judge.prompt) if f is not None]
            except ValueError as exc:
                raise ValueError(
                    f"judge.prompt has a stray brace ({exc}); write {{{{ and }}}} for literal braces"
                ) from None
            unknown = sorted(set(named) - set(allowed))
            missing = [p for p in allowed if p not in named]
            if unknown or missing:
                raise ValueError(
                    f"judge.prompt must name each of {', '.join('{' + p + '}' for p in allowed)} "
                    f"and nothing else in braces"
                    + (f"; it names {', '.join('{' + p + '}' for p in unknown)}" if unknown else "")
                    + (f"; it lacks {', '.join('{' + p + '}' for p in missing)}" if missing else "")
                    + " — write {{ and }} for literal braces"
                )

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
    def _provider_rules(self) -> _StudyBase:
        if self.provider.kind == "prolific":
            from hitkit.providers.prolific.client import pay_rule_problems

            problems = pay_rule_problems(
                self.hit.reward,
                self.provider.currency,
                self.provider.prolific.estimated_minutes,
                self.hit.assignment_minutes,
            )
            if problems:
                raise ValueError("Prolific would refuse this study: " + "; ".join(problems))
        if self.provider.kind == "prolific":
            from hitkit.providers.prolific import rejection
            from hitkit.providers.prolific.webhooks import url_problem

            s = self.provider.prolific
            problems = (
                [f"webhook_url: {url_problem(s.webhook_url)}"] if s.webhook_url and url_problem(s.webhook_url) else []
            )
            problems += rejection.problems(s.rejection_message, s.rejection_category)
            if problems:
                raise ValueError("provider.prolific." + "; provider.prolific.".join(problems))
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


def _protocol_sections() -> dict[str, Any]:
    """One optional field per protocol, named as the protocol, typed by its settings module's section."""
    fields: dict[str, Any] = {}
    for proto in PROTOCOLS.values():
        section = getattr(proto.module("settings"), proto.settings_class)
        fields[proto.name] = (Optional[section], None)
    return fields


if TYPE_CHECKING:

    class StudyConfig(_StudyBase):
        """One evaluation, as written in its study file; each protocol's section is an attribute named
        after the protocol (built from the registry at import, so a type checker sees it as Any)."""

        def __getattr__(self, name: str) -> Any: ...
else:
    StudyConfig = create_model("StudyConfig", __base__=_StudyBase, __module__=__name__, **_protocol_sections())
    StudyConfig.__doc__ = "One evaluation, as written in its study file."


def _validated(config: _StudyBase) -> StudyConfig:
    """The study file a validator of :class:`_StudyBase` checks: always the :class:`StudyConfig` built from it
    above, narrowed for code typed on StudyConfig (TypeError, naming the class, if that ever changes)."""
    if not isinstance(config, StudyConfig):
        raise TypeError(f"a study file validates as StudyConfig, not {type(config).__name__}")
    return config


def parse_study(data: object, source: str = "<study>", base_dir: Path = Path(".")) -> StudyConfig:
    """Validate an already-parsed YAML document into a :class:`StudyConfig`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a study file must be a YAML mapping of fields (study:, task:, ...)")
    try:
        return StudyConfig.model_validate({**data, "base_dir": base_dir})
    except ValidationError as exc:
        lines = [describe(e, StudyConfig) for e in exc.errors()]
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
    config = parse_study(data, source=str(path), base_dir=path.resolve().parent)
    try:  # here, not in the server: the study's folder is at hand
        check_language(config.ui_language, config.base_dir)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return config


def slug(text: str) -> str:
    """A lower-case identifier made of letters, digits and dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
