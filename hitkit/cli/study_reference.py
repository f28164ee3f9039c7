"""The study file's reference and JSON Schema, generated from the pydantic models (:class:`StudyConfig`).

The docs site builds its "Study file" reference page from :func:`study_reference_markdown` and
``hitkit schema`` writes :func:`study_schema`, so neither can drift from the models. A field's
description is its ``Field(description=...)``; :data:`FIELD_NOTES` gives one to fields whose model
has none yet (a test checks every field has one, and that no note is stale or shadowed).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

FIELD_NOTES: dict[str, str] = {
    "ProlificConfig.on_high_return_rate": "on Prolific's study.has_high_return_rate webhook: pause posting, or only warn",
    "ProlificConfig.rejection_category": "Prolific's rejection category sent with every rejection hitkit makes",
    "BotsConfig.pacing": "when each chat reply is released, so the quality-control slot is never the fast one",
    "PacingConfig.mode": "observed: hold control replies to a draw from the real bots' latencies; fixed: hold every "
    "reply until floor_s; off: release replies as they come",
    "StudyConfig.screener": "short multiple-choice questions before consent; a participant who fails is screened out "
    "with pay and never counts as a worker",
    "ScreenerQuestion.name": "the answer's name in the database (lower-case letters, digits, _)",
    "ScreenerQuestion.text": "the question as the participant reads it",
    "ScreenerQuestion.options": "the choices shown",
    "ScreenerQuestion.accept": "the choices that let a participant go on; any other screens them out",
    "ScreenerConfig.intro": "text shown above the questions",
    "ArenaConfig.crowd": "how the simulated crowd votes: strengths, length and position bias, ties",
    "StudyConfig.seed": "seeds the packing, the display order, the simulated crowd and every resampling",
    "StudyConfig.budget": "hard ceiling on worst-case spend: rewards, bonuses and fees",
    "StudyConfig.out": "results go to OUT/STUDY/ (database, export/, analysis/), relative to the study file",
    "StudyConfig.database": "SQLAlchemy URL; HITKIT_DATABASE_URL overrides it (default: SQLite in OUT/STUDY/hitkit.db)",
    "StudyConfig.systems": "the chatbots under evaluation (at least 2; names unique)",
    "StudyConfig.hit": "what a worker is offered: title, pay and time limits of one HIT",
    "StudyConfig.schedule": "how the scheduler posts and tends the work",
    "StudyConfig.server": "where the worker pages are served",
    "StudyConfig.provider": "which crowd does the work",
    "StudyConfig.simulated": "the simulated crowd (dry runs and tests); ignored by other providers",
    "StudyConfig.authenticity": "typing signals and paste rules of the worker pages",
    "StudyConfig.bots": "bots that `hitkit launch` serves itself with `hitkit bots serve`",
    "StudyConfig.generation": "bot–bot conversations made by the systems (Spot The Bot material)",
    "StudyConfig.prescreen": "the automatic pre-screening tournament (`hitkit prescreen`)",
    "StudyConfig.stop": "a pre-registered stopping rule: stop posting once its decision is made",
    "StudyConfig.judge": "an LLM judge that labels every item; the crowd labels a random share",
    "SystemConfig.name": "the system's name (letters, digits, '_', '.', '-'); material files use it",
    "SystemConfig.url": "its OpenAI-compatible endpoint (required for live chat and generation)",
    "SystemConfig.model": "the model name the endpoint serves the bot under",
    "SystemConfig.system_prompt": "system prompt sent with every request",
    "HitConfig.title": "the HIT's title, as the crowd sees it",
    "HitConfig.description": "the HIT's description, as the crowd sees it",
    "HitConfig.keywords": "comma-separated keywords (MTurk-style platforms)",
    "HitConfig.reward": "pay per assignment, in provider.currency",
    "HitConfig.lifetime_hours": "how long a HIT stays on offer",
    "HitConfig.assignment_minutes": "a worker holding an assignment longer loses it",
    "HitConfig.max_answer_chars": "longest free-text answer accepted",
    "ServerConfig.host": "address the worker pages are served on",
    "ServerConfig.public_url": "the address workers reach (behind a proxy or tunnel)",
    "ServerConfig.threads": "web server threads",
    "ProviderConfig.kind": "simulated, local (invite links), prolific, panel, or mturk (MTurk-compatible services)",
    "ProviderConfig.currency": "currency of rewards and budget",
    "ProviderConfig.prolific": "Prolific's settings (provider.kind: prolific)",
    "ProviderConfig.mturk": "MTurk-compatible settings (provider.kind: mturk)",
    "ProviderConfig.panel": "a URL-parameter panel's settings (provider.kind: panel)",
    "ProlificConfig.api_url": "Prolific REST API v1 base URL",
    "ProlificConfig.estimated_minutes": "the study's estimated completion time; pay rules are checked against it",
    "ProlificConfig.device_compatibility": "devices participants may use",
    "MTurkConfig.sandbox": "use the sandbox endpoints",
    "MTurkConfig.region": "AWS region",
    "MTurkConfig.frame_height": "height of the ExternalQuestion frame in pixels",
    "MTurkConfig.min_approval_rate": "qualification: minimum approval rate (%)",
    "MTurkConfig.min_approved_hits": "qualification: minimum number of approved HITs",
    "MTurkConfig.masters": "require Masters workers",
    "MTurkConfig.auto_approval_delay_s": "the platform's own auto-approval delay",
    "SimulatedConfig.workers": "groups of simulated workers",
    "CrowdGroup.profile": "how they answer (diligent, noisy, spammer, always_tie, judge_like) or type "
    "(llm_paster, slow_typist, phone)",
    "CrowdGroup.count": "workers of this profile",
    "BotsConfig.serve": "the bot server's settings",
    "BotServeConfig.host": "address the bot server binds",
    "BotServeConfig.max_batch": "chats decoded together",
    "BotServeConfig.device": "where the transformers engine runs",
    "GenerationConfig.conversations_per_pair": "|S_ij|: conversations per pair of systems",
    "GenerationConfig.self_chat": "each system also talks to itself",
    "PrescreenConfig.starting_utterance": "the first line of every tournament game",
    "PrescreenConfig.win_points": "standing points for a won game",
    "PrescreenConfig.tie_points": "standing points for a tied game",
    "JudgeConfig.options": "how the judge is asked (temperature, tokens, patience, concurrency)",
    "PairwiseConfig.responses": "JSONL, one prompt a line: {\"id\", \"prompt\", \"responses\": {system: text}}",
    "PairwiseConfig.prompts_per_hit": "comparisons in one HIT",
    "PairwiseConfig.votes_per_prompt": "workers who judge each comparison",
    "PairwiseConfig.question": "the question shown above the two responses",
    "LiveChatConfig.criteria": "the sliders: statements rated 0–100",
    "LiveChatConfig.icebreaker": "prescribe the topic from the bot's persona statements",
    "CriterionConfig.name": "short identifier of the criterion (column names use it)",
    "CriterionConfig.statement": "the statement the worker rates",
    "CriterionConfig.polarity": "negative statements are reversed before scoring",
    "CriterionConfig.qc": "the quality-control test uses this criterion",
    "SpotTheBotConfig.segments_per_hit": "segments in one HIT",
    "SpotTheBotConfig.annotations_per_segment": "workers who label each segment",
    "RatingConfig.responses": "JSONL in pairwise.responses' format; every response is rated alone",
    "RatingConfig.criteria": "the sliders (default: fluent, sensible, specific (QC), robotic (negative))",
}


@dataclass(frozen=True)
class FieldRow:
    """One field of the study file, as the reference lists it."""

    path: str
    owner: str
    name: str
    type: str
    default: str
    description: str


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The section models an annotation holds (``Optional[X]``, ``list[X]``, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in models_in(a)]


def type_name(annotation: Any) -> str:
    """A reader's name for a field's type."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return " or ".join(f"`{a}`" for a in args)
    if origin is list:
        return "list of entries" if models_in(args[0]) else f"list of {type_name(args[0])}"
    if origin is dict:
        return f"mapping of {type_name(args[0])} → {type_name(args[1])}"
    if args and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return " or ".join(type_name(a) for a in rest) + " (optional)"
    if args:
        return " or ".join(type_name(a) for a in args)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return {str: "text", int: "integer", float: "number", bool: "true/false", Decimal: "amount", Path: "path"}.get(
        annotation, "any" if annotation is Any else getattr(annotation, "__name__", str(annotation))
    )


