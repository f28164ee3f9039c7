"""Live chat's quality control and standardisation (METHODS §1, steps 2–5): negative criteria reversed,
each worker's ratings as z-scores, the per-worker one-sided Wilcoxon rank-sum test that the QC bot is
rated below the real systems, and the ratings of the workers who pass."""

from __future__ import annotations

import math
from typing import Literal, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA, Criterion, unknown_criteria

INTERVAL_UNITS: tuple[str, ...] = ("worker", "conversation", "rating")


QcMethod = Literal["asymptotic", "exact", "auto"]


def reverse_negative(ratings: pd.DataFrame, criteria: Sequence[Criterion] = DEFAULT_CRITERIA) -> pd.DataFrame:
    """Step 1: add ``oriented`` = score, or 100 − score for negative criteria (higher = better)."""
    unknown = unknown_criteria(ratings, criteria)
    if unknown:
        raise ValueError(f"ratings have criteria {unknown} not among the configured {[c.name for c in criteria]}")
    negative = {c.name for c in criteria if c.polarity == "negative"}
    out = ratings.copy()
    out["oriented"] = np.where(out["criterion"].isin(negative), 100.0 - out["score"], out["score"])
    return out


def standardise_per_worker(ratings: pd.DataFrame, ddof: int = 1) -> pd.DataFrame:
    """Step 2: add ``z`` = (oriented − μ)/σ over all of the worker's ratings; NaN where σ is 0."""
    by_worker = ratings.groupby("worker_id")["oriented"]
    mu = by_worker.transform("mean")
    sigma = by_worker.transform("std", ddof=ddof)
    out = ratings.copy()
    out["z"] = (out["oriented"] - mu) / sigma.where(sigma > 0)
    return out


def wilcoxon_qc(
    z_ratings: pd.DataFrame,
    criteria: Sequence[Criterion] = DEFAULT_CRITERIA,
    alpha: float = 0.05,
    *,
    method: QcMethod = "asymptotic",
) -> pd.DataFrame:
    """Step 3: per worker, one-sided Mann–Whitney U that QC-bot z < real-system z on qc criteria.

    Returns worker_id, n_control, n_system, p_value, passed (p < alpha). σ = 0 or no QC (or no
    real-system) ratings → p NaN, fails. ``method`` is scipy's: "asymptotic" (default) is the
    normal approximation with tie-corrected variance and continuity correction, which is also
    what scipy's "auto" and R's ``wilcox.test`` use once scores tie (nearly every worker's do).
    """
    qc_names = {c.name for c in criteria if c.qc}
    rows = []
    for worker, own in z_ratings.groupby("worker_id", sort=True):
        own = own[own["criterion"].isin(qc_names)]
        control = own.loc[own["is_control"], "z"].to_numpy()
        system = own.loc[~own["is_control"], "z"].to_numpy()
        p = math.nan
        if len(control) and len(system) and not (np.isnan(control).any() or np.isnan(system).any()):
            p = float(stats.mannwhitneyu(control, system, alternative="less", method=method).pvalue)
        rows.append((worker, len(control), len(system), p, bool(p < alpha)))
    return pd.DataFrame(rows, columns=["worker_id", "n_control", "n_system", "p_value", "passed"])


def worker_table(assignments: pd.DataFrame, z_ratings: pd.DataFrame, qc: pd.DataFrame) -> pd.DataFrame:
    """Step 4: one row per worker with a counted assignment; workers without ratings fail."""
    n_assignments = assignments.groupby("worker_id").size().rename("assignments")
    moments = z_ratings.groupby("worker_id")["oriented"].agg(mean_raw="mean", sd_raw="std")
    table = n_assignments.to_frame().join(qc.set_index("worker_id")[["passed", "p_value"]]).join(moments).reset_index()
    table["passed"] = table["passed"].astype("boolean").fillna(False).astype(bool)
    return table[["worker_id", "assignments", "passed", "p_value", "mean_raw", "sd_raw"]]


def passed_ratings(z_ratings: pd.DataFrame, workers: pd.DataFrame) -> pd.DataFrame:
    """The ratings of real systems (not the QC bot) by workers who passed QC."""
    ok = set(workers.loc[workers["passed"], "worker_id"])
    keep = z_ratings["worker_id"].isin(ok) & ~z_ratings["is_control"]
    return z_ratings[keep].reset_index(drop=True)
