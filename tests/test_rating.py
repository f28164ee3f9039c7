"""Direct Assessment of single responses (the `rating` protocol): packing, degraded copies, validation,
the analysis, and one whole study through real HTTP on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sqlalchemy import func, select

from hitkit.db.models import Assignment, Response, Study, Unit
from hitkit.db.session import session_scope
from hitkit.errors import AnswerError, ConfigError
from hitkit.material.degrade import degrade, phrase_length
from hitkit.protocols import by_table, task_for
from hitkit.protocols.rating.analysis import analyze_rating, worker_qc
from hitkit.protocols.rating.scores import DA_COLUMNS, DEFAULT_CRITERIA, SCORE_PREFIX, TABLE
from hitkit.protocols.rating.task import rotation_blocks
from hitkit.report import report
from hitkit.study.config import parse_study
from tests.studies import launch

REPO = Path(__file__).resolve().parents[1]
RESPONSES = REPO / "examples" / "data" / "ab_responses.jsonl"
SYSTEMS = ("alpha", "beta", "gamma")
QUALITY = {"alpha": 0.85, "beta": 0.5, "gamma": 0.2}


def config(**rating):
    return parse_study(
        {
            "study": "da-test",
            "task": "rating",
            "seed": 3,
            "budget": "100.00",
            "systems": [{"name": s} for s in SYSTEMS],
            "rating": {"responses": str(RESPONSES), **rating},
            "simulated": {"quality": QUALITY},
        }
    )


def units_of(specs, hit):
    """Unsaved Unit rows for one HIT's specs, with ids 1, 2, ... in HIT order."""
    by_key = {s.key: s for s in specs}
    return [
        Unit(id=i, public_key=f"k{i}", study_id=1, key=key, payload=dict(by_key[key].payload), required_answers=1)
        for i, key in enumerate(hit.unit_keys, 1)
    ]


# ------------------------------------------------------------------------- study file, packing


def test_the_study_file_checks_the_rating_section():
    with pytest.raises(ConfigError, match="needs a 'rating:' section"):
        parse_study({"study": "x", "task": "rating", "budget": "1", "systems": [{"name": s} for s in SYSTEMS]})
    with pytest.raises(ConfigError, match="degraded_per_hit = 5 exceeds rating.items_per_hit = 4"):
        config(items_per_hit=4, degraded_per_hit=5)
    with pytest.raises(ConfigError, match="qc=True"):
        config(criteria=[{"name": "fluent", "statement": "Fluent.", "polarity": "positive", "qc": False}])
    assert [c.name for c in config().rating.criterion_list()] == [c.name for c in DEFAULT_CRITERIA]


def test_hits_hold_distinct_prompts_mixed_systems_and_their_degraded_places():
    cfg = config(items_per_hit=10, degraded_per_hit=2, ratings_per_item=3)
    task = task_for(cfg)
    material = task.build()
    real = [u for u in material.units if not u.payload["is_control"]]
    assert len(real) == 90 and len(material.units) == 90 + 9 * 2
    assert {c.key for c in material.conversations} == {f"prompt:q{i:02d}" for i in range(1, 31)}
    hits = task.pack(material.units, random.Random(3))
    assert len(hits) == 9 and all(h.max_assignments == 3 for h in hits)
    by_key = {u.key: u for u in material.units}
    placed = Counter(k for h in hits for k in h.unit_keys)
    assert set(placed) == set(by_key) and set(placed.values()) == {1}  # every unit in exactly one HIT
    for hit in hits:
        payloads = [by_key[k].payload for k in hit.unit_keys]
        shown = [p for p in payloads if not p["is_control"]]
        assert len(shown) == 10 and len(payloads) - len(shown) == 2
        assert len({p["item_id"] for p in shown}) == 10  # no prompt twice
        assert min(Counter(p["system"] for p in shown).values()) >= 3  # the systems rotate within a HIT
    assert task.pack(material.units, random.Random(3)) == hits  # seeded


