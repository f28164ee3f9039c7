"""What ``hitkit plan`` does alike for every protocol with an LLM judge: size the crowd's share.

With ``judge:`` the judge labels every item and people label a uniformly random share of them
(:mod:`hitkit.judges.human_subset`), so the plan sizes ``judge.human_share``. A protocol's share plan
(``hitkit/protocols/NAME/judge_plan.py``) simulates one study on every item (people's labels as the
plain plan draws them, a simulated judge's labels) and analyses it at each share of the grid with the
real prediction-powered analysis; this module holds what is the same for all of them: the grid
(:func:`grid`), the replicate loop and the table (:func:`plan_shares`), the decisions that
pairwise win rates make (:func:`corrected`, :func:`decide_pairs`), the recommendation's lines
(:func:`table_lines`) and ``--confirm``'s one real run at the recommended share (:func:`confirm`; the
protocol says which decisions its export gets right). The assumed-or-measured judge of Spot The Bot and
live chat is :mod:`hitkit.simulation.simulated_judge`.

The recommended share is the smallest reaching :data:`hitkit.simulation.planning.POWER` for the first decision
that applies, or, with a width target, the smallest whose mean PPI half-width is at most it; the
people-only share for the same target comes from the same simulated labels.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hitkit.errors import ConfigError, HitkitError
from hitkit.progress import progress
from hitkit.simulation import plan_confirm, planning
from hitkit.study.config import StudyConfig

UNIT = "human_share"
ALPHA = 0.05
SHARES = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
REPLICATES = 40
FORMULA = "Var_PPI ≈ Var_human/n · (1 − ρ²·N_u/(n + N_u))"
PAIR_DECISIONS = {d: planning.DECISIONS[d] for d in ("closest_pair", "every_pair", "best", "no_false_difference")}
"""The plain plan's decisions that pairwise win rates can make (their intervals are per pair, not per
system, so the clusters decision is not one of them)."""
AVERAGED = ("half_width_human", "half_width_ppi", "half_width_formula", "n_human", "n_effective", "lam", "rho")
"""The columns of one simulated study at one share that the table averages over the simulated studies."""


def with_share(config: StudyConfig, share: float, seed: int | None = None) -> StudyConfig:
    """The study file with the crowd's share ``share`` (and the seed that draws it, where given)."""
    from hitkit.judges.section import judge_section

    judge = judge_section(config).model_copy(update={"human_share": share, "human_items": None})
    return config.model_copy(update={"judge": judge, **({"seed": seed} if seed is not None else {})})


def uniform(config: StudyConfig) -> StudyConfig:
    """The study with its crowd's share drawn uniformly (``judge.select: uniform``): under the uncertainty rule
    the expected number of human items is the uniform rule's, so ``hitkit plan`` costs them alike."""
    from hitkit.judges.section import judge_section

    return config.model_copy(update={"judge": judge_section(config).model_copy(update={"select": "uniform"})})


@dataclass
class JudgePlan:
    """The share plan's table (one row per share), the target, the recommended shares and what the plan assumed."""

    table: pd.DataFrame
    judge: Any
    replicates: int
    seconds: float
    width: float | None
    target: str
    recommended: float | None
    people_only: float | None
    own_share: float
    items: int
    dropped: list[float] = field(default_factory=list)
    decisions: dict[str, str] = field(default_factory=lambda: dict(PAIR_DECISIONS))
    unit: str = UNIT


def corrected(table: pd.DataFrame, pairs: int) -> pd.DataFrame:
    """Win-rate 95 % intervals widened to level 1 − 0.05/pairs (Bonferroni): they are t intervals with
    n_human − 1 degrees of freedom, so the same standard error times the other quantile."""
    from scipy import stats

    df = np.maximum(table["n_human"].to_numpy(float) - 1, 1)
    scale = stats.t.ppf(1 - ALPHA / (2 * pairs), df) / stats.t.ppf(0.975, df)
    out = table.copy()
    for kind in ("human", "ppi"):
        estimate = out[kind].to_numpy(float)
        # Widened, then kept inside [0, 1] as win_rates keeps its own.
        out[f"{kind}_low"] = np.clip(estimate - (estimate - out[f"{kind}_low"].to_numpy(float)) * scale, 0, 1)
        out[f"{kind}_high"] = np.clip(estimate + (out[f"{kind}_high"].to_numpy(float) - estimate) * scale, 0, 1)
    return out


