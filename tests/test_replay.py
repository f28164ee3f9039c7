"""``hitkit replay``: a stopping rule over random orders of a finished study's HITs, on hitkit's exports,
``hitkit import`` outputs and simulated data of every protocol, checked against the live rule."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from hitkit.analysis.replay import observations, orders, replay_order
from hitkit.analysis.replay_data import PairData, ReplayData
from hitkit.cli import main
from hitkit.errors import HitkitError
from hitkit.protocols.rating.scores import DEFAULT_CRITERIA as RATING_CRITERIA
from hitkit.running.replay import check_against_rule, read_study, replay

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "golden"
JI = REPO / "tests" / "data" / "ji2022-run1"
sys.path.insert(0, str(REPO / "benchmarks"))

from replay_clear import write_spot_the_bot  # noqa: E402


def agrees_with_the_live_rule(data, decision: str, n_orders: int = 2, every: int = 1) -> None:
    """The replay equals the protocol's comparisons + intervals + settle at every ``every``-th look."""
    total = len(data.units)
    for position in orders(total, n_orders, 11):
        problems = check_against_rule(data, position, decision, 0.05, list(range(0, total, every)) + [total - 1])
        assert problems == [], problems[:3]


@pytest.mark.parametrize("task", ["pairwise", "spot_the_bot", "live_chat"])
def test_replay_of_a_frozen_export_follows_the_live_rule_and_writes_its_tables(task, tmp_path):
    folder = GOLDEN / task / "export"
    data = read_study(task, folder)
    for decision in ("pair", "pairs", "clear"):
        agrees_with_the_live_rule(data, decision)
    out = tmp_path / "replay"
    run = CliRunner().invoke(main, ["replay", task, str(folder), "--orders", "30", "--seed", "4", "--out", str(out)])
    assert run.exit_code == 0, run.output
    rows = pd.read_csv(out / "replay.csv", dtype={"winner": str}, keep_default_na=False)
    assert list(rows.columns) == ["order", "system_a", "system_b", "stop_share", "winner"]
    pairs = len(data.pairs)
    assert len(rows) == 30 * pairs and sorted(set(rows["order"])) == list(range(30))
    shares = pd.to_numeric(rows["stop_share"].replace("", np.nan))
    assert ((shares > 0) & (shares <= 1) | shares.isna()).all()
    assert all(w in ("", a, b) for w, a, b in zip(rows["winner"], rows["system_a"], rows["system_b"]))
    summary = json.loads((out / "replay_summary.json").read_text())
    assert summary["task"] == task and summary["orders"] == 30 and summary["seed"] == 4
    assert len(summary["pairs"]) == pairs
    assert pd.read_csv(out / "replay_summary.csv").shape[0] == pairs
    # one line per pair in the console
    assert sum(1 for line in run.output.splitlines() if "–" in line.split(":")[0]) == pairs
    # seeded: the same seed gives the same rows
    again = tmp_path / "again"
    CliRunner().invoke(main, ["replay", task, str(folder), "--orders", "30", "--seed", "4", "--out", str(again)])
    assert (again / "replay.csv").read_bytes() == (out / "replay.csv").read_bytes()


def test_replay_of_a_released_live_chat_run_follows_the_live_rule_with_its_qc_horizon():
    data = read_study("live_chat", JI)
    assert len(data.units) == 304
    agrees_with_the_live_rule(data, "clear", n_orders=1, every=60)
    agrees_with_the_live_rule(data, "pair", n_orders=1, every=60)


def test_the_raw_ji_batch_through_hitkit_import_replays_as_the_released_tables(tmp_path):
    out = tmp_path / "export"
    run = CliRunner().invoke(
        main,
        [
            "import",
            "mturk",
            str(JI / "raw" / "Batch_free_run_1.csv"),
            "--mapping",
            str(REPO / "examples" / "ji2022_mturk_mapping.yaml"),
            "--study",
            "free-run-1",
            "--out",
            str(out),
        ],
    )
    assert run.exit_code == 0, run.output
    ours = replay(read_study("live_chat", out), orders_count=20, seed=2, decision="clear")
    released = replay(read_study("live_chat", JI), orders_count=20, seed=2, decision="clear")
    pd.testing.assert_frame_equal(ours.rows, released.rows)


