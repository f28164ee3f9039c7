"""The arena's stopping comparisons and adaptive pair priorities, and `hitkit analyze` given a file."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
from click.testing import CliRunner

from hitkit.analysis.sequential import intervals, settle
from hitkit.protocols.arena import sequential
from hitkit.protocols.arena.simulation import Crowd, Systems, battles, uniform_pairs


def table(rows, **extra) -> pd.DataFrame:
    return pd.DataFrame(
        [{"system_a": a, "system_b": b, "vote": v, "is_control": 0, "leak": 0, **extra} for a, b, v in rows]
    )


def test_comparisons_score_battles_and_skip_qc_and_leaks():
    rows = table([("x", "y", "a"), ("y", "x", "a"), ("x", "y", "tie"), ("y", "x", "both_bad")])
    noise = pd.concat([table([("x", "y", "b")] * 5, is_control=1), table([("x", "y", "b")] * 5, leak=1)])
    found = sequential.comparisons({"battles": pd.concat([rows, noise])}, ["y", "x", "z"], {("x", "y"): 100.0})
    by_pair = {(c.a, c.b): c for c in found}
    xy = by_pair[("x", "y")]
    # no worker or HIT ids: each battle is its own worker's, one observation each
    assert (xy.n, xy.estimate, xy.planned, xy.null, xy.clusters) == (4, 0.5, 100.0, 0.5, (1.0, 0.0, 0.5, 0.5))
    assert by_pair[("x", "z")].n == 0 and by_pair[("x", "z")].estimate == 0.5
    state = settle(intervals(found, 0.05), "pairs", ["x", "y", "z"])
    assert not state.fired


def test_a_decisive_run_of_battles_settles_the_pair():
    rows = table([("x", "y", "a")] * 300 + [("y", "x", "b")] * 300)
    found = sequential.comparisons({"battles": rows}, ["x", "y"], {("x", "y"): 600.0})
    state = settle(intervals(found, 0.05), "pair", ["x", "y"], ("x", "y"))
    assert state.fired and "x > y" in state.outcome


def test_planned_counts_units_with_a_pair_and_spreads_those_without():
    config = SimpleNamespace(systems=[SimpleNamespace(name=n) for n in ("x", "y", "z")])
    payloads = [
        {"systems": ["y", "x"]},
        {"systems": ["x", "y"], "required_answers": 2},
        {"prompt": "hi"},
        {"prompt": "yo"},
        {"prompt": "ho"},
        {"systems": ["x", "qc"], "is_control": True},
    ]
    plan = sequential.planned(payloads, config)
    assert plan[("x", "y")] == 3 + 1 and plan[("x", "z")] == 1 and plan[("y", "z")] == 1
    assert sequential.hit_pairs(payloads) == [("x", "y")]


def test_priorities_favour_a_system_not_yet_measured():
    rows = table(
        [("x", "y", "a")] * 60
        + [("x", "y", "b")] * 40
        + [("x", "w", "a")] * 99
        + [("x", "w", "b")]
        + [("y", "w", "a")] * 95
        + [("y", "w", "b")] * 5
    )
    weights = sequential.pair_priorities({"battles": rows}, ["x", "y", "w", "new"])
    assert abs(sum(weights.values()) - 1.0) < 1e-9
    assert min(weights[p] for p in weights if "new" in p) > max(weights[p] for p in weights if "new" not in p)
    picked = sequential.next_pairs({"battles": rows}, ["x", "y", "w", "new"], 12)
    assert sum("new" in p for p in picked) >= 9
    assert picked == sequential.next_pairs({"battles": rows}, ["x", "y", "w", "new"], 12)


def test_the_adaptive_design_uses_the_style_model_when_battles_carry_style_counts():
    systems = Systems(("p", "q", "r"), (0.0, 0.1, 0.2), (100.0, 300.0, 900.0))
    rng = np.random.default_rng(1)
    frame = battles(systems, Crowd(workers=30, length_bias=2.0), uniform_pairs(3, 300, rng), rng)
    info, rows, weights = sequential._model(frame, ["p", "q", "r"])
    assert info.shape == (3 + 4, 3 + 4) and rows.shape == (3, 7) and (weights > 0).all()
    plain_info, plain_rows, _ = sequential._model(frame.drop(columns=["tokens_a"]), ["p", "q", "r"])
    assert plain_info.shape == (3, 3) and plain_rows.shape == (3, 3)


def test_analyze_refuses_a_file_for_a_task_that_reads_folders(tmp_path):
    from hitkit.cli import main

    path = tmp_path / "battles.json"
    path.write_text(json.dumps([{"model_a": "x", "model_b": "y", "winner": "model_a"}]))
    result = CliRunner().invoke(main, ["analyze", "pairwise", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code != 0
    assert "is a file; `hitkit analyze pairwise` reads a folder of exported tables" in result.output


def plan_config(hits: int, quality: dict[str, float]):
    """A study's settings as the arena's plan reads them (the ``arena:`` section's fields it uses)."""
    arena = SimpleNamespace(
        hits=hits,
        battles_per_hit=10,
        control="qc",
        control_share=0.2,
        crowd=SimpleNamespace(scale=6.0, length_bias=0.5, position_bias=0.1, tie_share=0.1),
    )
    arena.battle_count = lambda: arena.hits * arena.battles_per_hit
    arena.control_count = lambda: round(arena.battle_count() * arena.control_share)
    return SimpleNamespace(
        study="plan",
        gold=None,  # no gold: section (the QC battles are control_share of them)
        arena=arena,
        systems=[SimpleNamespace(name=n) for n in [*quality, "qc"]],
        simulated=SimpleNamespace(
            quality=quality,
            workers=[SimpleNamespace(profile="diligent", count=18), SimpleNamespace(profile="spammer", count=2)],
            activity="zipf",
        ),
        schedule=SimpleNamespace(per_worker_cap=3),
    )


def test_plan_simulates_the_studys_leaderboard_battles_and_grows_power_with_size():
    from hitkit.protocols.arena import plan

    quality = {"a": 0.8, "b": 0.6, "c": 0.4, "d": 0.4}
    small, large = plan_config(10, quality), plan_config(120, quality)
    frame, truth = plan.simulate(small, seed=1)
    assert len(frame) == 80 and truth == quality and "qc" not in set(frame["system_a"]) | set(frame["system_b"])
    assert frame.equals(plan.simulate(small, seed=1)[0])
    assert plan.size_of(large) == 120 and 120 in plan.sizes(large)
    runs = {
        size: [plan.replicate(cfg, seed, n_boot=50) for seed in range(4)] for size, cfg in ((10, small), (120, large))
    }
    assert all(r["closest_pair"] is None or isinstance(r["closest_pair"], bool) for r in runs[10])
    assert sum(r["best"] for r in runs[120]) >= sum(r["best"] for r in runs[10])
    assert sum(r["every_pair"] for r in runs[120]) >= 3  # 960 battles separate qualities 0.2 apart
    assert all(r["no_false_difference"] for r in runs[120])  # c and d are equal