def decide_pairs(table: pd.DataFrame, kind: str, quality: dict[str, float]) -> dict[str, bool | None]:
    """The :data:`PAIR_DECISIONS` one analysis of win rates (``kind``: ppi or human; intervals at the
    corrected level) gets right: a pair differs when its interval lies wholly on one side of ½, in the
    direction it claims; systems rank by their mean estimated win rate."""
    a, b = table["system_a"].tolist(), table["system_b"].tolist()
    low, high, est = (table[c].to_numpy(float) for c in (f"{kind}_low", f"{kind}_high", kind))
    better = {(x, y) for x, y, lo in zip(a, b, low) if lo > 0.5} | {(y, x) for x, y, hi in zip(a, b, high) if hi < 0.5}
    estimate: dict[str, list[float]] = {}
    for x, y, e in zip(a, b, est):
        estimate.setdefault(x, []).append(e)
        estimate.setdefault(y, []).append(1 - e)
    ranked = sorted(estimate, key=lambda s: (-_mean_known(estimate[s]), s))
    nothing = {s: (math.nan, math.nan) for s in quality}
    out = planning.decide(quality, lambda x, y: (x, y) in better, ranked, nothing)
    return {d: out[d] for d in PAIR_DECISIONS}


def _mean_known(values: list[float]) -> float:
    """The mean of the values that are not NaN (NaN where none is; no warning, unlike numpy's nanmean)."""
    known = [v for v in values if not math.isnan(v)]
    return sum(known) / len(known) if known else math.nan


def grid(own: float, shares: list[float] | None, fits: Callable[[float], Any]) -> tuple[list[float], list[float]]:
    """The shares to plan (the study's own among them) and the default grid's shares that ``fits``
    refuses (with a ConfigError: too small for the study's strata, say). A share the coordinator gave
    that does not fit is an error."""
    asked = sorted({*SHARES, round(own, 4)}) if shares is None else sorted(set(shares))
    kept, dropped = [], []
    for share in asked:
        try:
            fits(share)
            kept.append(share)
        except ConfigError as error:
            if shares is not None:
                raise HitkitError(f"--shares {share:g}: {error}") from None
            dropped.append(share)
    return kept, dropped


def check_options(
    replicates: int, shares: list[float] | None, width: float | None, width_bound: float | None, width_words: str
) -> None:
    """The share plan's options, or an error naming the one that is wrong."""
    if replicates < 1:
        raise HitkitError("give at least one replicate")
    if shares is not None and any(not 0 < s <= 1 for s in shares):
        raise HitkitError(f"--shares {','.join(f'{s:g}' for s in shares)}: every share must be in (0, 1]")
    if width is not None and not (0 < width and (width_bound is None or width < width_bound)):
        span = f"(0, {width_bound:g})" if width_bound is not None else "(0, ∞)"
        raise HitkitError(f"--width {width:g}: the target half-width of {width_words} lies in {span}, e.g. 0.1")


