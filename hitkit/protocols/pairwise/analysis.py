"""Pairwise A/B (ChatEval, Sedoc et al. 2019): METHODS §3.

Reads ``votes.csv`` (and ``assignments.csv`` when present) from one folder (METHODS §4) and returns
an :class:`~hitkit.analysis.base.AnalysisResult` with these tables (column contract v1), and, when the
folder holds ``judge.csv`` (a study with an LLM judge), ``judge_win_rates``, ``judge_bias`` and ``judge_strengths``
(:mod:`hitkit.protocols.pairwise.judge`):

- ``pairs``: system_a, system_b, wins_a, wins_b, ties, gain, p_value, p_adjusted, correction,
  gain_low, gain_high, interval_unit: one row per unordered pair, system_a < system_b; gain =
  (wins_a − wins_b) / (wins_a + wins_b); two-sided test, corrected over the pairs
  (Bonferroni by default); p and the gain interval from one procedure: by default the worker-clustered
  CR2 t test (Bell–McCaffrey degrees of freedom) and its t interval.
- ``ranking``: system, score, ci_low, ci_high, rank: Bradley–Terry log-strength centred to mean 0,
  expanded percentile 95 % bootstrap interval (resampling workers in the analysis), rank 1 = best.
- ``workers``: worker_id, votes, compared, agree_with_majority, expected_by_chance, p_value,
  flagged: agreement with the other workers' majority and the test that flags a worker.

The display order of a pair is randomised, so a vote ``a`` means "the system shown first", which is
``system_a`` of that row. Every function here first turns votes into the canonical orientation: the
two systems sorted by name, ``first`` < ``second``, and an outcome 0 = first preferred, 1 = tie,
2 = second preferred. Items are keyed by (study, item_id) when a ``study`` column is present.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis import base
from hitkit.analysis.base import AnalysisResult, common_options, png
from hitkit.analysis.cr2 import PROCEDURE, ContrastTest, cr2_contrast
from hitkit.analysis.evidence import attach
from hitkit.analysis.gold import gold_accuracy, split_gold
from hitkit.analysis.inference import (
    DEFAULT_CORRECTION,
    DEFAULT_DUPLICATES,
    INTERVAL_METHOD,
    Correction,
    DuplicatePolicy,
    adjust,
    check_correction,
    duplicate_warnings,
)
from hitkit.analysis.tables import ASSIGNMENT_DUPLICATES
from hitkit.errors import InputError
from hitkit.protocols.pairwise import figures
from hitkit.protocols.pairwise import gold as gold_module
from hitkit.protocols.pairwise.agreement import cohen_weighted_kappa, worker_agreement
from hitkit.protocols.pairwise.bradley_terry import Resample, bradley_terry
from hitkit.protocols.pairwise.evidence import evidence
from hitkit.protocols.pairwise.judge import analysis_tables, read_judge
from hitkit.protocols.pairwise.reading import FIRST, SECOND, TIE, canonical, item_columns, read_votes

# A worker who cast more than this share of a run's votes dominates it (a warning).
DOMINANT_SHARE = 0.5
# Kappa below this reads as agreement near chance (a warning).
NEAR_CHANCE_KAPPA = 0.2


PAIR_TESTS = ("worker", "vote")
"""``pair_table``'s tests: ``worker`` (default) clustered by worker, ``vote`` ChatEval's sign test per vote."""


def worker_rate_test(wins_a: np.ndarray, wins_b: np.ndarray) -> ContrastTest | None:
    """The test of a pair's win rate among decisive votes, clustered by worker (``wins_a``, ``wins_b``: each
    worker's wins of a and of b): the rate p̂ = Σa / Σ(a + b) is the intercept of a least-squares fit of
    "a won" on the decisive votes, with the CR2 cluster-robust standard error and Bell–McCaffrey degrees of
    freedom over the G workers with a decisive vote (:mod:`hitkit.analysis.cr2`). A worker's votes share
    their taste, which the per-vote sign test takes as independent (measured: 17.7 % rejections of a true
    null at 5 % with worker tastes of sd 0.8, benchmarks/coverage.py); the plain sandwich with G − 1
    degrees of freedom was too liberal when a few workers cast most votes. None without decisive votes."""
    wins_a, wins_b = np.asarray(wins_a, dtype=int), np.asarray(wins_b, dtype=int)
    decisive = wins_a + wins_b
    if decisive.sum() == 0:
        return None
    workers = np.repeat(np.arange(len(decisive)), decisive)
    won = np.concatenate([np.r_[np.ones(a), np.zeros(b)] for a, b in zip(wins_a, wins_b)])
    return cr2_contrast(won, np.ones((len(won), 1)), workers, np.array([1.0]))


def all_alike(wins_a: np.ndarray, wins_b: np.ndarray) -> tuple[float, float, float] | None:
    """Where every worker with a decisive vote split them alike (typically all one way), the sandwich has no
    spread to measure and a t of infinity would claim p = 0: (p, gain_low, gain_high) of the exact sign test
    over the G workers instead (each one observation, the unit the test clusters on) and its Clopper–Pearson
    interval, which inverts it, as a gain; None where the workers differ."""
    test = worker_rate_test(wins_a, wins_b)
    if test is None or test.se > 0:
        return None
    wins_a, wins_b = np.asarray(wins_a), np.asarray(wins_b)
    keep = (wins_a + wins_b) > 0
    if test.estimate == 0.5:
        return 1.0, -1.0, 1.0
    leaning = int((wins_a[keep] > wins_b[keep]).sum())
    exact = stats.binomtest(leaning, int(keep.sum()), 0.5)
    share = exact.proportion_ci(0.95, method="exact")
    return float(exact.pvalue), 2 * share.low - 1, 2 * share.high - 1


def gain_test(wins_a: np.ndarray, wins_b: np.ndarray, test: str) -> tuple[float, float, float]:
    """(p, gain_low, gain_high) of one pair from one procedure, so that the 95 % gain interval excludes 0
    exactly when p < 0.05: ``worker``, :func:`worker_rate_test`'s two-sided p and its t interval of the
    rate, as a gain 2·rate − 1 (clipped to [−1, 1]); ``vote``, ChatEval's exact sign test and the
    Clopper–Pearson interval, which inverts it (the binomial at ½ is symmetric, so the two-sided exact p is
    twice the smaller tail, the tail each end of Clopper–Pearson's interval cuts at 2.5 %).
    (1.0, NaN, NaN) without decisive votes."""
    a, b = int(np.sum(wins_a)), int(np.sum(wins_b))
    if a + b == 0:
        return 1.0, math.nan, math.nan
    if test == "vote":
        exact = stats.binomtest(a, a + b, 0.5)
        rate = exact.proportion_ci(0.95, method="exact")
        return float(exact.pvalue), 2 * rate.low - 1, 2 * rate.high - 1
    alike = all_alike(wins_a, wins_b)
    if alike is not None:
        return alike
    clustered = worker_rate_test(wins_a, wins_b)
    if clustered is None:  # unreachable: a + b > 0 means decisive votes
        return 1.0, math.nan, math.nan
    low, high = clustered.interval(0.95)
    return clustered.p_two_sided(0.5), max(-1.0, 2 * low - 1), min(1.0, 2 * high - 1)


def pair_table(
    votes: pd.DataFrame,
    *,
    correction: Correction = DEFAULT_CORRECTION,
    test: str = "worker",
) -> pd.DataFrame:
    """Wins, ties, gain, its interval and a two-sided p that the pair's systems are equal, per unordered pair.

    gain = (wins_a − wins_b) / (wins_a + wins_b), ties excluded, NaN without decisive votes. p_value,
    gain_low, gain_high come from one procedure (:func:`gain_test`): with ``test="worker"`` (default) the
    worker-clustered CR2 t test of :func:`worker_rate_test` and its 95 % t interval; with ``"vote"``
    ChatEval's exact sign test, every vote independent, and the Clopper–Pearson interval. The interval
    excludes 0 exactly when p_value < 0.05; it is not corrected for multiple comparisons, p_adjusted is
    (``correction``: Bonferroni by default, Holm, none). interval_unit: the test's unit.
    """
    check_correction(correction)
    if test not in PAIR_TESTS:
        raise ValueError(f"pair test {test!r}; use one of {', '.join(PAIR_TESTS)}")
    keys = [c for c in ("study", "item_id", "worker_id") if c in votes.columns]
    canon = canonical(votes, *keys)
    counts = pd.crosstab([canon["first"], canon["second"]], canon["outcome"]).reindex(
        columns=[FIRST, SECOND, TIE], fill_value=0
    )
    by_worker = pd.crosstab([canon["first"], canon["second"], canon["worker_id"]], canon["outcome"]).reindex(
        columns=[FIRST, SECOND, TIE], fill_value=0
    )
    rows = []
    for (first, second), (wins_a, wins_b, ties) in zip(counts.index, counts.to_numpy()):
        decisive = int(wins_a + wins_b)
        own = by_worker.loc[(first, second)]
        p, low, high = gain_test(own[FIRST].to_numpy(), own[SECOND].to_numpy(), test)
        rows.append(
            {
                "system_a": first,
                "system_b": second,
                "wins_a": int(wins_a),
                "wins_b": int(wins_b),
                "ties": int(ties),
                "gain": (wins_a - wins_b) / decisive if decisive else math.nan,
                "p_value": p,
                "gain_low": low,
                "gain_high": high,
            }
        )
    columns = ["system_a", "system_b", "wins_a", "wins_b", "ties", "gain", "p_value", "gain_low", "gain_high"]
    table = pd.DataFrame(rows, columns=columns).sort_values(["system_a", "system_b"], ignore_index=True)
    table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction)
    table["correction"] = correction
    table["interval_unit"] = test
    return table[[*columns[:7], "p_adjusted", "correction", "gain_low", "gain_high", "interval_unit"]]


def _json_float(value: float) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def data_warnings(votes: pd.DataFrame, kappa: float) -> tuple[dict, list[str]]:
    """What a referee would want to know about the votes: (counts, warning lines).

    Counts: repeated_votes (votes by a worker on an item and pair they had already voted on, in
    another assignment), top_worker_share (the share of all votes cast by the most active
    worker). Warnings for any repeated vote, a worker casting more than
    :data:`DOMINANT_SHARE` of the votes, and kappa below :data:`NEAR_CHANCE_KAPPA` (agreement
    near chance).
    """
    keys = list(item_columns(votes)) + ["worker_id"]
    canon = canonical(votes, *keys)
    repeated = int(canon.duplicated(keys + ["first", "second"]).sum())
    share = float(votes["worker_id"].value_counts(normalize=True).iloc[0]) if len(votes) else 0.0
    lines = []
    if repeated:
        lines.append(
            f"{repeated} vote(s) repeat a worker's earlier vote on the same item and "
            "pair (in another assignment); they are counted, but they are not "
            "independent judgements"
        )
    if share > DOMINANT_SHARE:
        lines.append(
            f"one worker cast {share:.0%} of the votes; the results mostly say what "
            "that worker thinks (the worker-clustered intervals account for it)"
        )
    if not math.isnan(kappa) and kappa < NEAR_CHANCE_KAPPA:
        lines.append(f"agreement is near chance (weighted kappa {kappa:.2f} < {NEAR_CHANCE_KAPPA})")
    return {"repeated_votes": repeated, "top_worker_share": share}, lines


def analyze_votes(
    votes: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    correction: Correction = DEFAULT_CORRECTION,
    resample: Resample = "worker",
    test: str = "worker",
    gold: pd.DataFrame | None = None,
) -> AnalysisResult:
    """METHODS §3 on read votes (:func:`~hitkit.protocols.pairwise.reading.read_votes`, whose duplicate
    reports ride in ``votes.attrs``): pair table, Bradley–Terry ranking, kappa and worker flags.

    ``correction`` applies to the pair tests, ``test`` is their unit (and that of the gain intervals, which
    come from the same procedure), ``resample`` the unit the bootstrap of the Bradley–Terry intervals
    resamples (workers by default); all are recorded in the summary, with the warnings of
    :func:`data_warnings`. ``gold``: each worker's accuracy on gold comparisons
    (:data:`~hitkit.analysis.gold.GOLD_COLUMNS`), whose votes ``votes`` no longer holds.
    """
    check_correction(correction)
    duplicate_report = votes.attrs.get("duplicates", {})
    ranking = bradley_terry(votes, n_boot=n_boot, seed=seed, resample=resample)
    kappa = cohen_weighted_kappa(votes)
    counts, lines = data_warnings(votes, kappa)
    assignment_report = votes.attrs.get("assignment_duplicates")
    lines[:0] = duplicate_warnings(
        [("vote key(s) (assignment, item, pair)", duplicate_report), (ASSIGNMENT_DUPLICATES, assignment_report)]
    )
    summary = {
        "votes": len(votes),
        "ties": int((votes["vote"] == "tie").sum()),
        "workers": int(votes["worker_id"].nunique()),
        "items": len(votes[list(item_columns(votes))].drop_duplicates()),
        "systems": len(ranking),
        "kappa": _json_float(kappa),
        "seed": seed,
        "n_boot": n_boot,
        "multiple_comparisons": correction,
        "pair_test": test,
        "pair_procedure": PROCEDURE if test == "worker" else "exact sign test, Clopper–Pearson interval",
        "interval_unit": resample,
        "interval_method": INTERVAL_METHOD,
        "duplicates": duplicate_report,
        "assignment_duplicates": assignment_report,
        **counts,
        "warnings": lines,
    }
    result = AnalysisResult(
        tables={
            "pairs": pair_table(votes, correction=correction, test=test),
            "ranking": ranking,
            "workers": worker_agreement(votes),
        },
        summary=summary,
        figures={"ranking": png(lambda: figures.ranking(ranking))},
    )
    attach(result, *evidence(votes, ranking, n_boot=n_boot, seed=seed), gold=gold, gold_items=gold_module.ITEMS)
    return result


def analyze_pairwise(
    in_dir: str | Path,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    correction: Correction = DEFAULT_CORRECTION,
    resample: Resample = "worker",
    duplicates: DuplicatePolicy = DEFAULT_DUPLICATES,
    test: str = "worker",
    judge_labels: str | Path | None = None,
) -> AnalysisResult:
    """:func:`analyze_votes` on the votes of ``in_dir`` (``duplicates``: the policy for repeated rows,
    :func:`~hitkit.protocols.pairwise.reading.read_votes`); ``judge_labels``: a judge-labels file read
    instead of the folder's ``judge.csv`` (:mod:`hitkit.protocols.pairwise.judge_file`); by default the
    folder's ``judge_labels`` table where the study had several judges."""
    check_correction(correction)
    votes, gold_votes = split_gold(read_votes(in_dir, duplicates=duplicates))
    # Gold comparisons are no comparison of systems: they count only towards each worker's gold accuracy.
    gold = gold_accuracy(gold_module.answers({"votes": gold_votes})) if len(gold_votes) else None
    if votes.empty:
        raise InputError(
            Path(in_dir) / "votes.csv", "no votes from submitted or approved assignments; nothing to analyse"
        )
    result = analyze_votes(
        votes, n_boot=n_boot, seed=seed, correction=correction, resample=resample, test=test, gold=gold
    )
    judge_labels = judge_labels if judge_labels is not None else several_judges(in_dir)
    if judge_labels is not None:
        from hitkit.protocols.pairwise.judge_file import analysis_tables_from_file

        base.add_judge(result, analysis_tables_from_file(votes, judge_labels, seed=seed), figures.judge_win_rates)
        if "judge_strengths" in result.tables:
            result.figures["judge_strengths"] = png(lambda: figures.judge_strengths(result.tables["judge_strengths"]))
        return result
    judge_path = Path(in_dir) / "judge.csv"
    if judge_path.is_file() or judge_path.with_suffix(".parquet").is_file():
        add_judge(result, votes, read_judge(judge_path))
    return result


def several_judges(in_dir: str | Path) -> Path | None:
    """The export's ``judge_labels`` table, which a study judged by several judges has
    (:mod:`hitkit.judges.panel`): read as a judge-labels file; None where there is none."""
    for name in ("judge_labels.csv", "judge_labels.parquet"):
        if (Path(in_dir) / name).is_file():
            return Path(in_dir) / name
    return None


def add_judge(result: AnalysisResult, votes: pd.DataFrame, judge: pd.DataFrame) -> None:
    """Add the LLM judge's tables (``judge_win_rates``, ``judge_bias``, ``judge_strengths``), its summary (``judge``) and its
    warnings to ``result`` (:func:`~hitkit.protocols.pairwise.judge.analysis_tables`)."""
    base.add_judge(result, analysis_tables(votes, judge), figures.judge_win_rates)
    if "judge_strengths" in result.tables:
        result.figures["judge_strengths"] = png(lambda: figures.judge_strengths(result.tables["judge_strengths"]))


def analyze(
    in_dir: str | Path, *, seed: int, config=None, options: dict, replicate_dir=None, stability: bool = False
) -> AnalysisResult:
    """The registry's entry point: :func:`analyze_pairwise` with ``hitkit analyze``'s options."""
    common = common_options(options)
    return analyze_pairwise(
        in_dir,
        seed=seed,
        resample=options.get("cluster", "worker"),
        test=options.get("unit", "worker"),
        judge_labels=options.get("judge_labels"),
        **common,
    )


def worker_qc(tables: dict[str, pd.DataFrame], config=None) -> tuple[str, dict[str, bool]] | None:
    """Which workers pass quality control so far (the dashboard's and the QC policy's check): those
    :func:`worker_agreement` does not flag; None before any vote."""
    votes, _gold = split_gold(tables["votes"])
    if votes.empty:
        return None
    agreement = worker_agreement(votes)
    return (
        "agrees with the other workers' majority (not flagged, p ≥ 0.05)",
        {str(w): not bool(f) for w, f in zip(agreement["worker_id"], agreement["flagged"])},
    )
