"""Ranking k responses (METHODS.md §7): Plackett–Luce strengths with worker-clustered bootstrap intervals,
the pairwise win rates the rankings imply, and quality control by degraded copies ranked last.

Reads ``assignments.csv`` and ``rankings.csv`` from one folder. A *ranking* is one assignment's order of
one prompt's responses. Tables (column contract v1):

- ``workers``: worker_id, rankings, degraded, degraded_last, expected_last, p_value, qc: each worker's
  degraded copies ranked strictly below every intact response of their prompt, against chance (the
  copy's place uniform over the responses shown), by the exact one-sided Poisson-binomial test; ``qc``
  passed (p < α), failed, or not judged (no degraded copy). Rankings of failed workers are left out.
- ``ranking``: system, score, ci_low, ci_high, rank, rankings: Plackett–Luce log-strength (centred to
  mean 0; :mod:`hitkit.analysis.plackett_luce`, ties broken into both orders at half weight each) of the
  intact responses, with the expanded percentile 95 % interval of a bootstrap of workers (or rankings).
- ``implied_pairs``: system_a, system_b, wins_a, wins_b, ties, comparisons, win_rate, ci_low, ci_high,
  pl_probability: per pair of systems ranked together, how often a was put above b (ties ½) with the same
  bootstrap's interval, beside the probability the fitted strengths give, e^a / (e^a + e^b).
- ``agreement``, ``fragility`` and gold columns of ``workers`` (:func:`hitkit.analysis.evidence.attach`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis import plackett_luce as pl
from hitkit.analysis.agreement import agreement_rows, scopes, worker_agreement
from hitkit.analysis.base import AnalysisResult, common_options, png
from hitkit.analysis.evidence import attach
from hitkit.analysis.fragility import refit_fragility
from hitkit.analysis.gold import gold_accuracy
from hitkit.analysis.inference import (
    DEFAULT_DUPLICATES,
    INTERVAL_METHOD,
    DuplicatePolicy,
    apply_duplicate_policy,
    bootstrap_interval,
    cluster_codes,
    cluster_weights,
    duplicate_warnings,
)
from hitkit.analysis.ranking import compared_ranks
from hitkit.analysis.tables import counted, keep_counted, read_assignments, read_table
from hitkit.errors import InputError
from hitkit.protocols.ranking.settings import COLUMNS, TABLE
from hitkit.report import matrices, plots

RANKING = ["assignment_id", "item_id"]
"""The columns that name one ranking."""
TIES = "each tie broken into every order of the tied responses, each order weighing equally (½ for two)"
PAIR_COLUMNS = (
    "system_a",
    "system_b",
    "wins_a",
    "wins_b",
    "ties",
    "comparisons",
    "win_rate",
    "ci_low",
    "ci_high",
    "pl_probability",
)
QC_TEST = "exact one-sided Poisson-binomial test of degraded copies ranked last against chance"


def read_rankings(in_dir: str | Path, *, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.DataFrame:
    """Read and check ``rankings.csv`` (whole ranks from 1, is_control 0/1), keeping the counted
    assignments' rows; a repeated row is resolved by ``duplicates``."""
    path = Path(in_dir) / f"{TABLE}.csv"
    table = read_table(path, COLUMNS)[list(COLUMNS)]
    rank = pd.to_numeric(table["rank"], errors="coerce")
    control = table["is_control"].astype(str).str.strip().str.lower()
    for bad, why in (
        (rank.isna() | (rank < 1) | (rank % 1 != 0), "has a rank that is not a whole number from 1"),
        (~control.isin(["0", "1", "true", "false"]), "has an is_control that is not 0 or 1"),
    ):
        if bad.any():
            raise InputError(path, f"this row {why}", line=int(bad.to_numpy().nonzero()[0][0]) + 2)
    table = table.assign(rank=rank.astype(int), is_control=control.isin(["1", "true"]))
    table, report = apply_duplicate_policy(
        table, [*RANKING, "system", "is_control"], duplicates, what="ranked response", source=path
    )
    table = keep_counted(table, in_dir, path, duplicates=duplicates)
    table.attrs["duplicates"] = report
    return table


