"""``hitkit plan`` for a pairwise study with an LLM judge: how large the crowd's share must be.

With ``judge:`` the cost of a study is the crowd's share of the items (the judge labels all of them),
so the plan sizes ``judge.human_share`` instead of the votes per prompt, which stay the study's. Each
simulated study (seeded) draws the crowd's votes on every item as the plain plan does
(:func:`hitkit.protocols.pairwise.plan.simulate_votes`: the simulated crowd, ``simulated.quality``
as strengths) and the judge's labels on every item (:mod:`hitkit.protocols.pairwise.judge_model`);
then, at each share of the grid, the crowd's share is drawn as a launch draws it
(:func:`hitkit.human_subset.human_subset`, uniformly within each pair), the other items' votes are
dropped, and the real analysis runs on what is left: :func:`hitkit.analysis.ppi.win_rates` (PPI++,
jackknife t intervals), which gives the people-only intervals from the same votes too.

A pair is called different when its win-rate interval at level 1 − 0.05/m (Bonferroni over the m
pairs) lies wholly on one side of ½, in the direction it claims; systems rank by their mean
estimated win rate. The decisions (:data:`DECISIONS`) are scored against the systems' true order
in ``simulated.quality``, for the prediction-powered and the people-only analysis of the same
votes. The recommended share is the smallest reaching :data:`hitkit.planning.POWER` for the first
decision that applies, or, with a width target, the smallest whose mean PPI half-width is at most
it; the people-only share for the same target is printed beside it.

What a share buys is predicted by :data:`FORMULA` (``hitkit/analysis/ppi.py``): the half-width the
people-only interval would have, times √(1 − ρ² N_u/(n + N_u)), ρ the correlation of the judge's
score with the people's on each pair (from the simulated study's full data); the table prints it
beside the simulated width.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from hitkit import planning
from hitkit.config import StudyConfig
from hitkit.errors import ConfigError, HitkitError
from hitkit.progress import progress
from hitkit.protocols import task_for
from hitkit.protocols.pairwise import judge_model
from hitkit.protocols.pairwise.reading import FIRST, TIE, canonical

UNIT = "human_share"
ALPHA = 0.05
DECISIONS = {d: planning.DECISIONS[d] for d in ("closest_pair", "every_pair", "best", "no_false_difference")}
"""The plain plan's decisions that pairwise win rates can make (their intervals are per pair, not per
system, so the clusters decision is not one of them)."""
SHARES = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
REPLICATES = 40
ESTIMATOR = ("PPI++, prediction-powered inference with power tuning (Angelopoulos, Duchi & Zrnic 2023), by "
             "hitkit.analysis.ppi.win_rates as hitkit analyze runs it: lambda tuned per pair, jackknife t intervals")
FORMULA = "Var_PPI ≈ Var_human/n · (1 − ρ²·N_u/(n + N_u))"
SCORES = {FIRST: 1.0, TIE: 0.5}


def share_of(config: StudyConfig, units) -> float:
    """The study file's own share: ``judge.human_share``, or ``human_items`` over the items."""
    return config.judge.human_share if config.judge.human_share is not None else config.judge.human_items / len(units)


def with_share(config: StudyConfig, share: float, seed: int | None = None) -> StudyConfig:
    """The study file with the crowd's share ``share`` (and the seed that draws it, where given)."""
    judge = config.judge.model_copy(update={"human_share": share, "human_items": None})
    return config.model_copy(update={"judge": judge, **({"seed": seed} if seed is not None else {})})


@dataclass
class JudgePlan:
    """The share plan's table (one row per share), the target, the recommended shares and what the plan assumed."""

    table: pd.DataFrame
    judge: judge_model.SimulatedJudge
    replicates: int
    seconds: float
    width: float | None
    target: str
    recommended: float | None
    people_only: float | None
    own_share: float
    items: int
    dropped: list[float] = field(default_factory=list)
    decisions: dict[str, str] = field(default_factory=lambda: dict(DECISIONS))
    unit: str = UNIT