def _annotation_batch(export: Path, tmp_path: Path) -> tuple[Path, Path]:
    """An MTurk batch holding a Spot The Bot export's annotations (one row per assignment) and the
    mapping whose function turns it back into annotations."""
    annotations = pd.read_csv(export / "annotations.csv", dtype=str, keep_default_na=False)
    assignments = pd.read_csv(export / "assignments.csv", dtype=str, keep_default_na=False)
    fields = ["conversation_id", "segment_exchanges", "entity", "system", "label"]
    batch = [
        {
            "HITId": row["hit_id"],
            "HITTypeId": "T1",
            "Title": "t",
            "WorkTimeInSeconds": "60",
            "AssignmentStatus": "Approved",
            "AssignmentId": row["assignment_id"],
            "WorkerId": "W" + row["worker_id"],
            "Answer.rows": json.dumps(
                annotations.loc[annotations["assignment_id"] == row["assignment_id"], fields].to_dict("records")
            ),
        }
        for _, row in assignments.iterrows()
    ]
    path = tmp_path / "Batch_stb.csv"
    pd.DataFrame(batch).to_csv(path, index=False)
    (tmp_path / "stb_rules.py").write_text(
        "import json\n"
        "def annotations(fields):\n"
        "    return [dict(r, fluency=0, sensibleness=0, specificity=0, elapsed_s='')\n"
        "            for r in json.loads(fields['Answer.rows'])]\n"
    )
    mapping = tmp_path / "stb.yaml"
    mapping.write_text(yaml.safe_dump({"task": "spot_the_bot", "function": "stb_rules.py:annotations"}))
    return path, mapping


def test_spot_the_bot_annotations_through_hitkit_import_replay_as_the_export(tmp_path, monkeypatch):
    export = write_spot_the_bot(tmp_path / "sim", seed=5, conversations=8)
    batch, mapping = _annotation_batch(export, tmp_path)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "imported"
    run = CliRunner().invoke(
        main, ["import", "mturk", str(batch), "--mapping", str(mapping), "--study", "stb", "--out", str(out)]
    )
    assert run.exit_code == 0, run.output
    imported = read_study("spot_the_bot", out)
    agrees_with_the_live_rule(imported, "pair", every=3)
    ours = replay(imported, orders_count=25, seed=1)
    direct = replay(read_study("spot_the_bot", export), orders_count=25, seed=1)
    pd.testing.assert_frame_equal(ours.rows, direct.rows)


def test_a_clear_spot_the_bot_pair_settles_for_the_full_datas_winner_and_never_the_opposite(tmp_path):
    # a crowd large enough that the per-worker rule (one observation per annotator) has the data to settle
    export = write_spot_the_bot(tmp_path / "sim", seed=0, conversations=60, workers=1000)
    data = read_study("spot_the_bot", export)
    agrees_with_the_live_rule(data, "pair", n_orders=1, every=7)
    result = replay(data, orders_count=60, seed=0)
    rows = result.rows
    summary = result.summary.set_index(["system_a", "system_b"])
    # alpha (humanness 0) against delta (2.4): the full data favour delta, clearly
    assert summary.loc[("alpha", "delta"), "full_direction"] == "delta"
    mine = rows[(rows["system_a"] == "alpha") & (rows["system_b"] == "delta")]
    assert (mine["winner"] == "delta").mean() >= 0.9
    assert (mine["stop_share"] <= 0.7).mean() >= 0.9
    # no pair ever claims the opposite of what all the data favour
    for (a, b), row in summary.iterrows():
        wrong = {a: b, b: a}.get(row["full_direction"])
        own = rows[(rows["system_a"] == a) & (rows["system_b"] == b)]
        assert not (own["winner"] == wrong).any(), (a, b)


