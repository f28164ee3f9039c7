"""CLI polish: shell completion, --json output, progress bars that --no-progress silences, helpful errors,
and hitkit.load without a database."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

import hitkit
from hitkit.cli import main
from hitkit.errors import HitkitError
from hitkit.progress import progress, showing_progress


def write_votes(folder, n_items: int = 10):
    rows = []
    for i in range(n_items):
        for w, vote in enumerate(["a", "a", "tie"]):
            rows.append(
                {
                    "study": "s",
                    "hit_id": f"h{i // 5}",
                    "assignment_id": f"h{i // 5}-w{w}",
                    "worker_id": f"w{w}",
                    "item_id": f"i{i}",
                    "system_a": "alpha",
                    "system_b": "beta",
                    "vote": vote,
                }
            )
    folder.mkdir(parents=True, exist_ok=True)
    votes = pd.DataFrame(rows)
    votes.to_csv(folder / "votes.csv", index=False)
    assignments = votes[["study", "hit_id", "assignment_id", "worker_id"]].drop_duplicates()
    assignments.assign(status="approved", work_time_s=60.0).to_csv(folder / "assignments.csv", index=False)
    return folder


@pytest.mark.parametrize(
    "shell, marker", [("bash", "complete -o"), ("zsh", "compdef"), ("fish", "complete --no-files")]
)
def test_completion_prints_the_script_for_each_shell(shell, marker):
    run = CliRunner().invoke(main, ["completion", shell])
    assert run.exit_code == 0, run.output
    assert "_HITKIT_COMPLETE" in run.output and marker in run.output


def test_the_completion_script_completes_commands_and_options():
    env = {"_HITKIT_COMPLETE": "bash_complete", "COMP_WORDS": "hitkit rep", "COMP_CWORD": "1"}
    run = CliRunner().invoke(main, [], env=env, prog_name="hitkit")
    assert "report" in run.output
    env = {"_HITKIT_COMPLETE": "bash_complete", "COMP_WORDS": "hitkit export study.yaml --for", "COMP_CWORD": "3"}
    run = CliRunner().invoke(main, [], env=env, prog_name="hitkit")
    assert "--format" in run.output


def test_analyze_json_is_machine_readable_and_says_what_it_wrote(tmp_path):
    folder = write_votes(tmp_path / "export")
    run = CliRunner().invoke(main, ["analyze", "pairwise", str(folder), "--out", str(tmp_path / "out"), "--json"])
    assert run.exit_code == 0, run.output
    payload = json.loads(run.output)
    assert payload["summary"]["votes"] == 30 and payload["summary"]["task"] == "pairwise"
    assert payload["summary"]["software"]["hitkit"]
    assert [r["system"] for r in payload["ranking"]] == ["alpha", "beta"]
    assert all(p.startswith(str(tmp_path / "out")) for p in payload["files"])


def test_analyze_reads_parquet_when_there_is_no_csv(tmp_path):
    folder = write_votes(tmp_path / "csv")
    only = tmp_path / "parquet"
    only.mkdir()
    for name in ("votes", "assignments"):
        pd.read_csv(folder / f"{name}.csv").to_parquet(only / f"{name}.parquet")
    outs = {}
    for label, src in (("csv", folder), ("parquet", only)):
        outs[label] = tmp_path / f"out-{label}"
        run = CliRunner().invoke(main, ["analyze", "pairwise", str(src), "--out", str(outs[label])])
        assert run.exit_code == 0, run.output
    for name in ("pairs", "ranking", "workers"):
        pd.testing.assert_frame_equal(
            pd.read_csv(outs["csv"] / f"{name}.csv"), pd.read_csv(outs["parquet"] / f"{name}.csv")
        )


def test_report_from_an_export_folder_and_its_json(tmp_path):
    folder = write_votes(tmp_path / "run" / "export")
    run = CliRunner().invoke(main, ["report", str(folder), "--json"])
    assert run.exit_code == 0, run.output
    files = json.loads(run.output)
    assert files["html"] == str(tmp_path / "run" / "report" / "report.html")
    assert (tmp_path / "run" / "analysis" / "ranking.csv").is_file()
    assert "clustered by worker" in files["methods"]


def test_a_report_of_an_export_folder_analyses_it_afresh_even_beside_an_old_analysis(tmp_path):
    folder = write_votes(tmp_path / "run" / "export")
    assert CliRunner().invoke(main, ["report", str(folder)]).exit_code == 0
    stale = tmp_path / "run" / "analysis" / "ranking.csv"
    stale.write_text(stale.read_text().replace("\n", "\n", 1).replace(",", ",9.99e9,", 1))
    run = CliRunner().invoke(main, ["report", str(folder)])
    assert run.exit_code == 0, run.output
    report = (tmp_path / "run" / "report" / "report.md").read_text()
    assert "9.99e9" not in report and "9990000000" not in report and "exported tables in" in report


def test_analyze_uses_the_seed_the_export_records(tmp_path):
    folder = write_votes(tmp_path / "export")
    (folder / "study.json").write_text(json.dumps({"study": "s", "task": "pairwise", "seed": 7}))
    outs = {}
    for name, extra in (("recorded", []), ("given", ["--seed", "7"]), ("zero", ["--seed", "0"])):
        outs[name] = tmp_path / name
        run = CliRunner().invoke(main, ["analyze", "pairwise", str(folder), "--out", str(outs[name]), *extra])
        assert run.exit_code == 0, run.output
    ranking = {name: (out / "ranking.csv").read_text() for name, out in outs.items()}
    assert (
        ranking["recorded"] == ranking["given"]
        and json.loads((outs["recorded"] / "summary.json").read_text())["seed"] == 7
    )


def test_helpful_errors_name_the_problem_and_the_fix(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    run = CliRunner().invoke(main, ["report", str(empty)])
    assert run.exit_code == 1 and "holds no hitkit tables" in run.output and "hitkit export" in run.output
    run = CliRunner().invoke(main, ["report", str(tmp_path / "missing")])
    assert run.exit_code == 2 and "does not exist" in run.output
    run = CliRunner().invoke(main, ["export", str(tmp_path / "study.yaml"), "--format", "xml"])
    assert run.exit_code == 2 and "csv" in run.output and "parquet" in run.output
    run = CliRunner().invoke(main, ["analyze", "pairwise", str(empty), "--out", str(tmp_path / "o")])
    assert run.exit_code == 1 and "votes.csv" in run.output and "export" in run.output
    votes = write_votes(tmp_path / "votes")
    run = CliRunner().invoke(main, ["analyze", "live_chat", str(votes), "--out", str(tmp_path / "o")])
    assert run.exit_code == 1 and "hitkit analyze pairwise" in run.output
    with pytest.raises(HitkitError, match="holds no hitkit tables"):
        hitkit.load(empty)


def test_progress_bars_are_off_by_default_and_on_in_a_showing_block(capsys):
    items = [1, 2, 3]
    assert progress(items, "x") is items
    with showing_progress(True):
        assert list(progress(items, "counting", total=3)) == items
    assert "counting" in capsys.readouterr().err
    with showing_progress(False):
        assert progress(items, "x") is items


def test_load_reads_an_export_folder_into_dataframes(tmp_path):
    folder = write_votes(tmp_path / "export")
    (folder / "conversations.jsonl").write_text(
        json.dumps(
            {
                "study": "s",
                "conversation_id": "c1",
                "kind": "prompt",
                "meta": {},
                "turns": [
                    {"index": 0, "speaker": "user", "system": None, "text": "hi", "time": "2026-01-01T00:00:00+00:00"}
                ],
            }
        )
        + "\n"
    )
    data = hitkit.load(folder)
    assert data.task == "pairwise" and len(data.votes) == 30 and len(data["assignments"]) == 6
    assert list(data.conversations["text"]) == ["hi"]
    assert "votes" in data and "nothing" not in data
    with pytest.raises(AttributeError, match="no table"):
        _ = data.nothing


def test_db_commands_take_a_sqlite_file_as_serve_does(tmp_path):
    path = tmp_path / "study.db"
    up = CliRunner().invoke(main, ["db", "upgrade", "--db", str(path)])
    assert up.exit_code == 0, up.output
    now = CliRunner().invoke(main, ["db", "current", "--db", str(path)])
    assert now.exit_code == 0 and now.output.strip() == up.output.strip().rsplit(" ", 1)[-1]
    folder = CliRunner().invoke(main, ["db", "current", "--db", str(tmp_path)])
    assert folder.exit_code == 1 and "is a folder" in folder.output and "Traceback" not in folder.output