def poisson_binomial_tail(hits: int, chances: np.ndarray) -> float:
    """P(at least ``hits`` successes) of independent trials with success probabilities ``chances``."""
    dist = np.ones(1)
    for p in chances:
        dist = np.convolve(dist, [1 - p, p])
    return float(min(1.0, dist[hits:].sum()))


def qc_table(table: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """The ``workers`` table's QC columns (module docstring), one row per worker."""
    lowest_intact = table[~table["is_control"]].groupby(RANKING)["rank"].max().rename("lowest")
    shown = table.groupby(RANKING).size().rename("n_shown")
    copies = table[table["is_control"]].join(lowest_intact, on=RANKING).join(shown, on=RANKING)
    copies = copies.assign(correct=copies["rank"] > copies["lowest"], chance=1.0 / copies["n_shown"])
    rows = []
    for worker, own in table.groupby("worker_id", sort=True):
        mine = copies[copies["worker_id"] == worker]
        last = int(mine["correct"].sum())
        p = poisson_binomial_tail(last, mine["chance"].to_numpy()) if len(mine) else np.nan
        verdict = "not judged" if not len(mine) else ("passed" if p < alpha else "failed")
        n = len(own[RANKING].drop_duplicates())
        rows.append((worker, n, len(mine), last, float(mine["chance"].sum()), p, verdict))
    columns = ["worker_id", "rankings", "degraded", "degraded_last", "expected_last", "p_value", "qc"]
    out = pd.DataFrame(rows, columns=columns)
    out.attrs["copies"] = copies
    return out


def rankings_of(intact: pd.DataFrame, systems: list[str]) -> tuple[pd.DataFrame, list[pl.Ranking]]:
    """(one row per ranking: its worker and item; its tie groups of system indices, best first)."""
    index = {s: i for i, s in enumerate(systems)}
    keys: list[tuple[str, str]] = []
    groups: list[pl.Ranking] = []
    for (_assignment, item), rows in intact.groupby(RANKING, sort=True):
        keys.append((rows["worker_id"].iloc[0], item))
        by_rank = rows.groupby("rank", sort=True)["system"]
        groups.append([[index[s] for s in part] for _, part in by_rank])
    return pd.DataFrame(keys, columns=["worker_id", "item_id"]), groups


def fitted(
    intact: pd.DataFrame, *, n_boot: int, seed: int, unit: str, alpha: float = pl.ALPHA
) -> tuple[pd.DataFrame, pd.DataFrame, pl.Stages, list[str]]:
    """(``ranking``, ``implied_pairs``, the stages, the systems) of the intact responses' rankings."""
    systems = sorted(intact["system"].unique())
    keys, groups = rankings_of(intact, systems)
    data = pl.stages(groups, len(systems))
    score = pl.fit(data.weights.sum(axis=0), data, alpha)[0]
    wins, met = pl.above(groups, len(systems))
    k, labels = len(systems), keys["worker_id"] if unit == "worker" else np.arange(len(keys))
    codes, n_clusters = cluster_codes(labels)
    seen = np.zeros((n_clusters, k * k))
    np.add.at(seen, codes, met.reshape(len(keys), -1))
    clusters = (seen > 0).sum(axis=0)  # the clusters that ranked each pair
    weights = cluster_weights(codes, n_clusters, n_boot, np.random.default_rng(seed)).astype(float)
    boot = pl.fit(weights @ data.weights, data, alpha) if n_boot else np.empty((0, k))
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = (weights @ wins.reshape(len(keys), -1)) / (weights @ met.reshape(len(keys), -1))
    low, high = bootstrap_interval(boot, n_clusters) if n_boot else (np.full(k, np.nan),) * 2
    r_low, r_high = bootstrap_interval(rates, clusters) if n_boot else (np.full(k * k, np.nan),) * 2
    ranking = pd.DataFrame({"system": systems, "score": score, "ci_low": low, "ci_high": high})
    ranking["rank"] = compared_ranks(score, met.sum(axis=0) > 0)
    ranking["rankings"] = [sum(any(i in g for g in r) for r in groups) for i in range(k)]
    strict, tied, total = (wins == 1).sum(axis=0), (wins == 0.5).sum(axis=0), met.sum(axis=0)
    rate = wins.sum(axis=0) / np.where(total > 0, total, 1)
    pairs = pd.DataFrame(
        [
            (systems[i], systems[j], int(strict[i, j]), int(strict[j, i]), int(tied[i, j]), int(total[i, j]))
            + (rate[i, j], r_low[i * k + j], r_high[i * k + j], 1 / (1 + np.exp(score[j] - score[i])))
            for i in range(k)
            for j in range(i + 1, k)
            if total[i, j]
        ],
        columns=list(PAIR_COLUMNS),
    )
    return ranking.sort_values(["rank", "system"], ignore_index=True), pairs, data, systems


def evidence(intact: pd.DataFrame, ranking: pd.DataFrame, data: pl.Stages, systems: list[str], **boot):
    """(agreement rows, fragility rows, per-worker agreement) of the intact responses: ordinal alpha of
    each response's place among its prompt's intact responses (unit: prompt × system), and the rankings
    whose removal would flip adjacent systems, refitted with the ranking's own fit."""
    frame = intact.assign(place=intact.groupby(RANKING)["rank"].rank(method="min"))
    unit = ["item_id", "system"]
    agreement = agreement_rows(
        scopes(frame, ["system"]), measure="place", level="ordinal", unit=unit, coder="worker_id", value="place", **boot
    )
    workers = worker_agreement(frame, level="ordinal", unit=unit, coder="worker_id", value="place")
    score = ranking.set_index("system").loc[systems, "score"].to_numpy()
    fragility = refit_fragility(
        systems,
        list(ranking["system"]),
        pl.influence(data, score),
        lambda keep: pl.fit(keep.astype(float) @ data.weights, data),
        ranking="Plackett–Luce score",
    )
    return agreement, fragility, workers


def analyze_rankings(
    assignments: pd.DataFrame,
    table: pd.DataFrame,
    *,
    alpha: float = 0.05,
    n_boot: int = 1000,
    seed: int = 0,
    interval_unit: str = "worker",
    correction: str | None = None,
) -> AnalysisResult:
    """The steps of the module docstring on tables already read (duplicate reports in ``table.attrs``);
    every choice is recorded in the summary. ``correction`` is accepted for the shared options and unused:
    no test here is corrected for multiple comparisons (intervals only)."""
    if interval_unit not in ("worker", "ranking"):
        raise ValueError(f"interval_unit={interval_unit!r}; use worker or ranking")
    workers = qc_table(table, alpha)
    failed = set(workers.loc[workers["qc"] == "failed", "worker_id"])
    intact = table[~table["is_control"] & ~table["worker_id"].isin(failed)]
    if intact.empty:
        raise InputError(f"{TABLE}.csv", "no ranking of intact responses by a worker who passed QC; nothing to rank")
    ranking, pairs, data, systems = fitted(intact, n_boot=n_boot, seed=seed, unit=interval_unit)
    reports = [("ranked response(s)", table.attrs.get("duplicates", {}))]
    summary = {
        "workers": len(workers),
        "passed": int((workers["qc"] == "passed").sum()),
        "failed": len(failed),
        "not_judged": int((workers["qc"] == "not judged").sum()),
        "assignments": len(assignments),
        "rankings": len(intact[RANKING].drop_duplicates()),
        "tied_rankings": int(intact.groupby(RANKING)["rank"].agg(lambda r: r.duplicated().any()).sum()),
        "items": int(intact["item_id"].nunique()),
        "systems": len(systems),
        "degraded": int(workers["degraded"].sum()),
        "alpha": alpha,
        "qc_test": QC_TEST,
        "model": "Plackett–Luce (MM fixed point of choix's ILSR)",
        "regularisation": pl.ALPHA,
        "ties_method": TIES,
        "n_boot": n_boot,
        "seed": seed,
        "interval_unit": interval_unit,
        "interval_method": INTERVAL_METHOD,
        "duplicates": reports[0][1],
        "warnings": duplicate_warnings(reports),
    }
    result = AnalysisResult(
        tables={"ranking": ranking, "implied_pairs": pairs, "workers": workers},
        summary=summary,
        figures={"ranking": png(lambda: ranking_figure(ranking)), "win_rates": png(lambda: win_figure(pairs, ranking))},
    )
    copies = workers.attrs["copies"]
    attach(
        result,
        *evidence(intact, ranking, data, systems, n_boot=n_boot, seed=seed),
        gold=gold_accuracy(copies[["worker_id", "correct"]]) if len(copies) else None,
        gold_items="degraded copies, right when ranked below every intact response",
    )
    return result


def ranking_figure(ranking: pd.DataFrame) -> bytes:
    """Each system's Plackett–Luce score with its 95 % bootstrap interval, best at the top."""
    return plots.interval_ranking(
        list(ranking["system"]),
        ranking["score"],
        ranking["ci_low"],
        ranking["ci_high"],
        xlabel="Plackett–Luce score (log-strength, mean 0)",
        title="Ranking with 95 % bootstrap intervals",
        labels=[f"{s} (#{r})" for s, r in zip(ranking["system"], ranking["rank"])],
    )


def win_figure(pairs: pd.DataFrame, ranking: pd.DataFrame) -> bytes:
    """How often the row system was ranked above the column system (ties ½)."""
    mirrored = pd.concat(
        [
            pairs,
            pairs.rename(columns={"system_a": "system_b", "system_b": "system_a"}).assign(
                win_rate=1 - pairs["win_rate"]
            ),
        ]
    )
    values, _marks = matrices.pair_frames(mirrored, "win_rate", list(ranking["system"]))
    return plots.pair_matrix(
        values, title="Implied win rate of row over column (ties ½)", colorbar="win rate", vmin=0.0, vmax=1.0
    )


def analyze(
    in_dir: str | Path, *, seed: int, config=None, options: dict, replicate_dir=None, stability: bool = False
) -> AnalysisResult:
    """The registry's entry point: :func:`analyze_rankings` on ``in_dir``'s tables with ``hitkit analyze``'s options."""
    extra = common_options(options)
    duplicates = extra.pop("duplicates", DEFAULT_DUPLICATES)
    table = read_rankings(in_dir, duplicates=duplicates)
    assignments = counted(read_assignments(in_dir, duplicates=duplicates))
    return analyze_rankings(assignments, table, interval_unit=options.get("cluster", "worker"), seed=seed, **extra)


def worker_qc(tables: dict[str, pd.DataFrame], config=None) -> tuple[str, dict[str, bool | None]] | None:
    """Which workers pass quality control so far (the dashboard's and the QC policy's check): degraded
    copies ranked last more often than chance (:func:`qc_table`); None before any ranking."""
    table = tables[TABLE]
    if table.empty:
        return None
    control = table["is_control"].astype(str).str.strip().str.lower().isin(["1", "true"])
    workers = qc_table(table.assign(is_control=control, rank=pd.to_numeric(table["rank"])))
    verdict = {"passed": True, "failed": False, "not judged": None}
    return "degraded copies ranked last more often than chance (p < 0.05)", {
        str(w): verdict[q] for w, q in zip(workers["worker_id"], workers["qc"])
    }
