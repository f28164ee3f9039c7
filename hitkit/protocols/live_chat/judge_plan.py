"""``hitkit plan`` for a live-chat study with an LLM judge: how large the crowd's share must be.

In a judged live-chat study every HIT is still chatted through (the crowd makes the conversations);
each real system's chat slot is *rated* by its worker with probability ``judge.human_share``
(:func:`hitkit.judges.human_subset.rated`, drawn when the study is built; the QC bot's slot always is) and
the judge rates every conversation. So the share does not change the number of HITs or what they
cost as the study file prices them (``hit.reward``): it changes how many rating questionnaires the
workers fill in, i.e. shorter HITs; lowering the reward to match is the coordinator's call.

Each simulated study (seeded) draws the ratings of every conversation as the plain plan does
(:func:`hitkit.protocols.live_chat.plan.simulate_tables`: the simulated crowd, quality control's
spammers and the QC bot included) and the simulated judge's rating of every real-system
conversation (:func:`judge_scores`); then, at each share, the slots are drawn as a launch draws them,
the ratings of unrated conversations are dropped, and the real analysis runs on what is left:
reverse, standardise per worker, quality control (:func:`hitkit.protocols.live_chat.steps.screened`)
and the judge's part (:func:`hitkit.protocols.live_chat.judge.analysis_tables`: PPI++ of the mean
z per system, :func:`hitkit.analysis.ppi.ppi_mean`), which gives the people-only intervals from the
same ratings too. A system is called better than another when their overall 95 % intervals
separate (a conservative test: the PPI table has no pairwise test); systems rank by their estimate.

**The simulated judge.** Correlation ρ (``--judge-correlation``): among a system's conversations,
the correlation of its rating on a criterion with the worker's z (what PPI++ per system gains from):
m + ρ·(z − m) + √(1 − ρ²)·s·ε, m the system's mean z, s the spread of the worker's z around it, ε standard
normal; so the judge is right on average about each system unless given a bias per system B (in z
units: how much higher the judge scores the system than people do, the analysis' ``judge_bias``).
Put on the 0–100 slider's scale. ρ = 0 is useless to prediction-powered inference. A pilot (:func:`from_pilot`) measures both on a previous export's ``ratings.csv`` and
``judge.csv``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hitkit.errors import ConfigError, HitkitError
from hitkit.judges.section import human_share, judge_section
from hitkit.protocols import task_for
from hitkit.protocols.kit.judge_plan import Sized, Target, share_plan, shown
from hitkit.simulation import judge_planning, planning, simulated_judge
from hitkit.simulation.judge_planning import with_share
from hitkit.simulation.simulated_judge import AssumedJudge
from hitkit.study.config import StudyConfig

DEFAULT_CORRELATION = 0.5
"""The judge's correlation with the worker's rating that the plan assumes unless told."""
REPLICATES = 20
"""Simulated studies by default: each standardises and tests every worker's ratings at every share."""
ESTIMATOR = (
    "PPI++, prediction-powered inference with power tuning (Angelopoulos, Duchi & Zrnic 2023), by "
    "hitkit.protocols.live_chat.judge.analysis_tables as hitkit analyze runs it: the mean z per system "
    "(hitkit.analysis.ppi.ppi_mean), lambda tuned per system, jackknife t intervals, workers who pass "
    "quality control only"
)
DECISIONS = planning.DECISIONS | {
    "closest_pair": "the two systems of closest quality differ (their overall 95 % intervals separate)",
    "every_pair": "every pair of systems of different quality differs (their overall 95 % intervals separate)",
    "spammers_fail_qc": "every spammer fails quality control",
}
"""The plain live-chat plan's decisions, a difference being told by the PPI table's intervals (it has no
pairwise test)."""
SHOWN = shown("rated_conversations", "ratings")
"""The share plan's table as printed."""
TARGET = Target(REPLICATES, None, "a system's mean z interval", "the systems' 95 % mean-z intervals", DECISIONS)
"""What the share plan sizes: the systems' overall mean z (no bound on the half-width)."""
SCALE = 15.0
"""Slider points per unit of the judge's simulated z (the analysis standardises the judge's ratings, so
only the spread's shape matters, not this number)."""


JUDGE = simulated_judge.JudgeScale(
    "correlation",
    "--judge-correlation",
    0.0,
    "0",
    "0 is a judge unrelated to people, 1 rates as the worker does",
    "of its rating with the worker's z within a system; 0 useless",
    -3,
    3,
    "judge's mean z minus the workers', in z units",
)
"""The simulated judge's correlation and bias, as told and printed."""

JUDGE_OPTION, JUDGE_MEANS, BIAS_MEANS = "--judge-correlation", "correlation with the worker", "mean z"
"""How ``hitkit plan`` asks for the simulated judge: the option of its quality, what it is, what a bias moves."""
DEFAULT_JUDGE = DEFAULT_CORRELATION


