"""Several judges in one study (``judge.also``): each labels every comparison over real HTTP, the first
judge's labels stay judge.csv, every judge's go to judge_labels.csv, and the analysis measures each one's
calibration against people and combines them (:mod:`hitkit.judges.panel`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter

import pandas as pd
import pytest
from sqlalchemy import select

from hitkit.db.models import JudgeLabel
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError
from hitkit.judges.human_subset import crowd_units
from hitkit.protocols import task_for
from hitkit.study.loading import load_study
from tests.studies import launch
from tests.test_judge import UNITS, JudgeServer, ScriptedJudge, judged_study, serving


class CoinJudge(JudgeServer):
    """A judge whose verdict says nothing: A or B by a hash of the prompt."""

    def answer(self, prompt: str) -> tuple[int, str]:
        with self.lock:
            self.prompts.append(prompt)
        return 200, "A" if int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) % 2 else "B"


@pytest.fixture
def coin_server():
    yield from serving(CoinJudge())


@pytest.fixture
def judge_server():
    yield from serving(ScriptedJudge())


def test_two_judges_label_every_comparison_and_the_analysis_reports_each_ones_calibration(
    tmp_path, one_database_url, judge_server, coin_server
):
    database_url = one_database_url  # one store: what this test checks is not storage
    study_file = judged_study(
        tmp_path, database_url, judge_server.url, also=[{"name": "coin", "url": coin_server.url, "model": "coin-1"}]
    )
    lines = []
    result = launch(study_file, yes=True, show_progress=False, echo=lines.append, timeout_s=240)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "ab-demo"
    with session_scope(database_url) as s:
        rows = s.scalars(select(JudgeLabel)).all()
        assert len(rows) == 2 * 2 * UNITS and {r.status for r in rows} == {"done"}
        by_judge = Counter("coin" if r.variant.endswith("~1") else "first" for r in rows)
        assert by_judge == {"first": 2 * UNITS, "coin": 2 * UNITS}
        assert {r.model for r in rows if r.variant.endswith("~1")} == {"coin-1"}
    assert len(coin_server.prompts) > 0 and len(judge_server.prompts) > 0
    assert any(line.startswith(f"Judge: {4 * UNITS} labels planned") for line in lines)

    judge = pd.read_csv(out / "export" / "judge.csv")
    assert len(judge) == 2 * UNITS and set(judge["model"]) == {"scripted-judge"}  # the first judge's, as ever
    labels = pd.read_csv(out / "export" / "judge_labels.csv", dtype=str)
    assert Counter(labels["judge"]) == {"scripted-judge": 2 * UNITS, "coin": 2 * UNITS}

    calib = pd.read_csv(out / "analysis" / "judge_calibration.csv").set_index("judge")
    assert set(calib.index) == {"scripted-judge", "coin"}
    assert calib.loc["scripted-judge", "agreement"] > calib.loc["coin", "agreement"]
    summary = json.loads((out / "analysis" / "summary.json").read_text())["judge"]
    assert summary["judges"] == ["coin", "scripted-judge"] and "coin" not in summary["chosen"]
    rates = pd.read_csv(out / "analysis" / "judge_win_rates.csv")
    assert (rates["n_judge"] == 30).all() and (rates["n_human"] == 9).all()
    assert ((rates["ppi_low"] <= rates["ppi"]) & (rates["ppi"] <= rates["ppi_high"])).all()


def test_judges_with_one_name_are_refused(tmp_path, database_url):
    study_file = judged_study(tmp_path, database_url, "http://127.0.0.1:9", also=[{"name": "scripted-judge"}])
    with pytest.raises(ConfigError, match=re.escape("the judges' names must differ; 'scripted-judge'")):
        load_study(study_file)


def test_several_judges_are_refused_for_a_protocol_that_cannot_export_them_yet(tmp_path, database_url):
    from tests.test_judge_live_chat import judged_chat_study

    path = judged_chat_study(tmp_path, database_url, "http://127.0.0.1:9", also=[{"name": "other"}])
    config = load_study(path)
    with pytest.raises(ConfigError, match="judge.also: several judges in the study are available for pairwise"):
        crowd_units(config, task_for(config).build().units)
