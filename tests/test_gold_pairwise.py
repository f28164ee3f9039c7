"""Gold comparisons in a whole pairwise study (issue 42): mixed into every HIT at gold.rate, shown like
any other comparison, kept in votes.csv with is_gold and gold_answer, left out of the ranking, and
counted per worker with an exact interval that fails a random clicker's QC and passes careful workers."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
from sqlalchemy import select

from hitkit.db.models import Hit, Study, Unit
from hitkit.db.session import session_scope
from hitkit.material.gold import GOLD_BETTER, GOLD_WORSE, gold_total, spread
from tests.studies import launch, pairwise_study

CROWD = {"workers": [{"profile": "diligent", "count": 2}, {"profile": "spammer", "count": 1}]}
"""Three workers for three votes a comparison: each of them takes every HIT, whatever the timing."""


def gold_study(tmp_path, database_url, **gold):
    return pairwise_study(
        tmp_path,
        database_url,
        gold={"rate": 0.25, "qc": {"upper_below": 0.7}, **gold},
        simulated=CROWD,
        schedule={"per_worker_cap": 20},
    )


def test_gold_comparisons_fill_their_share_of_every_hit_fail_the_random_clicker_and_stay_out_of_the_ranking(
    tmp_path, one_database_url
):
    study_file = gold_study(tmp_path, one_database_url)
    result = launch(study_file, yes=True, show_progress=False, echo=lambda _m: None, timeout_s=240)
    assert result.crowd_errors == []
    out = tmp_path / "runs" / "ab-demo"

    with session_scope(one_database_url) as s:
        assert s.scalar(select(Study.status)) == "completed"
        units = s.scalars(select(Unit)).all()
        gold = [u for u in units if "gold" in u.payload]
        real = [u for u in units if "gold" not in u.payload]
        assert len(real) == 90 and len(gold) == gold_total(90, 0.25) == 30  # 30 / 120 = the rate
        per_hit = []
        for hit in s.scalars(select(Hit).order_by(Hit.index)):
            shown = [hu.unit for hu in hit.units]
            n_gold = sum("gold" in u.payload for u in shown)
            per_hit.append((len(shown) - n_gold, n_gold))
            # A degraded copy is never beside the comparison it was made from.
            sources = Counter(
                u.payload["gold"]["item_id"] if "gold" in u.payload else u.payload["item_id"] for u in shown
            )
            assert all(sources[u.payload["gold"]["item_id"]] == 1 for u in shown if "gold" in u.payload)
        assert [g for _, g in per_hit] == spread([n for n, _ in per_hit], 30)
        assert all(abs(g - 0.25 * (n + g)) <= 1 for n, g in per_hit)
        for u in gold:  # a response against a degraded copy of it, from the study's own material
            better, worse = u.payload["responses"]
            assert better != worse and u.payload["gold"]["system"] in {"alpha", "beta", "gamma"}

    votes = pd.read_csv(out / "export" / "votes.csv", keep_default_na=False)
    marked = votes[votes["is_gold"] == 1]
    assert len(marked) == 30 * 3 and (votes["is_gold"] == 0).sum() == 90 * 3
    assert set(marked["system_a"]) | set(marked["system_b"]) == {GOLD_BETTER, GOLD_WORSE}
    shown_better = marked.apply(lambda r: r["system_" + r["gold_answer"]], axis=1)
    assert (shown_better == GOLD_BETTER).all()  # gold_answer is the side the better response was on
    assert set(votes.loc[votes["is_gold"] == 0, "gold_answer"]) == {""}

    analysis = out / "analysis"
    ranking = pd.read_csv(analysis / "ranking.csv")
    assert list(ranking.sort_values("rank")["system"]) == ["alpha", "beta", "gamma"]
    pairs = pd.read_csv(analysis / "pairs.csv")
    assert set(pairs["system_a"]) | set(pairs["system_b"]) == {"alpha", "beta", "gamma"}
    assert (pairs[["wins_a", "wins_b", "ties"]].sum(axis=1).sum()) == 90 * 3  # real votes only
    summary = json.loads((analysis / "summary.json").read_text())
    assert summary["votes"] == 90 * 3 and summary["gold"]["answers"] == 30 * 3

    workers = pd.read_csv(analysis / "workers.csv", keep_default_na=False).set_index("worker_id")
    spammer = [w for w in workers.index if w.startswith("sim-spammer")]
    diligent = [w for w in workers.index if w.startswith("sim-diligent")]
    assert (workers.loc[spammer + diligent, "gold_items"] == 30).all()
    assert (workers.loc[diligent, "gold_qc"] == "passed").all() and (workers.loc[spammer, "gold_qc"] == "failed").all()
    assert (workers.loc[spammer, "gold_high"] < 0.7).all() and (workers.loc[diligent, "gold_low"] > 0.7).all()
    assert summary["gold"]["qc_failed"] == spammer

    # The QC the approval step acts on (schedule.qc_failures) fails the spammer by gold.
    from hitkit.money.qc import qc_summary
    from hitkit.study.stored import StudyContext

    with session_scope(one_database_url) as s:
        qc = qc_summary(s, StudyContext.of(s.scalar(select(Study)), "secret"), cache_key="gold-test")
    assert "gold accuracy" in qc.method
    assert [w for w, ok in qc.by_worker.items() if ok is False] == spammer

    # The report shows the gold items, the exact interval and the rule, and the spammer it fails.
    from hitkit.report import report

    html = report(study_file, tmp_path / "report").html.read_text()
    assert "Gold items (gold comparisons" in html and "Clopper–Pearson" in html
    assert "gold QC rule" in html and spammer[0] in html
