"""Ranking k responses in the report: the Plackett–Luce ranking, the implied win-rate matrix, quality
control by degraded copies, and the methods (agreement and fragility are the shared evidence section)."""

from __future__ import annotations

from hitkit.protocols.ranking.analysis import ranking_figure, win_figure
from hitkit.report.parts import ReportFigure, ReportInput, Section, interval_method, num


def _boot(s: dict) -> str:
    return (
        f"95 % {interval_method(s)} from {s.get('n_boot', '?')} bootstrap resamples of the "
        f"{s.get('interval_unit', 'worker')}s, each with all its rankings (numpy default_rng, seed {s.get('seed', '?')})"
    )


def sections(inp: ReportInput) -> list[Section]:
    """Plackett–Luce ranking with bootstrap intervals, implied win rates, degraded-copy QC."""
    t, s = inp.tables, inp.summary
    ranking, pairs = t["ranking"], t["implied_pairs"]
    rank = Section("Ranking")
    rank.text.append(
        f"Plackett–Luce scores (log-strength, mean 0; regularisation α = {s.get('regularisation', '?')} as in choix) "
        f"of {s.get('rankings', '?')} rankings of intact responses, with {_boot(s)}; rank 1 is best. Ties: "
        f"{s.get('ties_method', '?')}."
    )
    rank.figures.append(
        ReportFigure(
            "ranking", "Plackett–Luce score with its 95 % bootstrap interval, best at the top.", ranking_figure(ranking)
        )
    )
    rank.tables.append(("Ranking", ranking))
    wins = Section("Implied pairwise win rates")
    wins.text.append(
        "How often the row system's response was ranked above the column system's when a ranking held both "
        f"(ties count ½), with the same bootstrap's {interval_method(s)}; pl_probability is the probability the "
        "fitted Plackett–Luce strengths give, e^a / (e^a + e^b). No test is made, so none is corrected."
    )
    wins.figures.append(
        ReportFigure("win_rates", "Implied win rate of row over column (ties ½).", win_figure(pairs, ranking))
    )
    wins.tables.append(("Implied pairs", pairs))
    qc = Section("Quality control")
    qc.text.append(
        f"{s.get('passed', '?')} of {s.get('workers', '?')} workers passed QC, {s.get('failed', '?')} failed and "
        f"{s.get('not_judged', '?')} ranked no degraded copy: a worker passes when their degraded copies were "
        f"ranked below every intact response of their prompt more often than chance ({s.get('qc_test', '?')}, "
        f"p < {s.get('alpha', '?')}); {s.get('degraded', '?')} copies were ranked in all. Failed workers' rankings "
        "are left out of every table above and of preferences.jsonl."
    )
    qc.tables.append(("Workers", t["workers"]))
    return [rank, wins, qc]


def methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on ranking, from what the analysis recorded."""
    s = inp.summary
    return [
        f"Crowdworkers put the responses of {s.get('systems', '?')} systems to {s.get('items', '?')} prompts in "
        "order, best first, blind and in shuffled order; some prompts of each HIT also showed a degraded copy of "
        "one of their responses (a phrase replaced by a phrase of a response to another prompt), made for each "
        f"worker. {s.get('rankings', '?')} rankings of intact responses by workers who did not fail QC were "
        f"analysed ({s.get('tied_rankings', '?')} with a tie).",
        f"Quality control: per worker, an {s.get('qc_test', '?')} (each copy's place uniform over the responses "
        f"shown); a worker passes iff p < {s.get('alpha', '?')}, fails otherwise; {num(s.get('failed'))} of "
        f"{num(s.get('workers'))} failed.",
        "Systems were ranked by a Plackett–Luce model (Luce 1959; Plackett 1975) fitted by Hunter's (2004) MM "
        f"algorithm to the fixed point of choix's ILSR (Maystre & Grossglauser 2015) with α = "
        f"{s.get('regularisation', '?')} (a Gamma(α·n, α·n) prior on the n strengths), the degraded copy left out "
        f"of each ranking; ties were {s.get('ties_method', '?')}. Scores are log-strengths centred to mean 0 with "
        f"{_boot(s)}; implied pairwise win rates (ties ½) get intervals from the same resamples. Agreement is "
        "Krippendorff's ordinal alpha of each response's place among its prompt's intact responses.",
    ]
