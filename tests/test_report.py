"""`hitkit report` on a finished simulated study of each task type: one self-contained HTML file whose
figures are real PNG images, a Markdown summary, and a methods paragraph naming the tests and seed.

With HITKIT_REPORT_ARTIFACTS=1 the reports and their figures are also copied to test-artifacts/
(report-TASK.html, report-TASK-N.png) for a look by eye.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from hitkit.cli import main
from hitkit.report import (
    ReportInput,
    Section,
    build_sections,
    input_from_result,
    report,
    write_report,
)
from tests.test_export_roundtrip import run_study, start_bots

REPO = Path(__file__).resolve().parents[1]
IMG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (fails unless it is a PNG)."""
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def embedded_pngs(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in IMG.findall(html)]


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """One finished simulated study of each task type, on SQLite: task → (study file, run folder)."""
    server = start_bots()
    runs = {}
    try:
        for task in ("pairwise", "live_chat", "spot_the_bot"):
            tmp = tmp_path_factory.mktemp(task)
            runs[task] = run_study(task, tmp, f"sqlite:///{tmp / 'hitkit.db'}", server.url)
    finally:
        server.shutdown()
    return runs


def _save_artifacts(task: str, html_path: Path) -> None:
    if os.environ.get("HITKIT_REPORT_ARTIFACTS") != "1":
        return
    target = REPO / "test-artifacts"
    target.mkdir(exist_ok=True)
    shutil.copy(html_path, target / f"report-{task}.html")
    for i, png in enumerate(embedded_pngs(html_path.read_text()), start=1):
        (target / f"report-{task}-{i}.png").write_bytes(png)


