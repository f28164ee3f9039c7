"""Pairwise A/B in the report: ranking, pair gains with sign tests, worker agreement, and the methods."""

from __future__ import annotations

from hitkit.analysis.cr2 import PROCEDURE
from hitkit.protocols.pairwise import figures
from hitkit.report.parts import (
    ReportFigure,
    ReportInput,
    Section,
    correction,
    file_judge_sentence,
    flags,
    interval_method,
    judge_facts,
    judge_section,
    num,
)


def pair_test(s: dict) -> str:
    """The pairs' test in words, as the summary records it (older summaries: ChatEval's sign test)."""
    if s.get("pair_test", "vote") == "worker" and s.get("pair_procedure") == PROCEDURE:
        return (
            "two-sided test clustered by worker (the win rate among decisive votes against ½ over its CR2 "
            "cluster-robust standard error, Student's t with Bell–McCaffrey degrees of freedom), with the 95 % "
            "gain interval from the same t"
        )
    if s.get("pair_test", "vote") == "worker":  # summaries written before the small-sample correction
        return (
            "two-sided test clustered by worker (the win rate among decisive votes against ½ over its "
            "worker-clustered sandwich standard error, Student's t with workers − 1 degrees of freedom)"
        )
    return (
        "two-sided exact sign test with every vote independent (binomial test, p = 0.5; "
        "scipy.stats.binomtest; ChatEval's test, which ignores that a worker's votes share their taste)"
        + (", with the Clopper–Pearson 95 % gain interval, which inverts it" if s.get("pair_procedure") else "")
    )


def shared_ranks(ranking) -> list[str]:
    """A sentence per rank that several systems share: their order is not claimed."""
    shared = sorted({r for r in ranking["rank"] if (ranking["rank"] == r).sum() > 1}) if "rank" in ranking else []
    return [
        f"{', '.join(ranking.loc[ranking['rank'] == r, 'system'].astype(str))} share rank {r}: no vote, nor "
        "chain of votes, orders them (never compared with each other, or scored the same), so their order "
        "is unknown whatever their scores."
        for r in shared
    ]


def sections(inp: ReportInput) -> list[Section]:
    """Bradley–Terry ranking with bootstrap intervals, pair gains with sign tests, worker agreement."""
    t, s = inp.tables, inp.summary
    ranking = t["ranking"]
    rank = Section("Ranking")
    rank.text.append(
        f"Bradley–Terry scores (log-strength, mean 0) with 95 % bootstrap {interval_method(s)} "
        f"from {s.get('n_boot', '?')} resamples of the {s.get('interval_unit', 'vote')}s (each "
        "with all its votes); rank 1 is best."
    )
    rank.text.extend(shared_ranks(ranking))
    rank.figures.append(
        ReportFigure(
            "ranking",
            "Bradley–Terry score of each system with its 95 % bootstrap interval, best at the top.",
            figures.ranking(ranking),
        )
    )
    rank.tables.append(("Ranking", ranking))

    pairs = t["pairs"]
    sig = Section("Pairwise comparisons")
    sig.text.append(
        "Gain of the row system over the column system, (wins − losses) / (wins + losses), ties "
        f"left out; * marks p < 0.05 ({correction(s)}) of a {pair_test(s)}. p is the probability, were the "
        "two systems equally often preferred, of a win rate at least as far from ½ as the one observed; the "
        "gain interval is not corrected for multiple comparisons and excludes 0 exactly when the uncorrected "
        "p is below 0.05."
    )
    sig.figures.append(
        ReportFigure(
            "significance",
            "Gain of row over column; * two-sided p < 0.05.",
            figures.gains(pairs, list(ranking["system"]), correction(s), s.get("pair_test", "vote")),
        )
    )
    sig.tables.append(("Pairs", pairs))

    workers = t.get("workers")
    quality = Section("Worker agreement")
    kappa = s.get("kappa")
    quality.text.append(
        f"Cohen's weighted kappa between workers on the same comparison (linear weights, ties included): {num(kappa)}."
    )
    if workers is not None and len(workers):
        flagged = int(workers["flagged"].astype(str).str.lower().isin(["true", "1"]).sum())
        quality.text.append(
            f"{flagged} of {len(workers)} workers flagged for agreeing with the other workers' "
            "majority less often than the rest (one-sided binomial test, p < 0.05); flagged "
            "workers are listed for a look, not removed."
        )
        quality.figures.append(
            ReportFigure(
                "agreement",
                "Each worker's agreement with the other workers' majority; flagged workers in red.",
                figures.agreement(workers),
            )
        )
        quality.tables.append(("Workers", workers))
    return [rank, sig, quality] + judge_sections(inp)