def test_a_returning_annotator_counts_once_however_many_assignments(tmp_path):
    # 30 annotators (Zipf): the sign-flip test counts at most one block per annotator, in every order
    from hitkit.analysis.replay import observation_count, trace

    data = read_study("spot_the_bot", write_spot_the_bot(tmp_path / "sim", seed=0, conversations=40))
    for position in orders(len(data.units), 3, 0):
        for pair in data.pairs:
            n = trace(data, pair, position, 0.05, None).n
            assert 0 < n.max() <= 30 < len(set(pair.unit.tolist()))
    assert all(0 < observation_count(data, pair) <= 30 for pair in data.pairs)


def test_a_pair_without_observations_never_settles_and_holds_back_a_study_level_decision():
    one = PairData("a", "b", np.arange(30), np.arange(30), np.ones(30), 30.0)  # a beats b in every HIT
    none = PairData("a", "c", np.zeros(0, dtype=int), np.zeros(0, dtype=int), np.zeros(0), 12.0)  # planned, empty
    data = ReplayData("pairwise", [f"u{i}" for i in range(30)], ["a", "b", "c"], [one, none])
    position = np.arange(30)
    (look_ab, won_ab), (look_ac, won_ac) = replay_order(data, position, "pair", 0.05)
    assert look_ab is not None and won_ab == 1
    assert (look_ac, won_ac) == (None, 0)
    # "pairs" waits for a–c, which never settles: the rule never fires, nobody is claimed
    assert replay_order(data, position, "pairs", 0.05) == [(None, 0), (None, 0)]
    # "best" does not need a–c's observations to be made... but a beats c is never shown: no best either
    assert replay_order(data, position, "best", 0.05) == [(None, 0), (None, 0)]