def plan_shares(
    config: StudyConfig,
    judge,
    *,
    replicates: int,
    shares: list[float],
    dropped: list[float],
    width: float | None,
    width_words: str,
    own: float,
    items: int,
    decisions: dict[str, str],
    replicate: Callable[[int], dict[float, dict]],
    cost: Callable[[float], dict],
) -> JudgePlan:
    """The share plan from the protocol's parts: ``replicate(seed)`` analyses one simulated study at
    every share (per share the :data:`AVERAGED` columns, other numbers to average and ``ppi`` and
    ``human``: each analysis' decisions), ``cost(share)`` the first columns of a share's row (what the
    crowd does and is paid). The table averages the replicates; the recommendation is the smallest share
    meeting ``width`` (mean PPI half-width), else :data:`hitkit.simulation.planning.POWER` for the first decision
    that applies."""
    started = time.monotonic()
    runs = [
        replicate(config.seed * 100_003 + r)
        for r in progress(range(replicates), "plan", total=replicates, unit="study")
    ]
    rows = []
    for share in shares:
        row = {UNIT: share, **cost(share)}
        numbers = [k for k in runs[0][share] if k not in ("ppi", "human") and k not in row]
        for column in numbers:
            row[column] = round(_mean_known([run[share][column] for run in runs]), 4)
        for kind, suffix in (("ppi", ""), ("human", "_human")):
            for decision in decisions:
                seen = [run[share][kind][decision] for run in runs if run[share][kind][decision] is not None]
                row[decision + suffix] = round(sum(seen) / len(seen), 3) if seen else None
        rows.append(row)
    table = pd.DataFrame(rows)
    if width is not None:
        target = f"mean half-width of {width_words} at most {width:g}"
        meets = {kind: table[f"half_width_{kind}"] <= width for kind in ("ppi", "human")}
    else:
        first = next((d for d in decisions if table[d].notna().any()), None)
        target = (
            f"{planning.POWER:.0%} power for: {decisions[first]}"
            if first
            else "none (no decision applies to these qualities; give --width)"
        )
        meets = {
            kind: (table[first + suffix].fillna(0) >= planning.POWER) if first else table[UNIT] < 0
            for kind, suffix in (("ppi", ""), ("human", "_human"))
        }
    smallest = {kind: (float(table.loc[m, UNIT].iloc[0]) if m.any() else None) for kind, m in meets.items()}
    return JudgePlan(
        table,
        judge,
        replicates,
        round(time.monotonic() - started, 1),
        width,
        target,
        smallest["ppi"],
        smallest["human"],
        round(own, 4),
        items,
        dropped,
        dict(decisions),
    )


def shown(result: JudgePlan, columns: Sequence[str]) -> str:
    """The table as printed: ``columns``, then each decision that applies to some share (one that applies
    to none of simulated.quality's systems, e.g. no two equal, is left off the screen)."""
    return result.table[[*columns, *(d for d in result.decisions if result.table[d].notna().any())]].to_string(
        index=False
    )


def table_lines(
    result: JudgePlan,
    columns: Sequence[str],
    legend: str,
    currency: str,
    too_small: str,
    amount: Callable[[pd.Series], str],
    short: str,
    labels: str,
) -> list[str]:
    """The plan's lines after its header: the table (:func:`shown`), the ``legend`` of the protocol's
    columns with what every share plan's decision and cost columns mean, the default grid's shares left
    out (``too_small`` says why) and the target and the answers to it: with the judge (``amount(row)``
    says what the crowd does at that share; ``short`` what to do when no share reaches it), people only
    (from the same ``labels``), the study's own share."""
    lines = [
        "",
        shown(result, columns),
        "",
        f"{legend}; decision columns: share of simulated studies the PPI analysis got right (people-only: the "
        f"*_human columns of plan.csv); cost: every place paid, with fees ({currency}).",
    ]
    if result.dropped:
        lines.append(f"Left out of the grid: share(s) {', '.join(f'{s:g}' for s in result.dropped)}, {too_small}.")
    lines.append(f"Target: {result.target}.")
    if result.recommended is None:
        lines.append(f"- with the judge: not reached at any share on the grid; {short}")
    else:
        row = result.table[result.table[UNIT] == result.recommended].iloc[0]
        lines.append(f"- with the judge: human_share = {result.recommended:g} ({amount(row)})")
    people = "not reached on the grid" if result.people_only is None else f"human_share = {result.people_only:g}"
    lines.append(f"- people only, from the same {labels}: {people}")
    lines.append(f"- the study file's own share: {result.own_share:g}")
    return lines


