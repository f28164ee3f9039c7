"""The sections every report has (study, cost, pre-screen), the protocol's through the registry,
and the methods paragraph around the protocol's own sentences."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

import pandas as pd

from hitkit.errors import HitkitError
from hitkit.progress import progress
from hitkit.protocols import PROTOCOLS
from hitkit.report import plots
from hitkit.report.evidence import evidence_section
from hitkit.report.parts import SECTION_HOOKS, ReportFigure, ReportInput, Section, SectionSource, protocol_title
from hitkit.tables.schema import DONE_STATUSES


def overview_section(inp: ReportInput) -> Section:
    """Study, task, where the numbers come from, and how much work was done."""
    section = Section("Study")
    info, summary = inp.info, inp.summary
    facts = [("study", inp.study), ("protocol", protocol_title(inp.task))]
    if info.get("provider"):
        facts.append(("provider", info["provider"]))
    if info.get("status"):
        facts.append(("status", info["status"]))
    assignments = inp.export.get("assignments")
    if assignments is not None and len(assignments):
        counts = assignments["status"].astype(str).value_counts()
        facts.append(("assignments", ", ".join(f"{k} {v}" for k, v in counts.items())))
        facts.append(("workers with an assignment", str(assignments["worker_id"].nunique())))
    for key, label in [
        ("votes", "votes"),
        ("items", "items compared"),
        ("segment_annotations", "segment annotations"),
        ("games", "ranking games"),
        ("conversations", "conversations annotated"),
        ("hits", "HITs (counted assignments)"),
    ]:
        if key in summary and not isinstance(summary[key], (dict, list)):
            facts.append((label, str(summary[key])))
    facts.append(("computed from", inp.source or "analysis tables"))
    section.tables.append(("", pd.DataFrame(facts, columns=["", "value"])))
    return section


def cost_summary(inp: ReportInput) -> dict | None:
    """Paid and pending amounts by kind from the payment ledger, with the budget; None without a ledger."""
    ledger = inp.export.get("payments")
    if ledger is None:
        return None
    currency = str(inp.info.get("currency") or (ledger["currency"].iloc[0] if len(ledger) else "USD"))

    def amount(value) -> Decimal:
        try:
            return Decimal(str(value))
        except InvalidOperation:
            return Decimal(0)

    amounts = ledger["amount"].map(amount)
    status = ledger["status"].astype(str)
    paid = {
        kind: sum(amounts[(ledger["kind"] == kind) & (status == "paid")], Decimal(0))
        for kind in ("reward", "bonus", "fee")
    }
    pending = sum(amounts[status == "pending"], Decimal(0))
    budget = amount(inp.info["budget"]) if inp.info.get("budget") not in (None, "") else None
    total = sum(paid.values(), Decimal(0))
    assignments = inp.export.get("assignments")
    paid_assignments = None
    if assignments is not None:
        paid_assignments = int(assignments["status"].astype(str).isin(DONE_STATUSES).sum())
    return {
        "currency": currency,
        "paid": paid,
        "pending": pending,
        "total": total,
        "budget": budget,
        "failed": int((status == "failed").sum()),
        "counted_assignments": paid_assignments,
        "workers_paid": int(ledger.loc[status == "paid", "worker_id"].replace("", None).dropna().nunique()),
    }


LEDGER_LABELS = {"reward": "rewards", "bonus": "bonuses", "fee": "fees", "bonus_fee": "bonus fees"}
"""How the report names each kind of ledger row (plural, in words)."""


def cost_section(inp: ReportInput) -> Section:
    """Rewards, bonuses and fees paid, pending payments, and the budget, from the Payment ledger."""
    section = Section("Cost")
    cost = cost_summary(inp)
    if cost is None:
        section.text.append("No payment ledger here (payments.csv is written by hitkit export); cost not shown.")
        return section
    q = Decimal("0.01")
    rows = [(LEDGER_LABELS.get(k, k.replace("_", " ")), str(v.quantize(q))) for k, v in cost["paid"].items()]
    rows += [("total paid", str(cost["total"].quantize(q))), ("pending", str(cost["pending"].quantize(q)))]
    if cost["budget"] is not None:
        rows.append(("budget", str(cost["budget"].quantize(q))))
        if cost["budget"] > 0:
            rows.append(("share of budget paid", f"{float(cost['total'] / cost['budget']):.1%}"))
    if cost["counted_assignments"]:
        rows.append(("paid per counted assignment", str((cost["total"] / cost["counted_assignments"]).quantize(q))))
    rows.append(("workers paid", str(cost["workers_paid"])))
    if cost["failed"]:
        rows.append(("failed payments", str(cost["failed"])))
    section.tables.append((f"Payment ledger ({cost['currency']})", pd.DataFrame(rows, columns=["", cost["currency"]])))
    section.figures.append(
        ReportFigure(
            "cost",
            "What was paid (rewards, bonuses, fees) and is pending, against the study's budget.",
            plots.cost_bar(
                {k: float(v) for k, v in cost["paid"].items()},
                float(cost["pending"]),
                float(cost["budget"]) if cost["budget"] is not None else None,
                cost["currency"],
            ),
        )
    )
    return section


def prescreen_section(inp: ReportInput) -> Section | None:
    """The automatic pre-screen (``hitkit prescreen``) when the run folder has one."""
    folder = inp.run_dir / "prescreen" if inp.run_dir is not None else None
    if folder is None or not (folder / "standings.csv").is_file():
        return None
    from hitkit.prescreen.section import section

    return section(folder)


def stopping_section(inp: ReportInput) -> Section | None:
    """The pre-registered stopping rule: what it watched, when it fired (or that it did not), what it
    decided, each comparison's interval then, and what was spent against the fixed design."""
    rule = inp.info.get("stopping")
    if not rule:
        return None
    section = Section("Stopping rule", id="stopping")
    section.text.append(stopping_sentence(rule))
    rows = [
        ("decision", f"{rule['decision']}: {rule['meaning']}"),
        ("design", rule["design"]),
        ("α (every claim, at any look)", str(rule["alpha"])),
        ("method", rule["method"]),
        ("multiple comparisons", rule["correction"]),
        (
            "fired",
            f"after {rule['fired_after_hits']} of {rule['fixed_design']['assignments']} assignments "
            f"({rule['fired_at']})"
            if rule["fired"]
            else "no",
        ),
        ("outcome", rule["outcome"]),
        (
            f"fixed design ({rule['fixed_design']['hits']} HITs, every place paid)",
            f"{rule['fixed_design']['cost']} {rule['currency']}",
        ),
        ("committed when exported", f"{rule['committed']} {rule['currency']}"),
    ]
    section.tables.append(("", pd.DataFrame(rows, columns=["", "value"])))
    if rule.get("intervals"):
        table = pd.DataFrame(rule["intervals"])
        section.tables.append(
            (
                f"Each comparison's interval {'when the rule fired' if rule['fired'] else 'now'} "
                f"(n counts {rule['unit']}" + (f"; the bounds are {rule['bounds']})" if rule.get("bounds") else ")"),
                table,
            )
        )
    return section


