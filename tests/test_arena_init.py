"""The arena's `hitkit init` starter: a commented study and its prompt set that load and pass the dry run.

`hitkit init DIR --task NAME` writes a protocol's ``starter`` module (``STUDY_YAML`` and ``material()``);
the ``--task`` flag lands on another branch, so this test writes the starter as that command does."""

from __future__ import annotations

import json

from click.testing import CliRunner

from hitkit.cli import main
from hitkit.protocols.arena import starter
from hitkit.protocols.arena.prompts import read_prompts
from hitkit.study.loading import load_study


def write_starter(directory):
    directory.mkdir()
    files = {"study.yaml": starter.STUDY_YAML, **starter.material()}
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory / "study.yaml"


def test_the_arena_starter_is_a_commented_study_with_its_prompts_that_passes_the_dry_run(tmp_path):
    study = write_starter(tmp_path / "mine")
    text = study.read_text()
    assert sum(line.lstrip().startswith("#") or " # " in line for line in text.splitlines()) >= 10
    config = load_study(study)
    assert config.task == "arena" and config.provider.kind == "simulated" and config.arena.control == "qc"
    prompts_file = config.path(config.arena.prompts)
    assert prompts_file == tmp_path / "mine" / "prompts.jsonl"
    prompts = read_prompts(prompts_file)
    assert len(prompts) == 18 and len({p.category for p in prompts}) == 6
    assert [json.loads(line)["id"] for line in prompts_file.read_text().splitlines()] == [p.id for p in prompts]
    dry = CliRunner().invoke(main, ["launch", str(study), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "Nothing was posted or saved" in dry.output and "valid." in dry.output
    assert not config.out_dir.exists()
