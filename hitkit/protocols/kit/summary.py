"""What the protocols' analysis summaries (``summary.json``) record alike: the bootstrap behind every
interval, and the rows a duplicate policy removed with the warnings that say so."""

from __future__ import annotations

from typing import Any

from hitkit.analysis.inference import INTERVAL_METHOD, duplicate_warnings
from hitkit.analysis.tables import ASSIGNMENT_DUPLICATES


def bootstrap(n_boot: int, seed: int, unit: str) -> dict[str, Any]:
    """The summary's record of the bootstrap: its resamples (``n_boot``), ``seed``, the cluster it
    resamples (``interval_unit``) and how an interval is read from it (``interval_method``)."""
    return {"interval_unit": unit, "interval_method": INTERVAL_METHOD, "n_boot": n_boot, "seed": seed}


def repeated_rows(what: str, report: dict | None, assignment_report: dict | None) -> dict[str, Any]:
    """The summary's record of repeated rows: the answers' duplicate report (``what`` names their key),
    assignments.csv's, and a warning line for each that removed rows."""
    return {
        "duplicates": report,
        "assignment_duplicates": assignment_report,
        "warnings": duplicate_warnings([(what, report), (ASSIGNMENT_DUPLICATES, assignment_report)]),
    }