def assumed(correlation: float, bias: dict[str, float], systems: list[str]) -> AssumedJudge:
    """The judge the coordinator assumes: ``correlation`` with the worker's rating, a bias per system."""
    return simulated_judge.assume(JUDGE, correlation, bias, systems)


def judge_scores(ratings: pd.DataFrame, criteria, judge: AssumedJudge, rng: np.random.Generator) -> pd.DataFrame:
    """The simulated judge's ``judge.csv`` (the columns its analysis reads, ``human_subset`` to fill) for
    every real-system conversation of ``ratings`` (all of them rated): per criterion m + ρ·(z − m) +
    √(1 − ρ²)·s·ε + B, m the system's mean z, s the spread of the worker's z − m, B the system's bias; on the
    slider's scale (clipped to it) and reversed back for negative criteria."""
    from hitkit.protocols.live_chat.quality import reverse_negative, standardise_per_worker

    z = standardise_per_worker(reverse_negative(ratings, criteria))
    real = z[~z["is_control"]].reset_index(drop=True)
    z_all = real["z"].fillna(0).to_numpy()
    mean = real.assign(z=z_all).groupby("system")["z"].transform("mean").to_numpy()
    within = z_all - mean
    # The noise as spread as the worker's own ratings: a spammer's wild z does not drown a careful worker's.
    spread = pd.Series(within).groupby(real["worker_id"].to_numpy()).transform("std").fillna(0.0).to_numpy()
    rho = judge.value
    f = (
        mean
        + rho * within
        + math.sqrt(1 - rho**2) * spread * rng.standard_normal(len(real))
        + real["system"].map(judge.bias).fillna(0.0).to_numpy()
    )
    negative = real["criterion"].isin({c.name for c in criteria if c.polarity == "negative"}).to_numpy()
    score = np.clip(50 + SCALE * f, 0, 100)  # a slider's range
    return real[["conversation_id", "worker_id", "system", "criterion"]].assign(
        score=np.where(negative, 100 - score, score), parsed=True, model="simulated"
    )


def _units(config: StudyConfig, share: float, seed: int | None = None):
    """The study's chat slots at ``share`` (each with its ``rated`` draw); ConfigError where a system would
    have fewer than two rated."""
    return task_for(with_share(config, share, seed)).build().units


def _quality(config: StudyConfig) -> dict[str, float]:
    """The real systems' quality as the simulated crowd perceives it (the QC bot left out)."""
    task = task_for(config)
    return {s: q for s, q in task.perceived_quality().items() if s not in task.control_systems()}


def _decide(
    overall: pd.DataFrame, kind: str, quality: dict[str, float], workers: pd.DataFrame, profiles: dict[str, str]
) -> dict[str, bool | None]:
    """The :data:`DECISIONS` one analysis (``kind``: ppi or human) of the overall mean z per system gets right
    (:func:`hitkit.simulation.planning.ranked_nothing` where a system has no score: no QC-passed worker chatted with it)."""
    intervals = {
        s: (lo, hi) for s, lo, hi in overall[["system", f"{kind}_low", f"{kind}_high"]].itertuples(index=False)
    }
    ranked = list(overall.sort_values(kind, ascending=False)["system"])
    out = (
        planning.ranked_nothing(quality)
        if set(quality) - set(intervals)
        else planning.decide(quality, lambda a, b: intervals[a][0] > intervals[b][1], ranked, intervals)
    )
    passed = workers.set_index("worker_id")["passed"]
    spammers = [w for w in passed.index if profiles.get(w) == "spammer"]
    out["spammers_fail_qc"] = (not passed[spammers].astype(bool).any()) if spammers else None
    return out


