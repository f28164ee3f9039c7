"""The dashboard in a coordinator's words: every event the code writes has a name on the dashboard, and the
events table shows no machine name (``assignment_accepted``, ``provider_hit_id``) as its visible text."""

from __future__ import annotations

import datetime as dt
import html
import re
from pathlib import Path

import jinja2

from hitkit.dashboard.glossary import EVENT_LABELS, detail_label, event_label
from tests.studies import REPO

MACHINE_NAME = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def written_event_kinds() -> set[str]:
    """The event kinds the code writes as literals: ``kind="…"`` and ``add_event(session, study, "…", …)``
    in hitkit/ and server/, and the constants
    named ``…_EVENT``/``FIRED``/``CLOSED`` that Event rows take."""
    kinds: set[str] = set()
    for path in [*Path(REPO / "hitkit").rglob("*.py"), *Path(REPO / "server").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        if "Event(" not in text and "record_once(" not in text and "add_event(" not in text:
            continue
        kinds |= set(re.findall(r'Event\([^)]*?kind="([a-z_]+)"', text, re.DOTALL))
        kinds |= set(re.findall(r'add_event\(\s*[^,()]+,\s*[^,()]+(?:\([^()]*\))?,\s*"([a-z_]+)"', text))
        kinds |= set(re.findall(r'record_once\([^,]+,[^,]+,\s*"([a-z_]+)"', text))
        kinds |= set(re.findall(r'^(?:[A-Z_]*EVENT|FIRED|CLOSED|SCREENED_OUT) = "([a-z_]+)"', text, re.MULTILINE))
    return kinds


def test_every_event_the_code_writes_has_words_on_the_dashboard():
    kinds = written_event_kinds()
    assert len(kinds) >= 20  # the scan finds the code's events (a broken scan would pass vacuously)
    assert sorted(kinds - set(EVENT_LABELS)) == []


def test_the_events_table_shows_words_and_keeps_machine_names_out_of_sight():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(REPO / "hit_templates"), autoescape=True)
    env.filters.update(event_label=event_label, detail_label=detail_label, when=lambda t: t.strftime("%H:%M:%S"))
    now = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.timezone.utc)
    events = [
        {"time": now, "kind": k, "actor": "scheduler", "data": {"provider_hit_id": "abc", "assignment": 3}}
        for k in [*sorted(EVENT_LABELS), "some_future_event"]
    ]
    page = env.get_template("dashboard/_events_table.html").render(events=events, show_study=False, live_events=True)
    visible = html.unescape(re.sub(r"<[^>]+>", " ", page))  # attributes (the machine names in title=) are not shown
    assert MACHINE_NAME.findall(visible) == []
    assert "a worker accepted work" in visible and "platform's id of the work" in visible
    assert "some future event" in visible and 'title="assignment_accepted"' in page
