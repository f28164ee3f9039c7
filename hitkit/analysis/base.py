"""The one shape every analysis returns: named tables, a summary, and plots written on demand.

Like lifelines' fitters, every analysis in hitkit hands back the same kind of object, so the CLI,
the report and a notebook treat them alike: ``result.tables["ranking"]`` is a DataFrame,
``result.summary`` a JSON-able dict, and ``result.write(out_dir)`` puts every table as CSV, the
summary as ``summary.json`` and every figure as PNG into one folder.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

Figure = Callable[[Path], None]
"""Draws one figure into the given file path (PNG)."""


@dataclass
class AnalysisResult:
    """Tables (written as ``NAME.csv``), a summary (``summary.json``) and figures (``NAME.png``)."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write every table, the summary and every figure into ``out_dir``; return the paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        for name, table in self.tables.items():
            path = out / f"{name}.csv"
            table.to_csv(path, index=False)
            written.append(path)
        if self.summary:
            path = out / "summary.json"
            path.write_text(json.dumps(self.summary, indent=2, sort_keys=True, default=str) + "\n")
            written.append(path)
        for name, draw in self.figures.items():
            path = out / f"{name}.png"
            draw(path)
            written.append(path)
        return written


def png(draw: Callable[[], bytes]) -> Figure:
    """A :data:`Figure` that writes the PNG bytes ``draw`` returns (a protocol's ``figures`` function,
    the same one its report section shows)."""

    def write(path: Path) -> None:
        Path(path).write_bytes(draw())

    return write


COMMON_OPTIONS = ("correction", "duplicates", "n_boot")
"""``hitkit analyze`` options every protocol's analysis takes under the same name."""


def common_options(options: dict) -> dict:
    """The :data:`COMMON_OPTIONS` among ``options``, for a protocol's ``analyze`` entry point."""
    return {k: options[k] for k in COMMON_OPTIONS if k in options}


def add_judge(
    result: AnalysisResult,
    parts: tuple[dict[str, pd.DataFrame], dict, list[str]],
    figure: Callable[[pd.DataFrame], bytes],
) -> None:
    """Add a judged study's part of the analysis to ``result``: the protocol's ``analysis_tables``
    (tables, summary, warnings) as its tables, ``summary["judge"]`` and more ``warnings``, and
    ``figure`` of ``judge_win_rates``."""
    tables, summary, lines = parts
    result.tables.update(tables)
    result.summary["judge"] = summary
    result.summary["warnings"] = list(result.summary.get("warnings", [])) + lines
    result.figures["judge_win_rates"] = png(lambda: figure(tables["judge_win_rates"]))


MISSING_TEXT = "–"
"""What a console table shows for a missing value (never ``nan`` or ``None``)."""


def console_table(table: pd.DataFrame, labels: dict[str, str] | None = None) -> str:
    """``table`` as the command line prints it: missing values as :data:`MISSING_TEXT` in every column,
    columns renamed by ``labels`` (a count says what it counts)."""
    shown = table.rename(columns=labels or {})
    for column in shown.columns:
        if shown[column].dtype == object:
            shown[column] = shown[column].where(shown[column].notna(), MISSING_TEXT)
    return shown.to_string(index=False, na_rep=MISSING_TEXT)