def widths(table: pd.DataFrame, rho) -> dict[str, float]:
    """One analysis' :data:`AVERAGED` numbers from its PPI table (rows of n_human, n_judge, human_low/high,
    ppi_low/high, n_effective, lam; pairwise's and Spot The Bot's win rates, live chat's overall scores)
    and ``rho`` per row: mean half-widths, people only, PPI and :data:`FORMULA`'s (the people-only
    half-width times √(1 − ρ² N_u/(n + N_u)), N_u the judge-only items), and the mean n, n_effective, λ, ρ."""
    n, big_n = table["n_human"].to_numpy(float), (table["n_judge"] - table["n_human"]).to_numpy(float)
    r = np.asarray(rho, dtype=float)
    human_half = (table["human_high"] - table["human_low"]).to_numpy(float) / 2

    def mean(values) -> float:
        return _mean_known([float(v) for v in values])

    return {
        "half_width_human": mean(human_half),
        "half_width_ppi": mean((table["ppi_high"] - table["ppi_low"]) / 2),
        "half_width_formula": mean(human_half * np.sqrt(1 - r**2 * big_n / (n + big_n))),
        "n_human": float(n.mean()),
        "n_effective": mean(table["n_effective"]),
        "lam": mean(table["lam"]),
        "rho": float(r.mean()),
    }


def pilot_files(directory, names: Sequence[str]) -> None:
    """``--pilot``'s folder holds ``names`` (or their parquet), or an error saying what to give."""
    wanted = " and ".join(names)
    if not directory.is_dir():
        raise HitkitError(
            f"--pilot {directory}: not a folder; give the export folder of a previous study with "
            f"judge: (it holds {wanted})"
        )
    for name in names:
        if not (directory / name).is_file() and not (directory / name).with_suffix(".parquet").is_file():
            raise HitkitError(
                f"--pilot {directory}: no {name}; give the export folder of a previous study with "
                f"judge: (it holds {wanted})"
            )


Decide = Callable[[StudyConfig, Path, dict[str, str]], dict[str, bool | None]]
"""A protocol's ``decide_export(config, export_dir, profiles)``: which decisions the PPI analysis of a finished
run's export got right (``profiles``: each simulated worker's profile, for a decision about quality control)."""


def confirm_share(result: JudgePlan) -> float:
    """The share a confirming run uses: the recommended one, else the study's own."""
    return result.recommended if result.recommended is not None else result.own_share


def confirm(
    config: StudyConfig,
    study_file: str | Path,
    result: JudgePlan,
    decide: Decide,
    *,
    web,
    echo: Callable[[str], None] = print,
    timeout_s: float | None = 600,
) -> plan_confirm.Confirmation:
    """Run the study once at :func:`confirm_share` (:func:`hitkit.simulation.plan_confirm.confirming_run`: real HTTP, the
    simulated crowd, the study file's judge, which labels the material before posting or the crowd's work
    after it as the study's protocol does) and say which of the plan's decisions ``decide`` finds its
    export's PPI analysis got right (every decision of ``result`` named, None where one does not apply):
    ``hitkit plan --confirm`` calls it with the protocol's ``judge_plan.decide_export``."""
    from hitkit.simulation.crowd import crowd_from_config

    share = confirm_share(result)
    started = time.monotonic()
    run = plan_confirm.confirming_run(
        config, study_file, with_share(config, share), web=web, echo=echo, timeout_s=timeout_s
    )
    profiles = {w.worker_id: w.profile for w in crowd_from_config(run.config)}
    outcome = decide(run.config, run.folder / "export", profiles)
    return plan_confirm.Confirmation(
        share,
        result.unit,
        run.hits,
        run.assignments,
        run.workers,
        run.folder,
        run.database,
        config.provider.kind,
        {d: outcome.get(d) for d in result.decisions},
        round(time.monotonic() - started, 1),
    )