def _full_data(config: StudyConfig, seed: int, judge: judge_model.SimulatedJudge, pairs):
    """One simulated study on every item: per item (in unit order) its pair index, the crowd's mean
    score and the judge's order-averaged score for the pair's first system."""
    from hitkit.protocols.pairwise.plan import simulate_votes

    votes = simulate_votes(config.model_copy(update={"judge": None}), seed)
    c = canonical(votes, "item_id")
    c["score"] = pd.Series(c["outcome"]).map(SCORES).fillna(0.0).to_numpy()
    grouped = c.groupby(["item_id", "first", "second"], sort=False)["score"]
    per_item = grouped.mean().rename("human").reset_index()
    index = {p: j for j, p in enumerate(pairs)}
    pair = np.array([index[p] for p in zip(per_item["first"], per_item["second"])], dtype=int)
    rng = np.random.default_rng(seed)
    reference = judge_model.majority(per_item["human"].to_numpy(float))
    f = (judge_model.calls(reference, pair, judge, pairs, rng) + judge_model.calls(reference, pair, judge, pairs, rng)) / 2
    per_item["judge"] = f
    return per_item


def corrected(table: pd.DataFrame, pairs: int) -> pd.DataFrame:
    """``win_rates``' 95 % intervals widened to level 1 − 0.05/pairs (Bonferroni): its intervals are t
    intervals with n_human − 1 degrees of freedom, so the same standard error times the other quantile."""
    from scipy import stats

    df = np.maximum(table["n_human"].to_numpy(float) - 1, 1)
    scale = stats.t.ppf(1 - ALPHA / (2 * pairs), df) / stats.t.ppf(0.975, df)
    out = table.copy()
    for kind in ("human", "ppi"):
        estimate = out[kind].to_numpy(float)
        out[f"{kind}_low"] = estimate - (estimate - out[f"{kind}_low"].to_numpy(float)) * scale
        out[f"{kind}_high"] = estimate + (out[f"{kind}_high"].to_numpy(float) - estimate) * scale
    return out


def _decide(table: pd.DataFrame, kind: str, quality: dict[str, float]) -> dict[str, bool | None]:
    """The decisions one analysis (``kind``: ppi or human; intervals at the corrected level) gets right."""
    a, b = table["system_a"].tolist(), table["system_b"].tolist()
    low, high, est = (table[c].to_numpy(float) for c in (f"{kind}_low", f"{kind}_high", kind))
    better = {(x, y) for x, y, lo in zip(a, b, low) if lo > 0.5} | {(y, x) for x, y, hi in zip(a, b, high) if hi < 0.5}
    estimate: dict[str, list[float]] = {}
    for x, y, e in zip(a, b, est):
        estimate.setdefault(x, []).append(e)
        estimate.setdefault(y, []).append(1 - e)
    ranked = sorted(estimate, key=lambda s: (-float(np.nanmean(estimate[s])), s))
    nothing = {s: (math.nan, math.nan) for s in quality}
    out = planning.decide(quality, lambda x, y: (x, y) in better, ranked, nothing)
    return {d: out[d] for d in DECISIONS}


def replicate(config: StudyConfig, units, shares: list[float], seed: int, judge: judge_model.SimulatedJudge,
              ) -> dict[float, dict]:
    """One simulated study analysed at every share: per share the mean half-widths (people only, PPI,
    and the formula's), n_effective, λ, the human items per pair and each analysis' decisions."""
    from hitkit.analysis.ppi import win_rates
    from hitkit.human_subset import human_subset

    quality = task_for(config).perceived_quality()
    names = sorted(quality)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    full = _full_data(config, seed, judge, pairs)
    rho = {}
    for (a, b), part in full.groupby(["first", "second"]):
        ok = part["human"].std() > 0 and part["judge"].std() > 0
        rho[(a, b)] = float(np.corrcoef(part["human"], part["judge"])[0, 1]) if ok else 0.0
    item_of = {u.key: (str(u.payload["item_id"]), *sorted(u.payload["systems"])) for u in units}
    keys = list(zip(full["item_id"], full["first"], full["second"]))
    out = {}
    for share in shares:
        chosen = {item_of[u.key] for u in human_subset(with_share(config, share, seed), units)}
        items = pd.DataFrame({"system_a": full["first"], "system_b": full["second"], "judge": full["judge"],
                              "human": np.where([k in chosen for k in keys], full["human"], np.nan)})
        wide = win_rates(items)
        strict = corrected(wide, len(pairs))
        n, big_n = wide["n_human"].to_numpy(float), (wide["n_judge"] - wide["n_human"]).to_numpy(float)
        r = np.array([rho[(a, b)] for a, b in zip(wide["system_a"], wide["system_b"])])
        human_half = (wide["human_high"] - wide["human_low"]).to_numpy() / 2
        out[share] = {
            "half_width_human": float(np.mean(human_half)),
            "half_width_ppi": float(np.mean((wide["ppi_high"] - wide["ppi_low"]) / 2)),
            "half_width_formula": float(np.mean(human_half * np.sqrt(1 - r ** 2 * big_n / (n + big_n)))),
            "n_human": float(n.mean()), "n_effective": float(wide["n_effective"].mean()),
            "lam": float(wide["lam"].mean()), "rho": float(r.mean()),
            "ppi": _decide(strict, "ppi", quality), "human": _decide(strict, "human", quality)}
    return out


