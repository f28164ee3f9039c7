"""``judge.select: uncertainty``: a uniform pilot of the crowd's budget, then a second wave drawn where the
judge is unsure, every unit's probability recorded, and the analysis weighted by it (inverse-probability
PPI++ win rates and Bradley–Terry strengths)."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import select

from hitkit.analysis import ppi_bradley_terry
from hitkit.analysis.ppi_active import second_wave
from hitkit.analysis.ppi_weighted import ipw_strengths, ipw_win_rates
from hitkit.db.models import Event, Hit, HitUnit, Study, Unit
from hitkit.db.session import session_scope
from hitkit.errors import ConfigError, InputError
from hitkit.judges.design import EVENT
from hitkit.judges.human_subset import crowd_units, human_subset
from hitkit.protocols import task_for
from hitkit.protocols.pairwise.judge import read_judge
from hitkit.study.loading import load_study
from tests.studies import launch
from tests.test_judge import UNITS, judge_server, judged_study  # noqa: F401 - the fixture

PI_MIN = 0.05


def the_second_wave(session) -> dict:
    """The one ``judge_second_wave`` event's data (the wave is drawn once)."""
    events = session.scalars(select(Event).where(Event.kind == EVENT)).all()
    assert len(events) == 1  # drawn once
    return events[0].data


def test_a_two_wave_study_records_each_units_probability_and_reports_weighted_ppi(
    tmp_path,
    one_database_url,
    judge_server,  # noqa: F811
):
    database_url = one_database_url
    study_file = judged_study(tmp_path, database_url, judge_server.url, select="uncertainty", pilot=0.5, pi_min=PI_MIN)
    lines: list[str] = []
    result = launch(study_file, yes=True, show_progress=False, echo=lines.append, timeout_s=300)
    assert result.crowd_errors == [] and result.status == "completed"
    out = tmp_path / "runs" / "ab-demo"

    with session_scope(database_url) as s:
        wave = the_second_wave(s)
        pi = wave["pi"]
        assert len(pi) == UNITS and min(pi.values()) >= PI_MIN and max(pi.values()) <= 1
        # The expected number of human-labelled items is the budget: 30 % of each pair's 30 items.
        for pair in ("alpha~beta", "alpha~gamma", "beta~gamma"):
            assert sum(p for k, p in pi.items() if k.endswith(pair)) == pytest.approx(9, abs=1e-9)
        assert wave["expected_labels"] == pytest.approx(27)
        assert wave["confidence"] == "agreement"  # the scripted judge gives no logprobs
        # The pilot: half the budget, uniformly within each pair (round(4.5) = 5 of 30 each).
        assert len(wave["pilot"]) == 15
        keys = set(s.scalars(select(Unit.key)))
        assert keys == set(wave["pilot"]) | set(wave["drawn"]) and not set(wave["pilot"]) & set(wave["drawn"])
        posted = set(s.scalars(select(Unit.key).join(HitUnit, HitUnit.unit_id == Unit.id)))
        assert posted == keys
        assert s.scalar(select(Study.status)) == "completed"
        assert all(h.status == "completed" for h in s.scalars(select(Hit)))

    judge = pd.read_csv(out / "export" / "judge.csv", dtype={"item_id": str})
    per_unit = {
        f"{i}:{a}~{b}": p
        for i, a, b, p in judge[["item_id", "system_a", "system_b", "human_probability"]].itertuples(index=False)
    }
    assert {k: per_unit[k] for k in pi} == pytest.approx(pi)  # the export carries the recorded π
    assert judge["human_subset"].sum() == 2 * len(keys)
    votes = pd.read_csv(out / "export" / "votes.csv", dtype={"item_id": str})
    voted = {
        f"{i}:{'~'.join(sorted((a, b)))}"
        for i, a, b in votes[["item_id", "system_a", "system_b"]].itertuples(index=False)
    }
    assert voted == {k.split(":")[0] + ":" + "~".join(sorted(k.split(":")[1].split("~"))) for k in keys}

    summary = json.loads((out / "analysis" / "summary.json").read_text())["judge"]
    assert summary["estimator"].startswith("active prediction-powered inference")
    assert summary["strengths_estimator"].startswith("PPI++ for M-estimation with inverse-probability weights")
    assert summary["selection"].startswith("uncertainty") and summary["human_items"] == len(keys)
    assert summary["confidence"] == "agreement"
    rates = pd.read_csv(out / "analysis" / "judge_win_rates.csv")
    assert rates["n_human"].sum() == len(keys) and (rates["n_judge"] == 30).all()
    for kind in ("human", "ppi"):
        assert ((rates[f"{kind}_low"] <= rates[kind]) & (rates[kind] <= rates[f"{kind}_high"])).all()
    # The weighted estimate, recomputed from the export, is what the analysis reports.
    from hitkit.protocols.pairwise.judge import items

    again = ipw_win_rates(items(votes, read_judge(out / "export" / "judge.csv")))
    assert again["ppi"].to_numpy() == pytest.approx(rates["ppi"].to_numpy())
    strengths = pd.read_csv(out / "analysis" / "judge_strengths.csv")
    assert sorted(strengths["system"]) == ["alpha", "beta", "gamma"] and strengths["ppi_low"].notna().all()


