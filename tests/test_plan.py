"""`hitkit plan`: power and cost over a grid of sizes from simulated studies, seeded, per protocol."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hitkit.cli import main
from hitkit.protocols.pairwise.plan import simulate_votes
from hitkit.simulation.planning import plan, plan_text
from hitkit.study.config import load_study
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
    # Every place of every HIT votes on each of its prompts' pairs, and no worker takes a HIT twice.
    assert len(votes) == 30 * 3 * config.pairwise.votes_per_prompt
    assert not votes.duplicated(["hit_id", "worker_id", "item_id", "system_a", "system_b"]).any()
    assert votes.groupby("worker_id")["hit_id"].nunique().max() <= config.schedule.per_worker_cap


def test_the_command_prints_the_plan_and_writes_it(tmp_path):
    study = pairwise_study(tmp_path, f"sqlite:///{tmp_path / 'x.db'}")
    run = CliRunner().invoke(
        main, ["plan", str(study), "--replicates", "3", "--n-boot", "10", "--sizes", "1,2", "--json"]
    )
    assert run.exit_code == 0, run.output
    out = json.loads(run.output)
    assert out["unit"] == "votes_per_prompt" and [r["votes_per_prompt"] for r in out["table"]] == [1, 2]
    assert (tmp_path / "runs" / "ab-demo" / "plan" / "plan.csv").is_file()
    bad = CliRunner().invoke(main, ["plan", str(study), "--sizes", "1,two"])
    assert bad.exit_code != 0 and "whole numbers separated by commas" in bad.output


def _example(name, quality=None):
    """An example study file, with other qualities where given."""
    import yaml

    from hitkit.study.config import parse_study

    data = yaml.safe_load((REPO / "examples" / f"{name}.yaml").read_text())
    if quality is not None:
        data["simulated"]["quality"] = quality
    return parse_study(data, base_dir=REPO / "examples")


def _live_chat(quality=None):
    return _example("live_chat", quality)


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


def test_a_rating_plan_counts_ratings_per_response_and_its_power_grows_with_them():
    config = _example("rating", {"alpha": 0.53, "beta": 0.5, "gamma": 0.47})
    table = plan(config, replicates=8, n_boot=20, sizes=[1, 8]).table
    # 90 responses in 9 HITs of 10 (and 2 degraded places), 0.60 a place on the simulated crowd.
    assert list(table["hits"]) == [9, 9] and list(table["assignments"]) == [9, 72]
    assert list(table["cost"]) == ["5.40", "43.20"]
    assert table["every_pair"].iloc[1] > table["every_pair"].iloc[0]
    assert table["spammers_fail_qc"].dropna().min() >= 0.75
    assert table["no_false_difference"].isna().all()  # no two systems share a quality


def test_a_rating_plan_is_the_same_twice_and_its_ratings_are_the_analysis_input():
    from hitkit.protocols.rating.plan import simulate_tables

    config = _example("rating", {"alpha": 0.6, "beta": 0.6, "gamma": 0.3})
    first = plan(config, replicates=4, n_boot=10, sizes=[2]).table
    assert first.equals(plan(config, replicates=4, n_boot=10, sizes=[2]).table)
    assert first["best"].isna().all()  # two systems share the top quality
    assignments, ratings, profiles = simulate_tables(config, seed=3)
    # Every place (3 a HIT) rates its HIT's 10 responses and 2 degraded copies on the 4 criteria.
    assert len(assignments) == 9 * 3 and len(ratings) == 9 * 3 * 12 * 4
    degraded = ratings[ratings["is_control"]]
    assert len(degraded) == 9 * 3 * 2 * 4 and degraded["conversation_id"].str.endswith("/degraded").all()
    assert set(profiles.values()) <= {"diligent", "noisy", "spammer"}


def _spot_the_bot(tmp_path, quality, per_pair=6):
    import yaml

    from hitkit.study.config import load_study

    data = {
        "study": "stb-plan",
        "task": "spot_the_bot",
        "seed": 5,
        "budget": "100.00",
        "out": str(tmp_path / "runs"),
        "systems": [{"name": n, "url": "http://127.0.0.1:9/v1", "model": n} for n in quality],
        "generation": {"conversations_per_pair": per_pair},
        "hit": {"title": "Is it a person or a bot?", "reward": "1.00"},
        "simulated": {"quality": quality},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_study(path)


def test_a_spot_the_bot_plan_counts_conversations_per_pair_without_asking_a_bot(tmp_path):
    from hitkit.protocols.spot_the_bot.plan import sizes

    # The bots' URLs lead nowhere: a plan packs placeholders and never asks them.
    config = _spot_the_bot(tmp_path, {"alpha": 0.62, "beta": 0.5, "gamma": 0.38})
    assert sizes(config) == [3, 6]
    result = plan(config, replicates=6, n_boot=20, sizes=[2, 12])
    table = result.table
    assert result.unit == "conversations_per_pair" and list(table["conversations_per_pair"]) == [2, 12]
    # 6 pairs (self-chat included) of 2 or 12 conversations, human–human mixed in, 3 lengths, 2 annotations.
    assert list(table["assignments"]) == [2 * h for h in table["hits"]]
    assert table["closest_pair"].iloc[1] > table["closest_pair"].iloc[0]
    assert table["every_pair"].iloc[1] >= table["every_pair"].iloc[0]
    assert not (tmp_path / "runs").exists()  # nothing generated, nothing written


def test_a_spot_the_bot_plan_is_the_same_twice_and_its_annotations_are_the_analysis_input(tmp_path):
    from hitkit.protocols.spot_the_bot.plan import simulate_annotations, with_size
    from hitkit.protocols.spot_the_bot.reading import segment_annotations

    config = _spot_the_bot(tmp_path, {"alpha": 0.9, "beta": 0.9, "gamma": 0.1})
    first = plan(config, replicates=3, n_boot=10, sizes=[3]).table
    assert first.equals(plan(config, replicates=3, n_boot=10, sizes=[3]).table)
    assert first["best"].isna().all() and first["no_false_difference"].notna().all()
    annotations = simulate_annotations(with_size(config, 3), seed=2)
    segments = segment_annotations(annotations)
    # Every segment twice, by two workers; no worker sees two segments of one conversation.
    assert segments.groupby(["conversation_id", "segment_exchanges"])["worker_id"].nunique().eq(2).all()
    assert not segments.duplicated(["worker_id", "conversation_id"]).any()
    assert set(segments["system_0"]) == {"alpha", "beta", "gamma", "human"}


def test_confirm_runs_the_recommended_size_once_over_http_on_its_own_database(tmp_path, monkeypatch):
    own = tmp_path / "own.db"
    # A uniform crowd, whose power at 1 vote a prompt is sure in 3 replicates: this test is about the mechanics
    # of confirming (the long-tailed default crowd needs 2 votes a prompt here).
    study = pairwise_study(tmp_path, f"sqlite:///{own}", provider={"kind": "mturk"}, simulated={"activity": "uniform"})
    # Even where the environment names the study's database, the confirming run keeps to its own.
    monkeypatch.setenv("HITKIT_DATABASE_URL", f"sqlite:///{own}")
    run = CliRunner().invoke(
        main, ["plan", str(study), "--replicates", "3", "--n-boot", "10", "--sizes", "1,2", "--confirm", "--json"]
    )
    assert run.exit_code == 0, run.output
    out = json.loads(run.output)
    confirm = out["confirm"]
    assert confirm["size"] == out["smallest"]["closest_pair"] == 1  # the first decision's smallest size
    assert confirm["provider"] == "simulated" and confirm["study_provider"] == "mturk"
    assert confirm["hits"] == 10 and confirm["assignments"] == 10
    assert set(confirm["outcome"]) == set(out["decisions"]) and confirm["outcome"]["best"] is True
    folder = tmp_path / "runs" / "ab-demo" / "plan" / "confirm" / "ab-demo"
    assert confirm["database"] == f"sqlite:///{folder / 'hitkit.db'}"
    assert (folder / "export" / "votes.csv").is_file() and (folder / "analysis").is_dir()
    assert not own.exists()
    import pandas as pd

    votes = pd.read_csv(folder / "export" / "votes.csv")
    assert len(votes) == 30 * 3  # 30 prompts × 3 pairs, one vote each: the size confirmed
    text = CliRunner().invoke(
        main, ["plan", str(study), "--replicates", "3", "--n-boot", "10", "--sizes", "1", "--confirm"]
    )
    assert text.exit_code == 0, text.output
    assert "provider forced to the simulated crowd instead of mturk: nothing was posted" in text.output
    assert "simulated power  this run" in text.output and not own.exists()


def test_a_confirming_run_enlarges_the_crowd_by_whole_copies_of_its_mix_so_its_first_workers_are_the_studys():
    import yaml

    from hitkit.simulation.crowd import crowd_from_config
    from hitkit.simulation.plan_confirm import enlarged_crowd
    from hitkit.study.config import parse_study
    from hitkit.study.sections import CrowdGroup

    groups = [CrowdGroup(profile="diligent", count=8), CrowdGroup(profile="spammer", count=2)]
    enlarged = enlarged_crowd(groups, assignments=10, per_worker_cap=1)
    assert [(g.profile, g.count) for g in enlarged] == [("diligent", 8), ("spammer", 2)] * 2
    assert enlarged_crowd(groups, assignments=5, per_worker_cap=1) == groups
    data = yaml.safe_load((REPO / "examples" / "pairwise.yaml").read_text())
    data["simulated"]["workers"] = [g.model_dump() for g in enlarged]
    config = parse_study(data, "pairwise.yaml", REPO / "examples")
    ids = [w.worker_id for w in crowd_from_config(config)]
    # Numbered per profile across groups: distinct ids, and the first ten are the study's own ten.
    assert len(set(ids)) == 20
    assert ids[:10] == [f"sim-diligent-{i:03d}" for i in range(8)] + ["sim-spammer-000", "sim-spammer-001"]
    assert ids[10:] == [f"sim-diligent-{i:03d}" for i in range(8, 16)] + ["sim-spammer-002", "sim-spammer-003"]


def test_a_simulated_study_that_never_compared_a_system_separates_no_intervals():
    from hitkit.simulation.planning import decide

    # a one-HIT simulated arena can leave a system out of every battle: it has no interval to separate
    quality = {"a": 0.9, "b": 0.5, "c": 0.1}
    outcome = decide(quality, lambda x, y: False, ["b", "c"], {"b": (0.0, 1.0), "c": (2.0, 3.0)})
    assert outcome["clusters"] is False and outcome["best"] is False


def test_the_arena_starter_plans_from_one_hit(tmp_path):
    from hitkit.protocols.arena import starter

    folder = tmp_path / "mine"
    folder.mkdir()
    for name, text in {"study.yaml": starter.STUDY_YAML, **starter.material()}.items():
        (folder / name).write_text(text, encoding="utf-8")
    run = CliRunner().invoke(
        main, ["plan", str(folder / "study.yaml"), "--sizes", "1", "--replicates", "2", "--n-boot", "10"]
    )
    assert run.exit_code == 0, run.output
    assert "(1 HIT," in run.output or "below 80%" in run.output


def test_a_time_budget_runs_whole_rounds_and_gives_what_that_many_replicates_give(tmp_path, monkeypatch):
    """plan's default budget: rounds of one study per size while the next fits; the same seeds as --replicates."""
    import hitkit.simulation.planning as planning

    config = load_study(pairwise_study(tmp_path, None))
    clock = iter(range(0, 10_000, 2))  # every look at the clock is 2 s later
    monkeypatch.setattr(planning.time, "monotonic", lambda: float(next(clock)))
    timed = plan(config, n_boot=10, sizes=[1, 2], budget_s=40)
    assert planning.MIN_REPLICATES <= timed.replicates < 40 and timed.budget_s == 40
    monkeypatch.undo()
    fixed = plan(config, replicates=timed.replicates, n_boot=10, sizes=[1, 2])
    assert timed.table.equals(fixed.table) and fixed.budget_s is None
    assert 0 < timed.precision <= 1.96 * 0.5 / timed.replicates**0.5 + 5e-4  # rounded to 3 decimals
    assert f"within ±{timed.precision:.2f}" in plan_text(config, timed)


