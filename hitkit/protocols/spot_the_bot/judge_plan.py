"""``hitkit plan`` for a Spot The Bot study with an LLM judge: how large the crowd's share must be.

The judge labels every segment's two speakers; people annotate a uniformly random share of the
conversations within each pair of systems, all their segments (:func:`hitkit.judges.human_subset.human_subset`), so the plan sizes
``judge.human_share``. Each simulated study (seeded) draws the crowd's annotations of every segment
as the plain plan does (:func:`hitkit.protocols.spot_the_bot.plan.simulate_annotations`, on
placeholder bot–bot material of the study's |S_ij|) and the simulated judge's labels
(:func:`judge_labels`); then, at each share of the grid, the share is drawn as a launch draws it,
the other segments' annotations are dropped and the real analysis runs on what is left
(:func:`hitkit.protocols.spot_the_bot.judge_analysis.win_rates`: PPI++ on the win rate WINS / (WINS +
LOSSES), a ratio of means, :func:`hitkit.analysis.ppi_ratio.ppi_ratio`), which gives the people-only
intervals from the same annotations too. With ``judge.select: uncertainty`` the share is drawn as such a
launch draws it — a uniform pilot of conversations, then a second wave of conversations from the simulated
judge's labels and the pilot's annotations (:func:`_second_wave`) — and analysed with the weights by
conversation; a share costs what the uniform rule's does (the expected number of conversations is the budget). The pairwise-win-rate decisions
(:data:`hitkit.simulation.judge_planning.PAIR_DECISIONS`) are scored against simulated.quality (human-likeness)
with Bonferroni-corrected intervals, as pairwise's share plan scores them.

**The simulated judge.** Agreement P: the chance that its label of a speaker (human, unsure or bot)
is the crowd's most frequent label of that speaker on the segment. It copies that label with
probability (3P − 1)/2 and otherwise draws one of the three at random: P = 1 copies the crowd, P = ⅓
is a die, useless to prediction-powered inference. Bias per system B: how much more often the judge
labels the system's speakers human than people do (the analysis' ``judge_bias``); the system's labels
are moved toward (or away from) human with the chance that makes the difference B. A pilot (:func:`from_pilot`)
measures both on a previous export's ``annotations.csv`` and ``judge.csv``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from hitkit.errors import HitkitError
from hitkit.judges.design import uncertain
from hitkit.judges.section import own_share
from hitkit.protocols import task_for
from hitkit.protocols.kit.judge_plan import Sized, Target, share_plan, shown
from hitkit.protocols.spot_the_bot.annotations import LABELS
from hitkit.simulation import judge_planning, planning, simulated_judge
from hitkit.simulation.judge_planning import uniform, with_share
from hitkit.simulation.simulated_judge import AssumedJudge
from hitkit.study.config import StudyConfig

DEFAULT_AGREEMENT = 0.7
"""The judge's agreement with the crowd's label of a speaker that the plan assumes unless told."""
COIN = 1 / 3
"""A judge that draws one of the three labels at random agrees with any label a third of the time."""
REPLICATES = 20
"""Simulated studies by default: each builds a whole Spot The Bot study's annotations (as the plain plan's 20)."""
ESTIMATOR = (
    "PPI++, prediction-powered inference with power tuning (Angelopoulos, Duchi & Zrnic 2023), by "
    "hitkit.protocols.spot_the_bot.judge_analysis.win_rates as hitkit analyze runs it: the win rate "
    "WINS / (WINS + LOSSES) as a ratio of means (hitkit.analysis.ppi_ratio.ppi_ratio), lambda tuned per pair, "
    "jackknife t intervals"
)
DECISIONS = judge_planning.PAIR_DECISIONS
SHOWN = shown("human_annotations")
"""The share plan's table as printed."""
TARGET = Target(REPLICATES, 0.5, "a win rate's interval", "the win rates' 95 % intervals", DECISIONS)
"""What the share plan sizes: the pairs' win rates."""
KEYS = ["conversation_id", "segment_exchanges", "entity"]


JUDGE = simulated_judge.JudgeScale(
    "agreement",
    "--judge-agreement",
    COIN,
    "1/3",
    "1/3 is a die over human, unsure and bot, 1 copies the crowd's label",
    "the chance its label of a speaker is the crowd's most frequent one; 1/3 a die",
    -1,
    1,
    "judge's share of the system's speakers labelled human minus the crowd's",
)
"""The simulated judge's agreement and bias, as told and printed."""

