"""Gold items in a whole arena study (issue 42): gold.rate sets the share of battles against the QC bot
and spreads them evenly over the HITs, battles.csv marks them with is_gold and gold_answer (the real
system's side), the leaderboard leaves them out, and a worker who votes at random fails QC by gold."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from sqlalchemy import select

from hitkit.db.models import Hit, Study
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.money.qc import qc_summary
from hitkit.protocols.arena.analysis import worker_qc
from hitkit.protocols.arena.columns import BATTLE_COLUMNS
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext
from tests.studies import launch
from tests.test_arena_study import arena_study, bot_server  # noqa: F401 (the fixture)

QUALITY = {"anna": 0.9, "bert": 0.8, "cleo": 0.7, "qc": 0.0}


def gold_arena_study(tmp_path, database_url, bot_url):
    import yaml

    path = arena_study(tmp_path, database_url, bot_url, hits=12, battles_per_hit=4)
    data = yaml.safe_load(path.read_text())
    del data["arena"]["control_share"]
    data["gold"] = {"rate": 0.5, "qc": {"misses": 3}}
    # One careful worker and one who votes at random among a / b / tie / both bad (sim-spammer-000's kind).
    data["simulated"].update(
        workers=[{"profile": "diligent", "count": 1}, {"profile": "spammer", "count": 1}], quality=QUALITY
    )
    data["schedule"].update(per_worker_cap=7, wave_size=4, max_concurrent=4)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_gold_battles_fill_half_of_every_hit_and_fail_the_random_voter(tmp_path, one_database_url, bot_server):  # noqa: F811
    study_file = gold_arena_study(tmp_path, one_database_url, bot_server)
    result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=400)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "arena-demo"

    with session_scope(one_database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        for hit in s.scalars(select(Hit)):
            assert sum(hu.unit.payload["is_control"] for hu in hit.units) == 2 and len(hit.units) == 4
        ctx = StudyContext.of(s.scalar(select(Study)), "secret")
        qc = qc_summary(s, ctx, cache_key=f"gold-arena {one_database_url}")
        # the arena's own voter test on the same tables the QC policy reads
        _method, own = worker_qc(ctx.task.export(s, s.scalar(select(Study))), ctx.config)

    battles = pd.read_csv(out / "export" / "battles.csv", keep_default_na=False)
    assert tuple(battles.columns) == (*BATTLE_COLUMNS, "is_gold", "gold_answer")
    gold = battles[battles["is_gold"] == 1]
    assert len(gold) == 24 and (battles["is_gold"] == battles["is_control"]).all()
    real_side = gold.apply(lambda r: r["system_" + r["gold_answer"]], axis=1)
    assert set(real_side) <= {"anna", "bert", "cleo"}

    analysis = out / "analysis"
    board = pd.read_csv(analysis / "leaderboard.csv")
    assert set(board["system"]) == {"anna", "bert", "cleo"}
    workers = pd.read_csv(analysis / "workers.csv", keep_default_na=False).set_index("worker_id")
    spammer, diligent = "sim-spammer-000", "sim-diligent-000"
    assert workers.loc[spammer, "gold_items"] >= 8 and workers.loc[diligent, "gold_items"] >= 8
    assert workers.loc[spammer, "gold_qc"] == "failed" and workers.loc[diligent, "gold_qc"] == "passed"
    summary = json.loads((analysis / "summary.json").read_text())
    assert summary["gold"]["qc_failed"] == [spammer]
    assert qc.by_worker[spammer] is False and "gold items wrong" in qc.method
    # Gold fails nobody careful: the careful worker's verdict is the arena's own test's (passed where it has none).
    assert qc.by_worker[diligent] is (own[diligent] is not False)


def test_arena_gold_needs_a_qc_bot_and_is_refused_beside_a_changed_control_share(tmp_path, bot_server):  # noqa: F811
    import yaml

    path = arena_study(tmp_path, "sqlite:///unused.db", bot_server)
    data = yaml.safe_load(path.read_text())
    data["gold"] = {"rate": 0.25}
    data["arena"]["control_share"] = 0.3
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="arena.control_share = 0.3 and gold.rate = 0.25 both set"):
        load_study(path)
    del data["arena"]["control_share"], data["arena"]["control"]
    data["systems"] = [s for s in data["systems"] if s["name"] != "qc"]
    data["simulated"].get("quality", {}).pop("qc", None)  # else the shared check (a name not in systems) speaks first
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="name it in arena.control"):
        load_study(path)


def test_hitkit_plan_simulates_the_leaderboard_battles_gold_leaves(tmp_path, bot_server):  # noqa: F811
    from hitkit.protocols.arena.plan import simulate
    from hitkit.protocols.arena.settings import control_battles

    config = load_study(gold_arena_study(tmp_path, "sqlite:///unused.db", bot_server))
    # 48 battles, half of them gold (QC) battles: the plan's simulated study has the other 24
    assert config.arena.battle_count() == 48 and control_battles(config) == 24
    frame = simulate(config, seed=1)[0]
    assert len(frame) == 24
