"""Spot The Bot's figures, drawn once here for the analysis folder and the report alike (PNG bytes)."""

from __future__ import annotations

import pandas as pd

from hitkit.report import matrices, plots
from hitkit.report.curves import stability_curve, step_curves


def win_rates(table: pd.DataFrame, order: list[str], correction: str) -> bytes:
    """The win rate of each row system over each column system, * where the chi-square p < 0.05."""
    values, marks = matrices.pair_frames(table, "win_rate", order, mark=matrices.p_column(table))
    return plots.pair_matrix(
        values,
        marks=marks,
        title="Win rate of row over column",
        colorbar="win rate",
        vmin=0,
        vmax=1,
        mark_note=f"* chi-square p < 0.05, {correction}",
        row_label="system",
        col_label="opponent",
    )


def ranking(table: pd.DataFrame) -> bytes:
    """Each system's 95 % bootstrap rank range, coloured by cluster."""
    return plots.rank_ranges(table, title="TrueSkill ranking: rank ranges and clusters")


def survival(curves: pd.DataFrame) -> bytes:
    """The Turnbull survival curve of each system: the share of its speakers not yet spotted."""
    return step_curves(curves)


def stability(table: pd.DataFrame) -> bytes:
    """The share of the most frequent clustered ranking against conversations per pair."""
    return stability_curve(table)


def judge_win_rates(table: pd.DataFrame) -> bytes:
    """Each pair's win rate human-only, judge-only and prediction-powered, with their intervals."""
    return plots.judge_win_rates(table, "win rate of the first system (ties excluded)")
