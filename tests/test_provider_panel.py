"""The ``panel`` provider: participants arrive through the panel's URL parameters; their work counts
only once the coordinator confirms it with the panel's completion list (``hitkit confirm``)."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from hitkit.cli import main
from hitkit.db.models import Assignment, Event, Payment, Study
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError, FlowError, InputError
from hitkit.providers import make_provider
from hitkit.providers.base import CompletionKind
from hitkit.providers.panel import PanelProvider
from hitkit.running.scheduler import tick
from hitkit.simulation.crowd import crowd_from_config
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext, create_study, resolve_secret
from tests.fakes.crowd import run_rounds, take_hit
from tests.studies import pairwise_study

COMPLETE = "https://connect.cloudresearch.com/participant/project/ABC/complete?code={code}&s={session_id}"
PANEL = {
    "name": "CloudResearch Connect",
    "worker_param": "participantId",
    "session_param": "assignmentId",
    "completion_url": COMPLETE,
    "completion_code": "HK7Q2",
}


def panel_study(tmp_path, database_url, **panel):
    return pairwise_study(tmp_path, database_url, provider={"kind": "panel", "panel": {**PANEL, **panel}})


def export(database_url: str, out) -> dict[str, pd.DataFrame]:
    from hitkit.tables.export import export_study

    with session_scope(database_url) as s:
        export_study(s, StudyContext.load(s, "ab-demo", resolve_secret(database_url)), out, "csv")
    return {
        name: pd.read_csv(out / f"{name}.csv", dtype=str, keep_default_na=False) for name in ("assignments", "votes")
    }


# Arrival and hand-back --------------------------------------------------------------------------
def test_arrival_reads_the_configured_parameters_and_refuses_what_is_not_an_id(tmp_path):
    p = make_provider(load_study(panel_study(tmp_path, "sqlite://")), "s")
    assert isinstance(p, PanelProvider) and p.chooses_hit and p.confirmation == "coordinator"
    visit = p.arrival({"participantId": "P-123", "assignmentId": "S-9"})
    assert (visit.preview, visit.worker_id, visit.provider_assignment_id) == (False, "P-123", "S-9")
    assert p.arrival({}).preview  # the coordinator opening the link: read-only
    for bad in (
        {"participantId": "{{%PARTICIPANT_ID%}}", "assignmentId": "S-9"},  # the panel did not fill it in
        {"participantId": "../x", "assignmentId": "S-9"},
        {"participantId": "P-123\n", "assignmentId": "S-9"},  # `P-123%0a`: a new id that looks like P-123
        {"participantId": "P-123", "assignmentId": "S-9\n"},
        {"participantId": "P-123"},  # the panel sends a session id; this link has none
        {"assignmentId": "S-9"},
    ):
        with pytest.raises(FlowError) as err:
            p.arrival(bad)
        assert err.value.status == 400
    done = p.completion("S-9", {})
    assert done.kind is CompletionKind.REDIRECT
    assert done.url == "https://connect.cloudresearch.com/participant/project/ABC/complete?code=HK7Q2&s=S-9"
    assert p.entry_link("https://tasks.example.org/") == (
        "https://tasks.example.org/s/ab-demo/enter?participantId=<participant id>&assignmentId=<session id>"
    )
    code_only = make_provider(
        load_study(panel_study(tmp_path, "sqlite://", completion_url=None, session_param=None)), "s"
    )
    shown = code_only.completion(None, {})
    assert shown.kind is CompletionKind.PAGE and shown.code == "HK7Q2"


@pytest.mark.parametrize(
    "panel, message",
    [
        ({"completion_url": None, "completion_code": None}, "completion_url, completion_code or both"),
        ({"completion_code": None}, "names {code} but completion_code is not set"),
        ({"completion_url": "https://x.example/done?u={worker}"}, "may name only {code}, {session_id}"),
        ({"session_param": None}, "names {session_id} but session_param is not set"),
        ({"worker_param": "id&x=1"}, "provider.panel.worker_param"),
    ],
)
def test_a_panel_section_that_cannot_work_is_refused_with_the_fix(tmp_path, panel, message):
    with pytest.raises(ConfigError, match=message.replace("{", r"\{").replace("}", r"\}")):
        load_study(panel_study(tmp_path, "sqlite://", **panel))


def test_a_panel_study_needs_its_section(tmp_path):
    with pytest.raises(ConfigError, match="needs a provider.panel section"):
        load_study(pairwise_study(tmp_path, "sqlite://", provider={"kind": "panel"}))


# The whole study ---------------------------------------------------------------------------------
def test_a_panel_study_counts_work_only_once_the_coordinator_confirms_it(tmp_path, one_database_url):
    database_url = one_database_url  # one store: what this test checks is not storage
    path = panel_study(tmp_path, database_url)
    config = load_study(path)
    secret = resolve_secret(database_url)
    from server.embedded import WebServer

    with session_scope(database_url) as s:
        ctx = create_study(s, config, path, secret)
        s.get(Study, ctx.study_id).status = "running"
    web = WebServer(database_url, "127.0.0.1", 0, 8, secret).start()
    sessions: dict[str, list[str]] = {}
    try:
        with session_scope(database_url) as s:
            ctx = StudyContext.load(s, "ab-demo", secret)
            sim = ctx.task.simulation_context(s, s.get(Study, ctx.study_id))
        workers = crowd_from_config(config)
        visits = iter(range(10_000))

        def one_round() -> int:
            n = 0
            for w in workers:
                session_id = f"S{next(visits):05d}"
                # The panel sends the participant to the study link with its ids filled in.
                done = take_hit(
                    ctx,
                    sim,
                    w,
                    f"{web.url}/s/ab-demo/enter",
                    {"participantId": w.worker_id, "assignmentId": session_id},
                )
                if done is None:
                    continue
                assert done.status_code == 302
                assert done.headers["Location"] == COMPLETE.format(code="HK7Q2", session_id=session_id)
                sessions.setdefault(w.worker_id, []).append(session_id)
                n += 1
            return n

        taken = run_rounds(
            20,
            one_round,
            lambda: tick(database_url, "ab-demo", web.url),
            lambda: _study_status(database_url) == "completed",
        )
    finally:
        web.stop()
    assert taken == 10 * 3 == sum(len(v) for v in sessions.values())

    # Before confirmation: nothing approved or paid, exported as unconfirmed, no votes, nothing to analyse.
    with session_scope(database_url) as s:
        rows = s.scalars(select(Assignment)).all()
        assert len(rows) == 30 and {a.status for a in rows} == {"submitted"}
        assert {a.confirmed_at for a in rows} == {None}
        assert s.scalar(select(Payment.id)) is None
    before = export(database_url, tmp_path / "before")
    assert set(before["assignments"]["status"]) == {"unconfirmed"} and before["votes"].empty
    from hitkit.report.analyze import run_analysis

    with pytest.raises(InputError, match="no votes"):
        run_analysis("pairwise", tmp_path / "before")

    # The panel lists who completed: every session but two participants' (rejected there), and a stranger.
    rejected = {sorted(sessions)[0], sorted(sessions)[-1]}
    listed = [sid for wid, sids in sessions.items() if wid not in rejected for sid in sids]
    left_out = [sid for wid, sids in sessions.items() if wid in rejected for sid in sids]
    assert listed and left_out
    completed = tmp_path / "connect_completed.csv"
    with completed.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["participantId", "assignmentId", "status"])
        for wid, sids in sessions.items():
            for sid in sids:
                if sid in listed:
                    out.writerow([wid, sid, "Approved"])
        out.writerow(["P-unknown", "S-nobody", "Approved"])
    result = CliRunner().invoke(main, ["confirm", str(path), "--completed", str(completed)])
    assert result.exit_code == 0, result.output
    assert f"Confirmed {len(listed)} assignment(s); 0 were confirmed already." in result.output
    assert "S-nobody" in result.output
    again = CliRunner().invoke(main, ["confirm", str(path), "--completed", str(completed), "--json"])
    assert json.loads(again.output)["confirmed"] == [] and len(json.loads(again.output)["already_confirmed"]) == len(
        listed
    )

    with session_scope(database_url) as s:
        confirmed = {a.provider_assignment_id for a in s.scalars(select(Assignment)) if a.confirmed_at is not None}
        assert confirmed == set(listed)
        assert [e.data["confirmed"] for e in s.scalars(select(Event).where(Event.kind == "work_confirmed"))] == [
            len(listed),
            0,
        ]

    # The scheduler now approves (and books) the confirmed work only.
    tick(database_url, "ab-demo", "https://tasks.example.org")
    with session_scope(database_url) as s:
        status = {a.provider_assignment_id: a.status for a in s.scalars(select(Assignment))}
        paid = Counter(p.kind for p in s.scalars(select(Payment)))
    assert {status[sid] for sid in listed} == {"approved"} and {status[sid] for sid in left_out} == {"submitted"}
    assert paid == {"reward": len(listed), "fee": len(listed)}

    after = export(database_url, tmp_path / "after")
    exported = dict(zip(after["assignments"]["assignment_id"], after["assignments"]["status"]))
    assert {exported[sid] for sid in listed} == {"approved"} and {exported[sid] for sid in left_out} == {"unconfirmed"}
    assert set(after["votes"]["assignment_id"]) == set(listed)
    with session_scope(database_url) as s:
        from hitkit.db.models import Response

        asked = s.scalar(
            select(func.count())
            .select_from(Response)
            .join(Assignment)
            .where(Response.question == "vote", Assignment.provider_assignment_id.in_(listed))
        )
    assert len(after["votes"]) == asked > 0  # every vote of the confirmed work, none of the rest
    summary = run_analysis("pairwise", tmp_path / "after").summary
    assert summary["votes"] == asked
    assert summary["workers"] == len(sessions) - len(rejected)

    # The coordinator approving one of the left-out sessions in the dashboard confirms it too.
    from hitkit.dashboard import approve_assignment

    with session_scope(database_url) as s:
        ctx = StudyContext.load(s, "ab-demo", secret)
        one = s.scalar(select(Assignment.id).where(Assignment.provider_assignment_id == left_out[0]))
    approve_assignment(database_url, ctx, one)
    last = export(database_url, tmp_path / "last")
    exported = dict(zip(last["assignments"]["assignment_id"], last["assignments"]["status"]))
    assert exported[left_out[0]] == "approved" and left_out[0] in set(last["votes"]["assignment_id"])
    assert {exported[sid] for sid in left_out[1:]} == {"unconfirmed"}


def _study_status(database_url: str) -> str:
    with session_scope(database_url) as s:
        return s.scalar(select(Study.status))


def test_confirm_says_which_column_it_needs(tmp_path, database_url):
    path = panel_study(tmp_path, database_url)
    bad = tmp_path / "list.csv"
    bad.write_text("name,when\nx,y\n")
    result = CliRunner().invoke(main, ["confirm", str(path), "--completed", str(bad)])
    assert result.exit_code == 1
    assert "'assignmentId' or 'session_id' or 'assignment_id'" in result.output and "--column" in result.output


def test_every_id_pattern_matches_the_whole_string_not_up_to_a_final_newline():
    """``$`` matches before a final newline (``re.match(r"^x$", "x\\n")`` succeeds), so each id pattern is
    used with ``fullmatch``: an id ending in ``%0a`` is another id, refused, never taken for the one it ends."""
    from hitkit.protocols.live_chat.mturk import Rules
    from hitkit.providers.mturk_client import ID_PATTERN
    from hitkit.providers.panel import PANEL_ID
    from hitkit.worker.security import frame_ancestors

    for pattern, good in ((PANEL_ID, "P-123"), (ID_PATTERN, "3XYZ9")):
        assert pattern.fullmatch(good) and not pattern.fullmatch(good + "\n")
    assert frame_ancestors("https://a.example\n") == ("'self'", "https://a.example")  # split on whitespace
    with pytest.raises(ValueError, match="criteria must be distinct"):
        Rules.model_validate({"slots": 1, "system": "Input.s{i}", "scores": "Answer.q{i}", "criteria": ["fluent\n"]})
