"""The pre-screen in a report: a :class:`~hitkit.report.parts.Section` made from the folder ``hitkit
prescreen`` wrote (standings, dimensions, agreement with a human ranking, ChatEval metrics and the
ranking figure), rendered by the report's own table and figure code, in the full report or alone
(``OUT/STUDY/prescreen/report.md`` and ``report.html``)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from hitkit.errors import HitkitError
from hitkit.prescreen import agreement
from hitkit.prescreen.tournament import DIMENSIONS
from hitkit.report.parts import ReportFigure, Section
from hitkit.report.render import section_html, section_markdown

FIGURE = "prescreen-ranking"


def section(prescreen_dir: str | Path) -> Section:
    """The report section of a finished pre-screen in ``prescreen_dir``."""
    folder = Path(prescreen_dir)
    if not (folder / "standings.csv").is_file():
        raise HitkitError(f"{folder}: no standings.csv; run `hitkit prescreen STUDY.yaml` first")
    summary = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").is_file() else {}
    table = pd.read_csv(folder / "standings.csv")
    out = Section("Automatic pre-screening", id="prescreen")
    out.text.append(
        f"ChatMatch tournament (Yang et al., ACL 2022): a double round-robin of {summary.get('games', '?')} "
        f"bot–bot games among {len(table)} systems, each {summary.get('exchanges', '?')} exchanges from "
        f"“{summary.get('starting_utterance', '')}”. A game point per dimension won; TrueSkill averaged "
        f"over {summary.get('shuffles', '?')} shuffled game orders. Automatic scores are a first look, "
        "not a substitute for the human evaluation."
    )
    out.tables.append(
        (
            "Tournament standings",
            table[
                [
                    "system",
                    "rank_trueskill",
                    "trueskill_mu",
                    "trueskill_sigma",
                    "wins",
                    "ties",
                    "losses",
                    "points",
                    "rank_points",
                    "dimension_points",
                ]
            ],
        )
    )
    dims = pd.read_csv(folder / "dimensions.csv") if (folder / "dimensions.csv").is_file() else pd.DataFrame()
    if not dims.empty:
        wide = (
            dims.pivot(index="system", columns="dimension", values="points")
            .reindex(columns=[d for d in DIMENSIONS if d in set(dims["dimension"])])
            .reset_index()
        )
        out.tables.append(
            (
                "Dimension points (games won on each dimension; fluency = perplexity, diversity = "
                "repetitions and consistency = contradictions are costs, lower wins)",
                wide,
            )
        )
    agree = pd.read_csv(folder / "agreement.csv") if (folder / "agreement.csv").is_file() else pd.DataFrame()
    for row in agree.itertuples():
        out.text.append(
            f"Agreement with the human ranking (Kendall τ), {row.automatic} ranking vs {row.human}: "
            f"{agreement.describe(agreement.Agreement(row.tau, row.p_value, int(row.systems)))}"
        )
    if (folder / "chateval.csv").is_file():
        out.tables.append(
            (
                "ChatEval automatic metrics on the prompts: corpus distinct-n, mean embedding cosine and "
                "sentence BLEU-2 against the reference, mean response perplexity given the prompt",
                pd.read_csv(folder / "chateval.csv"),
            )
        )
    if (folder / "ranking.png").is_file():
        out.figures.append(
            ReportFigure(FIGURE, "TrueSkill ranking and game results", (folder / "ranking.png").read_bytes())
        )
    return out


def prescreen_section(prescreen_dir: str | Path) -> tuple[str, str]:
    """The pre-screen's section alone, ``(markdown, html_fragment)``: the Markdown links ``ranking.png``
    beside it, the HTML fragment is one ``<section>`` with the figure inline."""
    made = section(prescreen_dir)
    return section_markdown(made, {FIGURE: "ranking.png"}) + "\n", section_html(made)