def _constraints(field) -> str:
    marks = []
    for meta in field.metadata:
        for attr, sign in (
            ("gt", ">"),
            ("ge", "≥"),
            ("lt", "<"),
            ("le", "≤"),
            ("min_length", "at least"),
            ("max_length", "at most"),
        ):
            value = getattr(meta, attr, None)
            if value is not None:
                marks.append(f"{sign} {value}")
    return f" ({', '.join(marks)})" if marks else ""


def default_text(field) -> str:
    """The default a study file gets when it leaves the field out, as text."""
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "its fields' defaults"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, (Decimal, Path)):
        value = str(value)
    if value is None:
        return "none"
    if isinstance(value, type) and issubclass(value, BaseModel):  # a model class (pydantic's metaclass)
        return str(value)
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return ", ".join(str(v.model_dump(exclude_defaults=True) or v.model_dump()) for v in value[:3]) + (
            " …" if len(value) > 3 else ""
        )
    return f"`{value!r}`" if not isinstance(value, bool) else f"`{str(value).lower()}`"


def fields(model: type[BaseModel] | None = None, prefix: str = "", seen: set | None = None) -> list[FieldRow]:
    """Every field of the study file, sections after the field that holds them, in the models' order."""
    if model is None:
        from hitkit.study.loading import STUDY_FILE

        model = STUDY_FILE
    seen = set() if seen is None else seen
    rows: list[FieldRow] = []
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        owner = "StudyConfig" if model.__name__ == "StudyConfig" else model.__name__
        description = field.description or FIELD_NOTES.get(f"{owner}.{name}", "") or _protocol_section(owner, name)
        rows.append(
            FieldRow(
                prefix + name,
                owner,
                name,
                type_name(field.annotation) + _constraints(field),
                default_text(field),
                description,
            )
        )
        for sub in models_in(field.annotation):
            if (prefix + name, sub) not in seen:
                seen.add((prefix + name, sub))
                rows += fields(
                    sub, prefix + name + ("[]." if typing.get_origin(field.annotation) is list else "."), seen
                )
    return rows