JUDGE_OPTION, JUDGE_MEANS, BIAS_MEANS = "--judge-agreement", "agreement with the crowd", "share labelled human"
"""How ``hitkit plan`` asks for the simulated judge: the option of its quality, what it is, what a bias moves."""
DEFAULT_JUDGE = DEFAULT_AGREEMENT


def assumed(agreement: float, bias: dict[str, float], systems: list[str]) -> AssumedJudge:
    """The judge the coordinator assumes: ``agreement`` with the crowd's label, a bias per system."""
    return simulated_judge.assume(JUDGE, agreement, bias, systems)


def _modal(annotations: pd.DataFrame) -> pd.Series:
    """The crowd's most frequent label of each speaker of each annotated segment (ties: the label
    nearer human), indexed by :data:`KEYS`."""
    counts = annotations.groupby(KEYS)["label"].value_counts().unstack(fill_value=0)
    counts = counts.reindex(columns=list(LABELS), fill_value=0)
    return counts.idxmax(axis=1)


def judge_labels(annotations: pd.DataFrame, judge: AssumedJudge, rng: np.random.Generator) -> pd.DataFrame:
    """The simulated judge's ``judge.csv`` (the columns its analysis reads) for every segment the
    annotations cover: per speaker the crowd's most frequent label with probability (3P − 1)/2, else
    one of the three at random; then the labels of each system given a bias B moved toward human or bot
    until the judge's share of its speakers labelled human exceeds the crowd's by B (other systems keep
    whatever difference copying and random labels make)."""
    modal = _modal(annotations)
    first = annotations.drop_duplicates(KEYS).set_index(KEYS).loc[modal.index]
    labels = np.array(LABELS, dtype=object)
    copy = rng.random(len(modal)) < (3 * judge.value - 1) / 2
    label = np.where(copy, modal.to_numpy(dtype=object), labels[rng.integers(0, 3, len(modal))])
    system = first["system"].astype(str).to_numpy()
    crowd = (annotations["label"] == "human").groupby([annotations[k] for k in KEYS]).mean().loc[modal.index].to_numpy()
    for name, b in judge.bias.items():
        on = system == name
        # The shift that makes the judge's share labelled human exceed the crowd's by b on this system's speakers.
        shift = b - ((label[on] == "human").mean() - crowd[on].mean()) if on.any() else 0.0
        movable = (label[on] != "human") if shift > 0 else (label[on] == "human")
        if not shift or not movable.any():
            continue
        chance = min(1.0, abs(shift) / movable.mean())
        moved = movable & (rng.random(on.sum()) < chance)
        label[np.flatnonzero(on)[moved]] = "human" if shift > 0 else "bot"
    out = modal.index.to_frame(index=False)
    return out.assign(study=first["study"].to_numpy(), system=system, label=label)


def _base(config: StudyConfig) -> StudyConfig:
    """The study on placeholder bot–bot material of its own |S_ij| (as the plain plan and a dry run build it)."""
    from hitkit.protocols.spot_the_bot import plan

    return plan.with_size(config, plan.size_of(config))


def share_of(config: StudyConfig, units) -> float:
    """The study file's own share: ``judge.human_share``, or ``human_items`` over the items."""
    return own_share(config, len(units))


def replicate(base: StudyConfig, units, shares: list[float], seed: int, judge: AssumedJudge) -> dict[float, dict]:
    """One simulated study analysed at every share: per share the mean half-widths (people only, PPI and
    the formula's), n_effective, λ, the human segments per pair and each analysis' decisions."""
    from hitkit.judges.human_subset import human_subset
    from hitkit.protocols.spot_the_bot.judge_analysis import items, win_rates
    from hitkit.protocols.spot_the_bot.plan import simulate_annotations

    annotations = simulate_annotations(base.model_copy(update={"judge": None}), seed)
    labels = judge_labels(annotations, judge, np.random.default_rng(seed))
    full = items(annotations, labels.assign(human_subset=True))
    rho = {}
    for (a, b), part in full.groupby(["system_a", "system_b"]):
        theta = part["human_wins"].sum() / part["human_decisive"].sum()
        y = part["human_wins"] - theta * part["human_decisive"]
        f = part["judge_wins"] - theta * part["judge_decisive"]
        rho[(a, b)] = float(np.corrcoef(y, f)[0, 1]) if y.std() > 0 and f.std() > 0 else 0.0
    segment_of = {u.key: (str(u.payload["conversation"]), str(u.payload["k"])) for u in units}
    keys = list(zip(full["conversation_id"].astype(str), full["segment_exchanges"].astype(str)))
    quality = task_for(base).perceived_quality()
    out = {}
    for share in shares:
        sized = with_share(base, share, seed)
        drawn, probability = human_subset(sized, units), None
        if uncertain(sized):
            drawn, probability = _second_wave(sized, units, annotations, labels, drawn)
        chosen = {segment_of[u.key] for u in drawn}
        kept = np.array([k in chosen for k in keys])
        per_item = full.assign(
            human_subset=kept,
            human_wins=full["human_wins"].where(kept),
            human_decisive=full["human_decisive"].where(kept),
        )
        wide = win_rates(per_item, probability=probability)
        out[share] = {
            **judge_planning.widths(wide, [rho[(a, b)] for a, b in zip(wide["system_a"], wide["system_b"])]),
            "ppi": _decide(wide, "ppi", quality),
            "human": _decide(wide, "human", quality),
        }
    return out


