"""What every archive import rule reads with: a strict mapping section, where a row is, a field of a
row by its ``{i}`` template, and a number read from it with an error that names the line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from hitkit.errors import InputError


class Strict(BaseModel):
    """Base of every mapping section."""

    # A misspelt key in a mapping must be an error, not a silently ignored rule.
    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Where:
    """A row of a batch file: the file and its line (the header is line 1)."""

    path: Path
    line: int


def field_value(fields: Mapping[str, str], template: str, i: int) -> str | None:
    """The row's field named by ``template`` with ``{i}`` replaced by ``i``, stripped; None if absent."""
    value = fields.get(template.replace("{i}", str(i)))
    return None if value is None else str(value).strip()


def number(text: str, what: str, where: Where) -> float:
    """``text`` as a number, or an InputError naming ``what`` and the line."""
    try:
        return float(text)
    except ValueError:
        raise InputError(where.path, f"{what} is {text!r}, not a number", line=where.line) from None
