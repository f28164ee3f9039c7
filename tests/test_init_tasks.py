"""`hitkit init DIR --task NAME` writes a commented, runnable study for every protocol with a starter, and
every example study checks with `--dry-run`: validated, packed and priced, nothing posted or saved."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from hitkit.cli import main
from hitkit.study.loading import load_study
from hitkit.study.scaffold import tasks
from tests.studies import REPO


def test_every_protocol_with_a_starter_is_offered_and_the_four_protocols_have_one():
    assert {"pairwise", "live_chat", "spot_the_bot", "rating"} <= set(tasks())


@pytest.mark.parametrize("task", tasks())
def test_init_task_writes_a_commented_study_that_passes_the_dry_run(tmp_path, task):
    runner = CliRunner()
    made = runner.invoke(main, ["init", str(tmp_path / "mine"), "--task", task])
    assert made.exit_code == 0, made.output
    study = tmp_path / "mine" / "study.yaml"
    text = study.read_text()
    assert sum(line.lstrip().startswith("#") or " # " in line for line in text.splitlines()) >= 10  # commented
    config = load_study(study)
    assert config.task == task and config.provider.kind == "simulated"
    for path in config.model_dump().get(task, {}) or {}:  # every material file it names was written
        value = getattr(getattr(config, task), path)
        if isinstance(value, Path):
            assert config.path(value).is_file(), value
    dry = runner.invoke(main, ["launch", str(study), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "Nothing was posted or saved" in dry.output and "valid." in dry.output
    assert not config.out_dir.exists()  # a dry run writes no database
    again = runner.invoke(main, ["init", str(tmp_path / "mine"), "--task", task])
    assert again.exit_code == 1 and "already exists" in again.output  # never overwrites


def test_init_refuses_an_unknown_task_and_names_the_choices(tmp_path):
    result = CliRunner().invoke(main, ["init", str(tmp_path / "x"), "--task", "pairwize"])
    assert result.exit_code == 2 and "pairwise" in result.output and not (tmp_path / "x").exists()


def test_the_rating_starter_runs_on_the_simulated_crowd_and_ranks_its_systems(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["init", "mine", "--task", "rating"]).exit_code == 0
    run = runner.invoke(main, ["launch", "mine/study.yaml", "--yes", "--no-progress", "--timeout", "120"])
    assert run.exit_code == 0, run.output
    systems = (tmp_path / "mine" / "runs" / "my-rating-study" / "analysis" / "systems.csv").read_text()
    assert systems.index("alpha") < systems.index("gamma")


EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*.yaml") if p.name != "ji2022_mturk_mapping.yaml")


def test_examples_hold_one_plain_study_per_protocol_and_one_with_a_stopping_rule():
    configs = [load_study(REPO / "examples" / name) for name in EXAMPLES]
    plain = {c.task for c in configs if c.judge is None and c.stop is None}
    assert {"pairwise", "live_chat", "spot_the_bot", "rating"} <= plain
    assert any(c.stop is not None for c in configs)


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_study_passes_the_dry_run(name):
    result = CliRunner().invoke(main, ["launch", str(REPO / "examples" / name), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "Nothing was posted or saved" in result.output
