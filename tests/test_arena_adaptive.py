"""An arena study with ``design: adaptive`` and a ``stop:`` rule, through the real pages (real HTTP), and
`hitkit plan` on an arena study file."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner
from sqlalchemy import func, select

from hitkit.cli import main
from hitkit.db.models import Assignment, Event, Hit, HitUnit, Unit
from hitkit.db.session import session_scope
from hitkit.protocols.arena.sequential import hit_pairs
from tests.studies import launch
from tests.test_arena_study import arena_study, bot_server  # noqa: F401 (the module's bot server fixture)
from tests.test_stopping import adaptive, assert_stopped_early_only_if

WIDE = {"anna": 0.95, "bert": 0.3, "cleo": 0.1, "qc": 0.02}


def test_an_adaptive_arena_study_stops_early_when_one_system_is_far_better(tmp_path, one_database_url, bot_server):  # noqa: F811
    study_file = arena_study(tmp_path, one_database_url, bot_server, hits=24, battles_per_hit=5)
    adaptive(study_file, yaml.safe_load(study_file.read_text()), WIDE, min_hits=3, per_worker_cap=2)
    launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=400, analyse=False)
    assert_stopped_early_only_if(True, one_database_url, "anna")
    with session_scope(one_database_url) as s:
        fired = s.scalars(select(Event).where(Event.kind == "stop_rule_fired")).one()
        withdrawn = s.scalar(select(func.count()).select_from(Hit).where(Hit.status == "withdrawn"))
        assert fired.data["withdrawn"] == withdrawn > 0
        # Nothing was taken or paid for a withdrawn HIT.
        assert s.scalar(select(func.count()).select_from(Assignment).join(Hit).where(Hit.status == "withdrawn")) == 0
        # The adaptive order posts the packed HITs, unchanged: 24 QC battles in all, and the real pairs that
        # arena's sequential.hit_pairs reads for the order cover the three pairs.
        payloads = [p for (p,) in s.execute(select(Unit.payload).join(HitUnit, HitUnit.unit_id == Unit.id))]
        assert len(payloads) == 120 and sum(bool(p["is_control"]) for p in payloads) == 24
        assert hit_pairs(payloads) == [("anna", "bert"), ("anna", "cleo"), ("bert", "cleo")]
    info = json.loads((tmp_path / "runs" / "arena-demo" / "export" / "study.json").read_text())
    rule = info["stopping"]
    assert rule["fired"] and rule["fired_after_hits"] < 24


def test_hitkit_plan_on_an_arena_study_prints_and_writes_its_plan(tmp_path):
    study = arena_study(tmp_path, f"sqlite:///{tmp_path / 'x.db'}", "http://127.0.0.1:9")
    run = CliRunner().invoke(
        main, ["plan", str(study), "--replicates", "3", "--n-boot", "20", "--sizes", "4,12", "--json"]
    )
    assert run.exit_code == 0, run.output
    out = json.loads(run.output)
    assert out["unit"] == "hits" and [r["hits"] for r in out["table"]] == [4, 12]
    assert (tmp_path / "runs" / "arena-demo" / "plan" / "plan.csv").is_file()
    text = CliRunner().invoke(main, ["plan", str(study), "--replicates", "2", "--n-boot", "10", "--sizes", "6"])
    assert text.exit_code == 0, text.output
    assert "plan.csv" in text.output
    bad = CliRunner().invoke(main, ["plan", str(study), "--sizes", "0,4"])
    assert bad.exit_code != 0 and "at least 1" in bad.output
