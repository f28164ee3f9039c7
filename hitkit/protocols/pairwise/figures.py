"""Pairwise A/B's figures, drawn once here for the analysis folder and the report alike (PNG bytes)."""

from __future__ import annotations

import pandas as pd

from hitkit.report import matrices, plots


def ranking(table: pd.DataFrame) -> bytes:
    """Each system's Bradley–Terry score with its 95 % bootstrap interval, best at the top."""
    return plots.interval_ranking(
        list(table["system"]),
        table["score"],
        table["ci_low"],
        table["ci_high"],
        xlabel="Bradley–Terry score (log-strength, mean 0)",
        title="Ranking with 95 % bootstrap intervals",
        labels=[f"{sy} (#{r})" for sy, r in zip(table["system"], table["rank"])],
    )


PAIR_TESTS = {"worker": "two-sided worker-clustered test", "vote": "two-sided exact sign test"}
"""The pairs' test, by the summary's ``pair_test``, as a figure names it."""


def gains(pairs: pd.DataFrame, order: list[str], correction: str, test: str) -> bytes:
    """The gain of each row system over each column system, * where the p of ``test`` (a key of
    :data:`PAIR_TESTS`) is below 0.05."""
    mirrored = pd.concat(
        [
            pairs,
            pairs.rename(
                columns={"system_a": "system_b", "system_b": "system_a", "wins_a": "wins_b", "wins_b": "wins_a"}
            ).assign(gain=-pairs["gain"]),
        ],
        ignore_index=True,
    )
    values, marks = matrices.pair_frames(mirrored, "gain", order, mark=matrices.p_column(pairs))
    return plots.pair_matrix(
        values,
        marks=marks,
        title="Gain of row over column",
        colorbar="gain",
        mark_note=f"* {PAIR_TESTS[test]} p < 0.05, {correction}",
        row_label="system",
        col_label="opponent",
    )


def agreement(workers: pd.DataFrame) -> bytes:
    """Each worker's agreement with the other workers' majority; flagged workers in red."""
    return plots.agreement_histogram(workers)


def judge_win_rates(table: pd.DataFrame) -> bytes:
    """Each pair's win rate human-only, judge-only and prediction-powered, with their intervals."""
    return plots.judge_win_rates(table, "win rate of the first system (ties count ½)")


def judge_strengths(table: pd.DataFrame) -> bytes:
    """Each system's Bradley–Terry strength human-only, judge-only and prediction-powered, with
    their intervals, in the table's order (best prediction-powered strength first)."""
    return plots.people_judge_ppi(
        list(table["system"]),
        table,
        xlabel="Bradley–Terry score (log-strength, mean 0)",
        title="Strengths with 95 % intervals",
        reference=0.0,
    )
