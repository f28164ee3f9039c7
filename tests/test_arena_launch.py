"""An arena study launched whole, analysis and report included (the seam of the two arena branches: the
launch's analysis writes the leaderboard and its figures, and the report reads them)."""

from __future__ import annotations

import json

import pandas as pd

from hitkit.report.build import report
from tests.studies import launch
from tests.test_arena_study import arena_study, bot_server  # noqa: F401 (the module's bot server fixture)


def test_a_launched_arena_study_ends_with_a_leaderboard_its_figures_and_a_report(
    tmp_path,
    one_database_url,
    bot_server,  # noqa: F811 - the fixture imported above
):
    study = arena_study(tmp_path, one_database_url, bot_server, hits=8)
    echoed: list[str] = []
    launch(study, yes=True, show_progress=False, echo=echoed.append, timeout_s=400)
    run = tmp_path / "runs" / "arena-demo"
    analysis = run / "analysis"
    board = pd.read_csv(analysis / "leaderboard.csv")
    assert sorted(board["system"]) == ["anna", "bert", "cleo"]  # the QC bot is never on the leaderboard
    assert board["battles"].sum() == 2 * 32  # 8 HITs × 5 battles, 8 of them QC battles
    rating = board.set_index("system")["rating_style"]
    assert rating["anna"] > rating["cleo"]
    assert (board["rating_style_lower"] <= board["rating_style_upper"]).all()
    summary = json.loads((analysis / "summary.json").read_text())
    assert summary["leaderboard_battles"] == 32 and summary["control_battles"] == 8
    assert summary["style_interval_correction"] == "penalty"
    for figure in ("leaderboard.png", "win_rates.png"):
        assert (analysis / figure).read_bytes()[:4] == b"\x89PNG"
    assert set(pd.read_csv(analysis / "qc.csv")["worker_id"]) <= set(
        pd.read_csv(run / "export" / "battles.csv")["worker_id"]
    )
    costs = pd.read_csv(analysis / "costs.csv")  # what each system costs, from the exported conversations
    assert sorted(costs["system"]) == ["anna", "bert", "cleo"] and (costs["output_tokens"] > 0).all()
    assert (board["category"] == "all").all()
    files = report(run)
    text = files.markdown.read_text()
    assert "## Leaderboard" in text and "anna" in text
    assert "## What each system costs" in text
    # The analysis's warnings (8 workers, 32 battles: wide intervals) reach the console and the report.
    assert summary["warnings"]
    for line in summary["warnings"]:
        assert f"warning: {line}" in echoed and line in text
    assert any("QC" in line and "judged" in line for line in echoed), echoed  # the launch's QC line
    assert "penalty's pull toward the mean" in files.methods


def test_the_qc_policy_judges_a_worker_only_once_the_test_could_pass_them():
    from hitkit.protocols.arena.analysis import decisive_needed, worker_qc
    from tests.test_arena_stats import frame

    assert decisive_needed(0.05) == 5 and decisive_needed(0.01) == 7
    # One QC battle a HIT: a worker's first votes cannot pass a binomial test at 0.05, so they are not
    # judged (failing them would hold every worker's work); five decisive votes are judged either way.
    rows = (
        [("real", "qc", "b", "new")]
        + [("qc", "real", "a", "few")] * 3
        + [("real", "qc", "tie", "few")] * 3
        + [("real", "qc", "a", "good")] * 5
        + [("qc", "real", "a", "bad")] * 5
    )
    battles = pd.concat([frame(rows, is_control=1), frame([("real", "other", "a")])], ignore_index=True)
    method, by_worker = worker_qc({"battles": battles})
    # Too few votes for either test: not judged (None), so the QC policy neither holds nor passes them.
    assert by_worker == {"bad": False, "good": True, "few": None, "new": None, "w1": None}
    assert "from 5 decisive QC votes on" in method
