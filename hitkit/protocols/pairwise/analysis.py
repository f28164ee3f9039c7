"""Pairwise A/B (ChatEval, Sedoc et al. 2019): METHODS §3.

Reads ``votes.csv`` (and ``assignments.csv`` when present) from one folder (METHODS §4) and returns
an :class:`~hitkit.analysis.base.AnalysisResult` with these tables (column contract v1):

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
import warnings
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.base import AnalysisResult, common_options, png
from hitkit.analysis.inference import (DEFAULT_CORRECTION, DEFAULT_DUPLICATES, INTERVAL_METHOD,
                                       Correction, DuplicatePolicy, adjust, apply_duplicate_policy,
                                       bootstrap_interval, check_correction, cluster_codes,
                                       cluster_weights, clusters_per_column, duplicate_warnings)
from hitkit.analysis.ranking import RANK_DECIMALS
from hitkit.analysis.tables import ASSIGNMENT_DUPLICATES, keep_counted, read_table
from hitkit.errors import InputError
from hitkit.protocols.pairwise import figures
from hitkit.protocols.pairwise.votes import VOTE_COLUMNS, VOTES

Ties = Literal["half", "drop"]
Resample = Literal["vote", "worker", "item"]
RESAMPLE_UNITS: tuple[str, ...] = ("vote", "worker", "item")
# A worker who cast more than this share of a run's votes dominates it (a warning).
DOMINANT_SHARE = 0.5
# Kappa below this reads as agreement near chance (a warning).
NEAR_CHANCE_KAPPA = 0.2

FIRST, TIE, SECOND = 0, 1, 2



def read_votes(in_dir: str | Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES
               ) -> pd.DataFrame:
    """Read and check ``votes.csv``; keep only votes of submitted or approved assignments.

    Two votes of one assignment on the same item and pair are an export's repeat, resolved by
    ``duplicates`` (first by default; last, drop, error) with a warning that counts them; the
    report is in ``table.attrs["duplicates"]``; repeated rows of ``assignments.csv`` get the same
    policy (``table.attrs["assignment_duplicates"]``). (One worker voting on the same item in two
    assignments is kept, and counted by :func:`data_warnings`.)

    Without ``assignments.csv`` every vote counts. ``vote`` is normalised to lower case. Raises
    :class:`~hitkit.errors.InputError` naming the file (and line) for a missing file or column,
    a vote other than a/b/tie, an empty id or system, the same system on both sides, or a vote
    whose assignment is not in ``assignments.csv``.
    """
    in_dir = Path(in_dir)
    path = in_dir / "votes.csv"
    table = read_table(path, VOTE_COLUMNS)
    for column in ("worker_id", "item_id", "system_a", "system_b"):
        empty = table.index[table[column].str.strip() == ""]
        if len(empty):
            raise InputError(path, f"{column} is empty; every vote needs one",
                             line=int(empty[0]) + 2)
    vote = table["vote"].str.strip().str.lower()
    bad = table.index[~vote.isin(VOTES)]
    if len(bad):
        i = bad[0]
        raise InputError(path, f"vote {table.at[i, 'vote']!r} is not one of a, b, tie",
                         line=int(i) + 2)
    same = table.index[table["system_a"] == table["system_b"]]
    if len(same):
        i = same[0]
        raise InputError(path, f"system_a and system_b are both {table.at[i, 'system_a']!r}; a "
                         "vote compares two different systems", line=int(i) + 2)
    table["vote"] = vote
    pair_key = np.where(table["system_a"] < table["system_b"],
                        table["system_a"] + "\x00" + table["system_b"],
                        table["system_b"] + "\x00" + table["system_a"])
    table["_pair"] = pair_key
    table, report = apply_duplicate_policy(table, ["study", "assignment_id", "item_id", "_pair"],
                                           duplicates, what="vote (same assignment, item, pair)",
                                           source=path)
    table = keep_counted(table.drop(columns="_pair"), in_dir, path, duplicates=duplicates)
    extra = [c for c in table.columns if c not in VOTE_COLUMNS]
    out = table[list(VOTE_COLUMNS) + extra].reset_index(drop=True)
    out.attrs["duplicates"] = report
    out.attrs["assignment_duplicates"] = table.attrs["assignment_duplicates"]
    return out


def _canonical(votes: pd.DataFrame, *columns: str) -> pd.DataFrame:
    """Votes as first, second (sorted system names) and outcome (FIRST / TIE / SECOND)."""
    needed = ("system_a", "system_b", "vote") + columns
    missing = [c for c in needed if c not in votes.columns]
    if missing:
        raise InputError("votes", f"missing column(s) {missing}; expected {list(VOTE_COLUMNS)}")
    a = votes["system_a"].astype(str).to_numpy()
    b = votes["system_b"].astype(str).to_numpy()
    vote = votes["vote"].astype(str).str.strip().str.lower().to_numpy()
    bad = np.flatnonzero(~np.isin(vote, VOTES))
    if len(bad):
        raise InputError("votes", f"row {votes.index[bad[0]]!r}: vote "
                         f"{votes['vote'].iloc[bad[0]]!r} is not one of a, b, tie")
    same = np.flatnonzero(a == b)
    if len(same):
        raise InputError("votes", f"row {votes.index[same[0]]!r}: system_a and system_b are both "
                         f"{a[same[0]]!r}")
    swapped = a > b
    outcome = np.where(vote == "tie", TIE, np.where(vote == "a", FIRST, SECOND))
    # A pair displayed in reverse order: "a" preferred the system that sorts second.
    outcome = np.where(swapped & (outcome != TIE), 2 - outcome, outcome)
    out = pd.DataFrame({"first": np.where(swapped, b, a), "second": np.where(swapped, a, b),
                        "outcome": outcome})
    for column in columns:
        out[column] = votes[column].astype(str).to_numpy()
    return out


def _item_columns(votes: pd.DataFrame) -> tuple[str, ...]:
    return ("study", "item_id") if "study" in votes.columns else ("item_id",)


def pair_table(votes: pd.DataFrame, *, correction: Correction = DEFAULT_CORRECTION,
               resample: Resample = "worker", n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Wins, ties, gain, its interval and two-sided exact sign-test p per unordered pair.

    gain = (wins_a − wins_b) / (wins_a + wins_b), ties excluded, NaN without decisive votes;
    p_value = ``scipy.stats.binomtest(wins_a, wins_a + wins_b, 0.5)``, 1.0 without decisive
    votes; p_adjusted = p corrected over all pairs (``correction``: Bonferroni by default, Holm,
    none). gain_low / gain_high: expanded percentile 95 % interval from ``n_boot`` resamples of
    ``resample`` units (``worker`` default, ``item``, or ``vote`` = the naive bootstrap).
    """
    check_correction(correction)
    keys = [c for c in ("study", "item_id", "worker_id") if c in votes.columns]
    canon = _canonical(votes, *keys)
    counts = (pd.crosstab([canon["first"], canon["second"]], canon["outcome"])
              .reindex(columns=[FIRST, SECOND, TIE], fill_value=0))
    rows = []
    for (first, second), (wins_a, wins_b, ties) in zip(counts.index, counts.to_numpy()):
        decisive = int(wins_a + wins_b)
        rows.append({
            "system_a": first, "system_b": second,
            "wins_a": int(wins_a), "wins_b": int(wins_b), "ties": int(ties),
            "gain": (wins_a - wins_b) / decisive if decisive else math.nan,
            "p_value": stats.binomtest(int(wins_a), decisive, 0.5).pvalue if decisive else 1.0,
        })
    columns = ["system_a", "system_b", "wins_a", "wins_b", "ties", "gain", "p_value"]
    table = pd.DataFrame(rows, columns=columns).sort_values(["system_a", "system_b"],
                                                            ignore_index=True)
    table["p_adjusted"] = adjust(table["p_value"].to_numpy(), correction)
    table["correction"] = correction
    table["gain_low"], table["gain_high"] = math.nan, math.nan
    table["interval_unit"] = resample
    if n_boot > 0 and len(table) and len(canon):
        weights, codes = _resample_weights(canon, resample, n_boot, np.random.default_rng([seed, 3]))
        first, second = canon["first"].to_numpy(), canon["second"].to_numpy()
        here = np.stack([(first == a) & (second == b)
                         for a, b in zip(table["system_a"], table["system_b"])], axis=1)
        won = weights @ (here & (canon["outcome"] == FIRST).to_numpy()[:, None])
        lost = weights @ (here & (canon["outcome"] == SECOND).to_numpy()[:, None])
        with np.errstate(invalid="ignore", divide="ignore"):
            gain = (won - lost) / (won + lost)
        table["gain_low"], table["gain_high"] = bootstrap_interval(gain, clusters_per_column(codes, here))
    return table


