"""Live chat's figures, drawn once here for the analysis folder and the report alike (PNG bytes)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from hitkit.report import matrices, plots


def ranking(systems: pd.DataFrame, low, high) -> bytes:
    """Each system's overall mean z, with its 95 % interval where the analysis has one, best at the top."""
    return plots.interval_ranking(
        list(systems["system"]),
        systems["z"],
        low,
        high,
        xlabel="overall mean z (higher = better)",
        title="Ranking by overall z" + (" with 95 % intervals" if low is not None else ""),
        labels=[f"{sy} (n={n})" for sy, n in zip(systems["system"], systems["n"])],
    )


SIGNIFICANCE_TESTS = {
    "worker": "one-sided worker-clustered t test (CR2, Bell–McCaffrey df)",
    "rating": "one-sided Mann–Whitney U test (per rating)",
    "conversation": "one-sided Mann–Whitney U test (per conversation)",
}
"""The significance matrix's test, by the summary's ``significance_unit``, as a figure names it."""


def significance(table: pd.DataFrame, order: Sequence[str], alpha: float, correction: str, unit: str) -> bytes:
    """Each ordered pair's one-sided p of the test of ``unit`` (:data:`SIGNIFICANCE_TESTS`) of "the row system's z
    are no higher than the column's", * below ``alpha``; the title names the test, the note the correction."""
    values, marks = matrices.pair_frames(table, "p_value", list(order), mark=matrices.p_column(table), alpha=alpha)
    return plots.pair_matrix(
        values,
        marks=marks,
        title=f"Row beats column: p of the {SIGNIFICANCE_TESTS[unit]}",
        colorbar="p",
        cmap="Greens_r",
        vmin=0,
        vmax=1,
        fmt=matrices.p_cell,
        mark_note=f"* p < {alpha}, {correction}",
        row_label="system (wins)",
        col_label="system (beaten)",
    )


def criteria(systems: pd.DataFrame, names: Sequence[str]) -> bytes:
    """Mean z per criterion and system."""
    return plots.criterion_bars(systems, list(names))


def quality_control(workers: pd.DataFrame, alpha: float, test: str = "QC bot rated lower than real systems") -> bytes:
    """Workers passing the QC test (``test``: what it tests, in words) and the distribution of their p-values."""
    return plots.qc_pass(workers, alpha, test)
