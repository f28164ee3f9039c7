"""Live chat in the report: z-score ranking with intervals, significance matrix, criteria, quality
control, self-replication, and the methods."""

from __future__ import annotations

import pandas as pd

from hitkit.analysis.cr2 import PROCEDURE
from hitkit.protocols.kit.report import written
from hitkit.protocols.live_chat import figures
from hitkit.report.parts import (
    ReportFigure,
    ReportInput,
    Section,
    correction,
    file_judge_sentence,
    interval_method,
    judge_bias_part,
    judge_parts,
    num,
)


def significance_test(s: dict) -> str:
    """The significance matrix's test in words, as the summary records it (older summaries: the paper's)."""
    unit = s.get("significance_unit", "rating")
    if unit == "worker" and s.get("significance_procedure") == PROCEDURE:
        return (
            "one-sided test clustered by worker (the difference of mean z over its CR2 cluster-robust "
            "standard error, Student's t with Bell–McCaffrey degrees of freedom; valid when workers differ in "
            "taste and scale and when a few workers do most of the HITs)"
        )
    if unit == "worker":  # summaries written before the small-sample correction
        return (
            "one-sided test clustered by worker (the difference of mean z over its worker-clustered "
            "sandwich standard error, Student's t with workers − 1 degrees of freedom; valid when workers "
            "differ in taste and scale)"
        )
    what = "one criterion rating, the paper's test" if unit == "rating" else "one conversation's mean z"
    return (
        f"one-sided Mann–Whitney U (Wilcoxon rank-sum) test with every {unit} an independent observation "
        f"(unit: {what}; it ignores that a worker's ratings move together, and rejected 23.9 % (rating) or "
        "9.0 % (conversation) of true nulls at 5 % with worker and conversation effects)"
    )


def criteria_of(config) -> list[tuple[str, str, bool]] | None:
    """The study file's criteria as (name, polarity, qc), for the report's criteria and methods."""
    if config.live_chat is None:
        return None
    return [(c.name, c.polarity, c.qc) for c in config.live_chat.criterion_list()]


def _criteria(inp: ReportInput) -> list[tuple[str, str, bool]]:
    if inp.criteria:
        return inp.criteria
    from hitkit.protocols.live_chat.criteria import DEFAULT_CRITERIA

    known = {c.name: (c.name, c.polarity, c.qc) for c in DEFAULT_CRITERIA}
    fixed = {"system", "n", "z", "raw", "rank"}
    return [known.get(c, (c, "positive", True)) for c in inp.tables["systems"].columns if c not in fixed]


def _overall_intervals(tables: dict[str, pd.DataFrame], systems: pd.DataFrame):
    """(low, high) of each system's overall score, in the order of ``systems``, from the analysis'
    clustered bootstrap (``score_intervals``); (None, None) for an analysis without them."""
    intervals = tables.get("score_intervals")
    if intervals is None or intervals.empty:
        return None, None
    overall = intervals[intervals["criterion"] == "overall"].set_index("system")
    return (
        systems["system"].map(overall["low"]).to_numpy(dtype=float),
        systems["system"].map(overall["high"]).to_numpy(dtype=float),
    )


def sections(inp: ReportInput) -> list[Section]:
    """z-score ranking, significance matrix, per-criterion bars, QC pass rate, replication."""
    t, s = inp.tables, inp.summary
    alpha = float(s.get("alpha", 0.05))
    sections = [_ranking(t, s), _significance(t, s, alpha), _criteria_section(inp), _quality(t, s, alpha)]
    sections += judge_sections(inp)
    if "replication" in t:
        rep = Section("Self-replication")
        rep.text.append("Correlation of system scores between this run and the replicate run.")
        rep.tables.append(("Replication", t["replication"]))
        sections.append(rep)
    return sections


def _ranking(t: dict[str, pd.DataFrame], s: dict) -> Section:
    """The systems' overall mean z, with their bootstrap intervals where the analysis made them."""
    systems = t["systems"]
    rank = Section("Ranking")
    low, high = _overall_intervals(t, systems)
    unit = s.get("interval_unit", "worker")
    interval_words = (
        f" with its 95 % interval from {s.get('n_boot', '?')} bootstrap resamples of the {unit}s"
        if low is not None
        else ""
    )
    rank.text.append(
        "Mean per-worker z-score of every criterion rating of each system by the workers who passed "
        f"quality control (negative criteria reversed){interval_words}; n = number of criterion "
        "ratings."
    )
    rank.figures.append(
        ReportFigure(
            "ranking",
            f"Overall mean z of each system{interval_words}, best at the top (n ratings in brackets).",
            figures.ranking(systems, low, high),
        )
    )
    rank.tables.append(("Systems", systems))
    rank.tables += written(t, [("score_intervals", f"95 % intervals of every score (bootstrap of {unit}s)")])
    return rank


