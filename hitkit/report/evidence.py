"""The report's section on agreement and ranking fragility, the same for every protocol: it reads the
analysis' ``agreement`` and ``fragility`` tables (:mod:`hitkit.analysis.evidence`)."""

from __future__ import annotations

import pandas as pd

from hitkit.analysis.agreement import CONFIDENCE
from hitkit.analysis.fragility import NO_FLIP
from hitkit.analysis.gold import GOLD_COLUMNS
from hitkit.report.parts import ReportInput, Section, display, num


def evidence_section(inp: ReportInput) -> Section | None:
    """ "Agreement and ranking fragility": alpha per measure and scope with its interval, and each
    adjacent pair's fewest removals; None for an analysis made before these tables existed."""
    agreement = inp.tables.get("agreement")
    fragility = inp.tables.get("fragility")
    if agreement is None and fragility is None:
        return None
    section = Section("Agreement, gold items and ranking fragility", id="agreement")
    n_boot = inp.summary.get("n_boot")
    if agreement is not None and len(agreement):
        section.text.append(
            "Krippendorff's alpha at each answer's level of measurement (1 = perfect agreement, 0 = chance), "
            f"with {CONFIDENCE:.0%} percentile intervals from {num(n_boot)} bootstrap resamples of workers and "
            "units together (a worker drawn twice is never paired with their own copy). units: units coded by "
            "two or more workers; coders: the workers who coded them."
        )
        table = agreement.copy()
        section.tables.append(("Krippendorff's alpha (bootstrap over workers and units)", display(table)))
    elif agreement is not None:
        section.text.append(
            "No unit was coded by two or more workers, so agreement between workers cannot be measured."
        )
    if fragility is not None and len(fragility):
        section.text.append(
            "Fragility: for each pair of adjacent systems in the ranking, the fewest votes or ratings whose removal "
            "would put the lower system level with or above the higher one (method: how the number was found; "
            f"'{NO_FLIP}': no removal searched does so)."
        )
        table = fragility.copy()
        table["removals"] = [
            "–" if pd.isna(v) else f"{int(v)} of {int(n)}" for v, n in zip(table["removals"], table["observations"])
        ]
        section.tables.append(
            ("Ranking fragility (removals that flip adjacent systems)", display(table.drop(columns="observations")))
        )
    gold_part(section, inp)
    return section


def gold_part(section: Section, inp: ReportInput) -> None:
    """Each worker's accuracy on the protocol's known-answer items, with its exact interval."""
    gold = inp.summary.get("gold")
    table = next((t for t in inp.tables.values() if "gold_items" in t.columns), None)
    if not gold or table is None:
        return
    rule = gold.get("qc_rule")
    shown = table[table["gold_items"] > 0][list(GOLD_COLUMNS) + (["gold_qc"] if rule and "gold_qc" in table else [])]
    low = gold.get("below_half") or []
    section.text.append(
        f"Gold items ({gold.get('items')}): {gold.get('correct')} of {gold.get('answers')} answered right by "
        f"{gold.get('workers')} workers; per worker the share with its {gold.get('interval')} interval. "
        + (
            f"Workers whose whole interval lies below one half: {', '.join(low)}."
            if low
            else "No worker's interval lies wholly below one half."
        )
        + (
            f" The study's gold QC rule (gold.qc) passes a worker with {rule}; it fails "
            + (", ".join(gold.get("qc_failed") or []) or "no worker")
            + " (column gold_qc), and schedule.qc_failures decides what happens to a failing worker's work."
            if rule
            else ""
        )
    )
    section.tables.append(("Gold items per worker (exact Clopper–Pearson 95 % interval)", display(shown)))
