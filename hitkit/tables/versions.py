"""The versions of hitkit and of the numerical libraries a result was computed with (recorded in every
export's study.json and analysis' summary.json, and named in the report's methods paragraph)."""

from __future__ import annotations


def software_versions() -> dict[str, str]:
    """Versions of hitkit and of the numerical libraries its results depend on."""
    from importlib import metadata

    versions = {}
    for name in ("hitkit", "numpy", "scipy", "pandas", "trueskill", "lifelines", "matplotlib"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
