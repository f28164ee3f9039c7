"""Cells of the tidy tables made safe to open: text that a spreadsheet would run as a formula is
neutralised (OWASP, "CSV Injection"), in every export and import."""

from __future__ import annotations

import re

FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection")."""

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def neutralise_formula(value):
    """``value`` made inert for spreadsheets: text starting with a formula trigger gets a leading
    ``'`` (OWASP's CSV-injection advice), so ``=HYPERLINK(…)`` from a worker shows as text when a
    coordinator opens the export. Numbers, and text that is just a number (``-0.50``), are kept
    as they are; so is everything else. Applying it twice changes nothing more.

    Not defusedcsv (PyPI): it wraps the ``csv`` module only (we write with pandas, and Parquet
    too), does not cover a leading tab or carriage return, and rewrites every ``|`` in a cell.
    """
    if isinstance(value, str) and value[:1] in FORMULA_TRIGGERS and not _NUMBER.fullmatch(value):
        return "'" + value
    return value