def _grid(config: StudyConfig, units, shares: list[float] | None) -> tuple[list[float], list[float]]:
    """The shares to plan (the study's own among them) and the default grid's shares too small for
    every pair to get two human items. A share the coordinator gave that is too small is an error."""
    from hitkit.human_subset import human_subset

    own = round(share_of(config, units), 4)
    asked = sorted({*(shares or SHARES), own}) if shares is None else sorted(set(shares))
    grid, dropped = [], []
    for share in asked:
        try:
            human_subset(with_share(config, share), units)
            grid.append(share)
        except ConfigError as error:
            if shares is not None:
                raise HitkitError(f"--shares {share:g}: {error}") from None
            dropped.append(share)
    return grid, dropped


def plan(config: StudyConfig, judge: judge_model.SimulatedJudge, *, replicates: int | None = None,
         shares: list[float] | None = None, width: float | None = None) -> JudgePlan:
    """The share plan: ``replicates`` simulated studies (each analysed at every share of the grid,
    ``shares`` or :data:`SHARES` with the study's own) and the recommended share for the target:
    ``width`` (mean PPI half-width of the win rates), else the power of the first decision that applies."""
    from hitkit.human_subset import human_subset

    replicates = REPLICATES if replicates is None else replicates
    if replicates < 1:
        raise HitkitError("give at least one replicate")
    if shares is not None and any(not 0 < s <= 1 for s in shares):
        raise HitkitError(f"--shares {','.join(f'{s:g}' for s in shares)}: every share must be in (0, 1]")
    if width is not None and not 0 < width < 0.5:
        raise HitkitError(f"--width {width:g}: the target half-width of a win rate's interval lies in (0, 0.5), "
                          f"e.g. 0.1")
    started = time.monotonic()
    units = task_for(config).build().units
    grid, dropped = _grid(config, units, shares)
    runs = [replicate(config, units, grid, config.seed * 100_003 + r, judge)
            for r in progress(range(replicates), "plan", total=replicates, unit="study")]
    rows = []
    for share in grid:
        sized = with_share(config, share)
        hits, _, cost = planning.design_cost(sized)
        n_items = len(human_subset(sized, units))
        row = {UNIT: share, "human_items": n_items, "human_votes": n_items * config.pairwise.votes_per_prompt,
               "hits": hits, "cost": str(cost)}
        for column in ("half_width_human", "half_width_ppi", "half_width_formula", "n_human", "n_effective", "lam",
                       "rho"):
            row[column] = round(float(np.mean([run[share][column] for run in runs])), 4)
        for kind, suffix in (("ppi", ""), ("human", "_human")):
            for decision in DECISIONS:
                seen = [run[share][kind][decision] for run in runs if run[share][kind][decision] is not None]
                row[decision + suffix] = round(sum(seen) / len(seen), 3) if seen else None
        rows.append(row)
    table = pd.DataFrame(rows)
    if width is not None:
        target = f"mean half-width of the win rates' 95 % intervals at most {width:g}"
        meets = {kind: table[f"half_width_{kind}"] <= width for kind in ("ppi", "human")}
    else:
        first = next((d for d in DECISIONS if table[d].notna().any()), None)
        target = (f"{planning.POWER:.0%} power for: {DECISIONS[first]}" if first
                  else "none (no decision applies to these qualities; give --width)")
        meets = {kind: (table[first + suffix].fillna(0) >= planning.POWER) if first else table[UNIT] < 0
                 for kind, suffix in (("ppi", ""), ("human", "_human"))}
    smallest = {kind: (float(table.loc[m, UNIT].iloc[0]) if m.any() else None) for kind, m in meets.items()}
    return JudgePlan(table, judge, replicates, round(time.monotonic() - started, 1), width, target,
                     smallest["ppi"], smallest["human"], round(share_of(config, units), 4), len(units), dropped)


