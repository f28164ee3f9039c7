"""``hitkit report``: one self-contained HTML file and a Markdown summary of a study's results.

The report shows the protocol's tables and figures (ranking with intervals, significance matrix,
per-criterion bars, QC pass rate, survival and stability curves, cost against budget) and ends with
a methods paragraph generated from what was actually computed: tests, corrections, bootstrap
counts, seeds, software versions, workers before and after QC. Figures are PNGs embedded as
``data:`` URIs, so the HTML file travels alone; the Markdown summary links the same PNGs, written
beside it. Every piece of text from the data is escaped.

Input is a study file (exported and analysed from its database), a run folder ``OUT/STUDY``, an
export folder (analysed here) or an analysis folder. Other parts of hitkit add sections through
:func:`register_section` (every report) or ``extra_sections`` (one report): each is a
:class:`Section`, or a function of the :class:`ReportInput` that returns one (or None to skip).
The automatic pre-screen (``OUT/STUDY/prescreen``, from ``hitkit prescreen``) is included this way
when the run folder has one (:func:`prescreen_section`).
"""
from __future__ import annotations

import base64
import datetime as dt
import html
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pandas as pd

from hitkit import plots
from hitkit.errors import HitkitError
from hitkit.progress import progress

TASK_TITLES = {"pairwise": "Pairwise A/B (ChatEval)", "live_chat": "Live chat + Direct Assessment (Ji et al. 2022)",
               "spot_the_bot": "Spot The Bot (Deriu et al. 2020)"}


@dataclass
class ReportFigure:
    """One figure: a file-safe ``name``, a caption (plain text) and the PNG bytes."""

    name: str
    caption: str
    png: bytes


@dataclass
class Section:
    """One section of the report. Text is plain (escaped when rendered); ``html`` and ``markdown``
    are trusted extra bodies a producer has already escaped, appended after the tables."""

    title: str
    text: list[str] = field(default_factory=list)
    figures: list[ReportFigure] = field(default_factory=list)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    html: str = ""
    markdown: str = ""
    raw: bool = False
    """A section whose ``html`` (one ``<section id=ID>`` with its own heading) and ``markdown`` (with its
    own ``##`` heading) are complete: rendered as they are, without hitkit's heading and wrapper."""
    id: str = ""

    @property
    def anchor(self) -> str:
        return self.id or re.sub(r"[^a-z0-9]+", "-", self.title.lower()).strip("-") or "section"


@dataclass
class ReportInput:
    """Everything a report is made from: the analysis (``tables``, ``summary``), the exported
    tables (``export``, may be empty), the export's ``study.json`` (``info``) and the configured
    live-chat criteria with their polarity, when known."""

    task: str
    tables: dict[str, pd.DataFrame]
    summary: dict
    export: dict[str, pd.DataFrame] = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    source: str = ""
    criteria: list[tuple[str, str, bool]] | None = None  # (name, polarity, qc)
    run_dir: Path | None = None  # OUT/STUDY, where other parts of hitkit leave their results

    @property
    def study(self) -> str:
        """The study's name: the export's study.json, the analysis' summary.json, the tables'
        study column, else the run folder's name (``OUT/STUDY``)."""
        for known in (self.info, self.summary):
            if known.get("study"):
                return str(known["study"])
        for table in self.export.values():
            if "study" in table.columns and len(table):
                return str(table["study"].iloc[0])
        if self.run_dir is not None and self.run_dir.name:
            return self.run_dir.name
        return "study"


SectionSource = Section | Callable[[ReportInput], Section | None]
SECTION_HOOKS: list[Callable[[ReportInput], Section | None]] = []
"""Section makers added to every report, after the protocol's sections and before cost and methods
(e.g. a pre-screen of automatic metrics). Add one with :func:`register_section`."""


def register_section(maker: Callable[[ReportInput], Section | None]):
    """Add ``maker`` (ReportInput → Section or None) to every report; usable as a decorator."""
    SECTION_HOOKS.append(maker)
    return maker


@dataclass
class ReportFiles:
    """What :func:`write_report` wrote."""

    html: Path
    markdown: Path
    figures: list[Path]
    analysis_dir: Path | None = None
    methods: str = ""

    def as_json(self) -> dict:
        return {"html": str(self.html), "markdown": str(self.markdown), "figures": [str(p) for p in self.figures],
                "analysis_dir": str(self.analysis_dir) if self.analysis_dir else None, "methods": self.methods}


# --- small helpers ---------------------------------------------------------------------------------