def _judge_intro(j: dict, items: str) -> str:
    """What the judge and the people labelled, as the analysis's summary says: hitkit's own judge (both
    display orders), or a judge-labels file; people on a uniformly random share or where the judge was unsure."""
    if j.get("source"):
        judged = (
            f"The judge labels come from {j['source']} ({len(j.get('judges') or []) or '?'} judge(s)), "
            f"{j.get('items', '?')} {items} labelled"
        )
    else:
        judged = (
            f"The judge labelled all {j.get('items', '?')} {items} (each pair of responses in both display orders, "
            "averaged)"
        )
    selection = str(j.get("selection") or "uniform")
    if selection.startswith("uncertainty"):
        people = (
            f"people voted on {j.get('human_items', '?')} of them, drawn with known, unequal probabilities "
            "(more where the judge was unsure), so every estimate is inverse-probability weighted"
        )
    else:
        people = f"people voted on a uniformly random {j.get('human_items', '?')} of them"
    return f"{judged}; {people}."


def judge_sections(inp: ReportInput, items: str = "items") -> list[Section]:
    """With an LLM judge: each pair's win rate and each system's Bradley–Terry strength from people
    only, the judge only and both combined (prediction-powered), and the judge's bias per system;
    nothing without one. ``items``: what an item is (the arena's: battles)."""
    j = inp.summary.get("judge") or {}
    sections = judge_section(
        inp,
        _judge_intro(j, items) + " Per pair: the win "
        "rate of the first system (ties ½) from people only, from the judge only (its naive interval ignores its "
        "bias) and prediction-powered (PPI++), which corrects the judge by its error on the items people voted "
        "on. λ is the weight the judge got (0: people only); n_effective is how many human-labelled items the "
        "people-only estimate would need for the same precision.",
        "The judge's bias per system: the mean of the judge's score for the system minus the people's, over the "
        "items people voted on (positive: the judge favours it).",
        "ties",
        figures.judge_win_rates,
    )
    strengths = inp.tables.get("judge_strengths")
    if sections and strengths is not None and len(strengths):
        lam = strengths["lam"].iloc[0]
        section = sections[0]
        section.text.append(
            "The Bradley–Terry strengths the ranking reports, from people only, the judge only and "
            f"prediction-powered (PPI++ for the Bradley–Terry likelihood, one λ for all systems: {num(lam)}"
            f"{', so people only' if flags(strengths['fallback'])[0] else ''}); n_effective is per system. "
            "Items count equally here, so the people-only column can differ slightly from the ranking's where "
            "items have different numbers of votes, and its interval is the jackknife over items, not the "
            "ranking's bootstrap of workers."
        )
        section.figures.append(
            ReportFigure(
                "judge_strengths",
                "Bradley–Terry strength of each system: people only, judge only and "
                "prediction-powered, with 95 % intervals.",
                figures.judge_strengths(strengths),
            )
        )
        section.tables.append(("Strengths: people, judge, prediction-powered", strengths))
    return sections


