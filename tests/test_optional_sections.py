"""Code that needs an optional study-file section (judge:, generation:) stops with a ConfigError naming
it, instead of an AttributeError on None deep inside (the helpers the type check relies on)."""

from __future__ import annotations

import pytest

from hitkit.errors import ConfigError
from hitkit.judges.section import human_share, judge_section, own_share
from hitkit.material.generation import planned_pairs
from hitkit.study.loading import load_study
from tests.studies import pairwise_study

JUDGE = {"url": "http://127.0.0.1:8011", "model": "smollm"}


def test_a_study_without_judge_section_is_told_to_add_one(tmp_path):
    config = load_study(pairwise_study(tmp_path, "sqlite:///unused.db"))
    assert config.judge is None
    with pytest.raises(ConfigError, match=rf"study '{config.study}' has no 'judge:' section; add one"):
        judge_section(config)


def test_own_share_is_human_share_or_human_items_over_the_items(tmp_path):
    by_share = load_study(pairwise_study(tmp_path, "sqlite:///unused.db", judge={**JUDGE, "human_share": 0.3}))
    assert own_share(by_share, 40) == 0.3
    assert human_share(judge_section(by_share)) == 0.3
    by_items = load_study(pairwise_study(tmp_path, "sqlite:///unused.db", judge={**JUDGE, "human_items": 10}))
    assert own_share(by_items, 40) == 0.25


def test_a_share_by_fraction_is_asked_for_when_the_study_gives_human_items(tmp_path):
    config = load_study(pairwise_study(tmp_path, "sqlite:///unused.db", judge={**JUDGE, "human_items": 10}))
    with pytest.raises(ConfigError, match="give judge.human_share instead"):
        human_share(judge_section(config))


def test_planning_generation_without_generation_section_names_it(tmp_path):
    config = load_study(pairwise_study(tmp_path, "sqlite:///unused.db"))
    assert config.generation is None
    with pytest.raises(ConfigError, match="no 'generation:' section"):
        planned_pairs(config)
