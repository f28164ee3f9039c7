"""Importing live-chat ratings from an MTurk batch-results archive: the mapping's ``live_chat:`` section
and the ratings one archive row gives (Ji et al.'s release is read this way:
examples/ji2022_mturk_mapping.yaml)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Optional

from pydantic import Field, field_validator, model_validator

from hitkit.errors import InputError
from hitkit.imports.fields import Strict, Where, field_value, number


class VariantRule(Strict):
    """Add ``suffix`` to a (non-control) system when its ``field`` is ≤ ``at_most`` / ≥ ``at_least``
    / equal to ``equals`` — e.g. Ji et al.'s persona variant, ``seed{i}`` ≤ 500 → ``_p``."""

    field: str = Field(description="field template, e.g. Answer.seed{i}")
    suffix: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.\-]+$")
    at_most: Optional[float] = None
    at_least: Optional[float] = None
    equals: Optional[str] = None

    @model_validator(mode="after")
    def _one_test(self) -> "VariantRule":
        if sum(x is not None for x in (self.at_most, self.at_least, self.equals)) != 1:
            raise ValueError("give exactly one of at_most, at_least and equals")
        return self


class Rules(Strict):
    """Ratings: each row holds ``slots`` conversations; slot ``i`` names its system in ``system``
    and its criterion scores, in ``criteria`` order, ``separator``-joined in ``scores``."""

    slots: int = Field(gt=0, le=100)
    system: str = Field(description="field template naming slot i's system, e.g. Answer.task{i} or Input.u{i}")
    scores: str = Field(description="field template of slot i's scores, e.g. Answer.score{i}")
    separator: str = Field(",", min_length=1)
    criteria: list[str] = Field(min_length=1)
    systems: dict[str, str] = Field(default_factory=dict, description="archive name -> hitkit name (default: kept)")
    control: list[str] = Field(default_factory=list, description="hitkit names of the quality-control bot(s)")
    variant: Optional[VariantRule] = None

    @field_validator("criteria")
    @classmethod
    def _criteria(cls, criteria: list[str]) -> list[str]:
        bad = [c for c in criteria if not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", c)]
        if bad or len(set(criteria)) != len(criteria):
            raise ValueError(f"criteria must be distinct lower-case names (a-z, 0-9, _); got {criteria}")
        return criteria

    def templates(self) -> list[str]:
        """The field templates this section reads (each must exist in the archive)."""
        return [self.system, self.scores] + ([self.variant.field] if self.variant is not None else [])


def variant_applies(rule: VariantRule, fields: Mapping[str, str], i: int, where: Where) -> bool:
    """Whether slot ``i`` of the row is the variant the rule names."""
    name = rule.field.replace("{i}", str(i))
    value = field_value(fields, rule.field, i)
    if value is None or value == "":
        raise InputError(where.path, f"{name} is missing, and the mapping's variant rule reads it", line=where.line)
    if rule.equals is not None:
        return value == rule.equals
    read = number(value, name, where)
    if rule.at_most is not None:
        return read <= rule.at_most
    if rule.at_least is None:
        raise InputError(
            where.path,
            f"the mapping's variant rule on {name} gives none of at_most, at_least and equals; give one",
            line=where.line,
        )
    return read >= rule.at_least


def rows(m: Rules, fields: Mapping[str, str], where: Where) -> list[dict[str, Any]]:
    """One row's ratings: every slot with scores gives one rating per criterion (an empty slot none)."""
    out = []
    for i in range(m.slots):
        scores = field_value(fields, m.scores, i)
        if not scores or not scores.strip(m.separator + " "):
            continue  # an empty submission: the assignment stays, with nothing to rate
        raw = field_value(fields, m.system, i)
        if not raw:
            raise InputError(
                where.path,
                f"{m.system.replace('{i}', str(i))} (slot {i}'s system) is empty but the slot has scores",
                line=where.line,
            )
        system = m.systems.get(raw, raw)
        if m.systems and raw not in m.systems:
            raise InputError(
                where.path,
                f"system {raw!r} (slot {i}) is not in the mapping's 'systems'; add it "
                f"there (known: {', '.join(sorted(m.systems))})",
                line=where.line,
            )
        control = system in m.control
        if m.variant is not None and not control and variant_applies(m.variant, fields, i, where):
            system += m.variant.suffix
        values = scores.strip(m.separator + " ").split(m.separator)
        if len(values) != len(m.criteria):
            raise InputError(
                where.path,
                f"{m.scores.replace('{i}', str(i))} has {len(values)} values "
                f"({scores!r}) but the mapping names {len(m.criteria)} criteria",
                line=where.line,
            )
        for criterion, value in zip(m.criteria, values):
            score = number(value.strip(), f"slot {i}'s {criterion} score", where)
            if not 0 <= score <= 100 or score != int(score):
                raise InputError(
                    where.path,
                    f"slot {i}'s {criterion} score is {value!r}; ratings are whole numbers 0–100",
                    line=where.line,
                )
            out.append(
                {
                    "conversation_id": f"{fields['AssignmentId']}-{i}",
                    "slot": i,
                    "system": system,
                    "is_control": int(control),
                    "criterion": criterion,
                    "score": int(score),
                }
            )
    return out
