"""Ranking k responses (the `ranking` protocol): the study file's limits, packing and degraded copies,
the answer's format, quality control, and the starter run end to end on the simulated crowd over real
HTTP, asserted on the database and the exports (rankings.csv, preferences.jsonl) and the analysis."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from sqlalchemy import func, select

from hitkit.db.models import Response, Study, Unit
from hitkit.db.session import session_scope
from hitkit.errors import AnswerError, ConfigError
from hitkit.protocols import by_table, task_for
from hitkit.protocols.ranking.analysis import poisson_binomial_tail, qc_table
from hitkit.protocols.ranking.settings import COLUMNS, TABLE
from hitkit.protocols.ranking.starter import STUDY_YAML, material
from hitkit.protocols.ranking.task import parse_order
from hitkit.study.config import parse_study
from tests.studies import launch
from tests.test_rating import RESPONSES, units_of

SYSTEMS = ("alpha", "beta", "gamma", "delta")


def four_systems(folder: Path) -> Path:
    """The example responses with a fourth system, delta (beta's reply and gamma's run together)."""
    lines = []
    for line in RESPONSES.read_text().splitlines():
        row = json.loads(line)
        row["responses"]["delta"] = f"{row['responses']['beta']} {row['responses']['gamma']}"
        row["responses"].update({f"s{i}": f"{i}: {row['responses']['alpha']}" for i in range(7)})
        lines.append(json.dumps(row))
    path = folder / "responses.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def config(tmp_path):
    """A ranking study's config over the example prompts (a fourth system and s0 … s6 added)."""
    path = four_systems(tmp_path)
    return lambda systems=SYSTEMS, **ranking: study(path, systems, **ranking)


def study(path: Path, systems, **ranking):
    return parse_study(
        {
            "study": "rank-test",
            "task": "ranking",
            "seed": 5,
            "budget": "100.00",
            "systems": [{"name": s} for s in systems],
            "ranking": {"responses": str(path), **ranking},
        }
    )


def test_a_prompt_shows_at_most_six_responses_copy_included(config):
    assert config().ranking.shown(4) == 4
    with pytest.raises(ConfigError, match="at most 6 fit on a page"):
        config(systems=[f"s{i}" for i in range(7)], systems_per_item=6)
    assert config(systems=[f"s{i}" for i in range(7)]).ranking.shown(7) == 5  # 5 + the copy
    with pytest.raises(ConfigError, match="needs at least 5 systems"):
        config(systems_per_item=5)


def test_each_hit_holds_its_control_prompts_and_k_systems_rotate_evenly(config):
    cfg = config(systems_per_item=3, prompts_per_hit=6, degraded_per_hit=2)
    task = task_for(cfg)
    material_ = task.build()
    assert all(len(u.payload["systems"]) == 3 for u in material_.units)
    shown = Counter(s for u in material_.units for s in u.payload["systems"])
    assert max(shown.values()) - min(shown.values()) <= 1  # every system ranked about equally often
    hits = task.pack(material_.units, random.Random(1))
    by_key = {u.key: u for u in material_.units}
    assert sorted(k for h in hits for k in h.unit_keys) == sorted(by_key)
    for hit in hits[:-1]:
        assert len(hit.unit_keys) == 6 and sum(by_key[k].payload["control"] for k in hit.unit_keys) == 2


def test_a_control_prompt_shows_a_fresh_degraded_copy_and_the_view_names_no_system(config):
    cfg = config(prompts_per_hit=4, degraded_per_hit=2)
    task = task_for(cfg)
    specs = task.build().units
    hit = task.pack(specs, random.Random(2))[0]
    units = units_of(specs, hit)
    layout = task.layout(units, random.Random(3))
    control = next(u for u in units if u.payload["control"])
    items = task.shown_items(control, layout)
    assert len(items) == 5 and sum(c for _s, _t, c in items) == 1
    copy = next(t for _s, t, c in items if c)
    assert copy not in control.payload["responses"]
    view = task.view(control, layout)
    assert [i["label"] for i in view["items"]] == list("ABCDE")
    assert not any(s in json.dumps(view) for s in SYSTEMS)
    assert task.validate(control, "order", "e> a = b>c>d") == "E>A=B>C>D"
    with pytest.raises(AnswerError, match="once each"):
        task.validate(control, "order", "A>B>C>D")  # the copy left out
    plain = next(u for u in units if not u.payload["control"])
    with pytest.raises(AnswerError, match="once each"):
        task.validate(plain, "order", "A>B>C>D>E")