def stopping_sentence(rule: dict) -> str:
    """The methods paragraph's sentence on the stopping rule."""
    said = (
        f"The study was pre-registered to stop when its decision ({rule['meaning']}) was made, by "
        f"{rule['method']} at α = {rule['alpha']} with {rule['correction']} ({rule['design']} design), "
        f"looked at by the scheduler after each newly counted assignment (a worker's HIT handed in and not "
        f"rejected) once at least {rule['min_hits']} had been counted."
    )
    if rule.get("guarantee"):  # exports before the per-worker rule do not state it
        said += " " + rule["guarantee"]
    if rule["fired"]:
        said += (
            f" The rule fired after {rule['fired_after_hits']} of the fixed design's "
            f"{rule['fixed_design']['assignments']} assignments ({rule['outcome']}); "
            f"{rule['committed']} {rule['currency']} was committed against the fixed design's "
            f"{rule['fixed_design']['cost']} {rule['currency']}. The report's other intervals and tests are "
            f"fixed-sample ones and do not allow for the early stop; the rule's "
            + ("test does." if rule.get("bounds") else "intervals do.")
        )
    elif rule.get("study_status") == "completed":
        said += f" The rule did not fire; the study ran its whole design (at the end: {rule['outcome']})."
    else:
        said += (
            f" The rule had not fired when these data were exported (the study {rule.get('study_status')}, "
            f"{rule['counted_hits']} counted assignments; {rule['outcome']})."
        )
    return said


# --- the methods paragraph ---------------------------------------------------------------------------


def _versions(summary: dict) -> str:
    from hitkit.tables.versions import software_versions

    versions = summary.get("software") or software_versions()
    # trueskill and lifelines are test-only references: no number hitkit computes depends on them.
    names = ["hitkit", "numpy", "scipy", "pandas"]
    return ", ".join(f"{n} {versions[n]}" for n in names if n in versions and versions[n] != "not installed")


def methods_paragraph(inp: ReportInput) -> str:
    """A paragraph an author can paste into a paper: what was computed, with which settings and versions."""
    out = list(_report_module(inp.task).methods(inp))
    if inp.info.get("stopping"):
        out.append(stopping_sentence(inp.info["stopping"]))
    out.append(f"All numbers were computed with {_versions(inp.summary)}.")
    return " ".join(out)


# --- assembling ---------------------------------------------------------------------------------------


def _report_module(task: str):
    if task not in PROTOCOLS:
        raise HitkitError(f"no report for task '{task}'; tasks with a report: {', '.join(PROTOCOLS)}")
    return PROTOCOLS[task].module("report")


def build_sections(inp: ReportInput, extra_sections: Iterable[SectionSource] = ()) -> list[Section]:
    """The report's sections in order: study, the protocol's, extra and registered ones, cost."""
    makers: list = [
        overview_section,
        _report_module(inp.task).sections,
        evidence_section,
        stopping_section,
        prescreen_section,
        *SECTION_HOOKS,
        *extra_sections,
        cost_section,
    ]
    sections: list[Section] = []
    for maker in progress(makers, "report", total=len(makers), unit="section"):
        made = maker if isinstance(maker, Section) else maker(inp)
        if made is None:
            continue
        sections.extend(made if isinstance(made, list) else [made])
    return sections
