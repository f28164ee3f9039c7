"""The arena's analysis (``hitkit analyze arena``): a Bradley–Terry leaderboard with style control.

Reads battles (:mod:`hitkit.protocols.arena.reading`: an export folder's ``battles.csv``, a FastChat
clean-battle file, or both on one scale) and returns an
:class:`~hitkit.analysis.base.AnalysisResult` with these tables (docs/COLUMNS.md):

- ``leaderboard``: system, rating (Arena scale: 1000 + 400·log10-strength, ties half a win) with its
  worker-clustered 95 % bootstrap interval, the style-controlled rating and its worker-clustered sandwich interval, rank ranges,
  natural log-strengths, the system's record and its component of the comparison graph;
- ``style``: the style coefficients (length, headers, lists, bold) with intervals;
- ``win_rates``: each ordered pair's record and win rate (ties half);
- ``categories``: a leaderboard per prompt category (where battles carry one);
- ``qc``: every worker's verdict (passed / failed / not judged, :mod:`hitkit.protocols.arena.verdicts`)
  from the voter test of their leaderboard votes (:mod:`hitkit.protocols.arena.voters`) and the
  one-sided binomial test of their votes in QC battles (:func:`qc_table`).

QC battles (``is_control``) never enter a leaderboard; battles flagged as identity leaks (``leak``)
stay out unless ``include_leaks``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.base import AnalysisResult, png
from hitkit.analysis.evidence import attach
from hitkit.analysis.gold import gold_counts
from hitkit.analysis.inference import (
    DEFAULT_DUPLICATES,
    DuplicatePolicy,
)
from hitkit.errors import HitkitError, InputError
from hitkit.protocols.arena import figures
from hitkit.protocols.arena.bradley_terry import FASTCHAT_BASELINE, STYLE_REG
from hitkit.protocols.arena.categories import load_embedder
from hitkit.protocols.arena.costs import cost_table, pareto_figure
from hitkit.protocols.arena.evidence import evidence
from hitkit.protocols.arena.fastchat import read_fastchat
from hitkit.protocols.arena.leaderboard import by_category, leaderboard, win_rates
from hitkit.protocols.arena.options import PACKAGED_EMBEDDER, ArenaAnalysisOptions
from hitkit.protocols.arena.preparing import prepare
from hitkit.protocols.arena.reading import included, read_study_battles
from hitkit.protocols.arena.robust import SANDWICH
from hitkit.protocols.arena.verdicts import NOT_JUDGED, summary_warnings, verdicts
from hitkit.protocols.arena.voters import VOTER_ALPHA, voter_table
from hitkit.protocols.kit.summary import bootstrap

READS_FILES = True
"""``hitkit analyze arena FILE`` reads a FastChat clean-battle file as well as an export folder."""
QC_ALPHA = 0.05
"""A worker passes QC when the one-sided exact binomial test that they prefer the real system over the
QC bot has p below this (ties and both-bad votes left out)."""
OVERALL = "all"
"""The leaderboard's ``category`` for its overall rows (categories.csv holds the per-category rows, same columns)."""
CLUSTERS = ("worker", "battle")