def judge_methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on the LLM judge, naming the estimator; none without one."""
    facts = judge_facts(inp)
    if facts is None:
        return []
    j, fallback, models = facts
    own = (
        f"An LLM judge ({models}) labelled every one of the {j.get('items', '?')} items, each in both display "
        "orders, and the two labels were averaged to cancel its position bias; crowdworkers voted on "
        + (
            f"{j.get('human_items', '?')} items, a uniform pilot within each pair and then a second wave drawn "
            "with known probabilities where the judge was unsure (every estimate inverse-probability weighted)"
            if str(j.get("selection") or "").startswith("uncertainty")
            else f"a uniformly random subset of {j.get('human_items', '?')} items drawn within each pair (seeded)"
        )
        + ", each item's human score being the mean of its votes."
    )
    return [
        file_judge_sentence(j, "items (an item and a pair of systems)", "crowdworkers' votes") or own,
        f"Win rates combine the two by {j.get('estimator', 'PPI++')}: per pair, the mean human score plus λ̂ "
        "times the judge's mean on the items without votes minus its mean on the items with votes, with λ̂ "
        "tuned to minimise the variance and clipped to [0, 1]; the 95 % intervals are "
        f"{j.get('interval', 'normal')} intervals; {fallback} had λ̂ = 0 and use the "
        "human-only estimate. The judge-only estimates are shown for comparison, not used for inference.",
    ] + _strength_methods(inp, j)


def _strength_methods(inp: ReportInput, j: dict) -> list[str]:
    """The methods sentence on prediction-powered Bradley–Terry strengths; none without the table."""
    strengths = inp.tables.get("judge_strengths")
    if strengths is None or not len(strengths):
        return []
    lam = strengths["lam"].iloc[0]
    return [
        f"Bradley–Terry strengths combine the two by {j.get('strengths_estimator', 'PPI++ for M-estimation')}: "
        "the human votes' Bradley–Terry loss plus λ̂ times the judge's loss on the items without votes minus "
        "its loss on the items with votes, with the ranking's prior of one virtual tied game per pair and "
        "strengths centred to mean 0, λ̂ tuned to minimise the trace of the sandwich covariance and clipped to "
        f"[0, 1] (λ̂ = {num(lam)}{', the human-only fit' if lam == 0 else ''}); the 95 % intervals use the "
        f"{j.get('strengths_interval', 'sandwich variance')}.",
    ]


def methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on pairwise votes, from what the analysis recorded."""
    s, t = inp.summary, inp.tables
    out: list[str] = []
    out.append(
        f"We collected {s.get('votes', '?')} pairwise preference votes ({s.get('ties', '?')} ties) from "
        f"{s.get('workers', '?')} crowdworkers on {s.get('items', '?')} items comparing "
        f"{s.get('systems', '?')} systems, counting all work handed in (submitted, approved or rejected)."
    )
    out.append(
        "For every pair of systems we report the gain (wins − losses) / (wins + losses), ties "
        f"excluded, with a {pair_test(s)}; p-values are {correction(s)} over the pairs."
    )
    out.append(
        "Systems were ranked with a Bradley–Terry model fitted by Hunter's (2004) MM algorithm (ties "
        "counted as half a win to each side, a prior of one virtual tied game per pair); 95 % "
        f"{interval_method(s)} come from {s.get('n_boot', '?')} bootstrap resamples of the "
        f"{s.get('interval_unit', 'vote')}s, each with all its votes "
        f"(numpy default_rng, seed {s.get('seed', '?')})."
    )
    flagged = None
    if "workers" in t and len(t["workers"]):
        flagged = int(t["workers"]["flagged"].astype(str).str.lower().isin(["true", "1"]).sum())
    out.append(
        f"Inter-annotator agreement is Cohen's weighted kappa with linear weights, ties included "
        f"(κ = {num(s.get('kappa'))}). Each worker's agreement with the other workers' majority was "
        "tested against the other workers' pooled agreement rate (one-sided exact binomial test, "
        f"α = 0.05); {flagged if flagged is not None else '?'} of {s.get('workers', '?')} workers were "
        "flagged for review and none was excluded, so all "
        f"{s.get('workers', '?')} workers' votes enter the analysis."
    )
    return out + judge_methods(inp)
