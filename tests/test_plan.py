"""`hitkit plan`: power and cost over a grid of sizes from simulated studies, seeded, per protocol."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hitkit.cli import main
from hitkit.config import load_study
from hitkit.errors import HitkitError
from hitkit.planning import plan
from hitkit.protocols.pairwise.plan import simulate_votes
from tests.studies import REPO, pairwise_study


def _study(tmp_path, quality):
    return load_study(pairwise_study(tmp_path, f"sqlite:///{tmp_path / 'x.db'}", simulated={"quality": quality}))


def test_power_grows_with_votes_and_the_cost_follows_the_places(tmp_path):
    config = _study(tmp_path, {"alpha": 0.62, "beta": 0.5, "gamma": 0.38})
    table = plan(config, replicates=12, n_boot=30, sizes=[1, 4, 12]).table
    assert list(table["votes_per_prompt"]) == [1, 4, 12]
    assert table["closest_pair"].iloc[-1] > table["closest_pair"].iloc[0]
    assert table["clusters"].iloc[-1] >= table["clusters"].iloc[0]
    # 10 HITs of 10 prompts, 0.50 a place on the simulated crowd (no fee): cost = 0.50 x places.
    assert list(table["assignments"]) == [10, 40, 120]
    assert list(table["cost"]) == ["5.00", "20.00", "60.00"]


def test_two_identical_systems_are_rarely_called_different(tmp_path):
    config = _study(tmp_path, {"alpha": 0.5, "beta": 0.5, "gamma": 0.9})
    table = plan(config, replicates=30, n_boot=20, sizes=[3]).table
    # The sign tests are corrected over the 3 pairs: a false difference in at most 1 study in 10 here.
    assert table["no_false_difference"].iloc[0] >= 0.9
    assert table["best"].iloc[0] >= 0.9  # gamma is far ahead
    assert table["closest_pair"].iloc[0] >= 0.9  # closest pair of *different* quality: 0.5 vs 0.9


def test_a_plan_is_the_same_twice_and_the_simulated_votes_are_the_exports_shape(tmp_path):
    config = _study(tmp_path, {"alpha": 0.7, "beta": 0.5, "gamma": 0.3})
    first = plan(config, replicates=5, n_boot=10, sizes=[2]).table
    assert first.equals(plan(config, replicates=5, n_boot=10, sizes=[2]).table)
    votes = simulate_votes(config, seed=1)
    assert list(votes.columns) == ["study", "hit_id", "assignment_id", "worker_id", "item_id", "system_a",
                                   "system_b", "vote"]
    # Every place of every HIT votes on each of its prompts' pairs, and no worker takes a HIT twice.
    assert len(votes) == 30 * 3 * config.pairwise.votes_per_prompt
    assert not votes.duplicated(["hit_id", "worker_id", "item_id", "system_a", "system_b"]).any()
    assert votes.groupby("worker_id")["hit_id"].nunique().max() <= config.schedule.per_worker_cap


def test_the_command_prints_the_plan_and_writes_it(tmp_path):
    study = pairwise_study(tmp_path, f"sqlite:///{tmp_path / 'x.db'}")
    run = CliRunner().invoke(main, ["plan", str(study), "--replicates", "3", "--n-boot", "10", "--sizes", "1,2",
                                    "--json"])
    assert run.exit_code == 0, run.output
    out = json.loads(run.output)
    assert out["unit"] == "votes_per_prompt" and [r["votes_per_prompt"] for r in out["table"]] == [1, 2]
    assert (tmp_path / "runs" / "ab-demo" / "plan" / "plan.csv").is_file()
    bad = CliRunner().invoke(main, ["plan", str(study), "--sizes", "1,two"])
    assert bad.exit_code != 0 and "whole numbers separated by commas" in bad.output


def test_a_protocol_without_a_plan_says_which_have_one():
    with pytest.raises(HitkitError, match="not available for rating studies yet; it plans pairwise, live_chat"):
        plan(load_study(REPO / "examples" / "rating.yaml"))


def _live_chat(quality=None):
    import yaml

    from hitkit.config import parse_study

    data = yaml.safe_load((REPO / "examples" / "live_chat.yaml").read_text())
    if quality is not None:
        data["simulated"]["quality"] = quality
    return parse_study(data, base_dir=REPO / "examples")


def test_a_live_chat_plan_counts_hits_and_quality_control_catches_the_spammers():
    config = _live_chat()
    table = plan(config, replicates=8, n_boot=20, sizes=[2, 8]).table
    assert list(table["hits"]) == [2, 8] and list(table["assignments"]) == [2, 8]
    assert table["closest_pair"].iloc[1] > table["closest_pair"].iloc[0]
    assert table["spammers_fail_qc"].dropna().min() >= 0.75
    from hitkit.protocols.live_chat.plan import with_size

    three = config.model_copy(update={"systems": config.systems[:4]})  # 3 real systems share 5 slots a HIT
    with pytest.raises(ValueError, match="use a multiple of 3"):
        with_size(three, 1)


def test_a_live_chat_plan_of_identical_systems_makes_few_false_claims():
    names = [s.name for s in _live_chat().systems if s.name != "qc"]
    config = _live_chat({name: 0.6 for name in names})
    table = plan(config, replicates=10, n_boot=20, sizes=[8]).table
    assert table["no_false_difference"].iloc[0] >= 0.8
    assert table["best"].isna().all() and table["closest_pair"].isna().all()  # nothing to find
