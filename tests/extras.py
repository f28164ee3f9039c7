"""Skipping a test module whose optional extra is not installed, without importing the extra.

``pytest.importorskip("torch")`` at the top of a module imports torch (and transformers, ~5 s of CPU)
while the module is collected: in every pytest-xdist worker, whether or not that worker runs one of its
tests. :func:`require` only looks the packages up; the tests import them where they use them."""

from __future__ import annotations

import importlib.util

import pytest


def require(*modules: str, reason: str) -> None:
    """Skip the calling test module when any of ``modules`` is not installed (nothing is imported)."""
    if any(importlib.util.find_spec(m) is None for m in modules):
        pytest.skip(reason, allow_module_level=True)