def test_a_short_last_hit_gets_no_more_degraded_places_than_it_has_responses():
    cfg = config(items_per_hit=89, degraded_per_hit=2, ratings_per_item=3)  # 90 responses: 89 + 1
    task = task_for(cfg)
    material = task.build()
    hits = task.pack(material.units, random.Random(5))
    by_key = {u.key: u for u in material.units}
    shapes = [
        (
            sum(not by_key[k].payload["is_control"] for k in h.unit_keys),
            sum(by_key[k].payload["is_control"] for k in h.unit_keys),
        )
        for h in hits
    ]
    assert shapes == [(89, 2), (1, 1)]
    assert sum(1 for u in material.units if u.payload["is_control"]) == 3


def test_rotation_blocks_cut_a_short_last_block_and_repeat_prompts_only_when_blocks_exceed_them():
    specs = task_for(config()).build().units
    real = [u for u in specs if not u.payload["is_control"]]
    blocks = rotation_blocks(real, 40, random.Random(1))
    assert [len(b) for b in blocks] == [40, 40, 10]
    assert max(Counter(u.payload["item_id"] for u in blocks[0]).values()) == 2  # 40 responses, 30 prompts


def test_degraded_copies_replace_a_phrase_of_the_original_with_one_of_another_response():
    assert [phrase_length(n) for n in (1, 2, 5, 6, 8, 9, 15, 16, 20, 21, 40)] == [1, 2, 2, 3, 3, 4, 4, 5, 5, 5, 10]
    original = "Keep the same bedtime every night, put your phone away an hour before, and avoid coffee."
    donor = "Try 'The Martian' by Andy Weir: it's funny, fast-paced and easy to pick up again."
    copy = degrade(original, donor, random.Random(4))
    kept = copy.split()
    assert copy != original and len(kept) == len(original.split())
    assert sum(a == b for a, b in zip(kept, original.split())) == len(kept) - 5  # 16 words: 5 replaced
    assert degrade(original, donor, random.Random(4)) == copy
    assert degrade("Yes.", "", random.Random(0)) == "…"
    assert degrade("it depends.", "it depends.", random.Random(0)) == "…"  # never the original again


def test_each_assignment_degrades_responses_of_its_own_hit_blind_and_recorded():
    cfg = config(items_per_hit=6, degraded_per_hit=2)
    task = task_for(cfg)
    material = task.build()
    hit = task.pack(material.units, random.Random(3))[0]
    units = units_of(material.units, hit)
    layout = task.layout(units, random.Random(9))
    assert sorted(layout["order"]) == [u.id for u in units]
    real = {(u.payload["item_id"], u.payload["system"]): u for u in units if not u.payload["is_control"]}
    places = [u for u in units if u.payload["is_control"]]
    assert set(layout["degraded"]) == {str(u.id) for u in places}
    sources = [(m["item_id"], m["system"]) for m in layout["degraded"].values()]
    assert len(set(sources)) == 2 and set(sources) <= set(real)  # distinct responses of this HIT
    for unit in units:
        view = task.view(unit, layout)
        assert set(view) == {"unit_id", "position", "label", "prompt", "response", "criteria"}
        assert view["label"] == f"Response {layout['order'].index(unit.id) + 1}"
        if unit.payload["is_control"]:
            made = layout["degraded"][str(unit.id)]
            original = real[(made["item_id"], made["system"])]
            assert view["prompt"] == original.payload["prompt"] and view["response"] == made["text"]
    # Before a worker accepts (a preview) a degraded place shows nothing.
    assert task.view(places[0], {})["response"] is None


def test_sliders_take_whole_numbers_from_0_to_100():
    task = task_for(config())
    unit = units_of(task.build().units, task.pack(task.build().units, random.Random(0))[0])[0]
    assert [q.name for q in task.questions(unit)] == [SCORE_PREFIX + c.name for c in DEFAULT_CRITERIA]
    assert task.validate(unit, "score_fluent", "007") == "7"
    assert task.validate(unit, "score_robotic", 100) == "100"
    for bad in ("101", "-1", "50.5", "", "fifty"):
        with pytest.raises(AnswerError, match="whole number from 0 to 100"):
            task.validate(unit, "score_fluent", bad)
    with pytest.raises(AnswerError, match="has no question"):
        task.validate(unit, "vote", "a")