def _num(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _p(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _p_cell(value) -> str:
    """A p-value short enough for a matrix cell: 3 decimals without the leading zero (".006"),
    "<.001" below 0.001 (APA style), "1" for 1."""
    if value is None or math.isnan(value):
        return "–"
    if value < 0.001:
        return "<.001"
    return "1" if value >= 0.9995 else f"{value:.3f}".lstrip("0")


def _display(table: pd.DataFrame) -> pd.DataFrame:
    """A copy with numbers as short text: p-values to 3 decimals (< 0.001), other floats to 3."""
    out = table.copy()
    for column in out.columns:
        series = out[column]
        if pd.api.types.is_bool_dtype(series):
            out[column] = series.map({True: "yes", False: "no"})
        elif pd.api.types.is_float_dtype(series):
            is_p = column.startswith("p_") or column == "p_value"
            out[column] = series.map(_p if is_p else _num)
        else:
            out[column] = series.map(lambda v: "–" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    return out


def _matrix(table: pd.DataFrame, value: str, order: Sequence[str], *, mark: str | None = None,
            alpha: float = 0.05, a: str = "system_a", b: str = "system_b") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Square matrices (row = a, column = b) of ``value`` and of ``mark`` < alpha from a long table."""
    names = list(order) + sorted((set(table[a]) | set(table[b])) - set(order))
    values = pd.DataFrame(math.nan, index=names, columns=names)
    marks = pd.DataFrame(False, index=names, columns=names)
    for row in table.itertuples(index=False):
        ra, rb = getattr(row, a), getattr(row, b)
        if ra == rb:
            continue
        values.at[ra, rb] = getattr(row, value)
        if mark is not None:
            marks.at[ra, rb] = getattr(row, mark) < alpha
    return values, marks


def _correction(summary: dict) -> str:
    """How the analysis corrected its p-values, in words (older analyses did not say: none)."""
    from hitkit.analysis.inference import correction_label

    return correction_label(summary.get("multiple_comparisons", "none"))


def _interval_method(summary: dict) -> str:
    """How the analysis read its bootstrap intervals, in words (older analyses: plain percentiles)."""
    if summary.get("interval_method") == "expanded percentile":
        return ("expanded percentile intervals (Hesterberg 2015: widened by √(C/(C − 1))·t/z for the C units "
                "resampled)")
    return "percentile intervals"


def _p_column(table: pd.DataFrame) -> str:
    """The p-value column a mark is read from: the corrected one where the table has it."""
    return "p_adjusted" if "p_adjusted" in table.columns else "p_value"


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# --- the common sections ------------------------------------------------------------------------------

def overview_section(inp: ReportInput) -> Section:
    """Study, task, where the numbers come from, and how much work was done."""
    section = Section("Study")
    info, summary = inp.info, inp.summary
    facts = [("study", inp.study), ("protocol", TASK_TITLES.get(inp.task, inp.task))]
    if info.get("provider"):
        facts.append(("provider", info["provider"]))
    if info.get("status"):
        facts.append(("status", info["status"]))
    assignments = inp.export.get("assignments")
    if assignments is not None and len(assignments):
        counts = assignments["status"].astype(str).value_counts()
        facts.append(("assignments", ", ".join(f"{k} {v}" for k, v in counts.items())))
        facts.append(("workers with an assignment", str(assignments["worker_id"].nunique())))
    for key, label in [("votes", "votes"), ("items", "items compared"), ("segment_annotations", "segment annotations"),
                       ("games", "ranking games"), ("conversations", "conversations annotated"),
                       ("hits", "HITs (counted assignments)")]:
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
    paid = {kind: sum(amounts[(ledger["kind"] == kind) & (status == "paid")], Decimal(0))
            for kind in ("reward", "bonus", "fee")}
    pending = sum(amounts[status == "pending"], Decimal(0))
    budget = amount(inp.info["budget"]) if inp.info.get("budget") not in (None, "") else None
    total = sum(paid.values(), Decimal(0))
    assignments = inp.export.get("assignments")
    paid_assignments = None
    if assignments is not None:
        paid_assignments = int(assignments["status"].astype(str).isin(["approved", "submitted"]).sum())
    return {"currency": currency, "paid": paid, "pending": pending, "total": total, "budget": budget,
            "failed": int((status == "failed").sum()), "counted_assignments": paid_assignments,
            "workers_paid": int(ledger.loc[status == "paid", "worker_id"].replace("", None).dropna().nunique())}


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
    section.figures.append(ReportFigure("cost", "What was paid (rewards, bonuses, fees) and is pending, against the "
                                        "study's budget.",
                                        plots.cost_bar({k: float(v) for k, v in cost["paid"].items()},
                                                       float(cost["pending"]),
                                                       float(cost["budget"]) if cost["budget"] is not None else None,
                                                       cost["currency"])))
    return section


# --- the protocols' sections --------------------------------------------------------------------------

def pairwise_sections(inp: ReportInput) -> list[Section]:
    """Bradley–Terry ranking with bootstrap intervals, pair gains with sign tests, worker agreement."""
    t, s = inp.tables, inp.summary
    ranking = t["ranking"]
    rank = Section("Ranking")
    rank.text.append(f"Bradley–Terry scores (log-strength, mean 0) with 95 % bootstrap {_interval_method(s)} "
                     f"from {s.get('n_boot', '?')} resamples of the {s.get('interval_unit', 'vote')}s (each "
                     "with all its votes); rank 1 is best.")
    rank.figures.append(ReportFigure(
        "ranking", "Bradley–Terry score of each system with its 95 % bootstrap interval, best at the top.",
        plots.interval_ranking(list(ranking["system"]), ranking["score"], ranking["ci_low"], ranking["ci_high"],
                               xlabel="Bradley–Terry score (log-strength, mean 0)",
                               title="Ranking with 95 % bootstrap intervals",
                               labels=[f"{sy} (#{r})" for sy, r in zip(ranking["system"], ranking["rank"])])))
    rank.tables.append(("Ranking", ranking))

    pairs = t["pairs"]
    mirrored = pd.concat([pairs, pairs.rename(columns={"system_a": "system_b", "system_b": "system_a",
                                                       "wins_a": "wins_b", "wins_b": "wins_a"})
                          .assign(gain=-pairs["gain"])], ignore_index=True)
    gains, marks = _matrix(mirrored, "gain", list(ranking["system"]), mark=_p_column(pairs))
    sig = Section("Pairwise comparisons")
    sig.text.append("Gain of the row system over the column system, (wins − losses) / (wins + losses), ties "
                    f"left out; * marks a two-sided exact sign test p < 0.05 ({_correction(s)}).")
    sig.figures.append(ReportFigure("significance", "Gain of row over column; * two-sided sign test p < 0.05.",
                                    plots.pair_matrix(gains, marks=marks, title="Gain of row over column",
                                                      colorbar="gain", mark_note=f"* sign test p < 0.05, {_correction(s)}",
                                                      row_label="system", col_label="opponent")))
    sig.tables.append(("Pairs", pairs))

    workers = t.get("workers")
    quality = Section("Worker agreement")
    kappa = s.get("kappa")
    quality.text.append(f"Cohen's weighted kappa between workers on the same comparison (linear weights, ties "
                        f"included): {_num(kappa)}.")
    if workers is not None and len(workers):
        flagged = int(workers["flagged"].astype(str).str.lower().isin(["true", "1"]).sum())
        quality.text.append(f"{flagged} of {len(workers)} workers flagged for agreeing with the other workers' "
                            "majority less often than the rest (one-sided binomial test, p < 0.05); flagged "
                            "workers are listed for a look, not removed.")
        quality.figures.append(ReportFigure("agreement", "Each worker's agreement with the other workers' "
                                            "majority; flagged workers in red.", plots.agreement_histogram(workers)))
        quality.tables.append(("Workers", workers))
    return [rank, sig, quality]


def _criteria(inp: ReportInput) -> list[tuple[str, str, bool]]:
    if inp.criteria:
        return inp.criteria
    from hitkit.protocols.live_chat.analysis import DEFAULT_CRITERIA

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


def live_chat_sections(inp: ReportInput) -> list[Section]:
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
        plots.interval_ranking(list(systems["system"]), systems["z"], low, high,
                               xlabel="overall mean z (higher = better)",
                               title="Ranking by overall z" + (" with 95 % intervals" if low is not None else ""),
                               labels=[f"{sy} (n={n})" for sy, n in zip(systems["system"], systems["n"])])))
    rank.tables.append(("Systems", systems))
    if "score_intervals" in t:
        rank.tables.append((f"95 % intervals of every score (bootstrap of {unit}s)", t["score_intervals"]))

    significance = t["significance"]
    values, marks = _matrix(significance, "p_value", list(systems["system"]), mark=_p_column(significance),
                            alpha=alpha)
    sig = Section("Significance")
    sig.text.append(f"One-sided Mann–Whitney U (Wilcoxon rank-sum) p that the row system's z exceed the column "
                    f"system's, over single {s.get('significance_unit', 'rating')}s; * p < {alpha}, "
                    f"{_correction(s)}.")
    sig.figures.append(ReportFigure("significance", f"p that row beats column; * p < {alpha}.",
                                    plots.pair_matrix(values, marks=marks, title="Row beats column: one-sided "
                                                      "Mann–Whitney p", colorbar="p", cmap="Greens_r", vmin=0,
                                                      vmax=1, fmt=_p_cell,
                                                      mark_note=f"* p < {alpha}, {_correction(s)}",
                                                      row_label="system (wins)", col_label="system (beaten)")))

    criteria = [c[0] for c in _criteria(inp)]
    per = Section("Criteria")
    per.text.append("Mean z per criterion; the negative criteria (" + ", ".join(
        c[0] for c in _criteria(inp) if c[1] == "negative") + ") are reversed first, so higher is better on all.")
    per.figures.append(ReportFigure("criteria", "Mean z per criterion and system.",
                                    plots.criterion_bars(systems, criteria)))

    qc = Section("Quality control")
    workers = t["workers"]
    qc.text.append(f"{s.get('passed', '?')} of {s.get('workers', '?')} workers passed QC "
                   f"(pass rate {_num(s.get('pass_rate'))}); {s.get('hits_passed', '?')} of {s.get('hits', '?')} "
                   f"HITs were done by workers who passed. Mean minutes per conversation: "
                   f"{_num(s.get('minutes_per_conversation_passed'), 2)} (passed), "
                   f"{_num(s.get('minutes_per_conversation_failed'), 2)} (failed).")
    qc.figures.append(ReportFigure("qc", "Workers passing the QC test and the distribution of their p-values.",
                                   plots.qc_pass(workers, alpha)))
    qc.tables.append(("Workers", workers))
    sections = [rank, sig, per, qc]
    if "replication" in t:
        rep = Section("Self-replication")
        rep.text.append("Correlation of system scores between this run and the replicate run.")
        rep.tables.append(("Replication", t["replication"]))
        sections.append(rep)
    return sections


def spot_the_bot_sections(inp: ReportInput) -> list[Section]:
    """Win rates, TrueSkill ranking with rank ranges, survival and stability curves, annotators."""
    t, s = inp.tables, inp.summary
    ranking = t["ranking"]
    order = list(ranking["system"])
    wins = Section("Win rates")
    values, marks = _matrix(t["win_rates"], "win_rate", order, mark=_p_column(t["win_rates"]))
    wins.text.append("Win rate of the row system over the column system: of the annotations where one speaker got "
                     "the higher label (human > unsure > bot), the share the row system won; * chi-square test "
                     f"p < 0.05 that wins and losses split evenly ({_correction(s)}).")
    wins.figures.append(ReportFigure("win_rates", "Win rate of row over column; * chi-square p < 0.05.",
                                     plots.pair_matrix(values, marks=marks, title="Win rate of row over column",
                                                       colorbar="win rate", vmin=0, vmax=1,
                                                       mark_note=f"* chi-square p < 0.05, {_correction(s)}", row_label="system",
                                                       col_label="opponent")))
    wins.tables.append(("Win rates", t["win_rates"]))
    if "feature_win_rates" in t:
        wins.tables.append(("Feature win rates (fluency, sensibleness, specificity)", t["feature_win_rates"]))

    rank = Section("Ranking")
    rank.text.append(f"TrueSkill ranking (by {s.get('ranked_by', 'mu')}) with 95 % rank ranges from "
                     f"{s.get('n_boot', '?')} bootstrap resamples of the games; systems whose ranges overlap "
                     "share a cluster, written (first,last).")
    rank.figures.append(ReportFigure("ranking", "95 % bootstrap rank range of each system, coloured by cluster.",
                                     plots.rank_ranges(ranking, title="TrueSkill ranking: rank ranges and clusters")))
    rank.tables.append(("Ranking", ranking))
    sections = [wins, rank]

    if "survival" in t:
        surv = Section("Survival")
        unit = s.get("survival", {}).get("cluster")
        variance = (f" with a cluster-robust variance (clusters: {unit}s)" if unit not in (None, "annotation")
                    else "")
        surv.text.append("Share of each bot's speakers not yet spotted after k exchanges (Turnbull estimate on "
                         f"interval-censored data); pairwise generalized log-rank tests{variance}, "
                         f"{_correction(s)}.")
        surv.figures.append(ReportFigure("survival", "Turnbull survival curve per system.",
                                         plots.step_curves(t["survival"])))
        if "survival_tests" in t:
            surv.tables.append(("Generalized log-rank tests", t["survival_tests"]))
        if "cox" in t:
            surv.tables.append(("Cox proportional hazards per system", t["cox"]))
        sections.append(surv)

    stab = Section("Stability")
    if "stability" in t:
        st = s.get("stability", {})
        stab.text.append(f"Share of the most frequent clustered ranking over {st.get('n_sub', '?')} subsamples per "
                         f"number of conversations per pair ({st.get('n_boot', '?')} bootstrap resamples each); "
                         "the dashed line is 95 %.")
        stab.figures.append(ReportFigure("stability", "Ranking stability against conversations per pair.",
                                         plots.stability_curve(t["stability"])))
        if "stability_smallest" in t:
            stab.tables.append(("Smallest number of conversations per pair reaching 95 %", t["stability_smallest"]))
    else:
        stab.text.append("Ranking stability was not computed (minutes of computing): "
                         "hitkit report --stability adds it.")
    sections.append(stab)

    ann = Section("Annotators")
    ann.text.append(f"Mean annotator correctness {_num(s.get('correctness_mean'))} "
                    f"({_num(s.get('correctness_mean_human_human'))} on human–human material); share of "
                    f"annotators below 50 %: {_num(s.get('correctness_share_below_half'))}. Median time per "
                    f"segment annotation: {_num(s.get('median_elapsed_s', s.get('mean_elapsed_s')), 1)} s"
                    f" ({s.get('implausible_elapsed', 0)} implausible times left out).")
    for name, caption in [("agreement", "Agreement per system and label (chance 0.33)"),
                          ("segment_lengths", "Per segment length"), ("annotation_time", "Annotation time")]:
        if name in t:
            ann.tables.append((caption, t[name]))
    sections.append(ann)
    return sections


def prescreen_section(inp: ReportInput) -> Section | None:
    """The automatic pre-screen (``hitkit prescreen``) when the run folder has one, as that module renders it."""
    folder = inp.run_dir / "prescreen" if inp.run_dir is not None else None
    if folder is None or not (folder / "standings.csv").is_file():
        return None
    try:
        from hitkit.prescreen.run import prescreen_section as render
    except ImportError:
        return None
    markdown, fragment = render(folder)
    return Section("Automatic pre-screening", html=fragment, markdown=markdown, raw=True, id="prescreen")


PROTOCOL_SECTIONS = {"pairwise": pairwise_sections, "live_chat": live_chat_sections,
                     "spot_the_bot": spot_the_bot_sections}


# --- the methods paragraph ----------------------------------------------------------------------------

def _versions(summary: dict) -> str:
    from hitkit.loading import software_versions

    versions = summary.get("software") or software_versions()
    # trueskill and lifelines are test-only references: no number hitkit computes depends on them.
    names = ["hitkit", "numpy", "scipy", "pandas"]
    return ", ".join(f"{n} {versions[n]}" for n in names if n in versions and versions[n] != "not installed")


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
    return (f"each HIT held conversations with a median of {_num(float(per['median']), 1)} (from {per['min']} "
            f"to {per['max']}) of the {total} systems")


def methods_paragraph(inp: ReportInput) -> str:
    """A paragraph an author can paste into a paper: what was computed, with which settings and versions."""
    s, t = inp.summary, inp.tables
    out: list[str] = []
    if inp.task == "pairwise":
        out.append(f"We collected {s.get('votes', '?')} pairwise preference votes ({s.get('ties', '?')} ties) from "
                   f"{s.get('workers', '?')} crowdworkers on {s.get('items', '?')} items comparing "
                   f"{s.get('systems', '?')} systems, counting only submitted or approved assignments.")
        out.append("For every pair of systems we report the gain (wins − losses) / (wins + losses), ties "
                   "excluded, with a two-sided exact sign test (binomial test, p = 0.5; scipy.stats.binomtest); "
                   f"p-values are {_correction(s)} over the pairs.")
        out.append("Systems were ranked with a Bradley–Terry model fitted by Hunter's (2004) MM algorithm (ties "
                   "counted as half a win to each side, a prior of one virtual tied game per pair); 95 % "
                   f"{_interval_method(s)} come from {s.get('n_boot', '?')} bootstrap resamples of the "
                   f"{s.get('interval_unit', 'vote')}s, each with all its votes "
                   f"(numpy default_rng, seed {s.get('seed', '?')}).")
        flagged = None
        if "workers" in t and len(t["workers"]):
            flagged = int(t["workers"]["flagged"].astype(str).str.lower().isin(["true", "1"]).sum())
        out.append(f"Inter-annotator agreement is Cohen's weighted kappa with linear weights, ties included "
                   f"(κ = {_num(s.get('kappa'))}). Each worker's agreement with the other workers' majority was "
                   "tested against the other workers' pooled agreement rate (one-sided exact binomial test, "
                   f"α = 0.05); {flagged if flagged is not None else '?'} of {s.get('workers', '?')} workers were "
                   "flagged for review and none was excluded, so all "
                   f"{s.get('workers', '?')} workers' votes enter the analysis.")
    elif inp.task == "live_chat":
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
                   f"passed ({_num(s.get('pass_rate'))}), so {s.get('workers', '?')} workers before and "
                   f"{s.get('passed', '?')} after QC; only the passed workers' ratings of real systems are "
                   "scored.")
        out.append("A system's score is the mean z of all its criterion ratings, per criterion and overall. For "
                   "every ordered pair of systems a one-sided Mann–Whitney U test "
                   f"(unit: one {s.get('significance_unit', 'rating')}) asks whether the first system's z exceed "
                   f"the second's; p-values are {_correction(s)} over the ordered pairs. 95 % "
                   f"{_interval_method(s)} of every system score come from {s.get('n_boot', '?')} bootstrap "
                   f"resamples of the {s.get('interval_unit', 'worker')}s, each with all its ratings (numpy "
                   "default_rng, seed "
                   f"{s.get('seed', '?')}).")
        if "replication" in t:
            out.append("Self-replication is the Pearson, Spearman and Kendall correlation of system scores between "
                       "two runs, with a Fisher-z 95 % interval for Pearson's r.")
    elif inp.task == "spot_the_bot":
        env = s.get("trueskill", {})
        out.append(f"Following Deriu et al. (2020), {s.get('workers', '?')} annotators labelled each speaker of "
                   f"segments of bot–bot and human–human conversations as human, bot or unsure "
                   f"({s.get('segment_annotations', '?')} segment annotations of {s.get('conversations', '?')} "
                   "conversations; submitted or approved assignments only, no annotator excluded).")
        out.append("Per annotation, a system wins when its label ranks higher (human > unsure > bot); the win "
                   "rate is wins / (wins + losses), tested with a chi-square test of an even split "
                   f"(scipy.stats.chisquare; {_correction(s)} over the pairs), with 95 % {_interval_method(s)} from "
                   f"{s.get('n_boot', '?')} bootstrap resamples of the {s.get('interval_unit', 'annotation')}s.")
        out.append(f"Systems were ranked with TrueSkill (μ = {env.get('mu', '?')}, σ = {_num(env.get('sigma'))}, "
                   f"β = {_num(env.get('beta'))}, τ = {_num(env.get('tau'))}, draw probability "
                   f"{_num(env.get('draw_probability'))}"
                   f"{' (the observed tie rate)' if env.get('draw_probability_source') == 'observed tie rate' else ''}"
                   f"; ranked by {s.get('ranked_by', 'mu')}) on "
                   f"{s.get('games', '?')} one-versus-one games, ties as draws; {s.get('n_boot', '?')} bootstrap "
                   f"resamples of the {s.get('ranking_resampled', 'game')}s (numpy default_rng, seed "
                   f"{s.get('seed', '?')}) give each system's 95 % "
                   "rank range, and systems with overlapping ranges form clusters (Dušek et al. 2018).")
        if "survival" in s or "survival" in t:
            n_imp = s.get("survival", {}).get("n_imputations", "?")
            unit = s.get("survival", {}).get("cluster")
            robust = (f", with cluster-robust (sandwich) variances over {unit}s for the log-rank statistic and the "
                      "Cox coefficients" if unit not in (None, "annotation") else "")
            out.append("Survival of each bot until spotted was estimated with Turnbull's non-parametric estimator "
                       "on interval-censored data; pairs of systems were compared with the generalized log-rank "
                       f"test for interval-censored data (Zhao & Sun 2004; {n_imp} imputations, seed "
                       f"{s.get('seed', '?')}), and feature effects "
                       "with a Cox proportional-hazards model per system (fluency, sensibleness, specificity coded "
                       f"+1 / 0 / −1){robust}; p-values are {_correction(s)}.")
        if "stability" in s:
            st = s["stability"]
            sizes = st.get("sizes") or []
            span = f"{min(sizes)}–{max(sizes)}" if sizes else "?"
            out.append(f"For ranking stability we drew {st.get('n_sub', '?')} subsamples of each number of "
                       f"conversations per pair from {span}, ranked each with {st.get('n_boot', '?')} bootstrap "
                       "resamples, and report the share of the most frequent clustered ranking, with all systems "
                       "and without each one.")
    out.append(f"All numbers were computed with {_versions(s)}.")
    return " ".join(out)


# --- assembling ---------------------------------------------------------------------------------------

def build_sections(inp: ReportInput, extra_sections: Iterable[SectionSource] = ()) -> list[Section]:
    """The report's sections in order: study, the protocol's, extra and registered ones, cost."""
    if inp.task not in PROTOCOL_SECTIONS:
        raise HitkitError(f"no report for task '{inp.task}'; tasks with a report: {', '.join(PROTOCOL_SECTIONS)}")
    makers: list = [overview_section, PROTOCOL_SECTIONS[inp.task], prescreen_section, *SECTION_HOOKS,
                    *extra_sections, cost_section]
    sections: list[Section] = []
    for maker in progress(makers, "report", total=len(makers), unit="section"):
        made = maker if isinstance(maker, Section) else maker(inp)
        if made is None:
            continue
        sections.extend(made if isinstance(made, list) else [made])
    return sections


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1000px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
.table{max-width:100%;overflow-x:auto;margin:.6em 0 1.2em}
table{border-collapse:collapse;font-size:.85em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}
figure{margin:1em 0}figure img{max-width:100%;height:auto}figcaption{font-size:.85em;color:#555}
.methods{background:#f7f7f2;border-left:4px solid #b5b58a;padding:.8em 1em}
nav a{margin-right:1em}.meta{color:#666;font-size:.85em}
details{margin:.4em 0}summary{cursor:pointer;color:#345}
"""

_LONG_TABLE = 30


def _breakable_headers(body: str) -> str:
    """Column names may wrap after an underscore (``mean_pairwise_<wbr>win_rate``), so that a wide
    table's headers do not set its width."""
    return re.sub(r"<th>([^<]*)</th>", lambda m: "<th>" + m.group(1).replace("_", "_<wbr>") + "</th>", body)


def _html_table(caption: str, table: pd.DataFrame) -> str:
    """One table, inside a box that scrolls sideways when the table is wider than the column."""
    body = _breakable_headers(_display(table).to_html(index=False, escape=True, border=0, na_rep="–"))
    body = f'<div class="table">{body}</div>'
    title = f"<h3>{html.escape(caption)}</h3>" if caption else ""
    if len(table) > _LONG_TABLE:
        return (f"<details><summary>{html.escape(caption or 'table')} ({len(table)} rows)</summary>"
                f"{body}</details>")
    return title + body


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_html(inp: ReportInput, sections: Sequence[Section], methods: str) -> str:
    """The report as one HTML document; figures inline as data URIs, every text escaped."""
    title = f"hitkit report: {inp.study}"
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")  # noqa: UP017 - Python 3.10
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>",
             (f'<p class="meta">{html.escape(TASK_TITLES.get(inp.task, inp.task))} · generated '
              f"{html.escape(generated)}</p>"),
             "<nav>" + "".join(f'<a href="#{html.escape(s.anchor)}">{html.escape(s.title)}</a>' for s in sections)
             + '<a href="#methods">Methods</a></nav>']
    for section in sections:
        if section.raw:
            parts.append(section.html)
            continue
        parts.append(f'<section id="{html.escape(section.anchor)}"><h2>{html.escape(section.title)}</h2>')
        parts += [f"<p>{html.escape(text)}</p>" for text in section.text]
        for fig in section.figures:
            parts.append(f'<figure><img src="{_data_uri(fig.png)}" alt="{html.escape(fig.caption, quote=True)}">'
                         f"<figcaption>{html.escape(fig.caption)}</figcaption></figure>")
        parts += [_html_table(caption, table) for caption, table in section.tables]
        parts.append(section.html)
        parts.append("</section>")
    parts.append(f'<section id="methods"><h2>Methods</h2><p class="methods">{html.escape(methods)}</p></section>')
    parts.append("</body></html>")
    return "\n".join(parts)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]|!~#])")
_MD_BLOCK_START = re.compile(r"^(\s*)([+\-=])|^(\s*\d{1,9})([.)])(?=\s|$)")


def md_text(value: object, paragraph: bool = False) -> str:
    """``value`` as Markdown that renders as the same plain text: no raw HTML (``<``, ``>``, ``&`` become
    entities), no links, images, emphasis or code (their punctuation is backslash-escaped), no list,
    quote or heading from its first character (``paragraph``: text that starts a line), and on one
    line. Worker ids, comments and every other string from the data go through it; CommonMark shows
    the escaped characters as themselves."""
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = " ".join(text.splitlines()) if ("\n" in text or "\r" in text) else text
    text = _MD_SPECIAL.sub(r"\\\1", text)
    if not paragraph:
        return text
    return _MD_BLOCK_START.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(2) else f"{m.group(3)}\\{m.group(4)}",
                               text, count=1)


