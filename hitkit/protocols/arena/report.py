"""The arena in the report: the leaderboard with and without style control, the style coefficients, the
win-rate matrix, per-category leaderboards, quality control, what each system costs, and the methods
paragraph (prompt hygiene, categories and inverse-sampling weights included)."""

from __future__ import annotations

import pandas as pd

from hitkit.protocols.arena import figures
from hitkit.protocols.arena.analysis import decisive_needed, qc_counts
from hitkit.protocols.arena.costs import COST_BASES, pareto_figure
from hitkit.protocols.arena.robust import SANDWICH
from hitkit.protocols.arena.verdicts import FAILED, NOT_JUDGED
from hitkit.report.parts import ReportFigure, ReportInput, Section, interval_method, num

FEATURE_WORDS = {
    "length": "reply length (tokens)",
    "headers": "markdown headers",
    "lists": "list items",
    "bold": "bold spans",
}


def _style_sentence(style: pd.DataFrame) -> str:
    if style is None or not len(style):
        return "There is no style-controlled rating: some battles have no style counts."
    parts = [
        f"{FEATURE_WORDS.get(f, f)} {num(c)} [{num(lo)}, {num(hi)}]"
        for f, c, lo, hi in style[["feature", "coefficient", "coefficient_lower", "coefficient_upper"]].itertuples(
            index=False
        )
    ]
    return (
        "Style coefficients (log-odds of a win per standard deviation of the normalised difference, "
        "with 95 % intervals; positive: voters prefer more of it): " + "; ".join(parts) + "."
    )


def sections(inp: ReportInput) -> list[Section]:
    """Leaderboard, style, win rates, categories and QC; first, the analysis's warnings (a dominant worker,
    a ranking its intervals cannot order yet, ...), as ``hitkit analyze`` and ``launch`` print them."""
    t, s = inp.tables, inp.summary
    board = t["leaderboard"]
    main = Section("Leaderboard")
    if s.get("warnings"):
        main.text.append("Read with care: " + "; ".join(s["warnings"]) + ".")
    main.text.append(
        f"Arena ratings (1000 + 400·log10 strength, FastChat's scale) from Bradley–Terry with ties as half a win "
        f"({'Davidson ties' if s.get('ties') == 'davidson' else 'FastChat convention'}"
        + ("; battles weighted by 1 / their pair's battles" if s.get("inverse_sampling") else "")
        + "), and with style control "
        f"(reply length and markdown counts as covariates). 95 % bootstrap {interval_method(s)} from "
        f"{s.get('n_boot', '?')} resamples of the {s.get('interval_unit', 'worker')}s, each with all their battles"
        + (
            "; the style-controlled ones are cluster-robust (sandwich) intervals, clustered the same way. "
            if s.get("style_interval_method") == SANDWICH
            else ". "
        )
        + "rank = 1 + the number of systems whose interval lies wholly above this one's; rank_lower is the worst "
        "rank the intervals allow. A difference of 100 points means the better system wins about 64 % of "
        "battles against the other."
    )
    if s.get("components", 1) > 1:
        main.text.append(
            f"The systems fall into {s['components']} groups no chain of battles connects; ratings "
            "of different groups are on unrelated scales and are not ranked against each other."
        )
    main.figures.append(
        ReportFigure(
            "leaderboard",
            "Arena rating of each system, plain and style-controlled, with 95 % intervals.",
            figures.leaderboard(board),
        )
    )
    main.tables.append(("Leaderboard", board))
    style = Section("Style control")
    style.text.append(_style_sentence(t.get("style")))
    if t.get("style") is not None and len(t["style"]):
        style.tables.append(("Style coefficients", t["style"]))
    out = [main, style]
    rates = t.get("win_rates")
    if rates is not None and len(rates):
        pairs = Section("Win rates")
        pairs.text.append(
            "Share of battles the row system won against the column system (ties and both-bad votes "
            "count half); blank where the two never met."
        )
        pairs.figures.append(
            ReportFigure(
                "win_rates", "Win rate of row against column.", figures.win_rates(rates, list(board["system"]))
            )
        )
        out.append(pairs)
    categories = t.get("categories")
    if categories is not None and len(categories):
        cat = Section("Leaderboards by category")
        cat.text.append(
            "The same leaderboard on each prompt category's battles alone"
            + (
                f" (categories of written prompts by {s['prompts']['category_method']})."
                if (s.get("prompts") or {}).get("category_method")
                else "."
            )
        )
        cat.tables.append(("By category", categories))
        out.append(cat)
    qc = t.get("qc")
    if qc is not None and len(qc):
        out.append(_quality(qc, s))
    from hitkit.protocols.pairwise.report import judge_sections  # the same tables as a pairwise study's judge

    return out + judge_sections(inp, "battles") + cost_sections(inp)