def replicate(config: StudyConfig, shares: list[float], seed: int, judge: AssumedJudge) -> dict[float, dict]:
    """One simulated study analysed at every share: per share the mean half-widths of the systems'
    overall mean z (people only, PPI and the formula's), n_effective, λ, the rated conversations per
    system and each analysis' decisions (None at a share whose draw leaves a system under two rated
    conversations: a launch would refuse that draw)."""
    from hitkit.analysis.tables import counted
    from hitkit.protocols.live_chat.judge import analysis_tables
    from hitkit.protocols.live_chat.plan import simulate_tables
    from hitkit.protocols.live_chat.steps import screened

    criteria = config.live_chat.criterion_list()
    assignments, ratings, profiles = simulate_tables(config.model_copy(update={"judge": None}), seed)
    assignments = counted(assignments)
    unit_of = ratings.attrs["units"]
    scored = judge_scores(ratings, criteria, judge, np.random.default_rng(seed))
    quality = _quality(config)
    out = {}
    for share in shares:
        try:
            rated = {u.key for u in _units(config, share, seed) if u.payload.get("rated", True)}
        except ConfigError:
            out[share] = {
                **dict.fromkeys(judge_planning.AVERAGED, math.nan),
                "ppi": dict.fromkeys(DECISIONS),
                "human": dict.fromkeys(DECISIONS),
            }
            continue
        kept = ratings[ratings["is_control"] | ratings["conversation_id"].map(unit_of).isin(rated)]
        z, _, workers, _ = screened(assignments, kept, criteria)
        passed = set(workers.loc[workers["passed"], "worker_id"].astype(str))
        judged = scored.assign(human_subset=scored["conversation_id"].map(unit_of).isin(rated))
        tables, _, _ = analysis_tables(z, judged, criteria, passed)
        overall = tables["judge_scores"][tables["judge_scores"]["criterion"] == "overall"]
        rho = _correlations(z, judged, criteria, passed)
        out[share] = {
            **judge_planning.widths(overall, overall["system"].map(rho).fillna(0.0).to_numpy(float)),
            "ppi": _decide(overall, "ppi", quality, workers, profiles),
            "human": _decide(overall, "human", quality, workers, profiles),
        }
    return out


def _correlations(z: pd.DataFrame, judged: pd.DataFrame, criteria, passed: set[str]) -> dict[str, float]:
    """Per system, the correlation of the worker's and the judge's overall score (mean z over criteria)
    on the rated conversations: at this share, since a worker's z is standardised over the conversations
    they rated (fewer at a smaller share, so a noisier z and a lower ρ)."""
    from hitkit.protocols.live_chat.judge import conversations

    per = conversations(z, judged, criteria, passed)
    overall = per.groupby(["system", "conversation_id"])[["human", "judge"]].mean().dropna().reset_index()
    out = {}
    for system, part in overall.groupby("system"):
        ok = len(part) > 2 and part["human"].std() > 0 and part["judge"].std() > 0
        out[system] = float(np.corrcoef(part["human"], part["judge"])[0, 1]) if ok else 0.0
    return out


def plan(
    config: StudyConfig,
    judge: AssumedJudge,
    *,
    replicates: int | None = None,
    shares: list[float] | None = None,
    width: float | None = None,
) -> judge_planning.JudgePlan:
    """The share plan (:func:`hitkit.simulation.judge_planning.plan_shares`) of a live-chat study: ``replicates``
    simulated studies, each analysed at every share of the grid (``shares`` or the default with the
    study's own), and the share recommended for ``width`` (mean PPI half-width of the systems' overall
    mean z) or the first decision that applies."""
    return share_plan(config, judge, TARGET, _sized, replicates, shares, width)


def _sized(config: StudyConfig, judge: AssumedJudge) -> Sized:
    """The live-chat study's side of its share plan: its chat slots rated at each share, all of them
    chatted through (the same HITs and cost at every share)."""
    hits, _, paid = planning.design_cost(config)
    control = config.live_chat.control
    criteria = len(config.live_chat.criterion_list())

    def cost(share: float) -> dict:
        units = _units(config, share)
        n_rated = sum(1 for u in units if u.payload.get("rated", True))
        return {"rated_conversations": n_rated, "ratings": n_rated * criteria, "hits": hits, "cost": str(paid)}

    return Sized(
        human_share(judge_section(config)),
        lambda share: _units(config, share),
        sum(1 for u in task_for(config).build().units if u.payload["system"] != control),
        cost,
        lambda grid, seed: replicate(config, grid, seed, judge),
    )


def plan_text(config: StudyConfig, result: judge_planning.JudgePlan) -> str:
    """The share plan as the command line prints it: what was assumed, what the share buys, the estimator
    and its formula, the table and the recommendation."""
    currency = config.provider.currency
    full = result.table["rated_conversations"].max()
    lines = [
        f"Plan of the crowd's share for '{config.study}' (live chat with an LLM judge, on {config.provider.kind}): "
        f"workers chat in every slot of every HIT and rate each of the {result.items} real-system conversations "
        f"with probability human_share (the QC bot's always); the judge rates all of them; "
        f"{result.replicates} simulated studies from the simulated crowd and simulated.quality, {result.seconds} s.",
        simulated_judge.describe(result.judge, JUDGE),
        "What the share buys: NOT fewer HITs or a lower cost as the study file prices them (the hits and cost "
        "columns do not change: the chats are the work); each unrated conversation skips its rating questionnaire, "
        "so HITs get shorter (rated_conversations, ratings: what workers fill in) and hit.reward may be lowered "
        "to match, by you.",
        f"Estimator: {ESTIMATOR}; a system is better than another when their overall 95 % intervals separate. "
        f"Sizing formula: {judge_planning.FORMULA} (n rated conversations of a system, N_u judge-only ones, rho the "
        f"judge's correlation with the worker's overall z, {result.table['rho'].mean():.2f} here); "
        f"half_width_formula applies it to the people-only half-width.",
    ]
    lines += judge_planning.table_lines(
        result,
        SHOWN,
        "half_width_*: mean half-width of the systems' overall 95 % mean-z intervals; n_human, "
        "n_effective: conversations per system of workers who pass QC (n_effective: rated conversations worth as "
        "much as people and judge together)",
        currency,
        "too small for two rated conversations of every system",
        lambda row: (
            f"{row['rated_conversations']} of {full} conversations rated, {row['ratings']} ratings; "
            f"{row['hits']} HITs, {row['cost']} {currency} either way"
        ),
        "even every conversation rated falls short: raise the study's HITs (live_chat.hits) or relax the target",
        "ratings",
    )
    return "\n".join(lines)