def test_an_arena_plan_gives_each_hit_to_one_worker_by_the_activity_law_within_the_cap():
    from collections import Counter

    from hitkit.protocols.arena.plan import simulate

    example = _example("arena")
    per_hit = example.arena.battles_per_hit

    def sized(cap, activity="zipf"):
        return example.model_copy(
            update={
                "arena": example.arena.model_copy(update={"hits": 60}),
                "schedule": example.schedule.model_copy(update={"per_worker_cap": cap}),
                "simulated": example.simulated.model_copy(update={"activity": activity}),
            }
        )

    def votes(config):
        frame, _ = simulate(config, seed=3)
        return sorted(Counter(frame["worker_id"]).values(), reverse=True), frame

    busy, frame = votes(sized(30))
    assert busy[0] <= 30 * per_hit and sum(busy[:2]) > 0.5 * sum(busy)  # zipf: a few workers cast most votes
    assert frame.equals(votes(sized(30))[1])  # seeded
    capped, _ = votes(sized(10))
    assert len(capped) == 6 and capped[0] <= 10 * per_hit  # the cap flattens the law
    one, _ = votes(sized(1))
    assert len(one) > 50 and one[0] <= per_hit  # a cap of 1: as many workers as HITs, one HIT each
    uniform, _ = votes(sized(30, "uniform"))
    assert len(uniform) <= 6 and uniform[0] < busy[0]
