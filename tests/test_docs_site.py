"""The first day's documents: a README that fits on a screen and whose links resolve, and references
generated from the code that cannot drift: the study file's (pydantic models), the CLI's (click
commands) and the JSON Schema `hitkit schema` writes."""

from __future__ import annotations

import json
import re
import typing

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from hitkit.cli import main
from hitkit.cli.reference import cli_reference_markdown
from hitkit.cli.study_reference import FIELD_NOTES, study_reference_markdown
from hitkit.study.loading import STUDY_FILE
from tests.studies import REPO

README = REPO / "README.md"


def test_the_readme_fits_on_a_screen_and_keeps_the_two_quickstart_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert "bash ops/quickstart.sh" in text and "bash ops/test.sh" in text
    for written in (
        "feedback.csv",
        "payments.csv",
        "authenticity.csv",
        "authenticity_workers.csv",
        "score_intervals.csv",
        "conversations.jsonl",
        "study.json",
    ):
        assert written in text
    assert "../shared/data" not in text


def test_every_link_of_the_readme_resolves_to_a_file_of_the_repository():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert len(links) >= 20
    missing = [link for link in links if not link.startswith("http") and not (REPO / link).exists()]
    assert missing == []


def _models_in(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models_in(a)]


def _walk(model, prefix=""):
    """(path, owner class, name, field) for every field a study file may hold, read from the models."""
    for name, field in model.model_fields.items():
        if field.exclude:
            continue
        yield prefix + name, model.__name__, name, field
        for sub in _models_in(field.annotation):
            sep = "[]." if typing.get_origin(field.annotation) is list else "."
            yield from _walk(sub, prefix + name + sep)


def _rows(markdown: str) -> dict[str, list[str]]:
    rows = {}
    for line in markdown.splitlines():
        m = re.match(r"^\| `([^`]+)` \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in re.split(r"(?<!\\)\|", m.group(2))]
    return rows


def test_the_study_file_reference_lists_every_field_of_study_config_with_type_default_and_description():
    rows = _rows(study_reference_markdown())
    fields = list(_walk(STUDY_FILE))
    assert len(fields) > 150
    for path, _owner, _name, field in fields:
        assert path in rows, f"{path} is missing from the reference"
        type_cell, default_cell, description = rows[path]
        assert type_cell and description, f"{path} has no type or description"
        if field.is_required():
            assert default_cell == "required", path
        elif (
            field.default_factory is None
            and field.default is not PydanticUndefined
            and isinstance(field.default, (int, float, str))
            and not isinstance(field.default, bool)
        ):
            assert repr(field.default) in default_cell or str(field.default) in default_cell, (path, default_cell)
    assert set(rows) == {path for path, *_ in fields}  # nothing listed that the models do not hold


def test_each_field_note_fills_a_field_that_exists_and_has_no_description_of_its_own():
    owners = {}
    for _path, owner, name, field in _walk(STUDY_FILE):
        owners[f"{owner}.{name}"] = field
    for key in FIELD_NOTES:
        assert key in owners, f"FIELD_NOTES names {key}, which no model has"
        assert not owners[key].description, f"{key} has its own description; remove the note"


def test_the_reference_shows_a_known_field_as_the_model_defines_it():
    rows = _rows(study_reference_markdown())
    assert rows["schedule.wave_size"] == ["integer (> 0)", "`5`", "HITs posted per wave"]
    assert rows["pairwise.votes_per_prompt"][1] == "`3`"
    assert rows["systems"][1] == "required" and "at least 2" in rows["systems"][0]


def _commands(group, prefix="hitkit"):
    for name, command in group.commands.items():
        if command.hidden:
            continue
        yield f"{prefix} {name}", command
        if hasattr(command, "commands"):
            yield from _commands(command, f"{prefix} {name}")


def test_the_cli_reference_holds_every_command_and_every_option():
    text = cli_reference_markdown()
    commands = list(_commands(main))
    assert len(commands) >= 25
    for full_name, command in commands:
        assert f"## `{full_name}`" in text, full_name
        section = text.split(f"## `{full_name}`", 1)[1].split("\n## ", 1)[0]
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}`" in section, (full_name, opt)


def test_hitkit_schema_accepts_every_example_and_refuses_a_misspelt_field(tmp_path):
    out = tmp_path / "schema.json"
    result = CliRunner().invoke(main, ["schema", "--out", str(out)])
    assert result.exit_code == 0, result.output
    schema = json.loads(out.read_text())
    assert schema["properties"]["seed"]["description"]  # filled from the field notes
    validator = jsonschema.Draft202012Validator(schema)
    examples = sorted((REPO / "examples").glob("*.yaml"))
    checked = 0
    for path in examples:
        data = yaml.safe_load(path.read_text())
        if "study" not in data:
            continue  # the MTurk mapping is not a study file
        errors = [e.message for e in validator.iter_errors(data)]
        assert errors == [], (path.name, errors)
        checked += 1
    assert checked >= 8
    bad = yaml.safe_load((REPO / "examples" / "pairwise.yaml").read_text())
    bad["pairwise"]["votes_per_promt"] = 3
    assert any("votes_per_promt" in e.message for e in validator.iter_errors(bad))


def test_hitkit_schema_prints_the_schema_without_out():
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0 and json.loads(result.output)["title"] == "hitkit study file"


@pytest.mark.parametrize(
    "page",
    [
        "reference/editor.md",
        "reference/api.md",
        "tutorials/pairwise.md",
        "tutorials/live-chat.md",
        "tutorials/spot-the-bot.md",
        "tutorials/rating.md",
    ],
)
def test_the_pages_the_readme_promises_are_in_the_site_navigation(page):
    assert page in (REPO / "mkdocs.yml").read_text() and (REPO / "docs" / page).is_file()
