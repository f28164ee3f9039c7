"""The pieces every report is made of: sections, figures, the input, and the formatting of numbers,
p-values and pair matrices that the protocols' report sections share."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from hitkit.protocols import PROTOCOLS


@dataclass
class ReportFigure:
    """One figure: a file-safe ``name``, a caption (plain text) and the PNG bytes."""

    name: str
    caption: str
    png: bytes


@dataclass
class Section:
    """One section of the report. Text is plain (escaped when rendered); ``html`` and ``markdown``
    are trusted extra bodies a producer has already escaped, appended after the tables."""

    title: str
    text: list[str] = field(default_factory=list)
    figures: list[ReportFigure] = field(default_factory=list)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    html: str = ""
    markdown: str = ""
    raw: bool = False
    """A section whose ``html`` (one ``<section id=ID>`` with its own heading) and ``markdown`` (with its
    own ``##`` heading) are complete: rendered as they are, without hitkit's heading and wrapper."""
    id: str = ""

    @property
    def anchor(self) -> str:
        return self.id or re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-") or "section"


@dataclass
class ReportInput:
    """Everything a report is made from: the analysis (``tables``, ``summary``), the exported
    tables (``export``, may be empty), the export's ``study.json`` (``info``) and the configured
    live-chat criteria with their polarity, when known."""

    task: str
    tables: dict[str, pd.DataFrame]
    summary: dict
    export: dict[str, pd.DataFrame] = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    source: str = ""
    criteria: list[tuple[str, str, bool]] | None = None  # (name, polarity, qc)
    run_dir: Path | None = None  # OUT/STUDY, where other parts of hitkit leave their results

    @property
    def study(self) -> str:
        """The study's name: the export's study.json, the analysis' summary.json, the tables'
        study column, else the run folder's name (``OUT/STUDY``)."""
        for known in (self.info, self.summary):
            if known.get("study"):
                return str(known["study"])
        for table in self.export.values():
            if "study" in table.columns and len(table):
                return str(table["study"].iloc[0])
        if self.run_dir is not None and self.run_dir.name:
            return self.run_dir.name
        return "study"


SectionSource = Section | Callable[[ReportInput], Section | None]
SECTION_HOOKS: list[Callable[[ReportInput], Section | None]] = []
"""Section makers added to every report, after the protocol's sections and before cost and methods
(e.g. a pre-screen of automatic metrics). Add one with :func:`register_section`."""


def register_section(maker: Callable[[ReportInput], Section | None]):
    """Add ``maker`` (ReportInput → Section or None) to every report; usable as a decorator."""
    SECTION_HOOKS.append(maker)
    return maker


@dataclass
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: Path
    markdown: Path
    figures: list[Path]
    analysis_dir: Path | None = None
    methods: str = ""

    def as_json(self) -> dict:
        return {
            "html": str(self.html),
            "markdown": str(self.markdown),
            "figures": [str(p) for p in self.figures],
            "analysis_dir": str(self.analysis_dir) if self.analysis_dir else None,
            "methods": self.methods,
        }


def num(value, digits: int = 3) -> str:
    """A number as short text: floats to ``digits`` decimals, a missing value as "–"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def p_text(value) -> str:
    """A p-value as text: 3 decimals, "< 0.001" below, "–" when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _missing(value: object) -> bool:
    """None, NaN of any float type, pd.NA / NaT, or a text that says nan: shown as a dash, never as 'nan'."""
    if isinstance(value, str):
        return value.strip().lower() in ("nan", "none", "<na>")
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array in a cell is a value
        return False


def display(table: pd.DataFrame) -> pd.DataFrame:
    """A copy with numbers as short text: p-values to 3 decimals (< 0.001), other floats to 3."""
    out = table.copy()
    for column in out.columns:
        series = out[column]
        if pd.api.types.is_bool_dtype(series):
            out[column] = series.map(lambda v: "–" if _missing(v) else "yes" if v else "no")  # a nullable bool's NA too
        elif pd.api.types.is_float_dtype(series):
            is_p = column.startswith("p_") or column == "p_value"
            out[column] = series.map(p_text if is_p else num)
        else:
            out[column] = series.map(lambda v: "–" if _missing(v) else str(v))
    return out


def correction(summary: dict) -> str:
    """How the analysis corrected its p-values, in words (older analyses did not say: none)."""
    from hitkit.analysis.inference import correction_label

    return correction_label(summary.get("multiple_comparisons", "none"))


def interval_method(summary: dict) -> str:
    """How the analysis read its bootstrap intervals, in words (older analyses: plain percentiles)."""
    if summary.get("interval_method") == "expanded percentile":
        return "expanded percentile intervals (Hesterberg 2015: widened by √(C/(C − 1))·t/z for the C units resampled)"
    return "percentile intervals"


def protocol_title(task: str) -> str:
    """The protocol's title with its source, as the report's heading names it."""
    proto = PROTOCOLS.get(task)
    return proto.title if proto is not None else task


def flags(column) -> list[bool]:
    """A table column of booleans as written to CSV (True/False, 1/0) read back as bools."""
    return [str(v).strip().lower() in ("true", "1") for v in column]


def judge_parts(inp: ReportInput, table: str) -> tuple[dict, pd.DataFrame, int, str] | None:
    """With an LLM judge's analysis: its summary, its estimates table ``table``, how many estimates fell
    back to people only (λ̂ = 0) and the judge's model(s) in words; None without one."""
    j, estimates = inp.summary.get("judge"), inp.tables.get(table)
    if not j or estimates is None:
        return None
    names = j.get("models") or j.get("judges") or []
    return j, estimates, sum(flags(estimates["fallback"])), ", ".join(map(str, names)) or "?"


def file_judge_sentence(j: dict, items: str, people: str) -> str | None:
    """The methods sentence on where a judge's labels came from when they were read from a judge-labels file
    (``--judge-labels``; the summary's ``source``): the file, its judges, the items and how many of them
    ``people`` labelled, and how that share was drawn as far as the file says; None for hitkit's own judge."""
    if not j.get("source"):
        return None
    judges = ", ".join(map(str, j.get("judges") or [])) or "?"
    drawn = (
        "with the known, unequal probabilities the file gives (human_probability), so every estimate is "
        "inverse-probability weighted"
        if str(j.get("selection") or "").startswith("uncertainty")
        else "taken as a uniformly random share, as the file gives no probabilities (the estimates assume it)"
    )
    return (
        f"LLM-judge labels were read from {j['source']} (judge(s): {judges}) for {j.get('items', '?')} {items}; "
        f"{people} labelled {j.get('human_items', '?')} of them, {drawn}."
    )


def judge_bias_part(section: Section, inp: ReportInput, bias_words: str, unparsed_words: str) -> None:
    """Add the judge's bias table (with ``bias_words`` saying what it is) and, where some replies were not
    read, ``unparsed_words`` after the count of them, to a report's judge section."""
    bias, j = inp.tables.get("judge_bias"), inp.summary.get("judge") or {}
    if bias is not None and len(bias):
        section.text.append(bias_words)
        section.tables.append(("Judge bias", bias))
    if j.get("unparsed"):
        section.text.append(f"{j['unparsed']} of {j.get('labels', '?')} {unparsed_words}")
    calibration_part(section, inp)


def calibration_part(section: Section, inp: ReportInput) -> None:
    """Add each judge's calibration against people (``judge_calibration``: several judges, or judge labels
    from a file) and which judge the estimates used, to a report's judge section."""
    calib, j = inp.tables.get("judge_calibration"), inp.summary.get("judge") or {}
    if calib is None or not len(calib):
        return
    chosen = j.get("chosen") or {}
    used = ", ".join(f"{name} ({folds} of {sum(chosen.values())} halves)" for name, folds in chosen.items())
    section.text.append(
        f"{len(calib)} judge(s) labelled the items; each one's calibration against people on the items people "
        "labelled is below (agreement: the share of items where the judge's verdict is the people's; ECE: the "
        "expected calibration error of its score read as a probability; bias: mean judge − people score). The "
        "estimates use one predictor: each judge and the judges' mean are candidates, and each half of the "
        "items takes the one with the smallest PPI++ residual variance on the other half's human labels"
        + (f" (chosen: {used})." if used else ".")
    )
    section.tables.append(("Each judge's calibration against people", calib))


def judge_section(
    inp: ReportInput, intro: str, bias_note: str, unparsed_as: str, figure: Callable[[pd.DataFrame], bytes]
) -> list[Section]:
    """The *People and the LLM judge* section of a study judged by pairs (win rates): ``intro`` (what the
    judge and the people labelled, and what the columns mean) with the count of pairs that fell back to
    people only, the protocol's ``figure`` and table of ``judge_win_rates``, ``judge_bias`` after
    ``bias_note``, and the replies that named no label (counted as ``unparsed_as``); nothing without a judge."""
    parts = judge_parts(inp, "judge_win_rates")
    if parts is None:
        return []
    _, rates, fallback, _ = parts
    section = Section("People and the LLM judge")
    section.text.append(f"{intro} {fallback} of {len(rates)} pair(s) fell back to people only (λ = 0).")
    section.figures.append(
        ReportFigure(
            "judge_win_rates",
            "Win rate of the first system of each pair: people only, judge only and "
            "prediction-powered, with 95 % intervals.",
            figure(rates),
        )
    )
    section.tables.append(("Win rates: people, judge, prediction-powered", rates))
    judge_bias_part(section, inp, bias_note, f"judge replies named no label and count as {unparsed_as}.")
    return [section]


def judge_facts(inp: ReportInput) -> tuple[dict, str, str] | None:
    """What a judged study's methods sentences name: (the summary's ``judge``, "k of n pair(s)" that fell
    back to people only, the judge's models); None without a judge."""
    parts = judge_parts(inp, "judge_win_rates")
    if parts is None:
        return None
    j, rates, fallback, models = parts
    return j, f"{fallback} of {len(rates)} pair(s)", models
