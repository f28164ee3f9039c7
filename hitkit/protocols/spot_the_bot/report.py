"""Spot The Bot in the report: win rates, TrueSkill ranking with rank ranges, survival, stability,
annotators, and the methods."""

from __future__ import annotations

import pandas as pd

from hitkit.protocols.kit.report import written
from hitkit.protocols.spot_the_bot import figures
from hitkit.report.parts import (
    ReportFigure,
    ReportInput,
    Section,
    correction,
    interval_method,
    judge_facts,
    judge_section,
    num,
)


def sections(inp: ReportInput) -> list[Section]:
    """Win rates, TrueSkill ranking with rank ranges, survival and stability curves, annotators."""
    t, s = inp.tables, inp.summary
    survival = [_survival(t, s)] if "survival" in t else []
    return [_win_rates(t, s), _ranking(t, s), *survival, _stability(t, s), _annotators(t, s), *judge_sections(inp)]


def _win_rates(t: dict[str, pd.DataFrame], s: dict) -> Section:
    """The pairs' win rates (and the features', when written), with their matrix."""
    wins = Section("Win rates")
    wins.text.append(
        "Win rate of the row system over the column system: of the annotations where one speaker got "
        "the higher label (human > unsure > bot), the share the row system won; * chi-square test "
        f"p < 0.05 that wins and losses split evenly ({correction(s)})."
    )
    order = list(t["ranking"]["system"])
    wins.figures.append(
        ReportFigure(
            "win_rates",
            "Win rate of row over column; * chi-square p < 0.05.",
            figures.win_rates(t["win_rates"], order, correction(s)),
        )
    )
    wins.tables.append(("Win rates", t["win_rates"]))
    wins.tables += written(t, [("feature_win_rates", "Feature win rates (fluency, sensibleness, specificity)")])
    return wins


def _ranking(t: dict[str, pd.DataFrame], s: dict) -> Section:
    """The TrueSkill ranking with its rank ranges and clusters."""
    ranking = t["ranking"]
    rank = Section("Ranking")
    rank.text.append(
        f"TrueSkill ranking (by {s.get('ranked_by', 'mu')}) with 95 % rank ranges from "
        f"{s.get('n_boot', '?')} bootstrap resamples of the games; systems whose ranges overlap "
        "share a cluster, written (first,last)."
    )
    rank.figures.append(
        ReportFigure(
            "ranking", "95 % bootstrap rank range of each system, coloured by cluster.", figures.ranking(ranking)
        )
    )
    rank.tables.append(("Ranking", ranking))
    return rank


def _survival(t: dict[str, pd.DataFrame], s: dict) -> Section:
    """How long each bot's speakers went unspotted, with the log-rank tests and the Cox model."""
    surv = Section("Survival")
    unit = s.get("survival", {}).get("cluster")
    variance = f" with a cluster-robust variance (clusters: {unit}s)" if unit not in (None, "annotation") else ""
    surv.text.append(
        "Share of each bot's speakers not yet spotted after k exchanges (Turnbull estimate on "
        f"interval-censored data); pairwise generalized log-rank tests{variance}, "
        f"{correction(s)}."
    )
    surv.figures.append(
        ReportFigure("survival", "Turnbull survival curve per system.", figures.survival(t["survival"]))
    )
    surv.tables += written(
        t, [("survival_tests", "Generalized log-rank tests"), ("cox", "Cox proportional hazards per system")]
    )
    return surv


def _stability(t: dict[str, pd.DataFrame], s: dict) -> Section:
    """How stable the clustered ranking is against conversations per pair, or how to compute it."""
    stab = Section("Stability")
    if "stability" not in t:
        stab.text.append(
            "Ranking stability was not computed (minutes of computing): hitkit report --stability adds it."
        )
        return stab
    st = s.get("stability", {})
    stab.text.append(
        f"Share of the most frequent clustered ranking over {st.get('n_sub', '?')} subsamples per "
        f"number of conversations per pair ({st.get('n_boot', '?')} bootstrap resamples each); "
        "the dashed line is 95 %."
    )
    stab.figures.append(
        ReportFigure(
            "stability", "Ranking stability against conversations per pair.", figures.stability(t["stability"])
        )
    )
    stab.tables += written(t, [("stability_smallest", "Smallest number of conversations per pair reaching 95 %")])
    return stab


def _annotators(t: dict[str, pd.DataFrame], s: dict) -> Section:
    """The annotators' correctness and time, and the agreement tables."""
    ann = Section("Annotators")
    ann.text.append(
        f"Mean annotator correctness {num(s.get('correctness_mean'))} "
        f"({num(s.get('correctness_mean_human_human'))} on human–human material); share of "
        f"annotators below 50 %: {num(s.get('correctness_share_below_half'))}. Median time per "
        f"segment annotation: {num(s.get('median_elapsed_s', s.get('mean_elapsed_s')), 1)} s"
        f" ({s.get('implausible_elapsed', 0)} implausible times left out)."
    )
    ann.tables += written(
        t,
        [
            ("label_agreement", "Agreement per system and label (chance 0.33)"),
            ("segment_lengths", "Per segment length"),
            ("annotation_time", "Annotation time"),
        ],
    )
    return ann


def _share(j: dict, of: str) -> str:
    """How the conversations people annotated were drawn (a subset ``of`` something), from the judge's summary."""
    if str(j.get("selection") or "uniform").startswith("uncertainty"):
        return (
            f"a subset of {of} drawn with known, unequal probabilities (a uniform pilot, then more where the judge "
            "was unsure; every estimate inverse-probability weighted by conversation)"
        )
    return f"a uniformly random subset of {of}"