SHOWN = (UNIT, "human_votes", "hits", "cost", "half_width_human", "half_width_ppi", "half_width_formula",
         "n_human", "n_effective")


def plan_text(config: StudyConfig, result: JudgePlan) -> str:
    """The share plan as the command line prints it: what was assumed, the estimator and its formula,
    the table, and the recommendation."""
    currency = config.provider.currency
    # A decision that applies to none of simulated.quality's systems (no two equal, say) is left off the screen.
    shown = result.table[[*SHOWN, *(d for d in result.decisions if result.table[d].notna().any())]]
    lines = [
        f"Plan of the crowd's share for '{config.study}' (pairwise with an LLM judge, on {config.provider.kind}): "
        f"the judge labels all {result.items} items, people vote on a uniformly random share of each pair's "
        f"items, {config.pairwise.votes_per_prompt} votes each (votes_per_prompt, kept); {result.replicates} "
        f"simulated studies from the simulated crowd and simulated.quality, {result.seconds} s.",
        judge_model.describe(result.judge),
        f"Estimator: {ESTIMATOR}; a pair differs when its "
        f"interval at 1 - {ALPHA}/pairs (Bonferroni) excludes 1/2. Sizing formula: {FORMULA} (n human items, "
        f"N_u judge-only items of a pair, rho the judge's correlation with the people's score, "
        f"{result.table['rho'].mean():.2f} here); half_width_formula applies it to the people-only half-width.",
        "", shown.to_string(index=False), "",
        f"half_width_*: mean half-width of the pairs' 95 % win-rate intervals; n_human, n_effective: per pair "
        f"(n_effective: human items worth as much as people and judge together); decision columns: share of "
        f"simulated studies the PPI analysis got right (people-only: the *_human columns of plan.csv); "
        f"cost: every place paid, with fees ({currency}).",
    ]
    if result.dropped:
        lines.append(f"Left out of the grid: share(s) {', '.join(f'{s:g}' for s in result.dropped)}, too small for "
                     f"two human items in every pair.")
    lines.append(f"Target: {result.target}.")
    if result.recommended is None:
        lines.append("- with the judge: not reached at any share on the grid; even all items voted on fall short: "
                     "raise votes_per_prompt or relax the target")
    else:
        row = result.table[result.table[UNIT] == result.recommended].iloc[0]
        lines.append(f"- with the judge: human_share = {result.recommended:g} ({row['human_votes']} human votes, "
                     f"{row['hits']} HITs, {row['cost']} {currency})")
    people = "not reached on the grid" if result.people_only is None else f"human_share = {result.people_only:g}"
    lines.append(f"- people only, from the same votes: {people}")
    lines.append(f"- the study file's own share: {result.own_share:g}")
    return "\n".join(lines)


def confirm_share(result: JudgePlan) -> float:
    """The share a confirming run uses: the recommended one, else the study's own."""
    return result.recommended if result.recommended is not None else result.own_share


def decide_export(config: StudyConfig, export_dir) -> dict[str, bool | None]:
    """The decisions a finished run's export (votes.csv and judge.csv) gets right with the PPI analysis,
    as the plan scores a simulated study's."""
    from pathlib import Path

    from hitkit.analysis.ppi import win_rates
    from hitkit.protocols.pairwise.judge import items, read_judge
    from hitkit.protocols.pairwise.reading import read_votes

    export_dir = Path(export_dir)
    table = win_rates(items(read_votes(export_dir), read_judge(export_dir / "judge.csv")))
    return _decide(corrected(table, len(table)), "ppi", task_for(config).perceived_quality())


def confirm(config: StudyConfig, study_file, result: JudgePlan, *, web, echo=print,
            timeout_s: float | None = 600) -> planning.Confirmation:
    """Run the study once at :func:`confirm_share` (:func:`hitkit.planning.confirming_run`: real HTTP, the
    simulated crowd, the study file's judge) and say which decisions its PPI analysis got right."""
    share = confirm_share(result)
    started = time.monotonic()
    run = planning.confirming_run(config, study_file, with_share(config, share), web=web, echo=echo,
                                  timeout_s=timeout_s)
    outcome = decide_export(run.config, run.folder / "export")
    return planning.Confirmation(share, UNIT, run.hits, run.assignments, run.workers, run.folder, run.database,
                                 config.provider.kind, outcome, round(time.monotonic() - started, 1))
