"""Gold items in a whole rating study (issue 42): gold.rate sets how many degraded copies each HIT
gets, the export marks them with is_gold and gold_answer, no system score counts them, and a worker
who rates without reading fails QC by the gold rule while a careful one passes."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from sqlalchemy import select

from hitkit.db.models import Assignment, Hit, Study
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.material.gold import gold_total, spread
from hitkit.money.qc import qc_summary
from hitkit.protocols.rating.scores import DA_COLUMNS, TABLE
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext
from tests.studies import launch
from tests.test_rating import rating_study


def gold_rating_study(tmp_path, database_url, **gold):
    path = rating_study(tmp_path, database_url)
    data = yaml.safe_load(path.read_text())
    data["gold"] = {"rate": 0.4, "qc": {"misses": 4}, **gold}
    # Two workers for two ratings an item: each takes every HIT, whatever the timing.
    data["simulated"]["workers"] = [{"profile": "diligent", "count": 1}, {"profile": "spammer", "count": 1}]
    data["schedule"]["per_worker_cap"] = 20
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_gold_rate_sets_the_degraded_copies_and_fails_the_worker_who_does_not_read(tmp_path, one_database_url):
    study_file = gold_rating_study(tmp_path, one_database_url)
    result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=180)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "da-demo"

    expected = spread([6] * 6, gold_total(36, 0.4))
    assert expected == [4] * 6  # 4 of each HIT's 10 items: 0.4
    with session_scope(one_database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        for hit in s.scalars(select(Hit).order_by(Hit.index)):
            places = [hu.unit for hu in hit.units if hu.unit.payload["is_control"]]
            assert len(places) == 4 and len(hit.units) == 10
        for a in s.scalars(select(Assignment)):
            assert len(a.layout["degraded"]) == 4
        qc = qc_summary(s, StudyContext.of(s.scalar(select(Study)), "secret"), cache_key="gold-rating")

    ratings = pd.read_csv(out / "export" / f"{TABLE}.csv", dtype={"item_id": str}, keep_default_na=False)
    assert tuple(ratings.columns) == (*DA_COLUMNS, "is_gold", "gold_answer")
    assert (ratings["is_gold"] == ratings["is_control"]).all()
    assert set(ratings.loc[ratings["is_gold"] == 1, "gold_answer"]) == {"below_intact"}
    assert (ratings["is_gold"] == 1).sum() == 6 * 4 * 2 * 4  # HITs × copies × workers × criteria

    analysis = out / "analysis"
    systems = pd.read_csv(analysis / "systems.csv")
    assert set(systems["system"]) == {"alpha", "beta", "gamma"}
    summary = json.loads((analysis / "summary.json").read_text())
    workers = pd.read_csv(analysis / "workers.csv", keep_default_na=False).set_index("worker_id")
    spammer = [w for w in workers.index if w.startswith("sim-spammer")]
    diligent = [w for w in workers.index if w.startswith("sim-diligent")]
    assert (workers.loc[spammer + diligent, "gold_items"] == 24).all()
    assert (workers.loc[diligent, "gold_qc"] == "passed").all() and (workers.loc[spammer, "gold_qc"] == "failed").all()
    assert summary["gold"]["qc_failed"] == spammer and "fewer than 4 gold items wrong" in summary["gold"]["qc_rule"]
    assert "fewer than 4 gold items wrong" in qc.method
    assert qc.by_worker[spammer[0]] is False and qc.by_worker[diligent[0]] is True


def test_gold_rate_and_an_explicit_degraded_per_hit_are_refused_together(tmp_path):
    path = rating_study(tmp_path, "sqlite:///unused.db")
    data = yaml.safe_load(path.read_text())
    data["rating"]["degraded_per_hit"] = 3
    data["gold"] = {"rate": 0.2}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="rating.degraded_per_hit = 3 and gold.rate = 0.2 both set"):
        load_study(path)
    data["rating"]["degraded_per_hit"] = 2
    data["gold"] = {"rate": 0.2, "source": "human"}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="gold.source is 'human', which a rating study cannot make; use 'degraded'"):
        load_study(path)
