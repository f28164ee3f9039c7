"""``hitkit plan`` for a pairwise study with an LLM judge: how large the crowd's share must be.

With ``judge:`` the cost of a study is the crowd's share of the items (the judge labels all of them),
so the plan sizes ``judge.human_share`` instead of the votes per prompt, which stay the study's. Each
simulated study (seeded) draws the crowd's votes on every item as the plain plan does
(:func:`hitkit.protocols.pairwise.plan.simulate_votes`: the simulated crowd, ``simulated.quality``
as strengths) and the judge's labels on every item (:mod:`hitkit.protocols.pairwise.judge_model`);
then, at each share of the grid, the crowd's share is drawn as a launch draws it
(:func:`hitkit.judges.human_subset.human_subset`, uniformly within each pair), the other items' votes are
dropped, and the real analysis runs on what is left: :func:`hitkit.analysis.ppi.win_rates` (PPI++,
jackknife t intervals), which gives the people-only intervals from the same votes too. With ``judge.select:
uncertainty`` the share is drawn as such a launch draws it — a uniform pilot, then a second wave from the
simulated judge's order agreement and the pilot's errors (:func:`_second_wave`) — and analysed with the
weighted :func:`hitkit.analysis.ppi_weighted.ipw_win_rates`; a share costs what the uniform rule's does
(the expected number of human items is the same).

A pair is called different when its win-rate interval at level 1 − 0.05/m (Bonferroni over the m
pairs) lies wholly on one side of ½, in the direction it claims; systems rank by their mean
estimated win rate. The decisions (:data:`DECISIONS`) are scored against the systems' true order
in ``simulated.quality``, for the prediction-powered and the people-only analysis of the same
votes. The recommended share is the smallest reaching :data:`hitkit.simulation.planning.POWER` for the first
decision that applies, or, with a width target, the smallest whose mean PPI half-width is at most
it; the people-only share for the same target is printed beside it.

What a share buys is predicted by :data:`FORMULA` (``hitkit/analysis/ppi.py``): the half-width the
people-only interval would have, times √(1 − ρ² N_u/(n + N_u)), ρ the correlation of the judge's
score with the people's on each pair (from the simulated study's full data); the table prints it
beside the simulated width.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.judges.section import own_share
from hitkit.protocols import task_for
from hitkit.protocols.kit.judge_plan import Sized, Target, share_plan, shown
from hitkit.protocols.pairwise import judge_model
from hitkit.protocols.pairwise.reading import FIRST, TIE, canonical
from hitkit.simulation import judge_planning, planning
from hitkit.simulation.judge_planning import decide_pairs
from hitkit.study.config import StudyConfig

UNIT = judge_planning.UNIT
ALPHA = judge_planning.ALPHA
DECISIONS = judge_planning.PAIR_DECISIONS
SHARES = judge_planning.SHARES
REPLICATES = judge_planning.REPLICATES
ESTIMATOR = (
    "PPI++, prediction-powered inference with power tuning (Angelopoulos, Duchi & Zrnic 2023), by "
    "hitkit.analysis.ppi.win_rates as hitkit analyze runs it: lambda tuned per pair, jackknife t intervals"
)
FORMULA = judge_planning.FORMULA
SCORES = {FIRST: 1.0, TIE: 0.5}
JudgePlan = judge_planning.JudgePlan
with_share = judge_planning.with_share
corrected = judge_planning.corrected

TARGET = Target(REPLICATES, 0.5, "a win rate's interval", "the win rates' 95 % intervals", DECISIONS)
"""What the share plan sizes: the pairs' win rates."""

JUDGE_OPTION, JUDGE_MEANS, BIAS_MEANS = "--judge-agreement", "agreement with the crowd", "win rate"
"""How ``hitkit plan`` asks for the simulated judge: the option of its quality, what it is, what a bias moves."""
DEFAULT_JUDGE = judge_model.DEFAULT_AGREEMENT
assumed = judge_model.assumed


def pilot_judge(pilot, config: StudyConfig) -> judge_model.SimulatedJudge:
    """The judge measured on a pilot export (``votes.csv`` and ``judge.csv``)."""
    return judge_model.from_pilot(pilot, [s.name for s in config.systems])


def share_of(config: StudyConfig, units) -> float:
    """The study file's own share: ``judge.human_share``, or ``human_items`` over the items."""
    return own_share(config, len(units))


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
    f = (
        judge_model.calls(reference, pair, judge, pairs, rng) + judge_model.calls(reference, pair, judge, pairs, rng)
    ) / 2
    per_item["judge"] = f
    return per_item


def replicate(
    config: StudyConfig,
    units,
    shares: list[float],
    seed: int,
    judge: judge_model.SimulatedJudge,
) -> dict[float, dict]:
    """One simulated study analysed at every share: per share the mean half-widths (people only, PPI,
    and the formula's), n_effective, λ, the human items per pair and each analysis' decisions."""
    from hitkit.analysis.ppi import win_rates
    from hitkit.analysis.ppi_weighted import ipw_win_rates
    from hitkit.judges.human_subset import human_subset

    quality = task_for(config).perceived_quality()
    names = sorted(quality)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    full = _full_data(config, seed, judge, pairs)
    rho = {}
    for (a, b), part in full.groupby(["first", "second"]):
        ok = part["human"].std() > 0 and part["judge"].std() > 0
        rho[(a, b)] = float(np.corrcoef(part["human"], part["judge"])[0, 1]) if ok else 0.0
    item_of = {u.key: (str(u.payload["item_id"]), *sorted(u.payload["systems"])) for u in units}
    keys = list(zip(full["item_id"], full["first"], full["second"]))
    out = {}
    for share in shares:
        sized = with_share(config, share, seed)
        chosen = {item_of[u.key] for u in human_subset(sized, units)}
        pi = None
        if sized.judge is not None and sized.judge.select == "uncertainty":
            chosen, pi = _second_wave(sized, units, full.set_index(["item_id", "first", "second"]), chosen, seed)
        items = pd.DataFrame(
            {
                "system_a": full["first"],
                "system_b": full["second"],
                "judge": full["judge"],
                "human": np.where([k in chosen for k in keys], full["human"], np.nan),
            }
        )
        if pi is not None:
            items["human_probability"] = [pi[k] for k in keys]
        wide = win_rates(items) if pi is None else ipw_win_rates(items)
        strict = corrected(wide, len(pairs))
        out[share] = {
            **judge_planning.widths(wide, [rho[(a, b)] for a, b in zip(wide["system_a"], wide["system_b"])]),
            "ppi": decide_pairs(strict, "ppi", quality),
            "human": decide_pairs(strict, "human", quality),
        }
    return out


