"""Reading a study file: its shared part (:class:`~hitkit.study.config.StudyConfig`) with the protocol's section
added from the registry, validated once, here, into typed objects.

The registry validates a loaded study: each protocol's section (``pairwise:``, ``live_chat:`` ...) comes from
the protocol's folder, and the rules that need the protocol (its section is present, its own cross-section
rules, the judge it allows) are checked here, so :mod:`hitkit.study.config` never imports a protocol and every
protocol may type its code on ``StudyConfig``. The platform's load-time rules (Prolific's pay floor, its
rejection reasons and webhook address) are checked here too, so the shared part never imports a provider.
Paths in the file are relative to the file's own folder; :func:`load_study` resolves them. A file that does
not validate raises :class:`~hitkit.errors.ConfigError` naming the file, the field and the fix.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import Field, ValidationError, create_model, field_validator, model_validator

from hitkit.errors import ConfigError
from hitkit.i18n.catalogs import check_language
from hitkit.protocols import PROTOCOLS, known_name, task_for
from hitkit.protocols.base import Protocol
from hitkit.study.config import StudyConfig
from hitkit.study.config_errors import describe, section_example
from hitkit.study.gold_section import check_gold
from hitkit.study.sections import JudgeConfig


class _WithProtocol(StudyConfig):
    """The study file with the rules that ask the study's protocol (the registry)."""

    @field_validator("task")
    @classmethod
    def _known_task(cls, task: str) -> str:
        return known_name(task)

    @model_validator(mode="after")
    def _protocol_rules(self) -> _WithProtocol:
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
            _check_judge(self, proto, self.judge)
        if self.stop is not None:
            control = sorted(set(self.stop.systems or []) & set(task_for(self).control_systems()))
            if control:
                raise ValueError(
                    f"stop.systems names the quality-control system {', '.join(control)}, which no "
                    f"comparison includes; name two systems under evaluation"
                )
        return self

    @model_validator(mode="after")
    def _provider_rules(self) -> _WithProtocol:
        if self.provider.kind != "prolific":
            return self
        from hitkit.providers.prolific import rejection
        from hitkit.providers.prolific.client import pay_rule_problems
        from hitkit.providers.prolific.webhooks import url_problem

        s = self.provider.prolific
        problems = pay_rule_problems(
            self.hit.reward, self.provider.currency, s.estimated_minutes, self.hit.assignment_minutes
        )
        if problems:
            raise ValueError("Prolific would refuse this study: " + "; ".join(problems))
        problems = (
            [f"webhook_url: {url_problem(s.webhook_url)}"] if s.webhook_url and url_problem(s.webhook_url) else []
        )
        problems += rejection.problems(s.rejection_message, s.rejection_category)
        if problems:
            raise ValueError("provider.prolific." + "; provider.prolific.".join(problems))
        return self


def _check_judge(config: StudyConfig, proto: Protocol, judge: JudgeConfig) -> None:
    """The study's ``judge:`` section against what its protocol's judge (``PACKAGE.judge``) allows."""
    task = config.task
    if not proto.judged:
        judged = [p.name for p in PROTOCOLS.values() if p.judged]
        raise ValueError(
            f"judge: is available for {', '.join(judged)} studies only in this version of "
            f"hitkit, not for task '{task}'; remove the judge: section"
        )
    module = proto.module("judge")
    if judge.human_items is not None and getattr(module, "WHEN", "before") == "after":
        raise ValueError(
            f"judge.human_items cannot size a {task} study's human share: its items are made "
            "by the crowd, so each is drawn for rating on its own as it is laid out; give "
            "judge.human_share (the probability that a conversation is rated) instead"
        )
    if judge.human_items is not None and hasattr(module, "cluster"):
        raise ValueError(
            f"judge.human_items cannot size a {task} study's human share: it is drawn by "
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


def _protocol_sections() -> dict[str, Any]:
    """One optional field per protocol, named as the protocol, typed by its settings module's section."""
    fields: dict[str, Any] = {}
    for proto in PROTOCOLS.values():
        section = getattr(proto.module("settings"), proto.settings_class)
        fields[proto.name] = (Optional[section], None)
    return fields


STUDY_FILE: type[StudyConfig] = create_model(
    "StudyConfig",
    __base__=_WithProtocol,
    __module__=__name__,
    task=(str, Field(description="the protocol: " + ", ".join(PROTOCOLS), examples=list(PROTOCOLS))),
    **_protocol_sections(),
)
"""The whole study file as pydantic validates it: :class:`StudyConfig` with every protocol's section."""
STUDY_FILE.__doc__ = "One evaluation, as written in its study file."


def parse_study(data: object, source: str = "<study>", base_dir: Path = Path(".")) -> StudyConfig:
    """Validate an already-parsed YAML document into a :class:`StudyConfig`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a study file must be a YAML mapping of fields (study:, task:, ...)")
    try:
        return STUDY_FILE.model_validate({**data, "base_dir": base_dir})
    except ValidationError as exc:
        lines = [describe(e, STUDY_FILE) for e in exc.errors()]
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