def _config(tmp_path, database_url, **judge):
    from tests.studies import pairwise_study

    return load_study(
        pairwise_study(
            tmp_path, database_url, judge={"url": "http://127.0.0.1:9", "model": "j", "human_share": 0.3, **judge}
        )
    )


def test_the_pilot_is_the_pilot_share_of_each_pairs_budget(tmp_path, database_url):
    config = _config(tmp_path, database_url, select="uncertainty", pilot=0.5)
    units = task_for(config).build().units
    chosen = human_subset(config, units)
    assert len(chosen) == 15 and [u.key for u in chosen] == [u.key for u in crowd_units(config, units)]
    uniform = human_subset(_config(tmp_path, database_url), units)
    assert len(uniform) == 27


def test_uncertainty_is_refused_where_the_judge_labels_the_crowds_work(tmp_path, database_url):
    from tests.test_judge_live_chat import judged_chat_study

    path = judged_chat_study(tmp_path, database_url, "http://127.0.0.1:9", select="uncertainty")
    config = load_study(path)
    with pytest.raises(ConfigError, match=re.escape("judge.select: uncertainty needs a judge of the material")):
        crowd_units(config, task_for(config).build().units)


def test_a_bad_select_is_a_clear_error(tmp_path, database_url):
    with pytest.raises(ConfigError, match="judge.select: Input should be 'uniform' or 'uncertainty'"):
        _config(tmp_path, database_url, select="active")


