"""METHODS §1 steps 1–7 on counted 0–100 ratings, and the choices they take: live chat's, and the rating
protocol's with its degraded copies as the control (:mod:`hitkit.protocols.rating.analysis`). Both
analyses run the steps, record the choices in their summaries and return the same first tables and the
significance figure through :class:`RatingChoices`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import pandas as pd

from hitkit.analysis.base import AnalysisResult, png
from hitkit.analysis.inference import DEFAULT_CORRECTION, Correction, correction_label
from hitkit.protocols.kit.summary import bootstrap
from hitkit.protocols.live_chat import figures
from hitkit.protocols.live_chat.criteria import Criterion
from hitkit.protocols.live_chat.quality import (
    QcMethod,
    passed_ratings,
    reverse_negative,
    standardise_per_worker,
    wilcoxon_qc,
    worker_table,
)
from hitkit.protocols.live_chat.scores import (
    DEFAULT_SIGNIFICANCE_UNIT,
    SignificanceUnit,
    pairwise_significance,
    significance_procedure,
    system_scores,
)


@dataclass
class Scored:
    """The tables of METHODS §1 steps 1–7 on counted ratings: z-scores, the QC test and the workers'
    verdicts, the passed workers' ratings of real systems, system scores and pairwise significance."""

    z: pd.DataFrame
    qc: pd.DataFrame
    workers: pd.DataFrame
    kept: pd.DataFrame
    systems: pd.DataFrame
    significance: pd.DataFrame


def screened(
    assignments: pd.DataFrame,
    ratings: pd.DataFrame,
    criteria: Sequence[Criterion],
    *,
    alpha: float = 0.05,
    qc_method: QcMethod = "asymptotic",
    ddof: int = 1,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Steps 1–4: reverse, standardise, QC and keep the passed workers' ratings of real systems; returns
    (z, qc, workers, kept) as :class:`Scored` names them."""
    z = standardise_per_worker(reverse_negative(ratings, criteria), ddof=ddof)
    qc = wilcoxon_qc(z, criteria, alpha, method=qc_method)
    workers = worker_table(assignments, z, qc)
    return z, qc, workers, passed_ratings(z, workers)


@dataclass(frozen=True)
class RatingChoices:
    """The choices of an analysis of ratings, as its steps (:meth:`scored`) and intervals take them; the defaults
    are the analyses' (QC at α = 0.05, worker-clustered tests and intervals)."""

    alpha: float = 0.05
    qc_method: QcMethod = "asymptotic"
    significance_unit: SignificanceUnit = DEFAULT_SIGNIFICANCE_UNIT
    ddof: int = 1
    correction: Correction = DEFAULT_CORRECTION
    interval_unit: str = "worker"
    n_boot: int = 1000
    seed: int = 0

    def scored(self, assignments: pd.DataFrame, ratings: pd.DataFrame, criteria: Sequence[Criterion]) -> Scored:
        """Reverse, standardise, QC, keep the passed workers' ratings, score and test with these choices
        (live chat's steps, and the rating protocol's with its degraded copies as the control)."""
        z, qc, workers, kept = screened(
            assignments, ratings, criteria, alpha=self.alpha, qc_method=self.qc_method, ddof=self.ddof
        )
        systems = system_scores(kept, criteria)
        order = list(systems["system"])
        significance = pairwise_significance(kept, unit=self.significance_unit, order=order, correction=self.correction)
        return Scored(z, qc, workers, kept, systems, significance)

    def recorded(self) -> dict[str, Any]:
        """The summary's record of every choice (``multiple_comparisons`` is the correction)."""
        return {
            "alpha": self.alpha,
            "qc_method": self.qc_method,
            "significance_unit": self.significance_unit,
            "multiple_comparisons": self.correction,
            **significance_procedure(self.significance_unit),
            **bootstrap(self.n_boot, self.seed, self.interval_unit),
        }

    def result(self, steps: Scored, summary: dict[str, Any], tables: dict[str, pd.DataFrame]) -> AnalysisResult:
        """The analysis' result: the workers, systems and significance of ``steps``, then ``tables``;
        ``summary``; and the significance figure (the p-value matrix, row beats column)."""
        order = list(steps.systems["system"])
        label = correction_label(self.correction)
        return AnalysisResult(
            tables={"workers": steps.workers, "systems": steps.systems, "significance": steps.significance, **tables},
            summary=summary,
            figures={
                "significance": png(
                    lambda: figures.significance(steps.significance, order, self.alpha, label, self.significance_unit)
                )
            },
        )