def test_a_pair_no_hit_compares_is_listed_empty_and_not_watched(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    votes = pd.read_csv(GOLDEN / "pairwise" / "export" / "votes.csv", dtype=str, keep_default_na=False)
    pair = votes[["system_a", "system_b"]].apply(lambda r: tuple(sorted(r)), axis=1)
    votes[pair != ("beta", "gamma")].to_csv(export / "votes.csv", index=False)
    (export / "assignments.csv").write_bytes((GOLDEN / "pairwise" / "export" / "assignments.csv").read_bytes())
    run = CliRunner().invoke(main, ["replay", "pairwise", str(export), "--orders", "10", "--out", str(tmp_path / "r")])
    assert run.exit_code == 0, run.output
    assert "beta–gamma: no observations; never settles" in run.output
    rows = pd.read_csv(tmp_path / "r" / "replay.csv", keep_default_na=False)
    empty = rows[(rows["system_a"] == "beta") & (rows["system_b"] == "gamma")]
    assert len(empty) == 10 and (empty["stop_share"] == "").all() and (empty["winner"] == "").all()
    summary = pd.read_csv(tmp_path / "r" / "replay_summary.csv").set_index(["system_a", "system_b"])
    assert summary.loc[("beta", "gamma"), "observations"] == 0
    assert summary.loc[("beta", "gamma"), "settled"] == 0
    # not watched by a study-level decision: "pairs" can still fire on the other two
    decided = replay(read_study("pairwise", export), orders_count=10, seed=0, decision="pairs")
    assert decided.rows.loc[decided.rows["system_b"] == "beta", "stop_share"].notna().all()


def test_replay_ji_pairs_lists_a_pair_without_observations_instead_of_crashing(monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("replay_ji", REPO / "benchmarks" / "replay_ji.py")
    replay_ji = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay_ji)
    observations = replay_ji.observations

    def without_b_d(assignments, ratings, systems):
        # as on Free run 2: every HIT holding both fails its own QC test, so the pair has no observation
        hits, obs = observations(assignments, ratings, systems)
        obs[("B", "D")] = (np.zeros(0, dtype=int), np.zeros(0))
        return hits, obs

    monkeypatch.setattr(replay_ji, "observations", without_b_d)
    result = replay_ji.main(["--orders", "3", "--pairs"])
    out = capsys.readouterr().out
    assert "B-D" in out and "no observations" in out
    assert set(result) == {"hits_ratio", "contradictions", "recall", "clear_agree", "orders_ok"}


def _with_assignments(folder: Path, assignments: list[tuple]) -> Path:
    """Write ``assignments.csv`` (study, hit, assignment, worker, status, work time) beside the task table."""
    pd.DataFrame(
        assignments, columns=["study", "hit_id", "assignment_id", "worker_id", "status", "work_time_s"]
    ).to_csv(folder / "assignments.csv", index=False)
    return folder


def _battles(tmp_path: Path) -> Path:
    """An arena export: 3 systems, 90 assignments of 4 battles by 30 workers (3 each); x beats z nearly always."""
    rng = np.random.default_rng(0)
    strength = {"x": 1.5, "y": 0.5, "z": -1.0}
    rows, assignments = [], []
    for h in range(90):
        aid = f"a{h}"
        assignments.append(("arena", f"h{h}", aid, f"w{h % 30}", "approved", 30.0))
        for k in range(4):
            a, b = rng.choice(list(strength), size=2, replace=False)
            p = 1 / (1 + np.exp(strength[b] - strength[a]))
            vote = "a" if rng.random() < p else "b"
            rows.append(
                dict.fromkeys(
                    ["category", "reason", "tokens_a", "tokens_b", "header_count_a", "list_count_a"]
                    + ["bold_count_a", "header_count_b", "list_count_b", "bold_count_b"],
                    "",
                )
                | {
                    "study": "arena",
                    "hit_id": f"h{h}",
                    "assignment_id": aid,
                    "worker_id": f"w{h % 30}",
                    "battle_id": f"{aid}-{k}",
                    "prompt_id": f"p{k}",
                    "turns": 1,
                    "system_a": a,
                    "system_b": b,
                    "vote": vote,
                    "is_control": 0,
                    "leak": 0,
                }
            )
    folder = tmp_path / "arena"
    folder.mkdir()
    from hitkit.protocols.arena.columns import BATTLE_COLUMNS

    pd.DataFrame(rows)[list(BATTLE_COLUMNS)].to_csv(folder / "battles.csv", index=False)
    return _with_assignments(folder, assignments)


def test_arena_battles_replay_one_observation_per_worker_as_the_live_rule(tmp_path):
    data = read_study("arena", _battles(tmp_path))
    # 90 HITs by 30 workers: each pair has at most 30 observations, however many battles it has
    assert all(len(p.value) > 30 for p in data.pairs)
    assert all(len(observations(p, np.arange(90)).values) <= 30 for p in data.pairs)
    for decision in ("pair", "clear", "best"):
        agrees_with_the_live_rule(data, decision, n_orders=1, every=5)
    result = replay(data, orders_count=20, seed=0).summary.set_index(["system_a", "system_b"])
    assert result.loc[("x", "z"), "claims_a"] >= 0.9 and result.loc[("x", "z"), "opposite"] == 0


def _da_ratings(tmp_path: Path) -> Path:
    """A rating export: 40 assignments by 20 workers (2 each), each rating 2 responses of each of 3 systems
    and a degraded copy."""
    rng = np.random.default_rng(1)
    level = {"s1": 70.0, "s2": 55.0, "s3": 40.0}
    rows, assignments = [], []
    for h in range(40):
        aid = f"a{h}"
        assignments.append(("rating", f"h{h}", aid, f"w{h % 20}", "approved", 30.0))
        items = [(s, f"i{h}-{s}-{k}", 0) for s in level for k in range(2)] + [("s1", f"i{h}-d", 1)]
        for position, (system, item, control) in enumerate(items):
            for criterion in RATING_CRITERIA:
                base = 5.0 if control else level[system]
                score = base if criterion.polarity == "positive" else 100 - base
                rows.append(
                    ("rating", f"h{h}", aid, f"w{h % 20}", item, system, control, position, criterion.name)
                    + (int(np.clip(score + rng.normal(0, 8), 0, 100)),)
                )
    folder = tmp_path / "rating"
    folder.mkdir()
    from hitkit.protocols.rating.scores import DA_COLUMNS

    pd.DataFrame(rows, columns=list(DA_COLUMNS)).to_csv(folder / "da_ratings.csv", index=False)
    return _with_assignments(folder, assignments)


def test_rating_blocks_replay_with_their_qc_horizon_as_the_live_rule(tmp_path):
    data = read_study("rating", _da_ratings(tmp_path))
    assert data.holding is not None and data.holding.sum() == 40
    for decision in ("pair", "clear"):
        agrees_with_the_live_rule(data, decision, n_orders=1, every=4)
    result = replay(data, orders_count=20, seed=0).summary.set_index(["system_a", "system_b"])
    assert result.loc[("s1", "s3"), "claims_a"] >= 0.9


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "arena", str(GOLDEN / "pairwise" / "export")], "holds no battles.csv but pairwise's table"),
        (["replay", "pairwise", str(GOLDEN / "pairwise" / "export" / "votes.csv")], "is not a folder"),
        (["replay", "pairwise", str(GOLDEN / "pairwise" / "export"), "--orders", "0"], "--orders"),
        (["replay", "pairwise", str(GOLDEN / "pairwise" / "export"), "--alpha", "1"], "--alpha"),
        (["replay", "pairwise", str(GOLDEN / "pairwise" / "export"), "--decision", "all"], "--decision"),
    ],
)
def test_bad_input_says_what_and_where(args, message, tmp_path):
    run = CliRunner().invoke(main, args + ["--out", str(tmp_path / "r")])
    assert run.exit_code != 0
    assert message in run.output


