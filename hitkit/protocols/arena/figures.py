"""The arena's figures, drawn once for the analysis folder and the report alike (PNG bytes)."""

from __future__ import annotations

import pandas as pd

from hitkit.report import matrices, plots


def leaderboard(table: pd.DataFrame) -> bytes:
    """Each system's Arena rating, plain and style-controlled, with their worker-clustered 95 % intervals."""
    kinds = [("Bradley–Terry", table["rating"], table["rating_lower"], table["rating_upper"])]
    if table["rating_style"].notna().any():
        kinds.append(
            ("style-controlled", table["rating_style"], table["rating_style_lower"], table["rating_style_upper"])
        )
    return plots.compared_intervals(
        list(table["system"]),
        kinds,
        xlabel="Arena rating (1000 + 400·log10 strength)",
        title="Leaderboard with 95 % intervals (workers resampled)",
        reference=1000.0,
    )


def win_rates(table: pd.DataFrame, order: list[str]) -> bytes:
    """The win rate of each row system against each column system (ties half); blank where never compared."""
    values, _ = matrices.pair_frames(table, "win_rate", order, a="system", b="opponent")
    return plots.pair_matrix(
        values,
        title="Win rate of row against column (ties ½)",
        colorbar="win rate",
        vmin=0.0,
        vmax=1.0,
        fmt=lambda v: f"{v:.2f}",
        row_label="system",
        col_label="opponent",
    )
