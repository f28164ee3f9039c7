"""Several judges on one study: each judge's calibration against people, and one predictor made of them
for prediction-powered inference.

Calibration (per judge, on the items people labelled): ``agreement`` — the share of items where the
judge's verdict (its score above, at or below ½) is the people's (their mean score above, at or below
½); ``ece`` — the expected calibration error of the judge's score read as the probability that the first
system wins, Σ_b (n_b/n)·|mean(Y)_b − mean(f)_b| over ``ECE_BINS`` equal-width bins of f (Guo et al.
2017's definition with the human score as the outcome); ``bias`` — mean(f − Y); ``correlation`` —
Pearson's r of f and Y (NaN where either is constant).

Combination (:func:`cross_fitted_best`): the candidates are each judge and the judges' mean; the units
are split in ``FOLDS`` seeded halves, and each half takes the candidate whose PPI++ residual
variance Var(Y − λ̂f), with λ̂ = Cov(Y, f)/Var(f) clipped to [0, 1], is smallest on the *other* half's
human labels. Choosing on held-out labels keeps the predictor a fixed function of the item as far as
the half's own labels are concerned, so the PPI++ estimate stays valid; with one judge it is that judge.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

ECE_BINS = 10
"""Equal-width bins of the judge's score for the expected calibration error."""
FOLDS = 2
MEAN_OF_JUDGES = "mean of judges"
"""The candidate predictor that averages every judge's score."""


def _verdict(x: np.ndarray) -> np.ndarray:
    return np.sign(np.round(x - 0.5, 9))


def expected_calibration_error(y, f, bins: int = ECE_BINS) -> float:
    """Σ_b (n_b/n)·|mean(y)_b − mean(f)_b| over equal-width bins of f in [0, 1]; NaN without items."""
    y, f = np.asarray(y, dtype=float), np.asarray(f, dtype=float)
    if y.size == 0:
        return float("nan")
    index = np.minimum((f * bins).astype(int), bins - 1)
    count = np.bincount(index, minlength=bins)
    gap = np.abs(np.bincount(index, y, bins) - np.bincount(index, f, bins))
    return float(gap.sum() / y.size) if count.sum() else float("nan")


CALIBRATION_COLUMNS = ("judge", "n_items", "n_human", "agreement", "ece", "bias", "correlation", "chosen_folds")


def calibration(scores: pd.DataFrame, human: pd.Series, chosen: dict[str, int] | None = None) -> pd.DataFrame:
    """Per judge (``scores``: items × judges, the score for the first system; ``human``: the people's mean
    score per item, NaN where nobody voted): :data:`CALIBRATION_COLUMNS` (module docstring).
    ``chosen``: how many folds chose each candidate (:func:`cross_fitted_best`)."""
    labelled = human.notna().to_numpy()
    y = human.to_numpy(float)[labelled]
    rows = []
    for judge in scores.columns:
        f_all = scores[judge].to_numpy(float)
        f = f_all[labelled]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = float(np.corrcoef(y, f)[0, 1]) if y.size > 1 and y.std() > 0 and f.std() > 0 else float("nan")
        rows.append(
            (
                judge,
                int(np.isfinite(f_all).sum()),
                int(y.size),
                float((_verdict(f) == _verdict(y)).mean()) if y.size else float("nan"),
                expected_calibration_error(y, f),
                float((f - y).mean()) if y.size else float("nan"),
                r,
                int((chosen or {}).get(judge, 0)),
            )
        )
    return pd.DataFrame(rows, columns=list(CALIBRATION_COLUMNS))


def fold_of(units, seed: int, folds: int = FOLDS) -> np.ndarray:
    """Each unit's fold, from a seeded hash of its key (stable whatever the order of the rows)."""
    return np.array([int(hashlib.sha256(f"{seed}:{u}".encode()).hexdigest()[:8], 16) % folds for u in units], dtype=int)


def _residual_variance(y: np.ndarray, f: np.ndarray) -> float:
    if y.size < 3 or f.std() == 0:
        return float(np.var(y, ddof=1)) if y.size > 1 else float("inf")
    lam = float(np.clip(np.cov(y, f, ddof=1)[0, 1] / f.var(ddof=1), 0.0, 1.0))
    return float(np.var(y - lam * f, ddof=1))


def cross_fitted_best(
    scores: pd.DataFrame, human: pd.Series, units, *, seed: int = 0
) -> tuple[np.ndarray, dict[str, int]]:
    """(the combined predictor per item, how many folds chose each candidate): each fold's items take the
    candidate (a judge or :data:`MEAN_OF_JUDGES`) with the smallest residual variance on the other folds'
    human labels (module docstring). One judge: its own scores."""
    candidates = scores.copy()
    if scores.shape[1] > 1:
        candidates[MEAN_OF_JUDGES] = scores.mean(axis=1)
    if candidates.shape[1] == 1:
        return candidates.iloc[:, 0].to_numpy(float), {candidates.columns[0]: FOLDS}
    fold = fold_of(units, seed)
    labelled = human.notna().to_numpy()
    y_all = human.to_numpy(float)
    out = np.empty(len(scores))
    chosen: dict[str, int] = {}
    for k in range(FOLDS):
        train = labelled & (fold != k)
        score = {c: _residual_variance(y_all[train], candidates[c].to_numpy(float)[train]) for c in candidates}
        best = min(candidates.columns, key=lambda c: (score[c], c != MEAN_OF_JUDGES, str(c)))
        chosen[best] = chosen.get(best, 0) + 1
        out[fold == k] = candidates[best].to_numpy(float)[fold == k]
    return out, chosen