# ------------------------------------------------------------------------- analysis


def _synthetic_export(folder: Path) -> None:
    """Four diligent workers, a constant spammer and a random spammer, each rating every system and 3 degraded copies."""
    rng = np.random.default_rng(0)
    rows, assignments = [], []
    workers = [f"d{i}" for i in range(4)] + ["constant", "random"]
    for w in workers:
        assignments.append(
            {
                "study": "s",
                "hit_id": "h",
                "assignment_id": f"a-{w}",
                "worker_id": w,
                "status": "approved",
                "work_time_s": 300,
            }
        )
        texts = [(f"q{i}", s, 0, QUALITY[s]) for i in range(8) for s in SYSTEMS]
        texts += [(f"q{i}", "alpha", 1, 0.05) for i in range(3)]
        for item, system, control, quality in texts:
            for c in DEFAULT_CRITERIA:
                if w == "constant":
                    score = 50
                elif w == "random":
                    score = int(rng.integers(0, 101))
                else:
                    agree = float(np.clip(100 * quality + rng.normal(0, 8), 0, 100))
                    score = round(agree if c.polarity == "positive" else 100 - agree)
                rows.append(
                    {
                        "study": "s",
                        "hit_id": "h",
                        "assignment_id": f"a-{w}",
                        "worker_id": w,
                        "item_id": item,
                        "system": system,
                        "is_control": control,
                        "position": 0,
                        "criterion": c.name,
                        "score": score,
                    }
                )
    pd.DataFrame(assignments).to_csv(folder / "assignments.csv", index=False)
    pd.DataFrame(rows, columns=DA_COLUMNS).to_csv(folder / f"{TABLE}.csv", index=False)


def test_the_analysis_keeps_workers_who_rate_degraded_copies_lower_and_ranks_the_systems(tmp_path):
    _synthetic_export(tmp_path)
    result = analyze_rating(tmp_path, n_boot=200, seed=1)
    workers = result.tables["workers"].set_index("worker_id")
    assert workers.loc[["d0", "d1", "d2", "d3"], "passed"].all()
    assert not workers.loc["constant", "passed"] and np.isnan(workers.loc["constant", "p_value"])
    degraded = result.tables["degraded"].set_index("worker_id")
    assert list(result.tables["degraded"].columns) == [
        "worker_id",
        "n_degraded",
        "n_original",
        "mean_z_degraded",
        "mean_z_original",
        "p_value",
        "passed",
    ]
    assert degraded.loc["d0", "n_degraded"] == 3 * 3 and degraded.loc["d0", "n_original"] == 24 * 3
    assert degraded.loc["d0", "mean_z_degraded"] < degraded.loc["d0", "mean_z_original"]
    systems = result.tables["systems"]
    assert list(systems["system"]) == ["alpha", "beta", "gamma"]
    assert set(systems.columns) >= {"system", "n", "z", "raw", "rank", *(c.name for c in DEFAULT_CRITERIA)}
    intervals = result.tables["score_intervals"]
    overall = intervals[intervals["criterion"] == "overall"].set_index("system")
    assert (overall["low"] <= overall["score"]).all() and (overall["score"] <= overall["high"]).all()
    sig = result.tables["significance"].set_index(["system_a", "system_b"])
    assert sig.loc[("alpha", "gamma"), "p_adjusted"] < 0.05
    s = result.summary
    passed = int(workers["passed"].sum())
    assert (s["workers"], s["passed"], s["items"], s["responses"], s["degraded"]) == (6, passed, 8, 24, 6 * 3)
    assert result.tables["score_intervals"]["unit"].unique().tolist() == ["worker"]
    assert (
        analyze_rating(tmp_path, n_boot=0, interval_unit="response").tables["score_intervals"]["unit"].iloc[0]
        == "response"
    )
    # The dashboard's check is the same test on the same table.
    method, by_worker = worker_qc({TABLE: pd.read_csv(tmp_path / f"{TABLE}.csv", dtype={"worker_id": str})})
    assert "degraded" in method and by_worker == {w: bool(p) for w, p in workers["passed"].items()}


