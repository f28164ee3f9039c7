"""Live chat in the report: z-score ranking with intervals, significance matrix, criteria, quality
control, self-replication, and the methods."""
from __future__ import annotations

import pandas as pd

from hitkit.protocols.live_chat import figures
from hitkit.report.parts import ReportFigure, ReportInput, Section, correction, interval_method, num


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
    return (systems["system"].map(overall["low"]).to_numpy(dtype=float),
            systems["system"].map(overall["high"]).to_numpy(dtype=float))


def sections(inp: ReportInput) -> list[Section]:
    """z-score ranking, significance matrix, per-criterion bars, QC pass rate, replication."""
    t, s = inp.tables, inp.summary
    systems = t["systems"]
    alpha = float(s.get("alpha", 0.05))
    rank = Section("Ranking")
    low, high = _overall_intervals(t, systems)
    unit = s.get("interval_unit", "worker")
    interval_words = (f" with its 95 % interval from {s.get('n_boot', '?')} bootstrap resamples of the {unit}s"
                      if low is not None else "")
    rank.text.append("Mean per-worker z-score of every criterion rating of each system by the workers who passed "
                     f"quality control (negative criteria reversed){interval_words}; n = number of criterion "
                     "ratings.")
    rank.figures.append(ReportFigure(
        "ranking", f"Overall mean z of each system{interval_words}, best at the top (n ratings in brackets).",
        figures.ranking(systems, low, high)))
    rank.tables.append(("Systems", systems))
    if "score_intervals" in t:
        rank.tables.append((f"95 % intervals of every score (bootstrap of {unit}s)", t["score_intervals"]))

    significance = t["significance"]
    sig = Section("Significance")
    sig.text.append(f"One-sided Mann–Whitney U (Wilcoxon rank-sum) p that the row system's z exceed the column "
                    f"system's, over single {s.get('significance_unit', 'rating')}s; * p < {alpha}, "
                    f"{correction(s)}.")
    sig.figures.append(ReportFigure("significance", f"p that row beats column; * p < {alpha}.",
                                    figures.significance(significance, list(systems["system"]), alpha,
                                                         correction(s))))

    criteria = [c[0] for c in _criteria(inp)]
    per = Section("Criteria")
    per.text.append("Mean z per criterion; the negative criteria (" + ", ".join(
        c[0] for c in _criteria(inp) if c[1] == "negative") + ") are reversed first, so higher is better on all.")
    per.figures.append(ReportFigure("criteria", "Mean z per criterion and system.",
                                    figures.criteria(systems, criteria)))

    qc = Section("Quality control")
    workers = t["workers"]
    qc.text.append(f"{s.get('passed', '?')} of {s.get('workers', '?')} workers passed QC "
                   f"(pass rate {num(s.get('pass_rate'))}); {s.get('hits_passed', '?')} of {s.get('hits', '?')} "
                   f"HITs were done by workers who passed. Mean minutes per conversation: "
                   f"{num(s.get('minutes_per_conversation_passed'), 2)} (passed), "
                   f"{num(s.get('minutes_per_conversation_failed'), 2)} (failed).")
    qc.figures.append(ReportFigure("qc", "Workers passing the QC test and the distribution of their p-values.",
                                   figures.quality_control(workers, alpha)))
    qc.tables.append(("Workers", workers))
    sections = [rank, sig, per, qc]
    if "replication" in t:
        rep = Section("Self-replication")
        rep.text.append("Correlation of system scores between this run and the replicate run.")
        rep.tables.append(("Replication", t["replication"]))
        sections.append(rep)
    return sections


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
    return (f"each HIT held conversations with a median of {num(float(per['median']), 1)} (from {per['min']} "
            f"to {per['max']}) of the {total} systems")


def methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on live chat, from what the analysis recorded."""
    s, t = inp.summary, inp.tables
    out: list[str] = []
    criteria = _criteria(inp)
    negative = [c[0] for c in criteria if c[1] == "negative"]
    qc_names = [c[0] for c in criteria if c[2]]
    alpha = s.get("alpha", 0.05)
    out.append(f"Following Ji et al. (2022), {_hit_systems(inp)} and a degraded quality-control bot, "
               f"in blind, shuffled order; after each conversation the worker rated {len(criteria)} criteria "
               f"({', '.join(c[0] for c in criteria)}) on a 0–100 scale. Negative criteria "
               f"({', '.join(negative) or 'none'}) were reversed (100 − x), and each worker's ratings were "
               "standardised to z-scores with that worker's mean and standard deviation (ddof = 1) over all "
               "their ratings.")
    out.append(f"Quality control: per worker, a one-sided Mann–Whitney U (Wilcoxon rank-sum) test "
               f"(scipy.stats.mannwhitneyu, {s.get('qc_method', 'asymptotic')} method) that the z-scores of the "
               f"QC bot are lower than those of the real systems on the criteria {', '.join(qc_names)}; a "
               f"worker passes iff p < {alpha}. {s.get('passed', '?')} of {s.get('workers', '?')} workers "
               f"passed ({num(s.get('pass_rate'))}), so {s.get('workers', '?')} workers before and "
               f"{s.get('passed', '?')} after QC; only the passed workers' ratings of real systems are "
               "scored.")
    out.append("A system's score is the mean z of all its criterion ratings, per criterion and overall. For "
               "every ordered pair of systems a one-sided Mann–Whitney U test "
               f"(unit: one {s.get('significance_unit', 'rating')}) asks whether the first system's z exceed "
               f"the second's; p-values are {correction(s)} over the ordered pairs. 95 % "
               f"{interval_method(s)} of every system score come from {s.get('n_boot', '?')} bootstrap "
               f"resamples of the {s.get('interval_unit', 'worker')}s, each with all its ratings (numpy "
               "default_rng, seed "
               f"{s.get('seed', '?')}).")
    if "replication" in t:
        out.append("Self-replication is the Pearson, Spearman and Kendall correlation of system scores between "
                   "two runs, with a Fisher-z 95 % interval for Pearson's r.")
    return out