def _second_wave(config: StudyConfig, units, full: pd.DataFrame, pilot: set, seed: int) -> tuple[set, dict]:
    """``judge.select: uncertainty`` in one simulated study: the pilot's squared judge errors, the second
    wave's probabilities as a launch computes them (:func:`hitkit.analysis.ppi_active.second_wave`) and one
    seeded draw; (the items people label, each item's π), items keyed (item_id, first, second)."""
    from hitkit.analysis.ppi_active import second_wave
    from hitkit.judges.design import half
    from hitkit.judges.human_subset import budgets
    from hitkit.protocols.pairwise.judge import stratum

    assert config.judge is not None
    keys = [(str(u.payload["item_id"]), *sorted(u.payload["systems"])) for u in units]
    rows = full.loc[keys]
    f, y = rows["judge"].to_numpy(float), rows["human"].to_numpy(float)
    first = np.array([k in pilot for k in keys])
    pi2, pi = second_wave(
        np.abs(2 * f - 1),
        np.where(first, (y - f) ** 2, np.nan),
        first,
        np.array([half(seed, u.key) for u in units]),
        np.array([stratum(u) for u in units]),
        budgets(config, units),
        pi_min=config.judge.pi_min,
    )
    drawn = first | (np.random.default_rng(seed).random(len(keys)) < pi2)
    return {k for k, d in zip(keys, drawn) if d}, dict(zip(keys, pi))


def plan(
    config: StudyConfig,
    judge: judge_model.SimulatedJudge,
    *,
    replicates: int | None = None,
    shares: list[float] | None = None,
    width: float | None = None,
) -> JudgePlan:
    """The share plan: ``replicates`` simulated studies (each analysed at every share of the grid,
    ``shares`` or :data:`SHARES` with the study's own) and the recommended share for the target:
    ``width`` (mean PPI half-width of the win rates), else the power of the first decision that applies.
    The default grid's shares too small for every pair to get two human items are left out; a share the
    coordinator gave that is too small is an error."""
    return share_plan(config, judge, TARGET, _sized, replicates, shares, width)


def _sized(config: StudyConfig, judge: judge_model.SimulatedJudge) -> Sized:
    """The pairwise study's side of its share plan: the items people vote on at each share, and what
    their HITs cost."""
    from hitkit.judges.human_subset import human_subset

    units = task_for(config).build().units

    def cost(share: float) -> dict:
        # Under the uncertainty rule the expected number of human items is the uniform rule's: cost them alike.
        sized = judge_planning.uniform(with_share(config, share))
        hits, _, paid = planning.design_cost(sized)
        n_items = len(human_subset(sized, units))
        return {
            "human_items": n_items,
            "human_votes": n_items * config.pairwise.votes_per_prompt,
            "hits": hits,
            "cost": str(paid),
        }

    return Sized(
        share_of(config, units),
        lambda share: human_subset(with_share(config, share), units),
        len(units),
        cost,
        lambda grid, seed: replicate(config, units, grid, seed, judge),
    )


SHOWN = shown("human_votes")
"""The share plan's table as printed."""


def plan_text(config: StudyConfig, result: JudgePlan) -> str:
    """The share plan as the command line prints it: what was assumed, the estimator and its formula,
    the table, and the recommendation."""
    currency = config.provider.currency
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
    ]
    lines += judge_planning.table_lines(
        result,
        SHOWN,
        "half_width_*: mean half-width of the pairs' 95 % win-rate intervals; n_human, n_effective: "
        "per pair (n_effective: human items worth as much as people and judge together)",
        currency,
        "too small for two human items in every pair",
        lambda row: f"{row['human_votes']} human votes, {row['hits']} HITs, {row['cost']} {currency}",
        "even all items voted on fall short: raise votes_per_prompt or relax the target",
        "votes",
    )
    return "\n".join(lines)


def decide_export(
    config: StudyConfig,
    export_dir,
    profiles: dict[str, str] | None = None,
) -> dict[str, bool | None]:
    """The decisions a finished run's export (votes.csv and judge.csv) gets right with the PPI analysis,
    as the plan scores a simulated study's (``profiles`` unused: no win-rate decision is about the workers)."""
    from pathlib import Path

    from hitkit.analysis.ppi import win_rates
    from hitkit.protocols.pairwise.judge import items, read_judge
    from hitkit.protocols.pairwise.reading import read_votes

    export_dir = Path(export_dir)
    table = win_rates(items(read_votes(export_dir), read_judge(export_dir / "judge.csv")))
    return decide_pairs(corrected(table, len(table)), "ppi", task_for(config).perceived_quality())
