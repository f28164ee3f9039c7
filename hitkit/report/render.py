"""The report rendered: one self-contained HTML document (figures as data URIs, every text escaped)
and a Markdown summary whose text renders as the same plain text."""

from __future__ import annotations

import base64
import datetime as dt
import html
import re
from collections.abc import Sequence

import pandas as pd

from hitkit.report.parts import ReportInput, Section, display, protocol_title

CSS = """
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


def html_table(caption: str, table: pd.DataFrame) -> str:
    """One table, inside a box that scrolls sideways when the table is wider than the column."""
    body = _breakable_headers(display(table).to_html(index=False, escape=True, border=0, na_rep="–"))
    body = f'<div class="table">{body}</div>'
    title = f"<h3>{html.escape(caption)}</h3>" if caption else ""
    if len(table) > _LONG_TABLE:
        return f"<details><summary>{html.escape(caption or 'table')} ({len(table)} rows)</summary>{body}</details>"
    return title + body


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def section_html(section: Section) -> str:
    """One section as an HTML ``<section>``: its heading, text, figures inline, tables; a raw section as it is."""
    if section.raw:
        return section.html
    parts = [f'<section id="{html.escape(section.anchor)}"><h2>{html.escape(section.title)}</h2>']
    parts += [f"<p>{html.escape(text)}</p>" for text in section.text]
    for fig in section.figures:
        parts.append(
            f'<figure><img src="{_data_uri(fig.png)}" alt="{html.escape(fig.caption, quote=True)}">'
            f"<figcaption>{html.escape(fig.caption)}</figcaption></figure>"
        )
    parts += [html_table(caption, table) for caption, table in section.tables]
    parts += [section.html, "</section>"]
    return "\n".join(parts)


def section_markdown(section: Section, figure_links: dict[str, str]) -> str:
    """One section in Markdown: its ``##`` heading, text, figures linked (``figure_links``: name → path)
    and tables (long ones cut); a raw section as it is."""
    if section.raw:
        return section.markdown
    lines = [f"## {md_text(section.title)}", ""]
    for text in section.text:
        lines += [md_text(text, paragraph=True), ""]
    for fig in section.figures:
        if fig.name in figure_links:
            lines += [f"![{_md_cell(fig.caption)}]({figure_links[fig.name]})", ""]
    for caption, table in section.tables:
        if caption:
            lines += [f"**{md_text(caption)}**", ""]
        lines += [markdown_table(table.head(_LONG_TABLE)), ""]
        if len(table) > _LONG_TABLE:
            lines += [f"({len(table) - _LONG_TABLE} more rows in the HTML report)", ""]
    if section.markdown:
        lines += [section.markdown, ""]
    return "\n".join(lines).rstrip("\n")


def render_html(inp: ReportInput, sections: Sequence[Section], methods: str) -> str:
    """The report as one HTML document; figures inline as data URIs, every text escaped."""
    title = f"hitkit report: {inp.study}"
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")  # noqa: UP017 - Python 3.10
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        (f'<p class="meta">{html.escape(protocol_title(inp.task))} · generated {html.escape(generated)}</p>'),
        "<nav>"
        + "".join(f'<a href="#{html.escape(s.anchor)}">{html.escape(s.title)}</a>' for s in sections)
        + '<a href="#methods">Methods</a></nav>',
    ]
    parts += [section_html(section) for section in sections]
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
    return _MD_BLOCK_START.sub(
        lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(2) else f"{m.group(3)}\\{m.group(4)}", text, count=1
    )


def _md_cell(value: str) -> str:
    return md_text(value)


def markdown_table(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of ``table`` (numbers shortened as in the HTML)."""
    shown = display(table)
    header = "| " + " | ".join(_md_cell(str(c)) for c in shown.columns) + " |"
    rule = "|" + "|".join("---" for _ in shown.columns) + "|"
    rows = ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def render_markdown(inp: ReportInput, sections: Sequence[Section], methods: str, figure_links: dict[str, str]) -> str:
    """The Markdown summary: every section's text and tables (long ones cut), figures linked."""
    lines = [f"# hitkit report: {md_text(inp.study)}", "", f"{md_text(protocol_title(inp.task))}", ""]
    for section in sections:
        lines += [section_markdown(section, figure_links), ""]
    lines += ["## Methods", "", methods, ""]
    return "\n".join(lines)
