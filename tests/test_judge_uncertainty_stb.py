"""``judge.select: uncertainty`` for Spot The Bot: the crowd's share is drawn by whole conversations, a uniform
pilot first, then a second wave of conversations where the judge is unsure, every segment's π its
conversation's, and the win rates weighted by conversation (inverse-probability-weighted PPI++ ratio)."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import select

from hitkit.analysis.ppi_active import second_wave
from hitkit.db.models import Hit, HitUnit, Study, Unit
from hitkit.db.session import session_scope
from hitkit.protocols.base import UnitSpec
from hitkit.protocols.spot_the_bot.judge import read_judge, selection
from hitkit.protocols.spot_the_bot.judge_analysis import conversation_probability, items, win_rates
from tests.studies import launch
from tests.test_judge_spot_the_bot import (  # noqa: F401 - the fixture
    PER_PAIR,
    SEGMENTS,
    _studies_with_conversation_effects,
    conversation_outcomes,
    judge_server,
    judged_stb_study,
    outcome_items,
)
from tests.test_judge_uncertainty import the_second_wave

PI_MIN = 0.05
BUDGET = {
    **{p: 0.75 * PER_PAIR for p in ("alpha~alpha", "alpha~beta", "alpha~gamma", "beta~beta", "beta~gamma")},
    "gamma~gamma": 0.75 * PER_PAIR,
    "human~human": 0.75 * 5,
}


def test_a_two_wave_spot_the_bot_study_draws_whole_conversations_and_reports_weighted_win_rates(
    tmp_path,
    one_database_url,
    judge_server,  # noqa: F811
):
    database_url = one_database_url
    study_file = judged_stb_study(
        tmp_path, database_url, judge_server.url, human_share=0.75, select="uncertainty", pilot=0.5, pi_min=PI_MIN
    )
    result = launch(study_file, yes=True, show_progress=False, echo=lambda line: None, timeout_s=300)
    assert result.crowd_errors == [] and result.status == "completed"
    out = tmp_path / "runs" / "stb-demo"

    with session_scope(database_url) as s:
        wave = the_second_wave(s)
        pi = wave["pi"]
        assert len(pi) == SEGMENTS and all(PI_MIN < p <= 1 for p in pi.values())
        assert wave["cluster"] == "conversations"
        units = s.scalars(select(Unit)).all()
        conversation = {u.key: str(u.payload["conversation"]) for u in units}
        stratum = {str(u.payload["conversation"]): "~".join(sorted(u.payload["systems"])) for u in units}
        # The pilot: half the budget of conversations (round(1.5) = 2 of each pair's 4; round(1.875) = 2 of 5).
        pilot = {conversation[k] for k in wave["pilot"]}
        assert len(pilot) == 7 * 2 and len(wave["pilot"]) == 7 * 2 * 3
        assert set(conversation) == set(wave["pilot"]) | set(wave["drawn"])
        assert not set(wave["pilot"]) & set(wave["drawn"]) and wave["drawn"]
        # Whole conversations only: every segment of a conversation the crowd sees is a unit, with one π.
        by_conversation = defaultdict(set)
        for key, c in conversation.items():
            by_conversation[c].add(key)
        assert all(len(keys) == 3 for keys in by_conversation.values())
        assert all(len({pi[k] for k in keys}) == 1 for keys in by_conversation.values())
        # The expected number of conversations with people's labels is each stratum's budget.
        first_pi = {c: pi[next(iter(keys))] for c, keys in by_conversation.items()}
        assert all(first_pi[c] >= 2 / 5 - 1e-12 for c in pilot)
        hits = {h.id: h.index for h in s.scalars(select(Hit))}
        index_of = {}
        for hit_id, unit_id in s.execute(select(HitUnit.hit_id, HitUnit.unit_id)):
            index_of[unit_id] = hits[hit_id]
        key_of = {u.id: u.key for u in units}
        pilot_hits = {index_of[i] for i in index_of if key_of[i] in set(wave["pilot"])}
        second_hits = {index_of[i] for i in index_of if key_of[i] in set(wave["drawn"])}
        assert max(pilot_hits) < min(second_hits)  # the pilot posted first, the second wave after it
        assert s.scalar(select(Study.status)) == "completed"

    judge = read_judge(out / "export" / "judge.csv")
    expected = defaultdict(float)
    probability = conversation_probability(judge)
    assert probability is not None
    for c, p in probability.items():
        strata = judge.loc[judge["conversation_id"] == c, "system"].tolist()[:2]
        expected["~".join(sorted(strata))] += p
    assert dict(expected) == pytest.approx(BUDGET)  # Σπ over each stratum's conversations is its budget
    drawn = (judge["human_subset"] == "True").groupby(judge["conversation_id"]).agg(["all", "any"])
    assert (drawn["all"] == drawn["any"]).all()
    assert set(drawn.index[drawn["all"]]) == set(conversation.values())
    for c in stratum:
        assert probability[c] == pytest.approx(first_pi[c])  # the export carries the recorded π

    summary = json.loads((out / "analysis" / "summary.json").read_text())["judge"]
    assert summary["selection"].startswith("uncertainty") and summary["weights"] == "per conversation"
    assert summary["estimator"].startswith("active prediction-powered inference")
    mixed = {c for c, pair in stratum.items() if pair in ("alpha~beta", "alpha~gamma", "beta~gamma")}
    assert summary["human_conversations"] == len(mixed)  # the win rates' (pairs of different systems)
    rates = pd.read_csv(out / "analysis" / "judge_win_rates.csv")
    assert len(rates) == 3 and (rates["n_judge"] == PER_PAIR * 3).all()
    for kind in ("human", "ppi"):
        assert ((rates[f"{kind}_low"] <= rates[kind]) & (rates[kind] <= rates[f"{kind}_high"])).all()
    annotations = pd.read_csv(out / "export" / "annotations.csv", dtype={"conversation_id": str})
    again = win_rates(items(annotations, judge), probability=probability)
    assert again["ppi"].to_numpy() == pytest.approx(rates["ppi"].to_numpy())

    from hitkit.report.build import report

    files = report(out, tmp_path / "report")
    assert "weighted by conversation" in files.html.read_text() and "weighted by conversation" in files.methods


def test_with_a_constant_probability_the_weighted_human_only_rate_is_the_unweighted_one():
    for per_item in _studies_with_conversation_effects(3, 11):
        plain = win_rates(per_item)
        weighted = win_rates(per_item, probability=pd.Series(0.2, index=per_item["conversation_id"].unique()))
        assert weighted["human"].to_numpy() == pytest.approx(plain["human"].to_numpy(), abs=1e-12)
        assert weighted["judge"].to_numpy() == pytest.approx(plain["judge"].to_numpy(), abs=1e-12)
        assert (weighted["ppi_low"] <= weighted["ppi"]).all() and (weighted["ppi"] <= weighted["ppi_high"]).all()


def _table(rows, *, assignment: bool = False) -> pd.DataFrame:
    """judge.csv- or annotations.csv-shaped rows from (conversation, k, entity 0's label, entity 1's)."""
    out = []
    for i, (c, k, zero, one) in enumerate(rows):
        for entity, label in enumerate((zero, one)):
            out.append(
                {
                    "study": "s",
                    "conversation_id": c,
                    "segment_exchanges": str(k),
                    "entity": entity,
                    "system": ("alpha", "beta")[entity],
                    "label": label,
                    **({"assignment_id": str(i)} if assignment else {}),
                }
            )
    return pd.DataFrame(out)


def _unit(c: str, k: int) -> UnitSpec:
    return UnitSpec(
        key=f"{c}:{k}", payload={"conversation": c, "k": k, "systems": ["alpha", "beta"]}, required_answers=1
    )


def test_a_conversations_selection_scores_are_its_segments_residual_and_the_judges_agreement_across_them():
    units = [_unit(c, k) for c in ("sure", "torn", "unseen") for k in (2, 3)]
    judge = _table(
        [
            ("sure", 2, "human", "bot"),
            ("sure", 3, "human", "bot"),
            ("torn", 2, "human", "bot"),
            ("torn", 3, "bot", "human"),
            ("unseen", 2, "bot", "bot"),
            ("unseen", 3, "bot", "human"),
        ]
    )
    people = _table(
        [("sure", 2, "human", "bot"), ("sure", 3, "bot", "bot"), ("torn", 2, "bot", "human")], assignment=True
    )
    scores = selection(units, {"annotations": people}, judge)
    assert list(scores.index) == ["sure", "torn", "unseen"]
    assert scores.loc["sure"].to_dict() == {"judge": 2.0, "confidence": 1.0, "human": 1.5}
    # Only the annotated segment counts on both sides of a drawn conversation's residual.
    assert scores.loc["torn"].to_dict() == {"judge": 1.0, "confidence": 0.0, "human": 0.0}
    assert scores.loc["unseen", "judge"] == 0.5 and scores.loc["unseen", "confidence"] == 0.5
    assert np.isnan(scores.loc["unseen", "human"])


def test_conversations_where_the_judge_is_unsure_are_more_likely_to_go_to_people():
    rng = np.random.default_rng(3)
    n, rows, human = 600, [], []
    unsure = rng.random(n) < 0.5
    for i in range(n):
        calls = rng.random(3) < 0.5 if unsure[i] else np.ones(3, bool)  # an unsure judge flips between prefixes
        truth = rng.random() < 0.5 if unsure[i] else True  # and is then often wrong
        for k, call in enumerate(calls):
            rows.append((f"c{i}", k + 2, *(("human", "bot") if call else ("bot", "human"))))
            human.append((f"c{i}", k + 2, *(("human", "bot") if truth else ("bot", "human"))))
    units = [_unit(f"c{i}", k) for i in range(n) for k in (2, 3, 4)]
    pilot = np.zeros(n, bool)
    pilot[rng.choice(n, 150, replace=False)] = True
    seen = [r for r in human if pilot[int(r[0][1:])]]
    scores = selection(units, {"annotations": _table(seen, assignment=True)}, _table(rows))
    sq = ((scores["human"] - scores["judge"]) ** 2).to_numpy(float)
    pi2, pi = second_wave(
        scores["confidence"].to_numpy(float),
        np.where(pilot, sq, np.nan),
        pilot,
        rng.random(n) < 0.5,
        np.full(n, "alpha~beta"),
        {"alpha~beta": 200.0},
        pi_min=PI_MIN,
    )
    assert pi.sum() == pytest.approx(200) and pi.min() >= PI_MIN and pi.max() <= 1
    # The second wave's draw: far likelier where the judge is unsure (π = π₀ + (1 − π₀)·π₂ with the pilot's π₀).
    assert pi2[unsure & ~pilot].mean() > 1.2 * pi2[~unsure & ~pilot].mean()
    torn = scores["confidence"].to_numpy() < 0.5  # the judge's calls split across the conversation's prefixes
    assert pi2[torn & ~pilot].min() > 1.2 * pi2[~torn & ~pilot].max()
    assert pi[unsure & ~pilot].mean() > pi[~unsure & ~pilot].mean()


def _weighted_studies(n_studies: int, seed: int):
    """Seeded studies of one pair, 150 conversations of 3 segments (as ``_studies_with_conversation_effects``:
    conversation effects, a judge that copies people 80 % of the time), each conversation drawn for people with
    π = 0.4 where the judge's calls split across its segments (confidence ≤ ⅓) and 0.1 where they agree: (the
    :func:`items`-shaped table, each conversation's π). θ = 0.45 / 0.8."""
    rng = np.random.default_rng(seed)
    for _ in range(n_studies):
        conversation, outcome, judged = conversation_outcomes(rng)
        calls = np.select([judged == 0, judged == 2], [1.0, 0.5], 0.0)
        score = np.bincount(conversation, weights=calls) / np.bincount(conversation)
        pi = np.where(np.abs(2 * score - 1) > 0.5, 0.1, 0.4)
        drawn = (rng.random(pi.size) < pi)[conversation]
        yield outcome_items(conversation, outcome, judged, drawn), pd.Series(pi, index=np.arange(pi.size).astype(str))


