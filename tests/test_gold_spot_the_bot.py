"""Gold items in a whole Spot The Bot study (issue 42): gold.rate sets the share of human–human
conversations, whose speakers are the gold items; the annotations mark them with is_gold and
gold_answer, no ranking counts them, and a worker who labels at random fails QC by gold."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from sqlalchemy import select

from hitkit.db.models import Hit, Study, Unit
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.material.gold import gold_total
from hitkit.money.qc import qc_summary
from hitkit.protocols.spot_the_bot.annotations import ANNOTATION_COLUMNS
from hitkit.study.loading import load_study
from hitkit.study.stored import StudyContext
from tests.studies import launch
from tests.test_spot_the_bot_study import LENGTHS, QUALITY, stb_study, write_bot_bot, write_human_human


def gold_stb_study(tmp_path, database_url, **gold):
    path = stb_study(tmp_path, database_url, segments_per_hit=18)
    write_bot_bot(tmp_path / "bot_bot.jsonl", per_pair=3)  # 6 pairs (self-chat included) × 3
    write_human_human(tmp_path / "human.jsonl", count=20)
    data = yaml.safe_load(path.read_text())
    del data["spot_the_bot"]["human_count"]
    data["gold"] = {"rate": 0.5, "qc": {"upper_below": 0.7}, **gold}
    # 2 blocks of 3 HITs, 2 workers a HIT, a worker at most one HIT a block: 6 workers do 2 HITs each.
    data["simulated"]["workers"] = [{"profile": "diligent", "count": 5}, {"profile": "spammer", "count": 1}]
    data["schedule"]["per_worker_cap"] = 2
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_human_human_conversations_fill_the_gold_share_and_fail_the_random_labeller(tmp_path, one_database_url):
    study_file = gold_stb_study(tmp_path, one_database_url)
    result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=300)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "stb-demo"

    assert gold_total(18, 0.5) == 18
    with session_scope(one_database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        units = s.scalars(select(Unit)).all()
        human = [u for u in units if u.payload["kind"] == "human_human"]
        assert len(units) == 36 * len(LENGTHS) and len(human) == 18 * len(LENGTHS)  # half the segments
        for hit in s.scalars(select(Hit)):
            kinds = [hu.unit.payload["kind"] for hu in hit.units]
            assert kinds.count("human_human") == len(kinds) // 2  # each HIT holds its group's share
        qc = qc_summary(s, StudyContext.of(s.scalar(select(Study)), "secret"), cache_key="gold-stb")

    rows = pd.read_csv(out / "export" / "annotations.csv", keep_default_na=False)
    assert tuple(rows.columns) == (*ANNOTATION_COLUMNS, "is_gold", "gold_answer")
    assert ((rows["is_gold"] == 1) == (rows["system"] == "human")).all()
    assert set(rows.loc[rows["is_gold"] == 1, "gold_answer"]) == {"human"}

    analysis = out / "analysis"
    ranking = pd.read_csv(analysis / "ranking.csv")
    assert set(ranking["system"]) == set(QUALITY)  # no ranking counts the human speakers
    annotators = pd.read_csv(analysis / "annotators.csv", keep_default_na=False).set_index("worker_id")
    spammer = [w for w in annotators.index if w.startswith("sim-spammer")]
    diligent = [w for w in annotators.index if w.startswith("sim-diligent")]
    assert len(spammer) == 1 and len(diligent) == 5
    assert (annotators["gold_items"] == 36).all()  # 2 HITs × 9 human–human segments × 2 speakers
    assert annotators.loc[spammer[0], "gold_qc"] == "failed" and (annotators.loc[diligent, "gold_qc"] == "passed").all()
    summary = json.loads((analysis / "summary.json").read_text())
    assert (
        summary["gold"]["qc_failed"] == spammer and "upper end of the exact 95% interval" in summary["gold"]["qc_rule"]
    )
    assert qc.by_worker[spammer[0]] is False and "gold accuracy" in qc.method


def test_gold_rate_and_human_count_are_refused_together(tmp_path):
    path = stb_study(tmp_path, "sqlite:///unused.db")
    data = yaml.safe_load(path.read_text())
    data["gold"] = {"rate": 0.2}
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="spot_the_bot.human_count = 3 and gold.rate = 0.2 both set"):
        load_study(path)
    data["gold"] = {"rate": 0.2, "source": "degraded"}
    del data["spot_the_bot"]["human_count"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ConfigError, match="gold.source is 'degraded', which a spot_the_bot study cannot make; use 'human'"
    ):
        load_study(path)