def read_battles(*paths: str | Path, duplicates: DuplicatePolicy = DEFAULT_DUPLICATES) -> pd.DataFrame:
    """Battles from any number of sources, on one scale: an export folder (``battles.csv``) or a
    FastChat clean-battle file (``.json`` / ``.jsonl``). A FastChat battle's worker is its ``judge``
    where present, else the battle itself (its own cluster in the bootstrap)."""
    if not paths:
        raise InputError(".", "no battles given; name an export folder or a FastChat battle file")
    frames, reports = [], {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            frame = read_study_battles(path, duplicates=duplicates)
            reports.update({f"{path}": frame.attrs.get("duplicates", {})})
        elif path.is_file():
            frame = read_fastchat(path)
        else:
            raise InputError(path, "not found; give an export folder with battles.csv or a FastChat battle file")
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    out.attrs["duplicates"] = frames[0].attrs.get("duplicates", {}) if len(frames) == 1 else reports
    out.attrs["assignment_duplicates"] = frames[0].attrs.get("assignment_duplicates") if len(frames) == 1 else None
    return out


def control_systems(battles: pd.DataFrame, config=None) -> set[str]:
    """The QC bot's names: the systems that appear only in QC battles (``is_control`` = 1). Where both
    sides of a QC battle are such systems (early in a study, before the real systems met each other),
    the one in more QC battles is the bot. With the study's ``config``, its task type's
    ``control_systems`` name the bot instead, where they name any."""
    qc = battles[battles["is_control"].astype(int) == 1]
    if qc.empty:
        return set()
    if config is not None:
        from hitkit.protocols import task_for

        named = set(task_for(config).control_systems())
        if named:
            return named
    shown = pd.concat(
        [
            battles[["system_a", "is_control"]].rename(columns={"system_a": "system"}),
            battles[["system_b", "is_control"]].rename(columns={"system_b": "system"}),
        ]
    )
    only = shown.groupby("system")["is_control"].min()
    candidates = set(only.index[only.astype(int) == 1])
    seen = pd.concat([qc["system_a"], qc["system_b"]]).value_counts()
    control = set()
    for a, b in zip(qc["system_a"], qc["system_b"]):
        if a in candidates and b in candidates:
            if seen[a] != seen[b]:
                control.add(a if seen[a] > seen[b] else b)
        elif a in candidates or b in candidates:
            control.add(a if a in candidates else b)
    return control


def qc_table(battles: pd.DataFrame, control: set[str], alpha: float = QC_ALPHA) -> pd.DataFrame:
    """Per worker with QC battles: control_battles, real_wins (votes for the real system), control_wins,
    ties (ties and both-bad), p_value = P(X ≥ real_wins) for X ~ Binomial(real_wins + control_wins, ½)
    (1 without decisive votes), judged = at least :func:`decisive_needed` decisive QC votes (5 at α = 0.05:
    with fewer, even all of them for the real system cannot reach p < α), and passed = p_value < ``alpha``
    for a judged worker, empty (no verdict) for one who is not. ``control``: the QC bot's names
    (:func:`control_systems`)."""
    qc = battles[battles["is_control"].astype(int) == 1]
    left_control = qc["system_a"].isin(control).to_numpy()
    right_control = qc["system_b"].isin(control).to_numpy()
    unclear = ~(left_control ^ right_control)
    if unclear.any():
        # A QC battle whose bot cannot be told (two QC-only systems met equally often): not counted.
        qc, left_control, right_control = qc[~unclear], left_control[~unclear], right_control[~unclear]
    vote = qc["vote"].to_numpy()
    real = np.where(left_control, vote == "b", vote == "a")
    bot = np.where(left_control, vote == "a", vote == "b")
    frame = pd.DataFrame({"worker_id": qc["worker_id"].to_numpy(), "real": real, "bot": bot})
    table = (
        frame.groupby("worker_id", sort=True)
        .agg(control_battles=("real", "size"), real_wins=("real", "sum"), control_wins=("bot", "sum"))
        .reset_index()
    )
    table["ties"] = table["control_battles"] - table["real_wins"] - table["control_wins"]
    table["p_value"] = [
        stats.binomtest(int(w), int(w + c), 0.5, alternative="greater").pvalue if w + c else 1.0
        for w, c in zip(table["real_wins"], table["control_wins"])
    ]
    table["judged"] = (table["real_wins"] + table["control_wins"]) >= decisive_needed(alpha)
    table["passed"] = pd.Series(
        [bool(p < alpha) if j else pd.NA for p, j in zip(table["p_value"], table["judged"])],
        index=table.index,
        dtype="boolean",
    )
    return table.astype({"control_battles": int, "real_wins": int, "control_wins": int, "ties": int})


def qc_counts(qc: pd.DataFrame) -> tuple[int, int, int]:
    """(judged, failed, not judged) workers of a :func:`qc_table` (or its CSV, read back as text)."""
    if not len(qc):
        return 0, 0, 0
    judged = qc["judged"].astype(str).str.lower().isin(["true", "1"]) if "judged" in qc else pd.Series(True, qc.index)
    passed = qc["passed"].astype(str).str.lower().isin(["true", "1"])
    return int(judged.sum()), int((judged & ~passed).sum()), int((~judged).sum())


def decisive_needed(alpha: float = QC_ALPHA) -> int:
    """The fewest decisive QC votes with which :func:`qc_table`'s test can pass a worker: all n for the
    real system give p = 2⁻ⁿ, so n is the smallest with 2⁻ⁿ < ``alpha`` (5 at 0.05)."""
    return math.floor(math.log2(1.0 / alpha)) + 1


def voter_alpha(config=None) -> float:
    """The voter test's false-flag rate: the study's ``arena.voter_alpha``, else :data:`VOTER_ALPHA`."""
    arena = getattr(config, "arena", None) if config is not None else None
    return float(getattr(arena, "voter_alpha", VOTER_ALPHA) or VOTER_ALPHA)


def worker_table(battles: pd.DataFrame, config=None, *, include_leaks: bool = False) -> pd.DataFrame:
    """Every worker's QC verdict (:func:`~hitkit.protocols.arena.verdicts.verdicts`): the voter test on the
    leaderboard's battles and the control-battle test on the QC battles. FastChat battles without a judge
    (worker ``battle:N``) have no worker to judge and are left out."""
    battles = battles.assign(
        vote=battles["vote"].astype(str).str.strip().str.lower(), worker_id=battles["worker_id"].astype(str)
    )
    people = battles[~battles["worker_id"].str.startswith("battle:")]
    alpha = voter_alpha(config)
    counted = included(people, leaks=include_leaks)
    controls = people["is_control"].astype(int) == 1
    control = (
        qc_table(people, control_systems(people, config))
        if controls.any()
        else pd.DataFrame(
            columns=["worker_id", "control_battles", "real_wins", "control_wins", "ties", "p_value", "judged", "passed"]
        )
    )
    return verdicts(sorted(set(people["worker_id"])), control, voter_table(counted, alpha), alpha)


def qc_method(config=None) -> str:
    """The arena's QC check in words (the dashboard's, the console's and the QC policy's)."""
    alpha = voter_alpha(config)
    return (
        f"votes tested against the other workers' Bradley–Terry model for random, side-, tie- and length-biased "
        f"voting (anytime-valid e-value ≥ {1 / alpha:g}: false-flag rate ≤ {alpha:g}); in QC battles, prefers "
        f"the real system over the QC bot (one-sided binomial test, p < {QC_ALPHA}, from {decisive_needed()} "
        "decisive QC votes on)"
    )


def worker_qc(tables: dict[str, pd.DataFrame], config=None) -> tuple[str, dict[str, bool | None]] | None:
    """Which workers pass quality control so far (the dashboard's and the QC policy's check): every
    worker's verdict of :func:`worker_table`, None for a worker not judged yet (too few votes for either
    test: failing them would hold or reject every worker's first HITs, passing them would say what the
    tests have not found). None before any battle."""
    battles = tables["battles"]
    if battles.empty:
        return None
    table = worker_table(battles, config)
    verdict = {
        str(w): (None if status == NOT_JUDGED else status == "passed")
        for w, status in zip(table["worker_id"], table["status"])
    }
    return qc_method(config), verdict


def analyze_battles(
    battles: pd.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ties: str = "half",
    include_leaks: bool = False,
    cluster: str = "worker",
    config=None,
    covariates: Sequence[str] = (),
    inverse_sampling: bool = False,
) -> AnalysisResult:
    """The leaderboard, style coefficients, win rates, category leaderboards and QC of a battle frame.
    ``covariates``: declared style covariates (their ``style_NAME_a/_b`` columns are in ``battles``);
    ``inverse_sampling``: weigh the plain Bradley–Terry fit's battles by 1 / their pair's battles."""
    counted = _counted(battles, cluster, include_leaks)
    fitted = counted if cluster == "worker" else counted.assign(worker_id=[f"battle:{i}" for i in range(len(counted))])
    anchor = FASTCHAT_BASELINE
    fit: dict[str, Any] = {
        "ties": ties,
        "anchor": anchor,
        "covariates": covariates,
        "inverse_sampling": inverse_sampling,
    }
    board, style, facts = leaderboard(fitted, n_boot=n_boot, seed=seed, **fit)
    board.insert(0, "category", OVERALL)
    categories, skipped = by_category(fitted, n_boot=n_boot, seed=seed, **fit)
    control = control_systems(battles, config)
    qc = worker_table(battles, config, include_leaks=include_leaks)
    leaks = int((battles["leak"].astype(int) == 1).sum())
    styled = facts["style_control"] and n_boot > 0
    summary = {
        "battles": len(battles),
        "leaderboard_battles": len(counted),
        "control_battles": int((battles["is_control"].astype(int) == 1).sum()),
        "leaks": leaks,
        "include_leaks": include_leaks,
        "workers": int(counted["worker_id"].nunique()),
        "systems": len(board),
        "sources": sorted(set(battles["source"])) if "source" in battles else [],
        "ties": ties,
        "both_bad": "counted as a tie",
        **bootstrap(n_boot, seed, cluster),
        "style_control": facts["style_control"],
        "style_covariates": list(covariates),
        "inverse_sampling": inverse_sampling,
        "capped_battles": int(battles["capped"].astype(int).sum()) if "capped" in battles else 0,
        "style_reg": STYLE_REG,
        "style_interval_correction": "penalty" if styled else None,
        "style_interval_method": SANDWICH if styled else None,
        "components": facts["components"],
        "control_systems": sorted(control),
        **dict(zip(("qc_judged", "qc_failed", "qc_not_judged"), qc_counts(qc))),
        "voter_alpha": voter_alpha(config),
        "qc_method": qc_method(config),
        "anchor": {"system": anchor[0], "rating": anchor[1]} if anchor[0] in set(board["system"]) else None,
        "duplicates": battles.attrs.get("duplicates", {}),
        "warnings": summary_warnings(battles, counted, board, facts, cluster, 0 if include_leaks else leaks, skipped),
    }
    tables = {"leaderboard": board, "style": style, "win_rates": win_rates(counted), "categories": categories, "qc": qc}
    figs = {"leaderboard": png(lambda: figures.leaderboard(board))}
    if len(tables["win_rates"]):
        figs["win_rates"] = png(lambda: figures.win_rates(tables["win_rates"], list(board["system"])))
    result = AnalysisResult(tables=tables, summary=summary, figures=figs)
    attach(
        result,
        *evidence(counted, board, n_boot=n_boot, seed=seed),
        gold=gold_counts(qc["worker_id"], qc["control_battles"], qc["real_wins"]) if len(qc) else None,
        gold_items="control battles, right when the real system wins (a tie or both bad is not right)",
    )
    return result


def _counted(battles: pd.DataFrame, cluster: str, include_leaks: bool) -> pd.DataFrame:
    """The battles the leaderboard counts (:func:`included`); an error for an unknown ``cluster`` or
    where none is left."""
    if cluster not in CLUSTERS:
        raise HitkitError(f"cluster={cluster!r}; the arena's bootstrap resamples one of {', '.join(CLUSTERS)}")
    if battles.empty:
        raise InputError("battles", "no battles from submitted or approved assignments; nothing to analyse")
    counted = included(battles, leaks=include_leaks)
    if counted.empty:
        raise InputError(
            "battles",
            f"all {len(battles)} battles are QC battles or identity leaks; no leaderboard "
            "(include leaks with --include-leaks)",
        )
    return counted


ANALYSIS_OPTIONS = frozenset({"ties", "include_leaks", "add", "inverse_sampling"})
"""The ``hitkit analyze`` options of the arena alone (the registry entry's ``analysis_options``)."""


def cli_options(config, given: dict) -> dict:
    """``hitkit analyze``'s arena options as :func:`analyze` takes them."""
    return {name: given[name] for name in ANALYSIS_OPTIONS if given.get(name) is not None}


def analyze(
    in_dir: str | Path, *, seed: int, config=None, options: dict, replicate_dir=None, stability: bool = False
) -> AnalysisResult:
    """The registry's entry point: the battles of ``in_dir`` (an export folder or a FastChat battle file)
    and of ``options["add"]`` (more of either), prepared by the study's ``arena:`` settings (prompt cap,
    categories, style covariates: :mod:`.preparing`) and analysed with ``hitkit analyze``'s options
    (n_boot, duplicates, cluster, ties, include_leaks, inverse_sampling); with the systems' costs where
    the export has conversations."""
    extra = options.get("add") or ()
    extra = [extra] if isinstance(extra, (str, Path)) else list(extra)
    battles = read_battles(in_dir, *extra, duplicates=options.get("duplicates", DEFAULT_DUPLICATES))
    settings = config.arena if config is not None else ArenaAnalysisOptions()
    embed = None
    if settings.categories is not None and settings.categories.method == "embedding" and config is not None:
        if settings.categories.model != PACKAGED_EMBEDDER:  # a folder, relative to the study file
            embed = load_embedder(str(config.path(Path(settings.categories.model))))
    folders = [Path(p) for p in (in_dir, *extra) if Path(p).is_dir()]
    prepared = prepare(battles, folders, settings, seed=seed, embed=embed)
    n_boot = options.get("n_boot")
    result = analyze_battles(
        prepared.battles,
        n_boot=1000 if n_boot is None else int(n_boot),
        seed=seed,
        ties=options.get("ties") or "half",
        include_leaks=bool(options.get("include_leaks")),
        cluster=options.get("cluster") or "worker",
        config=config,
        covariates=[c.name for c in settings.style_covariates],
        inverse_sampling=bool(options.get("inverse_sampling") or settings.inverse_sampling),
    )
    result.summary["prompts"] = prepared.facts
    if options.get("judge_labels") is not None:
        from hitkit.protocols.arena.judge_file import add_judge_file

        counted = included(prepared.battles, leaks=bool(options.get("include_leaks")))
        add_judge_file(result, prepared.battles, counted, options["judge_labels"], seed=seed)
    if prepared.facts["capped_battles"]:
        result.summary["warnings"].append(
            f"{prepared.facts['capped_battles']} battle(s) repeat a prompt (or a near-duplicate of one) more than "
            f"arena.prompt_cap = {settings.prompt_cap} times and are left out of the leaderboard"
        )
    if len(prepared.transcripts.turns):
        board = result.tables["leaderboard"]
        table, basis = cost_table(prepared.transcripts.turns, settings.costs, board)
        result.tables["costs"] = table
        result.summary["cost_basis"] = basis
        result.figures["costs"] = png(lambda: pareto_figure(table, basis))
    return result
