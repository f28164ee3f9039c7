"""Errors a coordinator can act on: each says what was wrong, where, and what to do."""

from __future__ import annotations


class HitkitError(Exception):
    """Base class of every error hitkit reports to a person rather than as a traceback."""


class ConfigError(HitkitError):
    """A study file that does not validate; the message names the file, the field and the fix."""


class InputError(HitkitError):
    """A data file (responses, conversations, corpus) that cannot be read; names file and line."""

    def __init__(self, path, message: str, line: int | None = None):
        self.path, self.line = str(path), line
        where = f"{path} line {line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


class AnswerError(HitkitError):
    """A worker's answer that cannot be stored (unknown unit, bad value, too long)."""


class FlowError(HitkitError):
    """A worker request that the entry/submit flow refuses; ``status`` is the HTTP status to give."""

    def __init__(self, message: str, status: int = 400):
        self.status = status
        super().__init__(message)


class BudgetError(HitkitError):
    """Posting would let the study's spend exceed its budget."""