def test_with_unequal_probabilities_the_rate_weighted_by_conversation_covers_and_one_by_segment_does_not():
    # 200 studies measured: by conversation, PPI and people only 0.925 each; the same weights with each segment
    # taken for an independent draw (ipw_ratio on segment rows), PPI 0.785 and people only 0.805.
    from hitkit.analysis.ppi_weighted_ratio import ipw_ratio

    theta, counts = 0.45 / 0.8, defaultdict(int)
    for per_item, pi in _weighted_studies(200, 4):
        rate = win_rates(per_item, probability=pi).iloc[0]
        counts["ppi"] += rate["ppi_low"] <= theta <= rate["ppi_high"]
        counts["human"] += rate["human_low"] <= theta <= rate["human_high"]
        h = per_item["human_subset"].to_numpy(bool)
        y, z, f, g = (
            per_item[c].to_numpy(float) for c in ("human_wins", "human_decisive", "judge_wins", "judge_decisive")
        )
        segment = ipw_ratio(y, z, f, g, h, per_item["conversation_id"].map(pi).to_numpy(float))
        counts["segment_ppi"] += segment.low <= theta <= segment.high
        counts["segment_human"] += segment.human.low <= theta <= segment.human.high
    assert 0.91 <= counts["ppi"] / 200 <= 0.98 and 0.91 <= counts["human"] / 200 <= 0.98
    assert counts["segment_ppi"] < counts["ppi"] and counts["segment_human"] < counts["human"]
