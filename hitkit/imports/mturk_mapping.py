"""The mapping of ``hitkit import mturk`` (``--mapping MAPPING.yaml``): how one MTurk batch-results file
becomes hitkit's tables, read and validated, with errors that name the file, the key and the fix.

One optional section per protocol whose folder has MTurk import rules (``PACKAGE.mturk``), or a
``function: module:function`` for rules a section cannot say; the import itself is
:mod:`hitkit.imports.mturk`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import Field, ValidationError, create_model, field_validator, model_validator

from hitkit.errors import ConfigError
from hitkit.imports.fields import Strict
from hitkit.protocols import PROTOCOLS, known_name

DEFAULT_STATUSES = {"Submitted": "submitted", "Approved": "approved", "Rejected": "rejected"}


class _MappingBase(Strict):
    """How one MTurk batch-results file becomes hitkit's tables (``--mapping MAPPING.yaml``)."""

    task: str = Field(description="the protocol: " + ", ".join(PROTOCOLS))
    flatten: list[str] = Field(
        default_factory=lambda: ["Answer.taskAnswers"],
        description="columns holding JSON answers, flattened into Answer.<key>",
    )
    statuses: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_STATUSES), description="AssignmentStatus -> hitkit status"
    )
    function: Optional[str] = Field(
        None,
        pattern=r"^[^:]+:[A-Za-z_][A-Za-z0-9_]*$",
        description=(
            "module:function or path/file.py:function, called with each row's fields; returns the task "
            "table's rows without study, hit_id, assignment_id and worker_id"
        ),
    )

    @field_validator("task")
    @classmethod
    def _known_task(cls, task: str) -> str:
        return known_name(task)

    @model_validator(mode="after")
    def _one_rule(self) -> "_MappingBase":
        section = self.section
        other = [name for name in _SECTIONS if name != self.task and getattr(self, name) is not None]
        if other:
            raise ValueError(f"task is {self.task}, but the mapping has a '{other[0]}:' section; remove it")
        if (section is None) == (self.function is None):
            if self.task not in _SECTIONS:
                raise ValueError(
                    f"{PROTOCOLS[self.task].title} archives are imported with a function: add "
                    "'function: module:function' (see docs/COLUMNS.md)"
                )
            raise ValueError(f"give exactly one of a '{self.task}:' section and 'function:'")
        return self

    @property
    def section(self):
        """The protocol's own rules (its section of the mapping), or None when a function imports."""
        return getattr(self, self.task, None) if self.task in _SECTIONS else None


def _mapping_sections() -> dict[str, Any]:
    """One optional section per protocol whose folder has MTurk import rules (``PACKAGE.mturk``)."""
    return {p.name: (Optional[p.module("mturk").Rules], None) for p in PROTOCOLS.values() if p.mturk_rules}


_SECTIONS = _mapping_sections()
MTurkMapping = create_model("MTurkMapping", __base__=_MappingBase, __module__=__name__, **_SECTIONS)


def load_mapping(path: str | Path) -> MTurkMapping:
    """Read and validate a mapping file; ConfigError names the file, the key and the fix."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such mapping file; see examples/ji2022_mturk_mapping.yaml for one")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(
            f"{path}{where}: not valid YAML ({getattr(exc, 'problem', None) or exc}); fix the syntax there"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a mapping file is a YAML mapping of keys (task:, live_chat:, ...)")
    try:
        return MTurkMapping.model_validate(data)
    except ValidationError as exc:
        lines = []
        for e in exc.errors():
            where = ".".join(str(p) for p in e["loc"]) or "(top level)"
            fix = {
                "extra_forbidden": " — fix: remove it or check its spelling",
                "missing": " — fix: add it",
                "literal_error": " — fix: use one of the allowed values",
            }.get(e["type"], "")
            message = re.sub(r"^(Value|Assertion) error, ", "", e["msg"])  # pydantic's prefix says nothing
            lines.append(f"  {where}: {message}{fix}")
        raise ConfigError(f"{path}: the mapping is not valid:\n" + "\n".join(lines)) from None