def _quality(qc: pd.DataFrame, s: dict) -> Section:
    """Every worker's QC verdict: passed, failed (and why), or not judged (too few votes)."""
    quality = Section("Quality control")
    judged, failed, unjudged = qc_counts(qc)
    status = qc["status"].astype(str) if "status" in qc else pd.Series(dtype=str)
    quality.text.append(
        f"{failed} of {judged} judged workers failed quality control: {s.get('qc_method', 'the arena QC check')}."
        + (
            f" {unjudged} worker(s) had too few votes for either test to judge them and have no verdict"
            " (not judged, never passed)."
            if unjudged
            else ""
        )
    )
    flagged = qc[status == FAILED]
    if len(flagged):
        quality.text.append(
            "Failed: " + "; ".join(f"{w}: {r}" for w, r in zip(flagged["worker_id"], flagged["reason"])) + "."
        )
    if unjudged:
        quality.text.append(
            f"Not judged: {', '.join(map(str, qc.loc[status == NOT_JUDGED, 'worker_id'].head(20)))}"
            + (" and more" if unjudged > 20 else "")
            + ". Their votes count in the leaderboard; preferences.jsonl leaves them out unless arena.unjudged "
            "is include."
        )
    quality.tables.append(("QC per worker", qc))
    return quality


def methods(inp: ReportInput) -> list[str]:
    """The methods paragraph's sentences on the arena, from what the analysis recorded."""
    s = inp.summary
    leaks = "were left out" if not s.get("include_leaks") else "were kept"
    out = [
        (
            f"We collected {s.get('battles', '?')} arena votes, of which {s.get('leaderboard_battles', '?')} from "
            f"{s.get('workers', '?')} workers on {s.get('systems', '?')} systems enter the leaderboard: the "
            f"{s.get('control_battles', '?')} battles against the QC bot never do, and the {s.get('leaks', '?')} "
            f"battles in which a reply named a model or vendor {leaks}."
        )
    ]
    out.append(
        "Ratings are Bradley–Terry maximum-likelihood estimates on the Arena scale (scale 400, base 10, mean "
        "1000), a tie or a both-bad vote counting as half a win to each side as in FastChat's compute_bt"
        + (" (Davidson's tie model for the plain ratings)" if s.get("ties") == "davidson" else "")
        + "; "
        "style-controlled ratings add the normalised differences (a − b)/(a + b + 1) of reply tokens and markdown "
        "header, list and bold counts, standardised, as covariates of the same logistic model with an L2 penalty "
        f"of {s.get('style_reg', 0.5)} on every parameter (FastChat's compute_style_control)."
    )
    sandwich = s.get("style_interval_method") == SANDWICH
    out.append(
        f"95 % {interval_method(s)} {'of the plain ratings ' if sandwich else ''}come from "
        f"{s.get('n_boot', '?')} bootstrap resamples of the {s.get('interval_unit', 'worker')}s, each with all their "
        f"battles (numpy default_rng, seed {s.get('seed', '?')}); ranks are FastChat's: one plus the number of "
        "systems whose interval lies above the system's."
        + (
            " The style-controlled ratings' 95 % intervals are the point fit moved by the one-step "
            "estimate of the penalty's pull toward the mean, (H + R)⁻¹·R·φ (φ the ratings and style coefficients, "
            "H the logistic information, R the penalty), ± t with C − 1 degrees of freedom times the cluster-robust "
            f"(sandwich, CR1) standard error, its C clusters the {s.get('interval_unit', 'worker')}s (Liang & Zeger "
            "1986): the intervals are for the unpenalised ratings the fit converges to as battles accumulate, while "
            "the point ratings stay FastChat's. The style coefficients' intervals are the reported coefficient "
            "± the same t times its sandwich standard error, so each coefficient lies in its interval."
            if sandwich and s.get("style_interval_correction") == "penalty"
            else ""
        )
    )
    out.append(
        "Each worker's votes were tested against the Bradley–Terry model fitted to the other workers' votes "
        "(leave-one-worker-out; style-controlled where the battles have style counts) for voting at random, "
        "always for one side, always a tie or always for the longer reply: a mixture of likelihood ratios "
        f"(an e-value) of at least {1 / s.get('voter_alpha', 0.01):g} failed the worker, which happens to an "
        f"honest voter with probability at most {s.get('voter_alpha', 0.01):g} however often the test is run "
        "(Ville's inequality). Where there were QC battles, a worker also failed when their votes in them did "
        "not prefer the real system over the degraded QC bot (one-sided exact binomial test, p < 0.05, ties left "
        f"out, from {decisive_needed()} decisive QC votes on). {s.get('qc_failed', 0)} of {s.get('qc_judged', 0)} "
        "judged workers failed"
        + (
            f", and {s['qc_not_judged']} had too few votes to be judged (not judged, never passed)."
            if s.get("qc_not_judged")
            else "."
        )
    )
    return out + hygiene_methods(inp)


