"""Bad input gets a message naming what and where, and leaves what is saved untouched."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from hitkit.db.models import Study
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError, HitkitError, InputError
from hitkit.study.loading import load_study
from tests.studies import REPO, launch, pairwise_study


def test_malformed_yaml_names_the_file_and_line(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("study: x\ntask: pairwise\nsystems: [a, b\nbudget: 1\n")
    with pytest.raises(ConfigError) as err:
        load_study(path)
    assert str(path) in str(err.value) and "line 4" in str(err.value)


def test_invalid_fields_are_named_with_a_fix(tmp_path):
    path = pairwise_study(
        tmp_path,
        "sqlite:///unused.db",
        budget="lots",
        schedule={"per_worker_cap": 0},
        provider={"kind": "amazon"},
        colour="blue",
    )
    with pytest.raises(ConfigError) as err:
        load_study(path)
    text = str(err.value)
    assert str(path) in text
    assert "budget:" in text and "write an amount such as 12.50" in text
    assert "schedule.per_worker_cap" in text and "use a larger number" in text
    assert "provider.kind" in text and "'amazon'" in text
    assert "colour" in text and "remove it or check its spelling" in text


def test_a_missing_responses_file_is_named(tmp_path, database_url):
    path = pairwise_study(tmp_path, database_url, pairwise={"responses": str(tmp_path / "nope.jsonl")})
    with pytest.raises(InputError, match="nope.jsonl: responses file not found"):
        launch(path, yes=True, show_progress=False, echo=lambda _m: None)


def test_a_bad_response_line_is_named_and_nothing_is_saved(tmp_path, database_url):
    data = tmp_path / "responses.jsonl"
    good = {"id": "1", "prompt": "hi", "responses": {"alpha": "a", "beta": "b", "gamma": "c"}}
    data.write_text(json.dumps(good) + "\n" + '{"id": "2", "prompt": "hey", "responses": {"alpha": }\n')
    path = pairwise_study(tmp_path, database_url, pairwise={"responses": str(data)})
    with pytest.raises(InputError) as err:
        launch(path, yes=True, show_progress=False, echo=lambda _m: None)
    assert f"{data} line 2: not valid JSON" in str(err.value)
    missing = tmp_path / "missing.jsonl"
    missing.write_text(json.dumps({"id": "1", "prompt": "hi", "responses": {"alpha": "a"}}) + "\n")
    path = pairwise_study(tmp_path, database_url, pairwise={"responses": str(missing)})
    with pytest.raises(InputError, match="line 1: no response text for system.s. beta, gamma"):
        launch(path, yes=True, show_progress=False, echo=lambda _m: None)
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Study)) == 0


def test_launching_an_existing_study_again_keeps_it_and_points_to_resume(tmp_path, database_url):
    path = pairwise_study(tmp_path, database_url, budget="1.00")
    with pytest.raises(HitkitError):
        launch(path, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=30)
    with pytest.raises(HitkitError, match="already exists .* --resume"):
        launch(path, yes=True, show_progress=False, echo=lambda _m: None)
    with session_scope(database_url) as s:
        assert s.scalar(select(func.count()).select_from(Study)) == 1


def test_the_cli_prints_one_clear_line_not_a_traceback(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("study: Bad Name\n")
    run = subprocess.run(
        [sys.executable, "-m", "hitkit.cli", "launch", str(path), "--yes"], capture_output=True, text=True, cwd=REPO
    )
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "study: String should match pattern" in run.stderr and "task: Field required" in run.stderr
