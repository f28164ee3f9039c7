"""The tables behind the report's pair matrices: a pair table spread into a square of values and
significance marks, and p-values short enough for a matrix cell."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd


def p_cell(value) -> str:
    """A p-value short enough for a matrix cell: 3 decimals without the leading zero (".006"),
    "<.001" below 0.001 (APA style), "1" for 1."""
    if value is None or math.isnan(value):
        return "–"
    if value < 0.001:
        return "<.001"
    return "1" if value >= 0.9995 else f"{value:.3f}".lstrip("0")


def pair_frames(
    table: pd.DataFrame,
    value: str,
    order: Sequence[str],
    *,
    mark: str | None = None,
    alpha: float = 0.05,
    a: str = "system_a",
    b: str = "system_b",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Square matrices (row = a, column = b) of ``value`` and of ``mark`` < alpha from a long table."""
    names = list(order) + sorted((set(table[a]) | set(table[b])) - set(order))
    values = pd.DataFrame(math.nan, index=names, columns=names)
    marks = pd.DataFrame(False, index=names, columns=names)
    for row in table.itertuples(index=False):
        ra, rb = getattr(row, a), getattr(row, b)
        if ra == rb:
            continue
        values.at[ra, rb] = getattr(row, value)
        if mark is not None:
            marks.at[ra, rb] = getattr(row, mark) < alpha
    return values, marks


def p_column(table: pd.DataFrame) -> str:
    """The p-value column a mark is read from: the corrected one where the table has it."""
    return "p_adjusted" if "p_adjusted" in table.columns else "p_value"
