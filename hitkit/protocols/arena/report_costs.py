"""The arena report's parts on prompts and costs: prompt hygiene and categories, what each system costs
with its rating–cost Pareto figure, and the methods sentences for both (and for inverse-sampling weights)."""

from __future__ import annotations

from hitkit.protocols.arena.costs import COST_BASES, pareto_figure
from hitkit.report.parts import ReportFigure, ReportInput, Section


def sections(inp: ReportInput) -> list[Section]:
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


def methods(inp: ReportInput) -> list[str]:
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
