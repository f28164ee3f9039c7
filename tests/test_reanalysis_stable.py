"""A re-analysis that does not move: a real simulated study whose QC rejects the spammers' work
(``qc_failures: reject``) is analysed the same before and after the rejections, because QC and the
analysis count all work handed in; a coordinator's rejection with its own reason is excluded explicitly."""

from __future__ import annotations

import json

from click.testing import CliRunner
from sqlalchemy import select

from hitkit.cli import main
from hitkit.db.models import Assignment, Event
from hitkit.db.session import session_scope
from tests.studies import launch, pairwise_study


def _analyse(study_file, out):
    export = out / "export"
    run = CliRunner().invoke(main, ["export", str(study_file), "--out", str(export), "--format", "csv"])
    assert run.exit_code == 0, run.output
    run = CliRunner().invoke(
        main, ["analyze", "pairwise", str(export), "--out", str(out / "analysis"), "--n-boot", "50", "--seed", "1"]
    )
    assert run.exit_code == 0, run.output
    return export, {name: (out / "analysis" / name).read_text() for name in ("pairs.csv", "ranking.csv", "workers.csv")}


def test_a_study_analysed_before_and_after_its_qc_rejections_gives_the_same_numbers(tmp_path, one_database_url):
    study_file = pairwise_study(
        tmp_path,
        one_database_url,
        schedule={"qc_failures": "reject", "qc_reject_reason": "Your votes ignored the replies.", "approve_after_s": 0},
    )
    launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=240, analyse=False)
    with session_scope(one_database_url) as s:
        rejected = [a.id for a in s.scalars(select(Assignment).where(Assignment.status == "rejected"))]
        assert s.scalars(select(Event).where(Event.kind == "qc_rejected")).first() is not None
    assert rejected, "seeded: the spammers fail QC and the policy rejects their work"
    after_export, after = _analyse(study_file, tmp_path / "after")
    statuses = (after_export / "assignments.csv").read_text()
    assert ",rejected," in statuses and not (after_export / "exclusions.csv").exists()
    # Before the rejections the same work was submitted and waiting: undo them and analyse again
    with session_scope(one_database_url) as s:
        for a in s.scalars(select(Assignment).where(Assignment.id.in_(rejected))):
            a.status = "submitted"
    _, before = _analyse(study_file, tmp_path / "before")
    assert before == after
    summary = json.loads((tmp_path / "after" / "analysis" / "summary.json").read_text())
    assert "exclusions" not in summary


def test_a_coordinators_rejection_with_its_reason_is_excluded_explicitly(tmp_path, one_database_url):
    from hitkit.dashboard.workers import reject_assignment
    from hitkit.study.loading import load_study
    from hitkit.study.stored import StudyContext, resolve_secret

    study_file = pairwise_study(tmp_path, one_database_url)
    launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=240, analyse=False)
    config = load_study(study_file)
    with session_scope(one_database_url) as s:
        ctx = StudyContext.load(s, config.study, resolve_secret(one_database_url))
        # one diligent worker's work, still to be reviewed (as if it came in late), which the coordinator rejects
        target = s.scalars(select(Assignment).order_by(Assignment.id)).first()
        target.status = "submitted"
        target_id, worker = target.id, target.worker.external_id
    reject_assignment(one_database_url, ctx, target_id, "answered in another language")
    export, _ = _analyse(study_file, tmp_path / "out")
    exclusions = (export / "exclusions.csv").read_text().splitlines()
    assert len(exclusions) == 2 and worker in exclusions[1]
    assert "rejected by the coordinator: answered in another language" in exclusions[1]
    summary = json.loads((tmp_path / "out" / "analysis" / "summary.json").read_text())
    assert [e["reason"] for e in summary["exclusions"]] == ["rejected by the coordinator: answered in another language"]
    votes = [line.split(",") for line in (export / "votes.csv").read_text().splitlines()[1:]]
    excluded_id = exclusions[1].split(",")[1]
    assert summary["votes"] == sum(1 for v in votes if v[2] != excluded_id) < len(votes)