def _significance(t: dict[str, pd.DataFrame], s: dict, alpha: float) -> Section:
    """The pairwise significance matrix (row beats column) and the test behind it."""
    sig = Section("Significance")
    sig.text.append(
        f"{significance_test(s)[0].upper()}{significance_test(s)[1:]}. Each cell's p is the probability, "
        "were the row system's z no higher than the column system's, of a difference in its favour at least "
        f"as large as the one observed (a small p is evidence that the row system's z are higher); * p < {alpha}, "
        f"{correction(s)}."
    )
    order = list(t["systems"]["system"])
    unit = s.get("significance_unit", "rating")
    sig.figures.append(
        ReportFigure(
            "significance",
            f"p that row beats column; * p < {alpha}.",
            figures.significance(t["significance"], order, alpha, correction(s), unit),
        )
    )
    return sig


def _criteria_section(inp: ReportInput) -> Section:
    """The mean z of each system per criterion, the negative ones reversed."""
    criteria = [c[0] for c in _criteria(inp)]
    per = Section("Criteria")
    per.text.append(
        "Mean z per criterion; the negative criteria ("
        + ", ".join(c[0] for c in _criteria(inp) if c[1] == "negative")
        + ") are reversed first, so higher is better on all."
    )
    per.figures.append(
        ReportFigure("criteria", "Mean z per criterion and system.", figures.criteria(inp.tables["systems"], criteria))
    )
    return per


def _quality(t: dict[str, pd.DataFrame], s: dict, alpha: float) -> Section:
    """Who passed quality control, and how long their conversations took."""
    qc = Section("Quality control")
    workers = t["workers"]
    qc.text.append(
        f"{s.get('passed', '?')} of {s.get('workers', '?')} workers passed QC "
        f"(pass rate {num(s.get('pass_rate'))}); {s.get('hits_passed', '?')} of {s.get('hits', '?')} "
        f"HITs were done by workers who passed. Mean minutes per conversation: "
        f"{num(s.get('minutes_per_conversation_passed'), 2)} (passed), "
        f"{num(s.get('minutes_per_conversation_failed'), 2)} (failed)."
    )
    qc.figures.append(
        ReportFigure(
            "qc",
            "Workers passing the QC test and the distribution of their p-values.",
            figures.quality_control(workers, alpha),
        )
    )
    qc.tables.append(("Workers", workers))
    return qc


def _share(j: dict) -> str:
    """How the rated conversations were drawn, in words: the design's probability where the analysis knew it."""
    if j.get("human_share") is not None:
        return f"rated by its worker with probability {num(float(j['human_share']), 2)}"
    return "rated by its worker or not by a seeded random draw fixed when the study was built"


def judge_sections(inp: ReportInput) -> list[Section]:
    """With an LLM judge: each system's mean z (overall and per criterion) from people only, the judge
    only and both combined (prediction-powered), and the judge's bias per system; nothing without one."""
    parts = judge_parts(inp, "judge_scores")
    if parts is None:
        return []
    j, scores, fallback, _ = parts
    section = Section("People and the LLM judge")
    what = "responses" if inp.summary.get("task") == "rating" else "conversations"
    from_file = file_judge_sentence(j, f"{what} with real systems", "workers")
    section.text.append(
        (
            from_file
            if from_file
            else f"The judge rated all {j.get('conversations', '?')} conversations with real systems on every "
            f"criterion (the QC bot's are not ranked and were not judged); each conversation was {_share(j)}, "
            f"{j.get('human_conversations', '?')} of the {j.get('conversations_passed', '?')} conversations of "
            "workers who passed QC."
        )
        + " Per system and criterion (and overall, the mean over criteria): the mean z from "
        "people only, from the judge only (its ratings standardised as one more worker's; its naive interval "
        "ignores its bias) and prediction-powered (PPI++), which corrects the judge by its error on the rated "
        "conversations. λ is the weight the judge got (0: people only); n_effective is how many rated "
        f"conversations the people-only estimate would need for the same precision. {fallback} of {len(scores)} "
        "cell(s) fell back to people only (λ = 0)."
    )
    overall = scores["criterion"] == "overall"
    section.tables.append(("Overall mean z: people, judge, prediction-powered", scores[overall]))
    section.tables.append(("Mean z per criterion: people, judge, prediction-powered", scores[~overall]))
    judge_bias_part(
        section,
        inp,
        "The judge's bias per system: the mean of the judge's z minus the worker's, over "
        "the criterion ratings of the rated conversations (positive: the judge favours it).",
        "judge ratings were missing from its replies and count as the neutral 50.",
    )
    return [section]