EXPECTED = {
    # task: (least number of figures, words the methods paragraph must name)
    "pairwise": (4, ["clustered by worker", "Bradley–Terry", "bootstrap", "kappa", "binomial"]),
    "live_chat": (5, ["Mann–Whitney", "clustered by worker", "z-scores", "passed", "workers before"]),
    "spot_the_bot": (4, ["chi-square", "TrueSkill", "Turnbull", "log-rank", "Bonferroni", "bootstrap"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("task", ["pairwise", "live_chat", "spot_the_bot"])
def test_report_of_a_finished_study_is_one_html_file_with_real_figures(task, studies, tmp_path):
    study_file, run_dir = studies[task]
    out = tmp_path / "report"
    run = CliRunner().invoke(main, ["report", str(study_file), "--out", str(out), "--json", "--no-progress"])
    assert run.exit_code == 0, run.output
    files = json.loads(run.output)
    html = Path(files["html"]).read_text(encoding="utf-8")
    pngs = embedded_pngs(html)
    least, words = EXPECTED[task]
    assert len(pngs) >= least
    for png in pngs:
        width, height = png_size(png)
        assert 300 <= width <= 2000 and 100 <= height <= 2000
        assert len(png) > 3000  # something is drawn, not an empty canvas
    # Self-contained: nothing loaded from elsewhere.
    assert "src=\"http" not in html and "<link" not in html and "<script" not in html
    for section in ("Ranking", "Cost", "Methods"):
        assert f">{section}</h2>" in html

    seed = int(json.loads((run_dir / "export" / "study.json").read_text())["seed"])
    methods = files["methods"]
    for word in words:
        assert word in methods, word
    assert "hitkit " in methods and "numpy " in methods and "scipy " in methods
    if task != "live_chat":
        assert f"seed {seed}" in methods

    markdown = Path(files["markdown"]).read_text(encoding="utf-8")
    assert markdown.startswith("# hitkit report") and "## Methods" in markdown
    for link in re.findall(r"\]\((figures/[^)]+\.png)\)", markdown):
        assert png_size((out / link).read_bytes())
    assert len(files["figures"]) == len(pngs)
    _save_artifacts(task, Path(files["html"]))


@pytest.mark.slow
def test_live_chat_report_has_the_protocol_sections(studies, tmp_path):
    _, run_dir = studies["live_chat"]
    files = report(run_dir, tmp_path)
    html = files.html.read_text()
    for section in ("Significance", "Criteria", "Quality control"):
        assert f">{section}</h2>" in html
    workers = pd.read_csv(run_dir / "analysis" / "workers.csv")
    assert f"{int(workers['passed'].sum())} of {len(workers)} workers passed QC" in html


@pytest.mark.slow
def test_spot_the_bot_report_from_the_analysis_folder_and_with_stability(studies, tmp_path):
    from hitkit.protocols.spot_the_bot.analysis import analyze_spot_the_bot

    _, run_dir = studies["spot_the_bot"]
    files = report(run_dir / "analysis", tmp_path / "plain")
    html = files.html.read_text()
    for section in ("Win rates", "Survival", "Stability", "Annotators", "Cost"):
        assert f">{section}</h2>" in html
    assert "was not computed" in html

    # Stability with few subsamples (the default takes minutes) through the library API.
    result = analyze_spot_the_bot(
        run_dir / "export",
        seed=3,
        survival=True,
        stability=True,
        stability_sizes=range(1, 5),
        n_sub=40,
        stability_boot=10,
    )
    inp = input_from_result("spot_the_bot", result, run_dir / "export", source="test")
    files = write_report(inp, tmp_path / "stable")
    html = files.html.read_text()
    assert "was not computed" not in html and "ranking stability" in files.methods
    assert len(embedded_pngs(html)) == 5
    _save_artifacts("spot_the_bot-stability", files.html)


def test_text_from_the_data_is_escaped_and_extra_sections_come_before_cost(tmp_path):
    from hitkit.protocols.pairwise.analysis import analyze_pairwise

    evil = "<script>alert('x')</script>"
    rows = []
    for i in range(12):
        for w, vote in enumerate(["a", "a", "b"]):
            rows.append(
                {
                    "study": "s",
                    "hit_id": "h",
                    "assignment_id": f"a{i}-{w}",
                    "worker_id": f"w{w}",
                    "item_id": f"i{i}",
                    "system_a": evil,
                    "system_b": "plain",
                    "vote": vote,
                }
            )
    pd.DataFrame(rows).to_csv(tmp_path / "votes.csv", index=False)
    result = analyze_pairwise(tmp_path, n_boot=50)
    inp = ReportInput("pairwise", result.tables, result.summary, source=evil)
    extra = Section("Pre-screen", text=["automatic metrics & <more>"])
    names = [s.title for s in build_sections(inp, [extra, lambda _inp: None])]
    assert names.index("Pre-screen") == names.index("Cost") - 1
    raw = Section(
        "Ready-made",
        html='<section id="ready"><h2>Ready-made</h2><p>as is</p></section>',
        markdown="## Ready-made\n\nas is",
        raw=True,
        id="ready",
    )
    files = write_report(inp, tmp_path / "report", extra_sections=[extra, raw])
    html = files.html.read_text()
    assert html.count("<h2>Ready-made</h2>") == 1 and '<a href="#ready">Ready-made</a>' in html
    assert files.markdown.read_text().count("## Ready-made") == 1
    assert evil not in html and "&lt;script&gt;" in html
    assert "automatic metrics &amp; &lt;more&gt;" in html
    assert "No payment ledger" in html  # no export folder: cost is said to be missing, not invented


def _pairwise_votes(folder: Path, study: str = "chateval-pilot") -> Path:
    """A small pairwise export (votes.csv) of ``study`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {
            "study": study,
            "hit_id": "h",
            "assignment_id": f"a{i}-{w}",
            "worker_id": f"w{w}",
            "item_id": f"i{i}",
            "system_a": "x",
            "system_b": "y",
            "vote": vote,
        }
        for i in range(8)
        for w, vote in enumerate(["a", "a", "b"])
    ]
    pd.DataFrame(rows).to_csv(folder / "votes.csv", index=False)
    return folder


def test_a_report_from_the_analysis_folder_alone_is_titled_with_the_studys_name(tmp_path):
    from hitkit.report.analyze import run_analysis

    export = _pairwise_votes(tmp_path / "export")
    result = run_analysis("pairwise", export, options={"n_boot": 20})
    assert result.summary["study"] == "chateval-pilot"
    analysis = tmp_path / "elsewhere" / "analysis"
    result.write(analysis)
    files = report(analysis, tmp_path / "report")
    html = files.html.read_text()
    assert "<title>hitkit report: chateval-pilot</title>" in html
    assert files.markdown.read_text().startswith("# hitkit report: chateval-pilot")
    assert "hitkit report: study<" not in html


def test_an_older_analysis_without_the_study_in_its_summary_takes_the_run_folders_name(tmp_path):
    from hitkit.report.analyze import run_analysis

    result = run_analysis("pairwise", _pairwise_votes(tmp_path / "export"), options={"n_boot": 20})
    del result.summary["study"]
    result.write(tmp_path / "runs" / "ab-test-3" / "analysis")
    files = report(tmp_path / "runs" / "ab-test-3" / "analysis", tmp_path / "report")
    assert "<h1>hitkit report: ab-test-3</h1>" in files.html.read_text()


JI_RUN = REPO / "tests" / "data" / "ji2022-run1"


@pytest.fixture(scope="module")
def ji_report_input():
    """The paper's Free run 1 (tests/data/ji2022-run1) analysed as `hitkit report` would, fewer resamples."""
    from hitkit.report.analyze import run_analysis

    result = run_analysis("live_chat", JI_RUN, options={"n_boot": 200})
    return input_from_result("live_chat", result, JI_RUN, source="test")


def test_live_chat_methods_say_how_many_systems_each_hit_held_not_every(ji_report_input):
    from hitkit.report import methods_paragraph

    # Ji et al.: each HIT holds 5 of the 10 systems and the QC bot.
    assert ji_report_input.summary["systems"] == 10
    assert ji_report_input.summary["systems_per_hit"] == {"median": 5.0, "min": 5, "max": 5}
    methods = methods_paragraph(ji_report_input)
    assert "each HIT held conversations with 5 of the 10 systems and a degraded quality-control bot" in methods
    assert "chatted with every system" not in methods
    # An older analysis without the count: read from the exported ratings.
    older = ReportInput(
        "live_chat",
        ji_report_input.tables,
        {k: v for k, v in ji_report_input.summary.items() if k not in ("systems_per_hit", "systems")},
        export=ji_report_input.export,
    )
    assert "5 of the 10 systems" in methods_paragraph(older)


def test_the_live_chat_significance_section_says_what_p_is_and_names_the_cr2_test(ji_report_input):
    from hitkit.protocols.live_chat.report import sections

    text = " ".join(" ".join(section.text) for section in sections(ji_report_input))
    assert "p that the row system's z" not in text  # a p-value is not the probability that one system is better
    assert "of a difference in its favour at least as large as the one observed" in text
    assert "CR2" in text and "Bell–McCaffrey degrees of freedom" in text


def test_live_chat_ranking_figure_draws_the_clustered_intervals(ji_report_input, monkeypatch):
    from hitkit.protocols.live_chat.report import sections as live_chat_sections
    from hitkit.report import plots

    drawn = {}

    def spy(systems, score, low, high, **kwargs):
        drawn.update(systems=list(systems), low=low, high=high)
        return b"png"

    monkeypatch.setattr(plots, "interval_ranking", spy)
    ranking = live_chat_sections(ji_report_input)[0]
    intervals = ji_report_input.tables["score_intervals"]
    overall = intervals[intervals["criterion"] == "overall"].set_index("system")
    assert drawn["low"] is not None and drawn["high"] is not None
    assert list(drawn["low"]) == list(overall.loc[drawn["systems"], "low"])
    assert list(drawn["high"]) == list(overall.loc[drawn["systems"], "high"])
    assert "bootstrap resamples of the workers" in ranking.text[0]


COLUMN_PX = 1000  # the report's body: max-width 1000px; a wider PNG is shrunk, and its text with it


def test_pair_matrices_of_ten_systems_fit_the_column_without_shrinking_their_text():
    """Ji et al.'s 10 systems made a 1200-px matrix (8-point cells shrunk to about 6.5 points);
    long system names are cut on the axes, not in the tables."""
    from hitkit.report import plots
    from hitkit.report.matrices import p_cell

    for names in (
        ["A", "B", "A_p", "C", "C_p", "B_p", "D", "D_p", "E_p", "E"],
        [f"Huggingface-TransferTransfo-{i}" for i in range(10)],
    ):
        values = pd.DataFrame(0.0004, index=names, columns=names)
        for name in names:
            values.loc[name, name] = float("nan")
        marks = values < 0.05
        width, height = png_size(
            plots.pair_matrix(values, marks=marks, title="t", colorbar="p", fmt=p_cell, vmin=0, vmax=1, cmap="Greens_r")
        )
        assert width <= COLUMN_PX - 32 and height <= COLUMN_PX
    assert plots.short_labels(["Huggingface-TransferTransfo", "KV-MemNN"]) == ["Huggingface-Transfe…", "KV-MemNN"]
    # Cutting would make two labels alike: the names stay whole.
    assert plots.short_labels(["a_very_long_system_name_1", "a_very_long_system_name_2"])[0].endswith("_1")
    assert [p_cell(p) for p in (0.0004, 0.0061, 0.5, 0.99996)] == ["<.001", ".006", ".500", "1"]
    criteria = pd.DataFrame({"system": [f"s{i}" for i in range(10)], **{c: 0.1 for c in "abcdefg"}})
    assert png_size(plots.criterion_bars(criteria, list("abcdefg")))[0] <= COLUMN_PX - 32


def test_wide_tables_scroll_inside_the_column_and_their_headers_wrap():
    from hitkit.report.render import CSS, html_table

    table = pd.DataFrame(
        [
            {
                "system": "Huggingface-TransferTransfo",
                "mean_pairwise_win_rate": 0.5,
                "win_rate_rank_low": 1,
                "label": "a_b",
            }
        ]
    )
    html = html_table("Ranking", table)
    assert html.startswith('<h3>Ranking</h3><div class="table"><table')
    assert "<th>mean_<wbr>pairwise_<wbr>win_<wbr>rate</th>" in html
    assert "<td>a_b</td>" in html  # data cells are left as they are
    assert ".table{max-width:100%;overflow-x:auto" in CSS
