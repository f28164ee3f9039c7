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


class WriteError(HitkitError):
    """A file hitkit could not write (a full disk, no permission); one line naming the path and the cause."""

    def __init__(self, path, exc: OSError):
        import errno

        self.path = str(path)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            why = "the disk is full (no space left on the device); free some space or write elsewhere (--out)"
        else:
            why = exc.strerror or type(exc).__name__
        super().__init__(f"could not write {self.path}: {why}; nothing was left half-written there")


class AnswerError(HitkitError):
    """A worker's answer that cannot be stored (unknown unit, bad value, too long)."""


class FlowError(HitkitError):
    """A worker request that the entry/submit flow refuses; ``status`` is the HTTP status to give."""

    def __init__(self, message: str, status: int = 400):
        self.status = status
        super().__init__(message)


class BudgetError(HitkitError):
    """Posting would let the study's spend exceed its budget."""
