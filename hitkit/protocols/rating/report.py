"""Direct Assessment of responses in the report: live chat's ranking, significance and criteria
sections (the same tables), a quality-control section on the degraded copies, and the methods."""

from __future__ import annotations

import dataclasses

from hitkit.protocols.live_chat import figures as live_chat_figures
from hitkit.protocols.live_chat import report as live_chat_report
from hitkit.report.parts import ReportFigure, ReportInput, Section, correction, interval_method, num


def criteria_of(config) -> list[tuple[str, str, bool]] | None:
    """The study file's criteria as (name, polarity, qc), for the report's criteria and methods."""
    if config.rating is None:
        return None
    return [(c.name, c.polarity, c.qc) for c in config.rating.criterion_list()]


def _with_criteria(inp: ReportInput) -> ReportInput:
    if inp.criteria:
        return inp
    from hitkit.protocols.rating.scores import DEFAULT_CRITERIA

    return dataclasses.replace(inp, criteria=[(c.name, c.polarity, c.qc) for c in DEFAULT_CRITERIA])


def sections(inp: ReportInput) -> list[Section]:
    """z-score ranking, significance matrix, per-criterion bars (live chat's) and the degraded-copy QC."""
    inp = _with_criteria(inp)
    s, alpha = inp.summary, float(inp.summary.get("alpha", 0.05))
    out = [section for section in live_chat_report.sections(inp) if section.title != "Quality control"]
    qc = Section("Quality control")
    qc.text.append(
        f"{s.get('passed', '?')} of {s.get('workers', '?')} workers passed QC (pass rate "
        f"{num(s.get('pass_rate'))}): their degraded copies were rated below the responses they rated "
        f"intact (one-sided Wilcoxon rank-sum, p < {alpha}). {s.get('assignments_passed', '?')} of "
        f"{s.get('assignments', '?')} counted assignments were done by workers who passed; "
        f"{s.get('degraded', '?')} degraded copies were rated in all."
    )
    qc.figures.append(
        ReportFigure(
            "qc",
            "Workers passing the QC test and the distribution of their p-values.",
            live_chat_figures.quality_control(
                inp.tables["workers"], alpha, "degraded copies rated lower than intact responses"
            ),
        )
    )
    if "degraded" in inp.tables:
        qc.tables.append(
            ("Degraded copies against intact responses, per worker (QC criteria, mean z)", inp.tables["degraded"])
        )
    qc.tables.append(("Workers", inp.tables["workers"]))
    return out + [qc]


def methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on Direct Assessment, from what the analysis recorded."""
    inp = _with_criteria(inp)
    s, criteria = inp.summary, inp.criteria or []  # never empty after _with_criteria
    negative = [c[0] for c in criteria if c[1] == "negative"]
    qc_names = [c[0] for c in criteria if c[2]]
    alpha = s.get("alpha", 0.05)
    return [
        f"Following the Direct Assessment of Graham et al. (2013, 2017), crowdworkers rated "
        f"{s.get('responses', '?')} single responses of {s.get('systems', '?')} systems to {s.get('items', '?')} "
        f"prompts, one response at a time, blind and in shuffled order, on {len(criteria)} criteria "
        f"({', '.join(c[0] for c in criteria)}) on a 0–100 scale. Each HIT also held degraded copies of "
        "responses of the same HIT, made for each worker by replacing a phrase of the response with a phrase "
        "of a response to another prompt.",
        f"As in Ji et al. (2022), negative criteria ({', '.join(negative) or 'none'}) were reversed (100 − x) and "
        "each worker's ratings standardised to z-scores with that worker's mean and standard deviation (ddof = 1). "
        f"Quality control: per worker, a one-sided Mann–Whitney U (Wilcoxon rank-sum) test "
        f"(scipy.stats.mannwhitneyu, {s.get('qc_method', 'asymptotic')} method) that the z-scores of the "
        f"degraded copies are lower than those of the intact responses on {', '.join(qc_names)}; a worker passes "
        f"iff p < {alpha}. {s.get('passed', '?')} of {s.get('workers', '?')} workers passed "
        f"({num(s.get('pass_rate'))}); only their ratings of intact responses are scored.",
        "A system's score is the mean z of all its criterion ratings, per criterion and overall. For every "
        f"ordered pair of systems a {live_chat_report.significance_test(s)} asks whether the first "
        f"system's z exceed the second's; p-values are {correction(s)} over the ordered pairs. 95 % "
        f"{interval_method(s)} come from {s.get('n_boot', '?')} bootstrap resamples of the "
        f"{s.get('interval_unit', 'worker')}s, each with all its ratings (numpy default_rng, seed {s.get('seed', '?')}).",
    ]