def test_an_order_names_each_response_once_and_ties_only_where_allowed():
    assert parse_order("C>A=D>B", 4) == [[2], [0, 3], [1]]
    with pytest.raises(AnswerError, match="strict order"):
        parse_order("A=B", 2, ties=False)
    for bad in ("A>A>B", "A>B", "A>B>C>G", ""):
        with pytest.raises(AnswerError):
            parse_order(bad, 3)


def test_qc_counts_a_copy_right_only_below_every_intact_response_and_tests_against_chance():
    rows = []
    for n, (copy_rank, intact) in enumerate([(4, [1, 2, 3]), (3, [1, 2, 3]), (4, [1, 1, 3])]):
        rows += [("w", f"a{n}", "p", f"s{i}", False, r) for i, r in enumerate(intact)]
        rows += [("w", f"a{n}", "p", "s0", True, copy_rank)]
    table = pd.DataFrame(rows, columns=["worker_id", "assignment_id", "item_id", "system", "is_control", "rank"])
    worker = qc_table(table).iloc[0]
    assert worker["degraded"] == 3 and worker["degraded_last"] == 2  # tied for last is not last
    assert worker["p_value"] == pytest.approx(stats.binomtest(2, 3, 0.25, alternative="greater").pvalue)
    assert poisson_binomial_tail(1, np.array([0.5, 0.2])) == pytest.approx(1 - 0.5 * 0.8)


def starter_study(folder: Path, database_url: str) -> Path:
    """The `hitkit init --task ranking` study, on ``database_url``, with a crowd that has spammers."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in material().items():
        (folder / name).write_text(text)
    data = yaml.safe_load(STUDY_YAML)
    data.update(out=str(folder / "runs"), database=database_url)
    data["simulated"]["workers"] = [{"profile": "diligent", "count": 5}, {"profile": "spammer", "count": 3}]
    data["schedule"]["qc_failures"] = "pay"
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_starter_runs_on_the_simulated_crowd_and_exports_rankings_preferences_and_the_ranking(
    tmp_path, one_database_url
):
    result = launch(starter_study(tmp_path, one_database_url), yes=True, show_progress=False, echo=lambda _m: None)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "my-ranking-study"
    rankings = pd.read_csv(out / "export" / f"{TABLE}.csv", dtype={"item_id": str})
    assert tuple(rankings.columns) == COLUMNS and by_table(TABLE).name == "ranking"
    with session_scope(one_database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        answers = s.scalar(select(func.count()).select_from(Response).where(Response.question == "order"))
        controls = sum(u.payload["control"] for u in s.scalars(select(Unit)))
    # 4 prompts × 5 workers, 3 of them with a copy: 3 intact responses each, one more for a copy.
    assert answers == 20 and len(rankings) == 20 * 3 + 5 * controls
    assert (rankings.groupby(["assignment_id", "item_id"])["rank"].min() == 1).all()
    workers = pd.read_csv(out / "analysis" / "workers.csv").set_index("worker_id")
    spammers = [w for w in workers.index if "spammer" in w]
    assert all(workers.loc[w, "qc"] == "failed" for w in spammers if workers.loc[w, "degraded_last"] < 3)
    ranking = pd.read_csv(out / "analysis" / "ranking.csv")
    assert list(ranking["system"]) == ["alpha", "beta", "gamma"] and ranking["ci_low"].notna().all()
    summary = json.loads((out / "analysis" / "summary.json").read_text())
    kept = rankings[
        (rankings["is_control"] == 0) & ~rankings["worker_id"].isin(workers.index[workers["qc"] == "failed"])
    ]
    assert summary["rankings"] == len(kept[["assignment_id", "item_id"]].drop_duplicates())
    prefs = [json.loads(line) for line in (out / "export" / "preferences.jsonl").read_text().splitlines()]
    failed = set(workers.index[workers["qc"] == "failed"])
    assert prefs and not {p["worker_id"] for p in prefs} & failed
    assert {p["pair"] for p in prefs} == {"best_vs_worst", "implied"}
    for p in prefs:  # every pair is one the worker's order puts one above the other, intact texts only
        own = kept[(kept["worker_id"] == p["worker_id"]) & (kept["item_id"] == p["item_id"])].set_index("system")
        assert own.loc[p["chosen_system"], "rank"] < own.loc[p["rejected_system"], "rank"]
        assert p["prompt"][0]["role"] == "user" and p["chosen"][0]["role"] == "assistant"
