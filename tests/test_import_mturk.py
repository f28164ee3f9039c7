"""``hitkit import mturk``: MTurk batch-results archives into hitkit's tidy tables, through a mapping."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from hitkit.cli import main
from hitkit.errors import ConfigError, InputError
from hitkit.imports.mturk import import_mturk, pseudonym
from hitkit.imports.mturk_mapping import load_mapping

REPO = Path(__file__).resolve().parents[1]
MAPPING = REPO / "examples" / "ji2022_mturk_mapping.yaml"


def ji_dir():
    """Ji et al.'s run 1: the repo's copy, else the shared data beside the worktrees."""
    for folder in (REPO / "tests" / "data" / "ji2022-run1", REPO.parent / "shared" / "data" / "ji2022-run1"):
        if (folder / "raw" / "Batch_free_run_1.csv").is_file():
            return folder
    pytest.skip("Ji et al.'s run-1 data is not here (tests/data/ji2022-run1 or ../shared/data/ji2022-run1)")


def test_the_raw_ji_batch_imports_to_the_papers_figures_and_the_released_tidy_tables(tmp_path):
    folder = ji_dir()
    out = tmp_path / "free-run-1" / "export"
    result = CliRunner().invoke(
        main,
        [
            "import",
            "mturk",
            str(folder / "raw" / "Batch_free_run_1.csv"),
            "--mapping",
            str(MAPPING),
            "--study",
            "free-run-1",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "305 assignments (305 counted) by 249 workers; 12768 rows in ratings.csv" in result.output

    # The same tables as the release's tidy copy, row for row (worker ids already pseudonymised there).
    for name in ("assignments", "ratings"):
        ours = pd.read_csv(out / f"{name}.csv", dtype=str, keep_default_na=False)
        released = pd.read_csv(folder / f"{name}.csv", dtype=str, keep_default_na=False)
        pd.testing.assert_frame_equal(ours, released)
    assert json.loads((out / "study.json").read_text())["task"] == "live_chat"

    # The existing analysis, through the CLI, gives the paper's numbers (Ji et al. 2022, Tables 1 and 3).
    analysis = tmp_path / "free-run-1" / "analysis"
    result = CliRunner().invoke(main, ["analyze", "live_chat", str(out), "--out", str(analysis), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)["summary"]
    assert (summary["workers"], summary["passed"]) == (249, 173)
    systems = pd.read_csv(analysis / "systems.csv")
    z = dict(zip(systems["system"], systems["z"]))
    assert round(z["A"], 3) == 0.534 and list(systems["system"][:3]) == ["A", "B", "A_p"]
    assert round(z["E"], 3) == -0.243


def test_worker_ids_are_pseudonymised_once():
    assert pseudonym("A1B2C3D4E5F6G7") == "w" + hashlib.sha256(b"A1B2C3D4E5F6G7").hexdigest()[:12]
    assert pseudonym(pseudonym("A1B2C3D4E5F6G7")) == pseudonym("A1B2C3D4E5F6G7")  # idempotent
    assert pseudonym("w449cea8393e3") == "w449cea8393e3"  # the release's ids stay as they are


# A small archive of each shape --------------------------------------------------------------------
def write_batch(tmp_path, rows: list[dict]) -> str:
    base = {"HITId": "H1", "HITTypeId": "T1", "Title": "t", "WorkTimeInSeconds": "120", "AssignmentStatus": "Approved"}
    path = tmp_path / "Batch_1.csv"
    pd.DataFrame([{**base, **r} for r in rows]).to_csv(path, index=False)
    return str(path)


def write_mapping(tmp_path, data: dict, name: str = "mapping.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_pairwise_archive_of_classic_form_fields_becomes_votes(tmp_path):
    batch = write_batch(
        tmp_path,
        [
            {
                "AssignmentId": "A1",
                "WorkerId": "AWORKERONE",
                "Input.item0": "p1",
                "Input.left0": "bot1",
                "Input.right0": "bot2",
                "Answer.choice0": "left",
                "Input.item1": "p2",
                "Input.left1": "bot2",
                "Input.right1": "bot1",
                "Answer.choice1": "same",
            },
            {
                "AssignmentId": "A2",
                "WorkerId": "AWORKERTWO",
                "AssignmentStatus": "Rejected",
                "Input.item0": "p1",
                "Input.left0": "bot2",
                "Input.right0": "bot1",
                "Answer.choice0": "right",
                "Input.item1": "p2",
                "Input.left1": "bot1",
                "Input.right1": "bot2",
                "Answer.choice1": "left",
            },
        ],
    )
    mapping = write_mapping(
        tmp_path,
        {
            "task": "pairwise",
            "flatten": [],
            "pairwise": {
                "items": 2,
                "item_id": "Input.item{i}",
                "system_a": "Input.left{i}",
                "system_b": "Input.right{i}",
                "vote": "Answer.choice{i}",
                "votes": {"left": "a", "right": "b", "same": "tie"},
                "systems": {"bot1": "alpha", "bot2": "beta"},
            },
        },
    )
    result = import_mturk(batch, mapping, "old-ab", tmp_path / "out")
    assert list(result.assignments["status"]) == ["approved", "rejected"]
    assert list(result.assignments["worker_id"]) == [pseudonym("AWORKERONE"), pseudonym("AWORKERTWO")]
    votes = pd.read_csv(tmp_path / "out" / "votes.csv", dtype=str)
    assert list(votes.columns) == [
        "study",
        "hit_id",
        "assignment_id",
        "worker_id",
        "item_id",
        "system_a",
        "system_b",
        "vote",
    ]
    assert votes[["assignment_id", "item_id", "system_a", "system_b", "vote"]].values.tolist() == [
        ["A1", "p1", "alpha", "beta", "a"],
        ["A1", "p2", "beta", "alpha", "tie"],
        ["A2", "p1", "beta", "alpha", "b"],
        ["A2", "p2", "alpha", "beta", "a"],
    ]
    assert "AWORKER" not in (tmp_path / "out" / "votes.csv").read_text()  # no raw worker id is written


def test_a_repeated_assignment_id_is_counted_and_resolved_by_the_policy_not_refused(tmp_path):
    from hitkit.analysis.inference import DuplicateRowsWarning

    one = {
        "AssignmentId": "A1",
        "WorkerId": "AW1",
        "Input.item0": "p1",
        "Input.left0": "bot1",
        "Input.right0": "bot2",
        "Answer.choice0": "left",
    }
    other = {**one, "AssignmentId": "A2", "WorkerId": "AW2", "Answer.choice0": "right"}
    # A1 again, changed: the batch file was downloaded twice and pasted together.
    batch = write_batch(tmp_path, [one, other, {**one, "Answer.choice0": "same"}])
    mapping = write_mapping(
        tmp_path,
        {
            "task": "pairwise",
            "flatten": [],
            "pairwise": {
                "items": 1,
                "item_id": "Input.item{i}",
                "system_a": "Input.left{i}",
                "system_b": "Input.right{i}",
                "vote": "Answer.choice{i}",
                "votes": {"left": "a", "right": "b", "same": "tie"},
            },
        },
    )
    with pytest.warns(DuplicateRowsWarning, match="removed 1 row"):
        first = import_mturk(batch, mapping, "old-ab", tmp_path / "out")
    assert first.duplicates == {"policy": "first", "keys": 1, "rows_removed": 1}
    assert list(first.assignments["assignment_id"]) == ["A1", "A2"] and list(first.table["vote"]) == ["a", "b"]
    assert json.loads((tmp_path / "out" / "study.json").read_text())["import_duplicates"]["rows_removed"] == 1
    with pytest.warns(DuplicateRowsWarning):
        assert list(import_mturk(batch, mapping, "x", duplicates="last").table["vote"]) == ["b", "tie"]
    with pytest.raises(InputError, match="line 4: batch row .*repeats"):
        import_mturk(batch, mapping, "x", duplicates="error")
    run = CliRunner().invoke(
        main, ["import", "mturk", batch, "--mapping", str(mapping), "--study", "x", "--out", str(tmp_path / "cli")]
    )
    assert run.exit_code == 0, run.output
    assert "warning: 1 AssignmentId(s) of the batch repeat; duplicate policy 'first' removed 1 row(s)" in run.output


def test_a_python_function_says_what_a_mapping_cannot(tmp_path):
    (tmp_path / "rules.py").write_text(
        "def annotations(fields):\n"
        "    labels = fields['Answer.labels'].split('|')\n"
        "    return [{'conversation_id': fields['Input.conv'], 'segment_exchanges': 2, 'entity': e,\n"
        "             'system': fields[f'Input.sys{e}'], 'label': label, 'fluency': 0, 'sensibleness': 0,\n"
        "             'specificity': 0, 'elapsed_s': ''} for e, label in enumerate(labels)]\n"
    )
    batch = write_batch(
        tmp_path,
        [
            {
                "AssignmentId": "A1",
                "WorkerId": "AWORKERONE",
                "Input.conv": "c1",
                "Input.sys0": "alpha",
                "Input.sys1": "human",
                "Answer.labels": "bot|human",
            }
        ],
    )
    mapping = write_mapping(tmp_path, {"task": "spot_the_bot", "function": "rules.py:annotations"})
    result = import_mturk(batch, mapping, "old-stb", tmp_path / "out")
    assert result.table_name == "annotations"
    assert result.table[["entity", "system", "label"]].values.tolist() == [[0, "alpha", "bot"], [1, "human", "human"]]
    (tmp_path / "rules.py").write_text("def annotations(fields):\n    return [{'conversation_id': 'c1'}]\n")
    with pytest.raises(
        InputError,
        match=r"line 2: the mapping's function rules.py:annotations returned a row "
        r"without \['segment_exchanges'",
    ):
        import_mturk(
            batch,
            write_mapping(tmp_path, {"task": "spot_the_bot", "function": "rules.py:annotations"}, "again.yaml"),
            "old-stb",
        )


# Mistakes say what and where ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "change, message",
    [
        ({"live_chat": {"slot": 6}}, "live_chat.slot: Extra inputs are not permitted — fix: remove it"),
        (
            {"task": "chat"},
            "task: task 'chat' is not a protocol of this version of hitkit; use one of pairwise, "
            "live_chat, spot_the_bot",
        ),
        ({"live_chat": None}, "give exactly one of a 'live_chat:' section and 'function:'"),
        (
            {"live_chat": {"variant": {"field": "Answer.seed{i}", "suffix": "_p"}}},
            "live_chat.variant: give exactly one of at_most, at_least and equals",
        ),
    ],
)
def test_a_mapping_that_cannot_work_names_the_key_and_the_fix(tmp_path, change, message):
    data = yaml.safe_load(MAPPING.read_text())
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    with pytest.raises(ConfigError) as err:
        load_mapping(write_mapping(tmp_path, data))
    assert message in str(err.value) and "mapping.yaml" in str(err.value)


def test_an_archive_that_does_not_fit_the_mapping_names_the_line_and_the_field(tmp_path):
    blob = json.dumps([{"task0": "biencoder", "seed0": "12", "score0": "1#2#3"}])
    batch = write_batch(tmp_path, [{"AssignmentId": "A1", "WorkerId": "AW1", "Answer.taskAnswers": blob}])
    data = yaml.safe_load(MAPPING.read_text())
    data["live_chat"]["slots"] = 1
    with pytest.raises(
        InputError,
        match=r"Batch_1.csv line 2: Answer.score0 has 3 values .* but the mapping "
        r"names 7 criteria",
    ):
        import_mturk(batch, write_mapping(tmp_path, data), "x")
    data["live_chat"]["scores"] = "Answer.scores{i}"
    with pytest.raises(
        ConfigError,
        match=r"reads 'Answer.scores\{i\}', but no row .* has 'Answer.scores0'; "
        r"fields there: Answer.score0, Answer.seed0, Answer.task0",
    ):
        import_mturk(batch, write_mapping(tmp_path, data), "x")
    with pytest.raises(InputError, match="missing column\\(s\\) \\['WorkerId'\\]"):
        pd.DataFrame(
            [{"HITId": "H", "AssignmentId": "A", "AssignmentStatus": "Approved", "WorkTimeInSeconds": "1"}]
        ).to_csv(tmp_path / "bad.csv", index=False)
        import_mturk(tmp_path / "bad.csv", MAPPING, "x")


def test_a_batch_whose_requester_rejected_work_after_qc_imports_to_the_same_population(tmp_path):
    # Ji et al.'s run 1 as the requester would download it after rejecting the workers their own QC failed
    # (free run 2's batch has 61 of 296 rejected this way): the rejected work still counts, so the analysis
    # keeps the paper's population and its QC verdicts.
    folder = ji_dir()
    batch = pd.read_csv(folder / "raw" / "Batch_free_run_1.csv", dtype=str, keep_default_na=False)
    plain = tmp_path / "plain"
    result = CliRunner().invoke(
        main,
        [
            "import",
            "mturk",
            str(folder / "raw" / "Batch_free_run_1.csv"),
            "--mapping",
            str(MAPPING),
            "--study",
            "free-run-1",
            "--out",
            str(plain / "export"),
        ],
    )
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        main,
        ["analyze", "live_chat", str(plain / "export"), "--out", str(plain / "analysis"), "--n-boot", "20", "--json"],
    )
    assert result.exit_code == 0, result.output
    workers = pd.read_csv(plain / "analysis" / "workers.csv", dtype={"worker_id": str})
    failed = set(workers.loc[~workers["passed"], "worker_id"])
    rejected = batch["WorkerId"].map(pseudonym).isin(failed)
    batch.loc[rejected, "AssignmentStatus"] = "Rejected"
    assert rejected.sum() > 50
    batch.to_csv(tmp_path / "Batch_rejected.csv", index=False)
    after = tmp_path / "after"
    result = CliRunner().invoke(
        main,
        [
            "import",
            "mturk",
            str(tmp_path / "Batch_rejected.csv"),
            "--mapping",
            str(MAPPING),
            "--study",
            "free-run-1",
            "--out",
            str(after / "export"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "305 assignments (305 counted) by 249 workers" in result.output
    result = CliRunner().invoke(
        main,
        ["analyze", "live_chat", str(after / "export"), "--out", str(after / "analysis"), "--n-boot", "20", "--json"],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)["summary"]
    assert (summary["workers"], summary["passed"]) == (249, 173)
    for name in ("workers.csv", "systems.csv", "significance.csv", "score_intervals.csv"):
        assert (after / "analysis" / name).read_text() == (plain / "analysis" / name).read_text(), name