def judge_sections(inp: ReportInput) -> list[Section]:
    """With an LLM judge: each pair's win rate from people only, the judge only and both combined
    (prediction-powered), and the judge's bias per system; nothing without one."""
    j = inp.summary.get("judge") or {}
    return judge_section(
        inp,
        f"The judge labelled both speakers of all {j.get('items', '?')} segments; people annotated "
        f"{_share(j, 'them')}, drawn by whole conversations within each pair of systems: "
        f"{j.get('human_conversations', '?')} of the {j.get('conversations', '?')} conversations of two different "
        f"systems, {j.get('human_items', '?')} of their {j.get('pair_items', '?')} segments. Per pair: the win rate of the first system "
        "(wins / (wins + losses), human > unsure > bot, ties excluded) from people only, from the judge only (its "
        "naive interval ignores its bias) and prediction-powered (PPI++ for a ratio), which corrects the judge by "
        "its error on the conversations people annotated; a conversation's segments are prefixes of each other, so "
        "the intervals resample conversations. λ is the weight the judge got (0: people only); n_effective is how "
        "many human-annotated segments the people-only estimate would need for the same precision.",
        "The judge's bias per system: the share of the system's speakers the judge labelled human minus the "
        "people's share, over the segments people annotated (positive: the judge takes it for a person more often "
        "than people do; system human: the people of the human–human material).",
        "unsure for both speakers",
        figures.judge_win_rates,
    )


def judge_methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on the LLM judge, naming the estimator; none without one."""
    facts = judge_facts(inp)
    if facts is None:
        return []
    j, fallback, models = facts
    return [
        f"An LLM judge ({models}) labelled both speakers of every one of the {j.get('items', '?')} segments as "
        "human, bot or unsure, reading each as the annotators' page shows it; annotators labelled every segment of "
        f"{_share(j, 'the conversations')} within each pair of systems (seeded), each segment's human "
        "wins and decisive outcomes being the means over its annotations, summed per conversation.",
        f"Win rates combine the two by {j.get('estimator', 'PPI++')}: per pair, the ratio of the mean human "
        "wins and the mean human decisive outcomes, each plus λ̂ times the judge's mean on the conversations "
        "without annotations minus its mean on the annotated ones (the PPI++ M-estimator for "
        "E[wins − θ · decisive] = 0), with λ̂ tuned to minimise the estimate's variance and clipped to [0, 1]; "
        f"the 95 % intervals are {j.get('interval', 'jackknife t')} intervals; {fallback} "
        "had λ̂ = 0 and use the human-only estimate. The judge-only estimates are shown for comparison, not used "
        "for inference.",
    ]


def methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on Spot The Bot, from what the analysis recorded."""
    s, t = inp.summary, inp.tables
    out: list[str] = []
    env = s.get("trueskill", {})
    out.append(
        f"Following Deriu et al. (2020), {s.get('workers', '?')} annotators labelled each speaker of "
        f"segments of bot–bot and human–human conversations as human, bot or unsure "
        f"({s.get('segment_annotations', '?')} segment annotations of {s.get('conversations', '?')} "
        "conversations; submitted or approved assignments only, no annotator excluded)."
    )
    out.append(
        "Per annotation, a system wins when its label ranks higher (human > unsure > bot); the win "
        "rate is wins / (wins + losses), tested with a chi-square test of an even split "
        f"(scipy.stats.chisquare; {correction(s)} over the pairs), with 95 % {interval_method(s)} from "
        f"{s.get('n_boot', '?')} bootstrap resamples of the {s.get('interval_unit', 'annotation')}s."
    )
    out.append(
        f"Systems were ranked with TrueSkill (μ = {env.get('mu', '?')}, σ = {num(env.get('sigma'))}, "
        f"β = {num(env.get('beta'))}, τ = {num(env.get('tau'))}, draw probability "
        f"{num(env.get('draw_probability'))}"
        f"{' (the observed tie rate)' if env.get('draw_probability_source') == 'observed tie rate' else ''}"
        f"; ranked by {s.get('ranked_by', 'mu')}) on "
        f"{s.get('games', '?')} one-versus-one games, ties as draws; {s.get('n_boot', '?')} bootstrap "
        f"resamples of the {s.get('ranking_resampled', 'game')}s (numpy default_rng, seed "
        f"{s.get('seed', '?')}) give each system's 95 % "
        "rank range, and systems with overlapping ranges form clusters (Dušek et al. 2018)."
    )
    if "survival" in s or "survival" in t:
        n_imp = s.get("survival", {}).get("n_imputations", "?")
        unit = s.get("survival", {}).get("cluster")
        robust = (
            f", with cluster-robust (sandwich) variances over {unit}s for the log-rank statistic and the "
            "Cox coefficients"
            if unit not in (None, "annotation")
            else ""
        )
        out.append(
            "Survival of each bot until spotted was estimated with Turnbull's non-parametric estimator "
            "on interval-censored data; pairs of systems were compared with the generalized log-rank "
            f"test for interval-censored data (Zhao & Sun 2004; {n_imp} imputations, seed "
            f"{s.get('seed', '?')}), and feature effects "
            "with a Cox proportional-hazards model per system (fluency, sensibleness, specificity coded "
            f"+1 / 0 / −1){robust}; p-values are {correction(s)}."
        )
    if "stability" in s:
        st = s["stability"]
        sizes = st.get("sizes") or []
        span = f"{min(sizes)}–{max(sizes)}" if sizes else "?"
        out.append(
            f"For ranking stability we drew {st.get('n_sub', '?')} subsamples of each number of "
            f"conversations per pair from {span}, ranked each with {st.get('n_boot', '?')} bootstrap "
            "resamples, and report the share of the most frequent clustered ranking, with all systems "
            "and without each one."
        )
    return out + judge_methods(inp)