def test_a_folder_with_no_counted_work_is_refused_clearly(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    votes = pd.read_csv(GOLDEN / "pairwise" / "export" / "votes.csv", dtype=str, keep_default_na=False)
    votes.to_csv(folder / "votes.csv", index=False)
    assignments = pd.read_csv(GOLDEN / "pairwise" / "export" / "assignments.csv", dtype=str, keep_default_na=False)
    assignments.assign(status="returned").to_csv(folder / "assignments.csv", index=False)
    with pytest.raises(HitkitError, match="no counted assignments with answers"):
        read_study("pairwise", folder)


@pytest.mark.parametrize("decision", ["pair", "pairs", "clear", "best"])
def test_an_orders_row_is_the_first_look_its_pairs_traces_settle_or_fire(decision, tmp_path):
    from hitkit.analysis import replay as engine

    data = read_study("spot_the_bot", write_spot_the_bot(tmp_path / "sim", seed=2, conversations=12))
    each = 0.05 if decision == "pair" else 0.05 / len(data.watched)
    for position in orders(len(data.units), 5, 3):
        share = engine.observed_share(data, position)
        full = {id(p): engine.trace(data, p, position, each, share) for p in data.watched}
        if decision == "pair":
            want = [(engine.first(full[id(p)].settled), full[id(p)].winner) for p in data.pairs]
            want = [(look, int(w[look]) if look is not None else 0) for look, w in want]
        else:
            look = engine.first(engine._fired(full, data.watched, decision, len(position)))
            want = [(look, int(full[id(p)].winner[look]) if look is not None else 0) for p in data.pairs]
        assert replay_order(data, position, decision, 0.05) == want


def test_the_study_files_stop_decision_and_alpha_apply_unless_the_command_says_otherwise(tmp_path):
    folder = GOLDEN / "spot_the_bot" / "export"
    data = yaml.safe_load((GOLDEN / "spot_the_bot" / "study.yaml").read_text())
    data["stop"] = {"decision": "best", "alpha": 0.01}
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(data))
    base = ["replay", "spot_the_bot", str(folder), "--orders", "3", "--study", str(study)]
    run = CliRunner().invoke(main, base + ["--out", str(tmp_path / "a")])
    assert run.exit_code == 0, run.output
    said = json.loads((tmp_path / "a" / "replay_summary.json").read_text())
    assert (said["decision"], said["alpha"]) == ("best", 0.01)
    run = CliRunner().invoke(main, base + ["--decision", "pair", "--alpha", "0.1", "--out", str(tmp_path / "b")])
    said = json.loads((tmp_path / "b" / "replay_summary.json").read_text())
    assert (said["decision"], said["alpha"]) == ("pair", 0.1)