def _protocol_section(owner: str, name: str) -> str:
    """The description of a protocol's own section, from the registry."""
    from hitkit.protocols import PROTOCOLS

    proto = PROTOCOLS.get(name) if owner == "StudyConfig" else None
    return f"the settings of {proto.title}; required when `task: {name}`" if proto else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def study_reference_markdown() -> str:
    """The "Study file reference" page: one table per section, every field with type, default, description."""
    rows = fields()
    lines = [
        "# Study file reference",
        "",
        (
            "Generated from hitkit's pydantic models when the site is built, so it lists exactly what "
            "this version accepts. Paths are relative to the study file. `hitkit schema` writes the same "
            "as a JSON Schema for your editor (see [Editor support](editor.md)); the "
            "[study-file guide](../guide/study-file.md) explains the protocols."
        ),
        "",
    ]
    sections: dict[str, list[FieldRow]] = {}
    for row in rows:
        section = row.path.rsplit(".", 1)[0] if "." in row.path else ""
        sections.setdefault(section, []).append(row)
    for section, members in sections.items():
        lines += [f"## `{section}`" if section else "## Top level", ""]
        lines += ["| field | type | default | description |", "|---|---|---|---|"]
        lines += [f"| `{r.path}` | {_cell(r.type)} | {_cell(r.default)} | {_cell(r.description)} |" for r in members]
        lines.append("")
    return "\n".join(lines)


def study_schema() -> dict:
    """The study file's JSON Schema (pydantic's), with every field's description filled in."""
    from hitkit.study.loading import STUDY_FILE

    schema = STUDY_FILE.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "hitkit study file"
    schema["properties"].pop("base_dir", None)
    for owner, props in [("StudyConfig", schema["properties"])] + [
        (name, d.get("properties", {})) for name, d in schema.get("$defs", {}).items()
    ]:
        for name, prop in props.items():
            if "description" not in prop and f"{owner}.{name}" in FIELD_NOTES:
                prop["description"] = FIELD_NOTES[f"{owner}.{name}"]
    return schema
