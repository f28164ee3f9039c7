"""Importing pairwise votes from an MTurk batch-results archive: the mapping's ``pairwise:`` section and
the votes one archive row gives."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from hitkit.errors import InputError
from hitkit.imports.fields import Strict, Where, field_value

_SAME_VOTES: dict[str, Literal["a", "b", "tie"]] = {"a": "a", "b": "b", "tie": "tie"}
"""The votes' default mapping: the archive answers a, b and tie as hitkit does."""


class Rules(Strict):
    """Votes: each row holds ``items`` comparisons; comparison ``i`` has an item id, the system shown
    first (``system_a``), second (``system_b``) and the worker's answer, mapped by ``votes``."""

    items: int = Field(1, gt=0, le=1000)
    item_id: str
    system_a: str
    system_b: str
    vote: str
    votes: dict[str, Literal["a", "b", "tie"]] = Field(
        default_factory=lambda: dict(_SAME_VOTES), description="answer value in the archive -> a, b or tie"
    )
    systems: dict[str, str] = Field(default_factory=dict, description="archive name -> hitkit name (default: kept)")

    def templates(self) -> list[str]:
        """The field templates this section reads (each must exist in the archive)."""
        return [self.item_id, self.system_a, self.system_b, self.vote]


def rows(m: Rules, fields: Mapping[str, str], where: Where) -> list[dict[str, Any]]:
    """One row's votes: each comparison with an answer gives one vote."""
    out = []
    for i in range(m.items):
        answer = field_value(fields, m.vote, i)
        if not answer:
            continue
        if answer not in m.votes:
            raise InputError(
                where.path,
                f"{m.vote.replace('{i}', str(i))} is {answer!r}, which the mapping's "
                f"'votes' does not name; add it (known: {', '.join(m.votes)})",
                line=where.line,
            )
        row = {}
        for column in ("item_id", "system_a", "system_b"):
            value = field_value(fields, getattr(m, column), i)
            if not value:
                raise InputError(
                    where.path, f"{getattr(m, column).replace('{i}', str(i))} ({column}) is missing", line=where.line
                )
            row[column] = m.systems.get(value, value) if column != "item_id" else value
        out.append({**row, "vote": m.votes[answer]})
    return out
