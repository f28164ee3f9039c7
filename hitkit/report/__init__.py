"""``hitkit report``: one self-contained HTML file and a Markdown summary of a study's results.

The report shows the protocol's tables and figures (ranking with intervals, significance matrix,
per-criterion bars, QC pass rate, survival and stability curves, cost against budget) and ends with
a methods paragraph generated from what was actually computed: tests, corrections, bootstrap
counts, seeds, software versions, workers before and after QC. Figures are PNGs embedded as
``data:`` URIs, so the HTML file travels alone; the Markdown summary links the same PNGs, written
beside it. Every piece of text from the data is escaped.

Input is a study file (exported and analysed from its database), a run folder ``OUT/STUDY``, an
export folder (analysed here) or an analysis folder. Other parts of hitkit add sections through
:func:`register_section` (every report) or ``extra_sections`` (one report): each is a
:class:`Section`, or a function of the :class:`ReportInput` that returns one (or None to skip).
The automatic pre-screen (``OUT/STUDY/prescreen``, from ``hitkit prescreen``) is included this way
when the run folder has one (:func:`prescreen_section`).
"""

from hitkit.report.build import input_from_result, report, summary_json, write_report
from hitkit.report.parts import ReportFigure, ReportFiles, ReportInput, Section, register_section
from hitkit.report.render import render_html, render_markdown
from hitkit.report.sections import build_sections, methods_paragraph, prescreen_section

__all__ = [
    "ReportFigure",
    "ReportFiles",
    "ReportInput",
    "Section",
    "build_sections",
    "input_from_result",
    "methods_paragraph",
    "prescreen_section",
    "register_section",
    "render_html",
    "render_markdown",
    "report",
    "summary_json",
    "write_report",
]