def _second_wave(
    config: StudyConfig, units, annotations: pd.DataFrame, labels: pd.DataFrame, pilot
) -> tuple[list, pd.Series]:
    """``judge.select: uncertainty`` in one simulated study, as a launch draws it
    (:func:`hitkit.judges.second_wave.wave` on :func:`hitkit.protocols.spot_the_bot.judge.selection` of the
    pilot's annotations and the simulated judge's labels): (the units people annotate, each conversation's π)."""
    from hitkit.judges.second_wave import wave
    from hitkit.protocols.spot_the_bot.judge import selection

    keys = ["conversation_id", "segment_exchanges"]
    first = {(str(u.payload["conversation"]), str(u.payload["k"])) for u in pilot}
    seen = annotations[[k in first for k in zip(*(annotations[c].astype(str) for c in keys))]]
    scores = selection(units, {"annotations": seen}, labels)
    groups, drawn, pi = wave(config, units, scores, {u.key for u in pilot})
    chosen = [u for k, d in zip(groups, drawn) if d for u in groups[k]]
    return chosen, pd.Series(pi, index=list(groups))


def _decide(wide: pd.DataFrame, kind: str, quality: dict[str, float]) -> dict[str, bool | None]:
    """The :data:`DECISIONS` one analysis (``kind``: ppi or human) of the pairs' win rates (``judge_win_rates``)
    gets right, at Bonferroni-corrected levels, against the qualities of the systems it compares (the
    human–human material's people are no system of a pair)."""
    compared = set(wide["system_a"]) | set(wide["system_b"])
    return judge_planning.decide_pairs(
        judge_planning.corrected(wide, len(wide)), kind, {s: q for s, q in quality.items() if s in compared}
    )


def plan(
    config: StudyConfig,
    judge: AssumedJudge,
    *,
    replicates: int | None = None,
    shares: list[float] | None = None,
    width: float | None = None,
) -> judge_planning.JudgePlan:
    """The share plan (:func:`hitkit.simulation.judge_planning.plan_shares`) of a Spot The Bot study: ``replicates``
    simulated studies, each analysed at every share of the grid (``shares`` or the default with the
    study's own), and the share recommended for ``width`` or the first decision that applies."""
    return share_plan(config, judge, TARGET, _sized, replicates, shares, width)


def _sized(config: StudyConfig, judge: AssumedJudge) -> Sized:
    """The Spot The Bot study's side of its share plan, on placeholder bot–bot material of its |S_ij|: the
    segments people annotate at each share, and what their HITs cost."""
    from hitkit.judges.human_subset import human_subset

    base = _base(config)
    units = task_for(base).build().units
    section = task_for(base).config.spot_the_bot

    def fits(share: float):
        human_subset(with_share(base, share), units)  # under the uncertainty rule: its pilot
        return planning.design_cost(uniform(with_share(base, share)))

    def cost(share: float) -> dict:
        # Under the uncertainty rule the expected number of human conversations is the uniform rule's: cost them alike.
        hits, _, paid = planning.design_cost(uniform(with_share(base, share)))
        segments = len(human_subset(uniform(with_share(base, share)), units))
        return {
            "human_segments": segments,
            "human_annotations": segments * section.annotations_per_segment,
            "hits": hits,
            "cost": str(paid),
        }

    return Sized(
        share_of(base, units), fits, len(units), cost, lambda grid, seed: replicate(base, units, grid, seed, judge)
    )