def _resample_weights(canon: pd.DataFrame, resample: str, n_boot: int,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """[n_boot, n_votes] counts of each vote in each resample of ``resample`` units, and each
    vote's unit (cluster code)."""
    if resample not in RESAMPLE_UNITS:
        raise ValueError(f"resample={resample!r}; use one of {', '.join(RESAMPLE_UNITS)}")
    if resample == "vote":
        labels = np.arange(len(canon))
    elif resample == "worker":
        labels = canon["worker_id"].astype(str).to_numpy()
    else:
        item = canon["item_id"].astype(str)
        labels = ((canon["study"].astype(str) + "/" + item) if "study" in canon.columns
                  else item).to_numpy()
    codes, n_clusters = cluster_codes(labels)
    return cluster_weights(codes, n_clusters, n_boot, rng), codes


def _fit_bradley_terry(wins: np.ndarray, prior: float, tol: float = 1e-10,
                       max_iter: int = 100_000) -> np.ndarray:
    """Centred log-strengths for a batch of win matrices ``wins[..., i, j]`` (i beat j), by MM.

    Hunter's (2004) minorise–maximise update p_i ← W_i / Σ_j n_ij / (p_i + p_j), where each pair
    first gets ``prior`` virtual games split evenly (``prior / 2`` wins each way). Every update
    increases the penalised likelihood, and the prior makes its maximum unique and finite.
    """
    k = wins.shape[-1]
    off_diagonal = 1.0 - np.eye(k)
    w = wins + off_diagonal * (prior / 2)
    games = w + np.swapaxes(w, -1, -2)
    won = w.sum(axis=-1)
    log_p = np.zeros(wins.shape[:-1])
    for _ in range(max_iter):
        p = np.exp(log_p)
        denominator = (games / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
        new = np.log(won / denominator)
        new -= new.mean(axis=-1, keepdims=True)
        change = np.max(np.abs(new - log_p))
        log_p = new
        if change < tol:
            return log_p
    warnings.warn(f"Bradley–Terry fit stopped after {max_iter} iterations (last change "
                  f"{change:.2g}); a larger prior makes it converge faster", RuntimeWarning)
    return log_p


def bradley_terry(votes: pd.DataFrame, n_boot: int = 1000, seed: int = 0, ties: Ties = "half",
                  prior: float = 1.0, resample: Resample = "vote") -> pd.DataFrame:
    """Bradley–Terry scores with 95 % bootstrap intervals, one row per system by rank.

    score = natural log-strength centred to mean 0, so P(i beats j) = 1 / (1 + e^(s_j − s_i)).
    Fitted by Hunter's MM algorithm with a symmetric prior: every pair of systems gets ``prior``
    virtual tied games (half a win each way; default one game), which shrinks scores slightly
    towards 0 and keeps a system that never loses finite. ``ties="half"`` counts a tie as half a
    win to each side, ``ties="drop"`` leaves ties out. The bootstrap resamples the (remaining) vote
    rows with replacement ``n_boot`` times with ``numpy.random.default_rng(seed)``, drawn as
    multinomial counts over the distinct (pair, outcome) cells, which has exactly the distribution
    of resampled rows (``resample="vote"``). ``resample="worker"`` or ``"item"`` resamples whole
    workers or items with all their votes instead (the clustered bootstrap of METHODS §2b; the
    analysis defaults to workers). The interval is the expanded percentile interval of
    :func:`~hitkit.analysis.inference.bootstrap_interval` for the number of units resampled.
    rank 1 = highest score; equal scores share the lower rank (method "min"). With ``n_boot=0``
    the interval is NaN.
    """
    if resample not in RESAMPLE_UNITS:
        raise ValueError(f"resample={resample!r}; use one of {', '.join(RESAMPLE_UNITS)}")
    if ties not in ("half", "drop"):
        raise ValueError(f"ties={ties!r}; use 'half' or 'drop'")
    if not prior > 0:
        raise ValueError(f"prior={prior!r}; it must be > 0 so that every score is finite")
    if n_boot < 0:
        raise ValueError(f"n_boot={n_boot!r}; use 0 (no intervals) or more")
    keys = [c for c in ("study", "item_id", "worker_id") if c in votes.columns]
    canon = _canonical(votes, *keys)
    systems = sorted(set(canon["first"]) | set(canon["second"]))
    if not systems:
        raise InputError("votes", "no votes to rank; check that some assignments count")
    if ties == "drop":
        canon = canon[canon["outcome"] != TIE]
    index = {s: i for i, s in enumerate(systems)}
    k = len(systems)
    cells = canon.groupby(["first", "second", "outcome"]).size()
    first = np.array([index[f] for f, _, _ in cells.index], dtype=int)
    second = np.array([index[s] for _, s, _ in cells.index], dtype=int)
    outcome = np.array([o for _, _, o in cells.index], dtype=int)
    # What one vote of each cell adds to the win matrix, flattened to k * k.
    effect = np.zeros((len(cells), k * k))
    rows = np.arange(len(cells))
    effect[rows, first * k + second] += np.select([outcome == FIRST, outcome == TIE], [1.0, 0.5])
    effect[rows, second * k + first] += np.select([outcome == SECOND, outcome == TIE], [1.0, 0.5])
    counts = cells.to_numpy().astype(float)
    score = _fit_bradley_terry((counts @ effect).reshape(k, k), prior)

    ci_low = ci_high = np.full(k, math.nan)
    n = int(counts.sum())
    if n_boot > 0 and n > 0:
        rng = np.random.default_rng(seed)
        if resample == "vote":
            resampled = rng.multinomial(n, counts / n, size=n_boot).astype(float)
            n_units = n
        else:
            # Each vote's cell, then each resample's cell counts from its cluster weights.
            cell_of = pd.Series(np.arange(len(cells)), index=cells.index)
            cell = cell_of.loc[list(zip(canon["first"], canon["second"], canon["outcome"]))]
            onehot = np.zeros((len(canon), len(cells)))
            onehot[np.arange(len(canon)), cell.to_numpy()] = 1.0
            weights, codes = _resample_weights(canon, resample, n_boot, rng)
            resampled = weights @ onehot
            n_units = int(codes.max()) + 1
        boot = _fit_bradley_terry((resampled @ effect).reshape(n_boot, k, k), prior)
        # Every unit informs every score (through the common scale), so all units count.
        ci_low, ci_high = bootstrap_interval(boot, n_units)
    elif n_boot > 0:
        # No decisive votes left: every resample is the prior alone, all scores 0.
        ci_low = ci_high = np.zeros(k)
    table = pd.DataFrame({"system": systems, "score": score, "ci_low": ci_low,
                          "ci_high": ci_high})
    table["rank"] = (-table["score"].round(RANK_DECIMALS)).rank(method="min").astype(int)
    return table.sort_values(["rank", "system"], ignore_index=True)


def _ordered_pair_counts(categories: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """3×3 counts of ordered pairs of distinct votes within each group of ``keys``, summed."""
    c = (pd.crosstab([categories[k] for k in keys], categories["outcome"])
         .reindex(columns=[FIRST, TIE, SECOND], fill_value=0).to_numpy().astype(float))
    # Σ over groups of c cᵀ counts every ordered pair of votes; the diagonal term removes
    # each vote paired with itself.
    return c.T @ c - np.diag(c.sum(axis=0))


def cohen_weighted_kappa(votes: pd.DataFrame) -> float:
    """Cohen's weighted kappa (linear weights, ties included) between workers on the same item/pair.

    Votes are put on the ordinal scale prefer-first-system / tie / prefer-second-system (systems
    sorted by name, whatever the display order). Every two votes by different workers on the same
    item and the same pair of systems make one pair of ratings, counted in both orders so the table
    is symmetric and no worker is arbitrarily "rater 1" (chance agreement then uses the pooled
    marginals). Weights 1 − |i − j| / 2. NaN without such pairs or when every vote is in one
    category (chance agreement 1).
    """
    keys = list(_item_columns(votes)) + ["worker_id"]
    canon = _canonical(votes, *keys)
    item = list(_item_columns(votes)) + ["first", "second"]
    if canon.empty:
        return math.nan
    # Pairs of votes within an item/pair, less those where one worker voted twice.
    table = (_ordered_pair_counts(canon, item)
             - _ordered_pair_counts(canon, item + ["worker_id"]))
    total = table.sum()
    if total <= 0:
        return math.nan
    levels = np.arange(3)
    weight = 1.0 - np.abs(levels[:, None] - levels[None, :]) / 2
    observed = (weight * table).sum() / total
    marginal = table.sum(axis=1) / total
    expected = marginal @ weight @ marginal
    if np.isclose(expected, 1.0):
        return math.nan
    return float((observed - expected) / (1.0 - expected))


def worker_agreement(votes: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """Per worker: agreement with the other workers' majority and a test flagging low agreement.

    For each vote, the other workers' votes on the same item and pair (canonical orientation) have
    a majority when one outcome has more than half of them; ``compared`` counts the worker's votes
    that have one and ``agree_with_majority`` is the share of those the worker matched.

    Chance is the disagreement an ordinary worker shows by chance: ``expected_by_chance`` is the
    pooled agreement rate of all *other* workers (their agreed / their compared votes). A fixed
    1/3 would not do: a worker voting uniformly at random agrees with any majority 1/3 of the time,
    so they would never fall below it. ``p_value`` is the one-sided exact binomial test
    ``binomtest(agreed, compared, expected_by_chance, alternative="less")``; ``flagged`` is
    p_value < alpha. A worker with nothing to compare gets NaN and is not flagged. Among workers
    who all behave alike about ``alpha`` of them are flagged, so a flag asks for a look at the
    worker's votes rather than for rejection.
    """
    items = list(_item_columns(votes))
    canon = _canonical(votes, *items, "worker_id")
    group = items + ["first", "second"]
    one_hot = pd.get_dummies(canon["outcome"]).reindex(columns=[FIRST, TIE, SECOND],
                                                       fill_value=False).astype(int)
    keyed = pd.concat([canon[group + ["worker_id"]], one_hot], axis=1)
    outcomes = [FIRST, TIE, SECOND]
    in_group = keyed.groupby(group)[outcomes].transform("sum").to_numpy()
    own = keyed.groupby(group + ["worker_id"])[outcomes].transform("sum").to_numpy()
    others = in_group - own
    n_others = others.sum(axis=1)
    has_majority = others.max(axis=1) * 2 > n_others
    agreed = has_majority & (others.argmax(axis=1) == canon["outcome"].to_numpy())
    per = (pd.DataFrame({"worker_id": canon["worker_id"], "compared": has_majority,
                         "agreed": agreed})
           .groupby("worker_id", sort=True)
           .agg(votes=("compared", "size"), compared=("compared", "sum"), agreed=("agreed", "sum"))
           .reset_index())
    total_compared, total_agreed = per["compared"].sum(), per["agreed"].sum()
    rows = []
    for worker, n_votes, compared, agreed_n in per.itertuples(index=False):
        rest = total_compared - compared
        expected = (total_agreed - agreed_n) / rest if rest else math.nan
        if compared and not math.isnan(expected):
            p = stats.binomtest(int(agreed_n), int(compared), expected, alternative="less").pvalue
        else:
            p = math.nan
        rows.append({"worker_id": worker, "votes": int(n_votes), "compared": int(compared),
                     "agree_with_majority": agreed_n / compared if compared else math.nan,
                     "expected_by_chance": expected, "p_value": p,
                     "flagged": bool(p < alpha)})
    columns = ["worker_id", "votes", "compared", "agree_with_majority", "expected_by_chance",
               "p_value", "flagged"]
    return pd.DataFrame(rows, columns=columns)


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
    keys = list(_item_columns(votes)) + ["worker_id"]
    canon = _canonical(votes, *keys)
    repeated = int(canon.duplicated(keys + ["first", "second"]).sum())
    share = float(votes["worker_id"].value_counts(normalize=True).iloc[0]) if len(votes) else 0.0
    lines = []
    if repeated:
        lines.append(f"{repeated} vote(s) repeat a worker's earlier vote on the same item and "
                     "pair (in another assignment); they are counted, but they are not "
                     "independent judgements")
    if share > DOMINANT_SHARE:
        lines.append(f"one worker cast {share:.0%} of the votes; the results mostly say what "
                     "that worker thinks (the worker-clustered intervals account for it)")
    if not math.isnan(kappa) and kappa < NEAR_CHANCE_KAPPA:
        lines.append(f"agreement is near chance (weighted kappa {kappa:.2f} < "
                     f"{NEAR_CHANCE_KAPPA})")
    return {"repeated_votes": repeated, "top_worker_share": share}, lines


def analyze_pairwise(in_dir: str | Path, *, n_boot: int = 1000, seed: int = 0,
                     correction: Correction = DEFAULT_CORRECTION, resample: Resample = "worker",
                     duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> AnalysisResult:
    """Run METHODS §3 on ``in_dir``: pair table, Bradley–Terry ranking, kappa and worker flags.

    ``correction`` applies to the sign tests, ``resample`` is the unit the bootstrap of the
    Bradley–Terry intervals and the gain intervals resamples (workers by default), ``duplicates``
    the policy for repeated rows (:func:`read_votes`); all recorded in the summary, with the
    warnings of :func:`data_warnings`.
    """
    check_correction(correction)
    votes = read_votes(in_dir, duplicates=duplicates)
    duplicate_report = votes.attrs.get("duplicates", {})
    if votes.empty:
        raise InputError(Path(in_dir) / "votes.csv", "no votes from submitted or approved "
                         "assignments; nothing to analyse")
    ranking = bradley_terry(votes, n_boot=n_boot, seed=seed, resample=resample)
    kappa = cohen_weighted_kappa(votes)
    counts, lines = data_warnings(votes, kappa)
    assignment_report = votes.attrs.get("assignment_duplicates")
    lines[:0] = duplicate_warnings([("vote key(s) (assignment, item, pair)", duplicate_report),
                                    (ASSIGNMENT_DUPLICATES, assignment_report)])
    summary = {
        "votes": len(votes),
        "ties": int((votes["vote"] == "tie").sum()),
        "workers": int(votes["worker_id"].nunique()),
        "items": len(votes[list(_item_columns(votes))].drop_duplicates()),
        "systems": len(ranking),
        "kappa": _json_float(kappa),
        "seed": seed,
        "n_boot": n_boot,
        "multiple_comparisons": correction,
        "interval_unit": resample,
        "interval_method": INTERVAL_METHOD,
        "duplicates": duplicate_report,
        "assignment_duplicates": assignment_report,
        **counts,
        "warnings": lines,
    }
    return AnalysisResult(
        tables={"pairs": pair_table(votes, correction=correction, resample=resample,
                                    n_boot=n_boot, seed=seed),
                "ranking": ranking, "workers": worker_agreement(votes)},
        summary=summary,
        figures={"ranking": png(lambda: figures.ranking(ranking))})


def analyze(in_dir: str | Path, *, seed: int, config=None, options: dict, replicate_dir=None,
            stability: bool = False) -> AnalysisResult:
    """The registry's entry point: :func:`analyze_pairwise` with ``hitkit analyze``'s options."""
    common = common_options(options)
    return analyze_pairwise(in_dir, seed=seed, resample=options.get("cluster", "worker"), **common)


def worker_qc(tables: dict[str, pd.DataFrame], config=None) -> tuple[str, dict[str, bool]] | None:
    """Which workers pass quality control so far (the dashboard's and the QC policy's check): those
    :func:`worker_agreement` does not flag; None before any vote."""
    votes = tables["votes"]
    if votes.empty:
        return None
    agreement = worker_agreement(votes)
    return ("agrees with the other workers' majority (not flagged, p ≥ 0.05)",
            {str(w): not bool(f) for w, f in zip(agreement["worker_id"], agreement["flagged"])})