def _screened_export(directory, criteria) -> tuple[pd.DataFrame, pd.DataFrame, set[str]]:
    """An export's ratings as ``hitkit analyze`` screens them: those of counted assignments reversed,
    standardised per worker and quality-controlled; returns (z, the workers' QC table, those who pass)."""
    from hitkit.analysis.tables import counted
    from hitkit.protocols.live_chat.reading import read_tables
    from hitkit.protocols.live_chat.steps import screened

    every, ratings = read_tables(directory, criteria)
    assignments = counted(every)
    ratings = ratings[ratings["assignment_id"].isin(set(assignments["assignment_id"]))]
    z, _, workers, _ = screened(assignments, ratings, criteria)
    return z, workers, set(workers.loc[workers["passed"], "worker_id"].astype(str))


def from_pilot(directory, config: StudyConfig) -> AssumedJudge:
    """The judge measured on a previous export (``ratings.csv``, ``assignments.csv`` and ``judge.csv``):
    the correlation of its rating (standardised as the analysis does) with the worker's z within each
    system (both centred on the system's mean) on the rated conversations of workers who pass QC (at
    least 0), and its bias per system (the analysis' ``judge_bias``)."""
    from pathlib import Path

    from hitkit.protocols.live_chat.judge import bias, conversations, read_judge

    directory = Path(directory)
    judge_planning.pilot_files(directory, ("ratings.csv", "judge.csv"))
    criteria = config.live_chat.criterion_list()
    z, _, passed = _screened_export(directory, criteria)
    per = conversations(z, read_judge(directory / "judge.csv", criteria), criteria, passed)
    rated = per.dropna(subset=["human", "judge"])
    if len(rated) < 3:
        raise HitkitError(
            f"--pilot {directory}: fewer than 3 ratings of QC-passed workers have a judge rating too; "
            f"the two files must come from the same study"
        )
    centred = rated[["human", "judge"]] - rated.groupby("system")[["human", "judge"]].transform("mean")
    ok = centred["human"].std() > 0 and centred["judge"].std() > 0
    rho = float(np.corrcoef(centred["human"], centred["judge"])[0, 1]) if ok else 0.0
    table = bias(per)
    systems = {s.name for s in config.systems}
    ours = {s: float(b) for s, b in zip(table["system"], table["bias"]) if s in systems and np.isfinite(b)}
    return AssumedJudge(
        "correlation",
        min(1.0, max(0.0, rho if np.isfinite(rho) else 0.0)),
        ours,
        f"measured on the pilot {directory}",
        len(rated),
    )


pilot_judge = from_pilot
"""The judge measured on a pilot export (``ratings.csv``, ``assignments.csv`` and ``judge.csv``)."""


def decide_export(
    config: StudyConfig,
    export_dir,
    profiles: dict[str, str] | None = None,
) -> dict[str, bool | None]:
    """The :data:`DECISIONS` a finished run's export (``assignments.csv``, ``ratings.csv`` and ``judge.csv``,
    the judge's ratings of every conversation, made after the crowd's) gets right with the analysis
    ``hitkit analyze`` runs on it: the counted assignments' ratings reversed, standardised per worker and
    quality-controlled, then the PPI++ mean z per system of the workers who pass QC
    (:func:`hitkit.protocols.live_chat.judge.analysis_tables`, ``judge_scores``' overall rows), scored as the
    plan scores a simulated study's; ``profiles`` (worker id -> simulated profile) tells the spammers."""
    from pathlib import Path

    from hitkit.protocols.live_chat.judge import analysis_tables, read_judge

    export_dir = Path(export_dir)
    criteria = config.live_chat.criterion_list()
    z, workers, passed = _screened_export(export_dir, criteria)
    tables, _, _ = analysis_tables(z, read_judge(export_dir / "judge.csv", criteria), criteria, passed)
    overall = tables["judge_scores"][tables["judge_scores"]["criterion"] == "overall"]
    return _decide(overall, "ppi", _quality(config), workers, profiles or {})
