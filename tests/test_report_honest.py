"""Every report section of every protocol, rendered (issue 42): no ``nan`` or ``None`` reaches the page,
every figure that marks significance names the test the analysis ran (read from summary.json) and the
correction, and each report has its agreement and fragility section."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from hitkit.protocols.live_chat.figures import SIGNIFICANCE_TESTS
from hitkit.protocols.pairwise.figures import PAIR_TESTS
from hitkit.report import plots
from hitkit.report.analyze import run_analysis
from hitkit.report.build import input_from_result
from hitkit.report.render import render_html, render_markdown
from hitkit.report.sections import build_sections, methods_paragraph
from tests.studies import REPO

GOLDEN = REPO / "tests" / "data" / "golden"
TEST_NAMES = {*SIGNIFICANCE_TESTS.values(), *PAIR_TESTS.values()}
MISSING = re.compile(r"\b(nan|NaN|None|NaT|<NA>)\b")


def rating_export(folder):
    from tests.test_rating import _synthetic_export

    _synthetic_export(folder)
    return folder


def arena_export(folder):
    from tests.test_arena_stats import frame

    rows = [("x", "y", v, f"w{i % 4}") for i, v in enumerate(["a", "a", "b", "tie", "a", "both_bad", "a", "b"] * 4)]
    rows += [("y", "z", v, f"w{i % 4}") for i, v in enumerate(["a", "b", "a", "a"] * 4)]
    battles = frame(rows).drop(columns="source")
    battles["prompt_id"] = [f"p{i % 6}" for i in range(len(battles))]
    battles.to_csv(folder / "battles.csv", index=False)
    return folder


EXPORTS = {
    "pairwise": lambda tmp: GOLDEN / "pairwise" / "export",
    "live_chat": lambda tmp: GOLDEN / "live_chat" / "export",
    "spot_the_bot": lambda tmp: GOLDEN / "spot_the_bot" / "export",
    "rating": rating_export,
    "arena": arena_export,
}


@pytest.mark.parametrize("task", sorted(EXPORTS))
def test_every_section_is_free_of_missing_values_and_every_figure_names_the_test_that_ran(task, tmp_path, monkeypatch):
    export = EXPORTS[task](tmp_path)
    result = run_analysis(task, export, options={"n_boot": 50})
    drawn: list[dict] = []
    original = plots.pair_matrix

    def recording(values, **kwargs):
        drawn.append(kwargs)
        return original(values, **kwargs)

    monkeypatch.setattr(plots, "pair_matrix", recording)
    inp = input_from_result(task, result, export, source="test")
    sections = build_sections(inp)
    methods = methods_paragraph(inp)
    pages = {
        "html": render_html(inp, sections, methods),
        "markdown": render_markdown(inp, sections, methods, {}),
    }
    for kind, page in pages.items():
        text = re.sub(r"data:image/png;base64,[^\"')]+", "", page)
        found = MISSING.search(text)
        assert found is None, f"{task} {kind}: {text[max(0, found.start() - 200) : found.end() + 50]!r}"
    assert any(s.anchor == "agreement" for s in sections)
    summary = result.summary
    ran = None
    if "significance_unit" in summary and task in ("live_chat", "rating"):
        ran = SIGNIFICANCE_TESTS[summary["significance_unit"]]
    elif "pair_test" in summary:
        ran = PAIR_TESTS[summary["pair_test"]]
    for figure in drawn:
        words = f"{figure.get('title', '')} {figure.get('mark_note', '')}"
        named = {name for name in TEST_NAMES if name in words}
        if ran is not None and figure.get("marks") is not None:
            assert named == {ran}, f"{task}: figure {words!r} names {named}, the analysis ran the {ran}"
            assert "correct" in words.lower() or "bonferroni" in words.lower() or "holm" in words.lower()


def test_a_pair_all_one_way_gets_an_exact_p_and_an_interval_wider_than_a_point():
    from hitkit.protocols.pairwise.analysis import pair_table

    # 8 decisive votes for alpha and one tie, from four workers: the pairwise starter's 8–0 with a tie.
    votes = pd.DataFrame(
        [("s", f"w{i % 4}", f"q{i}", "alpha", "beta", "a") for i in range(8)]
        + [("s", "w0", "q8", "alpha", "beta", "tie")],
        columns=["study", "worker_id", "item_id", "system_a", "system_b", "vote"],
    )
    for test, want in (("vote", 2 * 0.5**8), ("worker", 2 * 0.5**4)):
        row = pair_table(votes, test=test).iloc[0]
        assert row["p_value"] == pytest.approx(want)  # exact: never 0
        assert row["gain"] == 1.0 and row["gain_low"] < 1.0 and row["gain_high"] == pytest.approx(1.0)


def test_console_tables_print_no_nan_or_none_and_say_what_n_counts():
    from hitkit.analysis.base import console_table

    table = pd.DataFrame({"system": ["a", "b"], "n": [21, 7], "p": [0.5, float("nan")], "note": ["x", None]})
    text = console_table(table, {"n": "n (criterion ratings)"})
    assert MISSING.search(text) is None and text.count("–") == 2
    assert "n (criterion ratings)" in text.splitlines()[0]