def cost_sections(inp: ReportInput) -> list[Section]:
    """'What each system costs', where the export had conversations."""
    costs = inp.tables.get("costs")
    if costs is None or not len(costs):
        return []
    basis = inp.summary.get("cost_basis", "reply_ms")
    part = Section("What each system costs")
    part.text.append(
        "Per system, over its replies in this study: the median milliseconds to the first token and to the "
        "whole reply, tokens (hitkit's count: words and punctuation marks), and where the study file prices "
        "the systems or says how to count energy, the mean price and energy of one reply and their totals. "
        f"The Pareto front (the figure's joined points) holds the systems no other beats on rating at no "
        f"greater {COST_BASES.get(basis, basis)}."
    )
    part.figures.append(
        ReportFigure(
            "costs", "Arena rating against cost per system; the Pareto front joined.", pareto_figure(costs, basis)
        )
    )
    part.tables.append(("Costs", costs))
    return [part]


def hygiene_methods(inp: ReportInput) -> list[str]:
    """Sentences on prompt hygiene, categories and weights, from what the analysis recorded."""
    s = inp.summary
    prompts = s.get("prompts") or {}
    out = []
    if prompts.get("written_prompts"):
        out.append(
            f"Prompts workers wrote ({prompts['written_prompts']} battles, {prompts['distinct_written_prompts']} "
            "distinct after grouping) were normalised (NFKC, case folded, punctuation removed) and grouped as one "
            f"prompt where their word 3-shingles had Jaccard similarity ≥ {prompts.get('prompt_similarity')}; at "
            f"most {prompts.get('prompt_cap')} battles of a prompt count (LMArena's deduplication), which left "
            f"out {prompts.get('capped_battles', 0)}."
        )
    if prompts.get("category_method"):
        out.append(
            f"{prompts.get('categorised_battles', 0)} battles without a category from the study's prompt set were "
            f"categorised by {prompts['category_method']}; each category with enough battles has its own "
            "leaderboard (categories.csv; leaderboard.csv's category 'all' is the overall one)."
        )
    if s.get("inverse_sampling"):
        out.append(
            "In the plain Bradley–Terry fit and its bootstrap each battle weighs 1 / (battles of its pair), "
            "scaled to sum to the battles, so a pair sampled more often does not weigh more (style control "
            "is unweighted, as FastChat's)."
        )
    if s.get("style_covariates"):
        out.append("Style control also takes the study's covariates: " + ", ".join(s["style_covariates"]) + ".")
    return out
