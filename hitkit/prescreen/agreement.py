"""How far the automatic ranking agrees with a human one: Kendall's τ (τ-b, ties allowed).

A human ranking comes from a finished study's analysis folder (:func:`human_ranking_from_analysis`:
pairwise and Spot The Bot ``ranking.csv``, live chat ``systems.csv``), from any CSV with a
``system`` column and a ``rank`` or ``score`` column (:func:`human_ranking_from_csv`), or, for a
study on the simulated crowd, from the quality the simulation gives each system
(:func:`simulated_ranking`: the order the simulated workers perceive).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from scipy import stats

from hitkit.errors import HitkitError


@dataclass(frozen=True)
class Agreement:
    """Kendall's τ-b between two rankings over the ``n`` systems they share, and its p-value."""

    tau: float
    p_value: float
    n: int


def kendall_tau(automatic: Mapping[str, float], human: Mapping[str, float]) -> Agreement:
    """Kendall's τ-b between two rankings given as system → rank (1 = best) over their common systems.

    Fewer than two common systems, or a ranking with every system tied, give τ = NaN.
    """
    common = sorted(set(automatic) & set(human))
    if len(common) < 2:
        return Agreement(float("nan"), float("nan"), len(common))
    result = stats.kendalltau([automatic[s] for s in common], [human[s] for s in common])
    return Agreement(float(result.statistic), float(result.pvalue), len(common))


def _ranks_from(table: pd.DataFrame, source: str) -> dict[str, float]:
    if "system" not in table.columns:
        raise HitkitError(f"{source}: no 'system' column; a human ranking needs 'system' and 'rank' or 'score'")
    if "rank" in table.columns:
        return {str(s): float(r) for s, r in zip(table["system"], table["rank"])}
    for score in ("score", "z", "trueskill_mu", "win_rate"):
        if score in table.columns:
            ranks = table[score].rank(ascending=False, method="min")
            return {str(s): float(r) for s, r in zip(table["system"], ranks)}
    raise HitkitError(f"{source}: no 'rank' or 'score' column to rank the systems by")


def human_ranking_from_csv(path: str | Path) -> dict[str, float]:
    """System → rank from a CSV with ``system`` and ``rank`` (1 = best) or a ``score`` (higher = better)."""
    path = Path(path)
    if not path.is_file():
        raise HitkitError(f"{path}: no such human ranking file")
    return _ranks_from(pd.read_csv(path), str(path))


def human_ranking_from_analysis(directory: str | Path) -> dict[str, float]:
    """System → rank from a finished study's analysis folder (``hitkit analyze`` or ``launch`` output)."""
    directory = Path(directory)
    for name in ("ranking.csv", "systems.csv"):
        if (directory / name).is_file():
            return human_ranking_from_csv(directory / name)
    raise HitkitError(
        f"{directory}: no ranking.csv (pairwise, Spot The Bot) or systems.csv (live chat); "
        f"give the folder that `hitkit analyze` wrote"
    )


def simulated_ranking(quality: Mapping[str, float], systems: list[str], default: float = 0.5) -> dict[str, float]:
    """System → rank by the simulated crowd's configured quality (unlisted systems: ``default``)."""
    values = pd.Series({s: float(quality.get(s, default)) for s in systems})
    return {s: float(r) for s, r in values.rank(ascending=False, method="min").items()}


def describe(agreement: Agreement) -> str:
    """One line for a report: τ, its p-value and the number of systems."""
    if math.isnan(agreement.tau):
        return f"τ undefined ({agreement.n} system(s) in common, or a ranking with every system tied)"
    return f"τ = {agreement.tau:+.3f} (p = {agreement.p_value:.3g}, {agreement.n} systems)"