def _world(seed: int, n: int = 600):
    rng = np.random.default_rng(seed)
    confidence = rng.random(n)
    sq = rng.random(n) * (1 - confidence) ** 2  # the judge errs where it is unsure
    stratum = np.where(np.arange(n) < n // 2, "s1", "s2")
    pilot = np.zeros(n, bool)
    for s in ("s1", "s2"):
        pilot[rng.choice(np.flatnonzero(stratum == s), 30, replace=False)] = True
    half = rng.random(n) < 0.5
    return confidence, np.where(pilot, sq, np.nan), pilot, half, stratum


def test_the_second_wave_sends_people_where_the_judge_is_unsure_within_the_budget_and_the_floor():
    confidence, sq, pilot, half, stratum = _world(1)
    pi2, pi = second_wave(confidence, sq, pilot, half, stratum, {"s1": 90.0, "s2": 60.0}, pi_min=PI_MIN)
    assert pi[stratum == "s1"].sum() == pytest.approx(90) and pi[stratum == "s2"].sum() == pytest.approx(60)
    assert pi.min() >= PI_MIN - 1e-12 and pi.max() <= 1
    assert np.corrcoef(confidence, pi)[0, 1] < -0.5  # less sure, more likely to go to people
    assert (pi >= 30 / 300 - 1e-12).all()  # never below the pilot's own chance


def test_an_items_probability_never_depends_on_its_own_pilot_label():
    confidence, sq, pilot, half, stratum = _world(2)
    base = second_wave(confidence, sq, pilot, half, stratum, {"s1": 90.0, "s2": 60.0})[1]
    i = int(np.flatnonzero(pilot & half)[0])
    changed = sq.copy()
    changed[i] = 10.0
    after = second_wave(confidence, changed, pilot, half, stratum, {"s1": 90.0, "s2": 60.0})[1]
    same_half = half & (stratum == stratum[i])
    assert after[same_half] == pytest.approx(base[same_half])  # its half's π come from the other half


def test_confidence_that_says_nothing_leaves_the_second_wave_near_uniform():
    for seed in range(3):
        confidence, informative, pilot, half, stratum = _world(seed)
        noise = np.where(pilot, np.random.default_rng(seed + 10).random(confidence.size), np.nan)
        budget = {"s1": 90.0, "s2": 60.0}
        flat = second_wave(confidence, noise, pilot, half, stratum, budget)[1][stratum == "s1"]
        steep = second_wave(confidence, informative, pilot, half, stratum, budget)[1][stratum == "s1"]
        assert flat.std() < 0.3 * steep.std() and flat.mean() == pytest.approx(0.3)


def _items(seed: int, n: int = 600) -> tuple[pd.DataFrame, np.ndarray]:
    """Items of three systems (true centred strengths returned too), a judge that is right more often where it
    is confident, and people sent with a probability that falls with that confidence."""
    rng = np.random.default_rng(seed)
    systems, strength = np.array(["a", "b", "c"]), np.array([0.6, 0.0, -0.6])
    first = rng.integers(0, 3, n)
    second = (first + rng.integers(1, 3, n)) % 3
    outcome = (rng.random(n) < 1 / (1 + np.exp(strength[second] - strength[first]))).astype(float)
    confidence = rng.random(n)
    judge = np.where(rng.random(n) < 0.6 + 0.4 * confidence, outcome, 1 - outcome)
    pi = np.clip(0.1 + 0.5 * (1 - confidence), PI_MIN, 1)
    human = np.where(rng.random(n) < pi, outcome, np.nan)
    table = pd.DataFrame(
        {
            "system_a": systems[first],
            "system_b": systems[second],
            "human": human,
            "judge": judge,
            "human_probability": pi,
        }
    )
    return table, strength - strength.mean()


def test_weighted_strengths_with_equal_probabilities_and_no_judge_are_the_human_only_fit():
    items = _items(4)[0].drop(columns="human_probability")
    weighted = ipw_strengths(items.assign(human_probability=0.4), prior=0.5).set_index("system")
    uniform = ppi_bradley_terry.strengths(items, prior=0.5, lam=0.0).set_index("system")
    assert weighted["human"].to_numpy() == pytest.approx(uniform.loc[weighted.index, "human"].to_numpy(), abs=1e-8)
    assert weighted["judge"].to_numpy() == pytest.approx(uniform.loc[weighted.index, "judge"].to_numpy(), abs=1e-8)


def test_weighted_strengths_cover_the_truth_and_a_good_judge_narrows_them():
    covered, ratio = [], []
    for seed in range(60):
        items, truth = _items(seed)
        table = ipw_strengths(items, prior=0.05).set_index("system").loc[["a", "b", "c"]]
        covered += list((table["ppi_low"] <= truth) & (truth <= table["ppi_high"]))
        ratio.append(((table["ppi_high"] - table["ppi_low"]) / (table["human_high"] - table["human_low"])).mean())
    assert np.mean(covered) >= 0.9 and np.mean(ratio) < 0.9


def test_a_judge_table_with_a_bad_probability_is_refused_with_its_line(tmp_path):
    path = tmp_path / "judge.csv"
    path.write_text(
        "study,item_id,system_a,system_b,vote,parsed,human_subset,model,reply,human_probability\n"
        "s,q1,a,b,a,true,true,m,A,0.5\n"
        "s,q2,a,b,b,true,false,m,B,0\n"
    )
    with pytest.raises(InputError, match=r"judge.csv line 3: human_probability .0. is not a number in \(0, 1\]"):
        read_judge(path)
