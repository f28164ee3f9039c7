"""A study file's mistakes come with the fix: the closest field name for a typo, and the expected shape
(with an example) for a missing field or section."""

from __future__ import annotations

import pytest
import yaml

from hitkit.errors import ConfigError
from hitkit.study.loading import load_study

BASE = {
    "study": "hints",
    "task": "pairwise",
    "budget": "10.00",
    "systems": [{"name": "a"}, {"name": "b"}],
    "pairwise": {"responses": "r.jsonl"},
}


def problems(tmp_path, data: dict) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(ConfigError) as err:
        load_study(path)
    return str(err.value)


@pytest.mark.parametrize(
    "change, line",
    [
        (
            {"pairwise": {"responses": "r.jsonl", "votes_per_promt": 3}},
            "pairwise.votes_per_promt: Extra inputs are not permitted (got 3) — fix: did you mean `votes_per_prompt`?",
        ),
        (
            {"hit": {"rewrd": "1.00"}},
            "hit.rewrd: Extra inputs are not permitted (got '1.00') — fix: did you mean `reward`?",
        ),
        ({"sytems": []}, "sytems: Extra inputs are not permitted — fix: did you mean `systems`?"),
        (
            {"schedule": {"per_worker_cpa": 2}},
            ("schedule.per_worker_cpa: Extra inputs are not permitted (got 2) — fix: did you mean `per_worker_cap`?"),
        ),
    ],
)
def test_a_misspelt_field_is_answered_with_the_closest_name(tmp_path, change, line):
    assert "  " + line in problems(tmp_path, {**BASE, **change}).splitlines()


def test_a_key_like_no_field_keeps_the_plain_fix(tmp_path):
    text = problems(tmp_path, {**BASE, "colour": "blue"})
    assert "colour: Extra inputs are not permitted (got 'blue') — fix: remove it or check its spelling" in text
    assert "did you mean" not in text


def test_missing_systems_show_how_many_and_the_shape_of_one(tmp_path):
    data = {k: v for k, v in BASE.items() if k != "systems"}
    assert (
        "  systems: Field required — fix: add at least 2, e.g. - name: my-bot" in problems(tmp_path, data).splitlines()
    )


def test_a_missing_field_inside_a_list_entry_shows_an_example_value(tmp_path):
    text = problems(tmp_path, {**BASE, "systems": [{"name": "a"}, {"url": "http://x"}]})
    assert "systems.1.name: Field required — fix: add it, e.g. name: my-bot" in text


def test_a_missing_task_names_every_protocol_from_the_registry(tmp_path):
    from hitkit.protocols import PROTOCOLS

    text = problems(tmp_path, {k: v for k, v in BASE.items() if k != "task"})
    assert (
        f"task: Field required — fix: add it, e.g. task: {next(iter(PROTOCOLS))} (one of {', '.join(PROTOCOLS)})"
        in text
    )


def test_a_missing_protocol_section_shows_its_required_fields_and_the_init_command(tmp_path):
    text = problems(tmp_path, {k: v for k, v in BASE.items() if k != "pairwise"})
    assert (
        "task 'pairwise' needs a 'pairwise:' section — fix: add it, e.g. pairwise: {responses: FILE.jsonl} "
        "(`hitkit init DIR --task pairwise` writes a commented one)"
    ) in text


def test_a_missing_required_field_of_a_section_shows_an_example(tmp_path):
    text = problems(tmp_path, {**BASE, "pairwise": {"votes_per_prompt": 3}})
    assert "pairwise.responses: Field required — fix: add it, e.g. responses: FILE.jsonl" in text
