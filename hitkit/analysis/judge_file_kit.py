"""What every protocol's ``--judge-labels FILE`` analysis shares once the file is read
(:mod:`hitkit.analysis.judge_labels`): refusing units the export does not know, combining several judges
into one predictor, each judge's calibration against the people, and the probability each unit went to
people.

Calibration on any scale (:func:`agreement_calibration`): per judge, on the units people labelled,
``agreement`` — the share where the judge's verdict is the people's (the protocol says what a verdict
is: the same side of the scale's middle, the same label); ``ece`` — the expected calibration error of
the file's ``confidence`` read as the probability of that agreement, Σ_b (n_b/n)·|agree_b − conf_b| over
equal-width bins (Guo et al. 2017; NaN where the file gives no confidence); ``bias`` — mean(f − Y);
``correlation`` — Pearson's r; ``chosen_folds`` as :func:`~hitkit.analysis.judges_combined.calibration`.
Pure functions: no database.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.judges_combined import (  # noqa: F401 - CALIBRATION_COLUMNS named in docstrings
    CALIBRATION_COLUMNS,
    calibration,
    cross_fitted_best,
    expected_calibration_error,
)
from hitkit.errors import InputError


def refuse_unknown(path: str | Path, labels: pd.DataFrame, unknown: pd.Series, what: str) -> None:
    """An InputError naming the file, the line and the unit of the first label where ``unknown`` is True
    (``what`` says what the unit should have been and how to name one the export lacks)."""
    if unknown.any():
        row = labels[unknown.to_numpy()].iloc[0]
        raise InputError(path, f"unit {row['unit']!r} (column unit) is not {what}", line=int(row["line"]))


def combine(
    scores: pd.DataFrame, human: pd.Series, fold_units, *, seed: int = 0
) -> tuple[pd.DataFrame, np.ndarray, dict[str, int], int]:
    """(the complete rows of ``scores``, the combined predictor on them, how many folds chose each
    candidate, how many rows lacked some judge's label): ``scores`` is keys × judges, ``human`` the
    people's label per key (NaN where none), ``fold_units`` the key's unit for the cross-fitting folds
    (:func:`~hitkit.analysis.judges_combined.cross_fitted_best`)."""
    complete = scores.notna().all(axis=1).to_numpy()
    kept = scores[complete]
    units = np.asarray(list(fold_units))[complete]
    combined, chosen = cross_fitted_best(kept, human[complete], units, seed=seed)
    return kept, combined, chosen, int((~complete).sum())


def agreement_calibration(
    scores: pd.DataFrame,
    human: pd.Series,
    confidence: pd.DataFrame,
    agree: Callable[[np.ndarray, np.ndarray], np.ndarray],
    chosen: dict[str, int] | None = None,
) -> pd.DataFrame:
    """Per judge (columns of ``scores``, keys × judges; ``confidence`` the same shape, NaN where not
    given; ``human`` per key, NaN where people gave none): :data:`CALIBRATION_COLUMNS` (module
    docstring), :func:`~hitkit.analysis.judges_combined.calibration`'s with ``agreement`` by
    ``agree(f, y)`` (where the judge's verdict is the people's) and ``ece`` of the confidence."""
    # Scores and labels moved by one constant to be ≥ 0 (calibration reads them as probabilities for its own
    # ece): bias and correlation do not change; agreement and ece are replaced below.
    low = min(float(np.nanmin(scores.to_numpy(float))), float(human.min()) if human.notna().any() else 0.0, 0.0)
    table = calibration(scores - low, human - low, chosen)
    labelled = human.notna().to_numpy()
    y = human.to_numpy(float)[labelled]
    for i, judge in enumerate(scores.columns):
        hit = agree(scores[judge].to_numpy(float)[labelled], y).astype(float)
        conf = confidence[judge].to_numpy(float)[labelled] if judge in confidence else np.full(y.size, np.nan)
        given = np.isfinite(conf)
        table.loc[i, "agreement"] = float(hit.mean()) if y.size else float("nan")
        table.loc[i, "ece"] = expected_calibration_error(hit[given], conf[given]) if given.any() else float("nan")
    return table


def probability(path: str | Path, labels: pd.DataFrame, units) -> np.ndarray | float:
    """Each unit's probability of having gone to people (:func:`~hitkit.analysis.judge_labels.unit_probability`),
    a unit without one while others have one refused with the file's name."""
    from hitkit.analysis.judge_labels import unit_probability

    try:
        return unit_probability(labels, units)
    except ValueError as exc:
        raise InputError(path, f"column human_probability: {exc}") from None


def warnings_for(dropped: int, unlabelled: int, what: str) -> list[str]:
    """The analysis's warnings: units some judge did not label, and ``what`` people labelled without any judge."""
    lines = []
    if dropped:
        lines.append(f"{dropped} unit(s) lack a label from some judge and are left out of the judge's tables")
    if unlabelled:
        lines.append(f"{unlabelled} {what} have no judge label and are left out of the judge's tables")
    return lines