def judge_methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on the LLM judge, naming the estimator; none without one."""
    parts = judge_parts(inp, "judge_scores")
    if parts is None:
        return []
    j, scores, fallback, models = parts
    what = "responses" if inp.summary.get("task") == "rating" else "conversations"
    from_file = file_judge_sentence(j, what, "workers")
    return [
        (
            from_file + " The judge's ratings were reversed for negative criteria and standardised over all its "
            "ratings as if it were one more worker."
        )
        if from_file
        else f"An LLM judge ({models}) rated each of the {j.get('conversations', '?')} finished conversations with a "
        "real system on every criterion, with the statements the workers saw, after the crowd's work; each "
        f"conversation with a real system was {_share(j)} (a Bernoulli draw per chat slot, independent of the "
        "worker), the QC bot's always. The judge's ratings were reversed for negative criteria and standardised "
        "over all its ratings as if it were one more worker.",
        f"Scores combine the two by {j.get('estimator', 'PPI++')}: per system and criterion, over the "
        "conversations of workers who passed QC, the mean z of the rated conversations plus λ̂ times the judge's "
        "mean on the unrated conversations minus its mean on the rated ones, with λ̂ tuned to minimise the "
        f"variance and clipped to [0, 1]; the 95 % intervals are {j.get('interval', 'normal')} intervals; "
        f"{fallback} of {len(scores)} cell(s) had λ̂ = 0 and use the human-only estimate. Workers are kept or dropped "
        "whole, but the QC test reads only their rated conversations, so among passed workers the rated "
        "conversations are not exactly a random sample of their conversations (docs/METHODS.md). The judge-only estimates are shown for comparison, not used for inference.",
    ]


def _hit_systems(inp: ReportInput) -> str:
    """How many systems each live-chat HIT held, in words, counted from the data (the summary's
    :func:`~hitkit.protocols.live_chat.analysis.hit_design`, or the exported ratings for an older analysis)."""
    design = inp.summary
    ratings = inp.export.get("ratings")
    if "systems_per_hit" not in design and ratings is not None and len(ratings):
        from hitkit.protocols.live_chat.analysis import hit_design

        control = ratings["is_control"].astype(str).str.strip().str.lower().isin(["1", "true"])
        design = hit_design(ratings.assign(is_control=control))
    per, total = design.get("systems_per_hit"), design.get("systems")
    if not per or not total:
        return "each worker chatted with several systems"
    if per["min"] == per["max"]:
        held = f"all {total}" if per["max"] == total else f"{per['max']} of the {total}"
        return f"each HIT held conversations with {held} systems"
    return (
        f"each HIT held conversations with a median of {num(float(per['median']), 1)} (from {per['min']} "
        f"to {per['max']}) of the {total} systems"
    )


def methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on live chat, from what the analysis recorded."""
    s, t = inp.summary, inp.tables
    out: list[str] = []
    criteria = _criteria(inp)
    negative = [c[0] for c in criteria if c[1] == "negative"]
    qc_names = [c[0] for c in criteria if c[2]]
    alpha = s.get("alpha", 0.05)
    out.append(
        f"Following Ji et al. (2022), {_hit_systems(inp)} and a degraded quality-control bot, "
        f"in blind, shuffled order; after each conversation the worker rated {len(criteria)} criteria "
        f"({', '.join(c[0] for c in criteria)}) on a 0–100 scale. Negative criteria "
        f"({', '.join(negative) or 'none'}) were reversed (100 − x), and each worker's ratings were "
        "standardised to z-scores with that worker's mean and standard deviation (ddof = 1) over all "
        "their ratings."
    )
    out.append(
        f"Quality control: per worker, a one-sided Mann–Whitney U (Wilcoxon rank-sum) test "
        f"(scipy.stats.mannwhitneyu, {s.get('qc_method', 'asymptotic')} method) that the z-scores of the "
        f"QC bot are lower than those of the real systems on the criteria {', '.join(qc_names)}; a "
        f"worker passes iff p < {alpha}. {s.get('passed', '?')} of {s.get('workers', '?')} workers "
        f"passed ({num(s.get('pass_rate'))}), so {s.get('workers', '?')} workers before and "
        f"{s.get('passed', '?')} after QC; only the passed workers' ratings of real systems are "
        "scored."
    )
    out.append(
        "A system's score is the mean z of all its criterion ratings, per criterion and overall. For "
        f"every ordered pair of systems a {significance_test(s)} asks whether the first system's z exceed "
        f"the second's; p-values are {correction(s)} over the ordered pairs. 95 % "
        f"{interval_method(s)} of every system score come from {s.get('n_boot', '?')} bootstrap "
        f"resamples of the {s.get('interval_unit', 'worker')}s, each with all its ratings (numpy "
        "default_rng, seed "
        f"{s.get('seed', '?')})."
    )
    if "replication" in t:
        out.append(
            "Self-replication is the Pearson, Spearman and Kendall correlation of system scores between "
            "two runs, with a Fisher-z 95 % interval for Pearson's r."
        )
    return out + judge_methods(inp)