def _md_cell(value: str) -> str:
    return md_text(value)


def markdown_table(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``table`` (numbers shortened as in the HTML)."""
    shown = _display(table)
    header = "| " + " | ".join(_md_cell(str(c)) for c in shown.columns) + " |"
    rule = "|" + "|".join("---" for _ in shown.columns) + "|"
    rows = ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def render_markdown(inp: ReportInput, sections: Sequence[Section], methods: str,
                    figure_links: dict[str, str]) -> str:
    """The Markdown summary: every section's text and tables (long ones cut), figures linked."""
    lines = [f"# hitkit report: {md_text(inp.study)}", "", f"{md_text(TASK_TITLES.get(inp.task, inp.task))}", ""]
    for section in sections:
        if section.raw:
            lines += [section.markdown, ""]
            continue
        lines += [f"## {md_text(section.title)}", ""]
        for text in section.text:
            lines += [md_text(text, paragraph=True), ""]
        for fig in section.figures:
            if fig.name in figure_links:
                lines += [f"![{_md_cell(fig.caption)}]({figure_links[fig.name]})", ""]
        for caption, table in section.tables:
            if caption:
                lines += [f"**{md_text(caption)}**", ""]
            shown = table.head(_LONG_TABLE)
            lines += [markdown_table(shown), ""]
            if len(table) > _LONG_TABLE:
                lines += [f"({len(table) - _LONG_TABLE} more rows in the HTML report)", ""]
        if section.markdown:
            lines += [section.markdown, ""]
    lines += ["## Methods", "", methods, ""]
    return "\n".join(lines)


def write_report(inp: ReportInput, out_dir: str | Path, *, extra_sections: Iterable[SectionSource] = (),
                 name: str = "report") -> ReportFiles:
    """Write ``NAME.html`` (self-contained), ``NAME.md`` and the figures (``figures/*.png``) into ``out_dir``."""
    out = Path(out_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    sections = build_sections(inp, extra_sections)
    methods = methods_paragraph(inp)
    figures, links = [], {}
    used: set[str] = set()
    for section in sections:
        for fig in section.figures:
            stem = f"{section.anchor}-{fig.name}" if fig.name in used else fig.name
            used.add(fig.name)
            fig.name = stem
            path = out / "figures" / f"{stem}.png"
            path.write_bytes(fig.png)
            figures.append(path)
            links[stem] = f"figures/{stem}.png"
    html_path = out / f"{name}.html"
    html_path.write_text(render_html(inp, sections, methods), encoding="utf-8")
    md_path = out / f"{name}.md"
    md_path.write_text(render_markdown(inp, sections, methods, links), encoding="utf-8")
    return ReportFiles(html_path, md_path, figures, methods=methods)


# --- from a study file or a folder --------------------------------------------------------------------

def _criteria_of(config) -> list[tuple[str, str, bool]] | None:
    if config is None or getattr(config, "live_chat", None) is None:
        return None
    return [(c.name, c.polarity, c.qc) for c in config.live_chat.criterion_list()]


def input_from_result(task: str, result, export_dir: Path | None, *, source: str, config=None) -> ReportInput:
    """A ReportInput from an :class:`~hitkit.analysis.base.AnalysisResult` and (optionally) an export folder."""
    from hitkit.loading import load

    export, info = {}, {}
    if export_dir is not None:
        data = load(export_dir)
        export, info = data.tables, data.info
    return ReportInput(task=task, tables=dict(result.tables), summary=dict(result.summary), export=export,
                       info=info, source=source, criteria=_criteria_of(config))


def report(path: str | Path, out: str | Path | None = None, *, seed: int | None = None, stability: bool = False,
           extra_sections: Iterable[SectionSource] = (), name: str = "report") -> ReportFiles:
    """Write the report of ``path``: a study file (exported and analysed afresh from its database), a run
    folder, an export folder (analysed here) or an analysis folder (its tables as they are).

    ``out`` defaults to ``OUT/STUDY/report`` (the run folder's ``report``); ``seed`` overrides the study's
    seed; ``stability`` adds Spot The Bot's ranking stability (minutes).
    """
    from hitkit.analysis import run_analysis
    from hitkit.loading import export_from_database, load, locate

    path = Path(path)
    config = None
    if path.is_file() and path.suffix in (".yaml", ".yml"):
        from hitkit.config import load_study

        config = load_study(path)
        export_dir = export_from_database(path)
        analysis_dir, run_dir, source = None, config.out_dir, f"the database of study file {path.name}"
    else:
        export_dir, analysis_dir = locate(path)
        run_dir = path.parent if path.name in ("export", "analysis") else path
        source = f"{analysis_dir or export_dir}"
    out_dir = Path(out) if out is not None else run_dir / "report"

    if analysis_dir is not None and not stability and seed is None:
        analysed = load(analysis_dir)
        task = analysed.task or (load(export_dir).task if export_dir else None)
        if task is None:
            raise HitkitError(f"cannot tell which task {analysis_dir} holds; give the export folder instead")
        export = load(export_dir) if export_dir is not None else None
        inp = ReportInput(task=task, tables=analysed.analysis, summary=analysed.summary,
                          export=export.tables if export else {}, info=export.info if export else {},
                          source=f"analysis tables in {analysis_dir}", run_dir=run_dir)
        files = write_report(inp, out_dir, extra_sections=extra_sections, name=name)
        files.analysis_dir = analysis_dir
        return files

    if export_dir is None:
        raise HitkitError(f"{path}: no exported tables to analyse; run `hitkit export` first")
    data = load(export_dir)
    task = config.task if config is not None else data.task
    if task is None:
        raise HitkitError(f"cannot tell which task {export_dir} holds (no study.json, votes, ratings or annotations)")
    use_seed = seed if seed is not None else (config.seed if config is not None else int(data.info.get("seed", 0)))
    result = run_analysis(task, export_dir, seed=use_seed, config=config, stability=stability)
    analysis_out = (run_dir / "analysis") if config is not None or export_dir.name == "export" else out_dir / "analysis"
    result.write(analysis_out)
    inp = ReportInput(task=task, tables=dict(result.tables), summary=dict(result.summary), export=data.tables,
                      info=data.info, source=source if config is not None else f"exported tables in {export_dir}",
                      criteria=_criteria_of(config), run_dir=run_dir)
    files = write_report(inp, out_dir, extra_sections=extra_sections, name=name)
    files.analysis_dir = analysis_out
    return files


def summary_json(files: ReportFiles) -> str:
    """The report's files and methods paragraph as JSON (``hitkit report --json``)."""
    return json.dumps(files.as_json(), indent=2)