def test_the_analysis_refuses_a_score_out_of_range(tmp_path):
    _synthetic_export(tmp_path)
    table = pd.read_csv(tmp_path / f"{TABLE}.csv")
    table.loc[5, "score"] = 140
    table.to_csv(tmp_path / f"{TABLE}.csv", index=False)
    with pytest.raises(Exception, match="line 7.*not a number within 0–100|not a number within 0–100"):
        analyze_rating(tmp_path, n_boot=0)


# ------------------------------------------------------------------------- a whole study


def rating_study(tmp_path: Path, database_url: str) -> Path:
    lines = RESPONSES.read_text().splitlines()[:12]
    (tmp_path / "responses.jsonl").write_text("\n".join(lines) + "\n")
    data = yaml.safe_load((REPO / "examples" / "rating.yaml").read_text())
    data.update(out=str(tmp_path / "runs"), database=database_url)
    data["rating"].update(responses=str(tmp_path / "responses.jsonl"), items_per_hit=6, ratings_per_item=2)
    data["schedule"]["qc_failures"] = "pay"
    data["simulated"]["workers"] = [
        {"profile": "diligent", "count": 6},
        {"profile": "noisy", "count": 1},
        {"profile": "spammer", "count": 2},
    ]
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_simulated_rating_study_fails_spammers_and_recovers_the_quality_order(tmp_path, one_database_url):
    database_url = one_database_url  # one store: what this test checks is not storage
    study_file = rating_study(tmp_path, database_url)
    result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=120)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "da-demo"
    ratings = pd.read_csv(out / "export" / f"{TABLE}.csv", dtype={"item_id": str})
    assert tuple(ratings.columns) == DA_COLUMNS and by_table(TABLE).name == "rating"

    with session_scope(database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        assert s.scalar(select(func.count()).select_from(Response)) == len(ratings)
        # 36 responses in 6 HITs of 6, each with 2 degraded places, each HIT taken by 2 workers.
        units = s.scalars(select(Unit)).all()
        assert len(units) == 36 + 12
        per_unit = Counter(r.unit_id for r in s.scalars(select(Response)))
        assert all(per_unit[u.id] == 2 * len(DEFAULT_CRITERIA) for u in units)
        # Every degraded copy degrades a response its worker also rated intact, and shows other text.
        for a in s.scalars(select(Assignment)):
            intact = {
                (u.payload["item_id"], u.payload["system"]): u.payload["response"]
                for u in (hu.unit for hu in a.hit.units)
                if not u.payload["is_control"]
            }
            assert len(a.layout["degraded"]) == 2
            for made in a.layout["degraded"].values():
                assert intact[(made["item_id"], made["system"])] != made["text"]

    degraded = ratings[ratings["is_control"] == 1]
    assert len(degraded) == 6 * 2 * 2 * len(DEFAULT_CRITERIA)
    key = ["assignment_id", "item_id", "system"]
    intact = set(ratings.loc[ratings["is_control"] == 0, key].itertuples(index=False))
    assert set(degraded[key].itertuples(index=False)) <= intact
    assert ratings["score"].between(0, 100).all() and set(ratings["criterion"]) == {c.name for c in DEFAULT_CRITERIA}

    workers = pd.read_csv(out / "analysis" / "workers.csv")
    assert workers.loc[workers["worker_id"].str.startswith("sim-diligent"), "passed"].all()
    # A spammer who clicks at random passes a 0.05-level test with probability 0.05 (which HITs each
    # spammer takes depends on timing, so no seed fixes it): both spammers pass with probability 0.0025.
    assert workers.loc[workers["worker_id"].str.startswith("sim-spammer"), "passed"].sum() <= 1
    systems = pd.read_csv(out / "analysis" / "systems.csv")
    assert list(systems.sort_values("rank")["system"]) == ["alpha", "beta", "gamma"]
    summary = json.loads((out / "analysis" / "summary.json").read_text())
    assert summary["task"] == "rating" and summary["degraded"] == 6 * 2 * 2

    files = report(study_file, tmp_path / "report")
    html = files.html.read_text()
    assert "Graham et al." in html and "Ji et al. (2022)" in html and "degraded copies" in html