def plan_text(config: StudyConfig, result: judge_planning.JudgePlan) -> str:
    """The share plan as the command line prints it: what was assumed, the estimator and its formula, the
    table, and the recommendation."""
    currency = config.provider.currency
    section = task_for(_base(config)).config.spot_the_bot
    rule = (
        "a uniform pilot, then where the judge is unsure (select: uncertainty, weighted by conversation), of a"
        if uncertain(config)
        else "a uniformly random"
    )
    lines = [
        f"Plan of the crowd's share for '{config.study}' (Spot The Bot with an LLM judge, on "
        f"{config.provider.kind}): the judge labels both speakers of all {result.items} segments, people "
        f"annotate {rule} share of each pair's conversations, {section.annotations_per_segment} "
        f"annotations each (kept); {result.replicates} simulated studies on placeholder material from the "
        f"simulated crowd and simulated.quality, {result.seconds} s.",
        simulated_judge.describe(result.judge, JUDGE),
        f"Estimator: {ESTIMATOR}; a pair differs when its interval at 1 - {judge_planning.ALPHA}/pairs "
        f"(Bonferroni) excludes 1/2. Sizing formula: {judge_planning.FORMULA} (n human segments, N_u judge-only "
        f"segments of a pair, rho the correlation of the judge's and the people's linearised win "
        f"(wins - theta * decisive), {result.table['rho'].mean():.2f} here); half_width_formula applies it to "
        f"the people-only half-width.",
    ]
    lines += judge_planning.table_lines(
        result,
        SHOWN,
        "half_width_*: mean half-width of the pairs' 95 % win-rate intervals; n_human, n_effective: "
        "segments per pair (n_effective: human segments worth as much as people and judge together); "
        "human_annotations: segment annotations people make",
        currency,
        "too small for two human segments in every pair (or to pack)",
        lambda row: f"{row['human_segments']} segments, {row['hits']} HITs, {row['cost']} {currency}",
        "even all segments annotated fall short: raise annotations_per_segment or |S_ij|, or relax the target",
        "annotations",
    )
    return "\n".join(lines)


def from_pilot(directory, systems: list[str]) -> AssumedJudge:
    """The judge measured on a previous export (``annotations.csv`` and ``judge.csv``): agreement, the
    share of the judge's speaker labels equal to the crowd's most frequent label on the annotated
    segments (at least a die's); bias per system, the analysis' ``judge_bias``."""
    from pathlib import Path

    from hitkit.protocols.spot_the_bot.judge import read_judge
    from hitkit.protocols.spot_the_bot.judge_analysis import judge_bias
    from hitkit.protocols.spot_the_bot.reading import read_annotations

    directory = Path(directory)
    judge_planning.pilot_files(directory, ("annotations.csv", "judge.csv"))
    annotations, judged = read_annotations(directory), read_judge(directory / "judge.csv")
    for t in (annotations, judged):
        for k in ("conversation_id", "segment_exchanges"):
            t[k] = t[k].astype(str).str.strip()
    modal = _modal(annotations).rename("crowd")
    both = judged.set_index(KEYS)[["label"]].join(modal, how="inner")
    if both.empty:
        raise HitkitError(
            f"--pilot {directory}: no segment has both annotations and a judge label; the two files "
            f"must come from the same study"
        )
    bias = judge_bias(annotations, judged)
    ours = {s: float(b) for s, b in zip(bias["system"], bias["bias"]) if s in set(systems) and np.isfinite(b)}
    return AssumedJudge(
        "agreement",
        max(COIN, float((both["label"] == both["crowd"]).mean())),
        ours,
        f"measured on the pilot {directory}",
        len(both),
    )


def pilot_judge(pilot, config: StudyConfig) -> AssumedJudge:
    """The judge measured on a pilot export (``annotations.csv`` and ``judge.csv``)."""
    return from_pilot(pilot, [s.name for s in config.systems])


def decide_export(
    config: StudyConfig,
    export_dir,
    profiles: dict[str, str] | None = None,
) -> dict[str, bool | None]:
    """The :data:`DECISIONS` a finished run's export (``annotations.csv`` and ``judge.csv``) gets right with
    the analysis ``hitkit analyze`` runs on it (:func:`hitkit.protocols.spot_the_bot.judge_analysis.win_rates`: PPI++
    per pair with :func:`hitkit.analysis.ppi_ratio.ppi_ratio` on the conversations' sums), scored as the plan
    scores a simulated study's (``profiles`` unused: no win-rate decision is about the workers)."""
    from pathlib import Path

    from hitkit.protocols.spot_the_bot.judge import read_judge
    from hitkit.protocols.spot_the_bot.judge_analysis import items, win_rates
    from hitkit.protocols.spot_the_bot.reading import read_annotations

    export_dir = Path(export_dir)
    per_item = items(read_annotations(export_dir), read_judge(export_dir / "judge.csv"))
    return _decide(win_rates(per_item), "ppi", task_for(config).perceived_quality())
