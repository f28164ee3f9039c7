"""hitkit: human evaluation of chatbots with crowdworkers. ``hitkit.load(path)`` reads a study's
tables into pandas DataFrames (imported on first use, so ``import hitkit`` stays light)."""

from __future__ import annotations


def load(path, **kwargs):
    """A study's tables as DataFrames; see :func:`hitkit.tables.loading.load`."""
    from hitkit.tables.loading import load as _load

    return _load(path, **kwargs)
