"""Pairwise A/B (ChatEval, Sedoc et al. 2019): METHODS §3.

Reads ``votes.csv`` (and ``assignments.csv`` when present) from one folder (METHODS §4) and returns
an :class:`~hitkit.analysis.base.AnalysisResult` with these tables (column contract v1), and, when the
folder holds ``judge.csv`` (a study with an LLM judge), ``judge_win_rates``, ``judge_bias`` and ``judge_strengths``
(:mod:`hitkit.protocols.pairwise.judge`):

- ``pairs``: system_a, system_b, wins_a, wins_b, ties, gain, p_value, p_adjusted, correction,
  gain_low, gain_high, interval_unit: one row per unordered pair, system_a < system_b; gain =
  (wins_a − wins_b) / (wins_a + wins_b); two-sided exact sign test, corrected over the pairs
  (Bonferroni by default); gain interval from a bootstrap of workers (default).
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

# A worker who cast more than this share of a run's votes dominates it (a warning).
from hitkit.analysis.bounded import wilson_interval
from hitkit.analysis.evidence import attach
from hitkit.analysis.inference import (
    DEFAULT_CORRECTION,
    DEFAULT_DUPLICATES,
    INTERVAL_METHOD,
    Correction,
    DuplicatePolicy,
    adjust,
    bootstrap_interval,
    check_correction,
    clusters_per_column,
    duplicate_warnings,
)
from hitkit.analysis.tables import ASSIGNMENT_DUPLICATES
from hitkit.errors import InputError
from hitkit.protocols.pairwise import figures
from hitkit.protocols.pairwise.agreement import cohen_weighted_kappa, worker_agreement
from hitkit.protocols.pairwise.bradley_terry import Resample, _resample_weights, bradley_terry
from hitkit.protocols.pairwise.evidence import evidence
from hitkit.protocols.pairwise.judge import analysis_tables, read_judge
from hitkit.protocols.pairwise.reading import FIRST, SECOND, TIE, canonical, item_columns, read_votes

DOMINANT_SHARE = 0.5
# Kappa below this reads as agreement near chance (a warning).
NEAR_CHANCE_KAPPA = 0.2


PAIR_TESTS = ("worker", "vote")
"""``pair_table``'s tests: ``worker`` (default) clustered by worker, ``vote`` ChatEval's sign test per vote."""


def worker_sign_test(wins_a: np.ndarray, wins_b: np.ndarray) -> float:
    """Two-sided p that a pair's win rate among decisive votes is ½, clustered by worker: per worker their
    wins of a and of b; the rate p̂ = Σa / Σ(a + b), each worker's influence (a_w − p̂·(a_w + b_w)) / Σ(a + b),
    the sandwich variance G/(G − 1) Σ influence² over the G workers with a decisive vote, and
    (p̂ − ½) / SE against Student's t with G − 1 degrees of freedom (where SE is 0, every worker alike,
    the exact two-sided sign test over the G workers instead: never p = 0). A worker's votes share their taste,
    which the per-vote sign test takes as independent (measured: 17.7 % rejections of a true null at 5 %
    with worker tastes of sd 0.8, benchmarks/coverage.py). 1.0 without decisive votes, NaN with one worker."""
    decisive = wins_a + wins_b
    keep = decisive > 0
    total = float(decisive.sum())
    g = int(keep.sum())
    if total == 0:
        return 1.0
    if g < 2:
        return math.nan
    rate = float(wins_a.sum()) / total
    influence = (wins_a[keep] - rate * decisive[keep]) / total
    se = math.sqrt(g / (g - 1) * float((influence**2).sum()))
    if se == 0:
        # Every worker split their votes alike (typically all one way): the sandwich has no spread to
        # measure, and a t of infinity would claim p = 0. The exact sign test over the workers (each one
        # independent observation, the unit this test clusters on) says what such data can show.
        if rate == 0.5:
            return 1.0
        leaning_a = int((wins_a[keep] > wins_b[keep]).sum())
        return float(stats.binomtest(leaning_a, g, 0.5).pvalue)
    return float(2 * stats.t.sf(abs(rate - 0.5) / se, g - 1))


def pair_table(
    votes: pd.DataFrame,
    *,
    correction: Correction = DEFAULT_CORRECTION,
    resample: Resample = "worker",
    n_boot: int = 1000,
    seed: int = 0,
    test: str = "worker",
) -> pd.DataFrame:
    """Wins, ties, gain, its interval and a two-sided p that the pair's systems are equal, per unordered pair.

    gain = (wins_a − wins_b) / (wins_a + wins_b), ties excluded, NaN without decisive votes;
    p_value: with ``test="worker"`` (default) :func:`worker_sign_test`, clustered by worker; with
    ``"vote"`` ChatEval's exact sign test ``scipy.stats.binomtest(wins_a, wins_a + wins_b, 0.5)``, every
    vote independent; 1.0 without decisive votes; p_adjusted = p corrected over all pairs (``correction``: Bonferroni by default, Holm,
    none). gain_low / gain_high: expanded percentile 95 % interval from ``n_boot`` resamples of
    ``resample`` units (``worker`` default, ``item``, or ``vote`` = the naive bootstrap); where every
    decisive vote went one way, 2·(Wilson interval of the win rate) − 1 instead of a single point.
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
        if test == "worker":
            own = by_worker.loc[(first, second)]
            p = worker_sign_test(own[FIRST].to_numpy(float), own[SECOND].to_numpy(float))
        else:
            p = stats.binomtest(int(wins_a), decisive, 0.5).pvalue if decisive else 1.0
        rows.append(
            {
                "system_a": first,
                "system_b": second,
                "wins_a": int(wins_a),
                "wins_b": int(wins_b),
                "ties": int(ties),
                "gain": (wins_a - wins_b) / decisive if decisive else math.nan,
                "p_value": p,
            }
        )
    columns = ["system_a", "system_b", "wins_a", "wins_b", "ties", "gain", "p_value"]
    table = pd.DataFrame(rows, columns=columns).sort_values(["system_a", "system_b"], ignore_index=True)
    table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction)
    table["correction"] = correction
    table["gain_low"], table["gain_high"] = math.nan, math.nan
    table["interval_unit"] = resample
    if n_boot > 0 and len(table) and len(canon):
        weights, codes = _resample_weights(canon, resample, n_boot, np.random.default_rng([seed, 3]))
        first, second = canon["first"].to_numpy(), canon["second"].to_numpy()
        here = np.stack([(first == a) & (second == b) for a, b in zip(table["system_a"], table["system_b"])], axis=1)
        won = weights @ (here & (canon["outcome"] == FIRST).to_numpy()[:, None])
        lost = weights @ (here & (canon["outcome"] == SECOND).to_numpy()[:, None])
        with np.errstate(invalid="ignore", divide="ignore"):
            gain = (won - lost) / (won + lost)
        table["gain_low"], table["gain_high"] = bootstrap_interval(gain, clusters_per_column(codes, here))
    # All decisive votes one way: every resample gives the same gain, an interval of one point. The Wilson
    # interval of the win rate (as the win-rate tables use for n of n) says how far n votes can pin it.
    one_way = ((table["wins_a"] == 0) | (table["wins_b"] == 0)) & (table["wins_a"] + table["wins_b"] > 0)
    for i in np.flatnonzero(one_way.to_numpy()):
        low, high = wilson_interval(float(table["wins_a"].iat[i]), int(table["wins_a"].iat[i] + table["wins_b"].iat[i]))
        table.loc[i, ["gain_low", "gain_high"]] = 2 * low - 1, 2 * high - 1
    return table


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
) -> AnalysisResult:
    """METHODS §3 on read votes (:func:`~hitkit.protocols.pairwise.reading.read_votes`, whose duplicate
    reports ride in ``votes.attrs``): pair table, Bradley–Terry ranking, kappa and worker flags.

    ``correction`` applies to the sign tests, ``resample`` is the unit the bootstrap of the
    Bradley–Terry intervals and the gain intervals resamples (workers by default); both are recorded
    in the summary, with the warnings of :func:`data_warnings`.
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
        "interval_unit": resample,
        "interval_method": INTERVAL_METHOD,
        "duplicates": duplicate_report,
        "assignment_duplicates": assignment_report,
        **counts,
        "warnings": lines,
    }
    result = AnalysisResult(
        tables={
            "pairs": pair_table(votes, correction=correction, resample=resample, n_boot=n_boot, seed=seed, test=test),
            "ranking": ranking,
            "workers": worker_agreement(votes),
        },
        summary=summary,
        figures={"ranking": png(lambda: figures.ranking(ranking))},
    )
    attach(result, *evidence(votes, ranking, n_boot=n_boot, seed=seed))
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
) -> AnalysisResult:
    """:func:`analyze_votes` on the votes of ``in_dir`` (``duplicates``: the policy for repeated rows,
    :func:`~hitkit.protocols.pairwise.reading.read_votes`)."""
    check_correction(correction)
    votes = read_votes(in_dir, duplicates=duplicates)
    if votes.empty:
        raise InputError(
            Path(in_dir) / "votes.csv", "no votes from submitted or approved assignments; nothing to analyse"
        )
    result = analyze_votes(votes, n_boot=n_boot, seed=seed, correction=correction, resample=resample, test=test)
    judge_path = Path(in_dir) / "judge.csv"
    if judge_path.is_file() or judge_path.with_suffix(".parquet").is_file():
        add_judge(result, votes, read_judge(judge_path))
    return result


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
        in_dir, seed=seed, resample=options.get("cluster", "worker"), test=options.get("unit", "worker"), **common
    )


def worker_qc(tables: dict[str, pd.DataFrame], config=None) -> tuple[str, dict[str, bool]] | None:
    """Which workers pass quality control so far (the dashboard's and the QC policy's check): those
    :func:`worker_agreement` does not flag; None before any vote."""
    votes = tables["votes"]
    if votes.empty:
        return None
    agreement = worker_agreement(votes)
    return (
        "agrees with the other workers' majority (not flagged, p ≥ 0.05)",
        {str(w): not bool(f) for w, f in zip(agreement["worker_id"], agreement["flagged"])},
    )
