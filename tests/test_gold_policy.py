"""The gold items' pure parts (issue 42): the exact interval's use in the QC rule, how a rule's verdict
joins the protocol's own, how many gold items go where, and the study file's gold: section's errors."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

from hitkit.analysis.gold import (
    clopper_pearson,
    combine_verdicts,
    gold_accuracy,
    gold_verdicts,
    split_gold,
    verdict_rule,
)
from hitkit.errors import ConfigError, InputError
from hitkit.material.gold import deal, degraded_pairs, gold_total, read_gold_pairs, spread
from hitkit.money.qc_policy import decide
from hitkit.study.config import load_study
from tests.studies import pairwise_study


def answers(**workers: tuple[int, int]) -> pd.DataFrame:
    """Gold answers: worker -> (right, wrong)."""
    rows = [(w, True) for w, (r, _) in workers.items() for _ in range(r)]
    rows += [(w, False) for w, (_, x) in workers.items() for _ in range(x)]
    return gold_accuracy(pd.DataFrame(rows, columns=["worker_id", "correct"]))


@pytest.mark.parametrize("level", [0.9, 0.95, 0.99])
def test_the_interval_at_any_level_is_scipys_exact_one(level):
    k, n = np.array([0, 3, 9, 10]), np.array([10, 10, 10, 10])
    low, high = clopper_pearson(k, n, level)
    for i in range(len(k)):
        ci = stats.binomtest(int(k[i]), int(n[i])).proportion_ci(confidence_level=level, method="exact")
        assert (low[i], high[i]) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_the_upper_bound_rule_fails_only_a_worker_surely_below_the_threshold():
    gold = answers(careful=(9, 1), guesser=(3, 9), unlucky=(0, 2))
    verdicts = gold_verdicts(gold, upper_below=0.7)
    # 3 of 12: the exact upper bound is 0.57 < 0.7; 0 of 2 reaches 0.84: too few items to fail anyone.
    assert verdicts == {"careful": True, "guesser": False, "unlucky": True}
    high = stats.binomtest(3, 12).proportion_ci(method="exact").high
    assert high < 0.7 < stats.binomtest(0, 2).proportion_ci(method="exact").high
    # A lower level narrows the interval: at 50 % the two misses of 2 are enough.
    assert gold_verdicts(gold, upper_below=0.7, level=0.51)["unlucky"] is False


def test_the_misses_rule_counts_wrong_answers_and_no_rule_fails_nobody():
    gold = answers(a=(10, 2), b=(1, 3), c=(0, 0 + 1))
    assert gold_verdicts(gold, misses=3) == {"a": True, "b": False, "c": True}
    assert gold_verdicts(gold, misses=2) == {"a": False, "b": False, "c": True}
    assert gold_verdicts(gold) == {"a": True, "b": True, "c": True}
    assert gold_verdicts(gold.iloc[0:0], misses=1) == {}
    assert verdict_rule(None, None) == "" and "fewer than 3 gold items wrong" in verdict_rule(None, 3)
    assert "0.5" in verdict_rule(0.5, None) and "95%" in verdict_rule(0.5, None)


def test_a_worker_fails_when_either_check_fails_and_is_judged_when_either_judges():
    own = {"a": True, "b": True, "c": None, "d": False}
    gold = {"a": True, "b": False, "c": True, "e": False}
    assert combine_verdicts(own, gold) == {"a": True, "b": False, "c": True, "d": False, "e": False}
    assert combine_verdicts({"x": None}, {}) == {"x": None}
    # What the approval step then does: only a failed check holds or rejects.
    assert [decide("hold", v) for v in (True, False, None)] == ["approve", "hold", "approve"]
    assert [decide("reject", v) for v in (True, False, None)] == ["approve", "reject", "approve"]


def test_gold_places_keep_the_rate_in_every_hit_and_add_up():
    assert gold_total(90, 0.25) == 30 and gold_total(36, 0.4) == 24 and gold_total(3, 0.01) == 1
    assert gold_total(0, 0.3) == 0
    counts = spread([10] * 9 + [1], 30)
    assert sum(counts) == 30 and all(abs(c - 3.3) <= 1 for c in counts[:9]) and counts[9] in (0, 1)
    assert spread([6, 6, 6], 4) == [1, 2, 1] and spread([], 5) == []


def test_gold_items_are_dealt_away_from_the_blocks_that_show_their_source():
    blocks = [["p1", "p2"], ["p2", "p3"], ["p1", "p3"]]
    gold = ["g:p3", "g:p1", "g:p2"]
    dealt = deal(blocks, gold, [1, 1, 1], lambda g, block: g[2:] in block)
    assert sorted(x for b in dealt for x in b if x.startswith("g:")) == sorted(gold)
    assert all(g[2:] not in b for b in dealt for g in b if g.startswith("g:"))


def test_degraded_gold_pairs_take_each_item_once_before_any_twice():
    responses = [
        (f"q{i}", f"prompt {i}", s, f"a reply of {s} to prompt {i} with some words") for i in range(4) for s in "xy"
    ]
    made = degraded_pairs(responses, 6, random.Random(1))
    items = [item for _, item, _ in made]
    assert len(set(items[:4])) == 4 and all(pair.better != pair.worse for pair, _, _ in made)
    assert all(pair.better in {r[3] for r in responses} for pair, _, _ in made)


def test_split_gold_leaves_a_table_without_gold_columns_whole():
    plain = pd.DataFrame({"vote": ["a", "b"]})
    real, gold = split_gold(plain)
    assert real is plain and gold.empty
    marked = plain.assign(is_gold=["1", "0"])
    real, gold = split_gold(marked)
    assert list(real["vote"]) == ["b"] and list(gold["vote"]) == ["a"]


def test_a_gold_file_is_read_with_errors_that_name_the_file_and_line(tmp_path):
    path = tmp_path / "gold.jsonl"
    path.write_text('{"id": "g1", "prompt": "Hi", "better": "Hello! How can I help?", "worse": "banana"}\n')
    assert read_gold_pairs(path)[0].better.startswith("Hello")
    path.write_text(path.read_text() + '{"id": "g2", "prompt": "Hi", "better": "same", "worse": "same"}\n')
    with pytest.raises(InputError, match=r"gold.jsonl.*line 2.*the same text"):
        read_gold_pairs(path)
    path.write_text('{"id": "g1", "prompt": "Hi", "better": ""}\n')
    with pytest.raises(InputError, match="better and worse must be non-empty text"):
        read_gold_pairs(path)


def _with(tmp_path, **changes):
    path = pairwise_study(tmp_path, "sqlite:///unused.db")
    data = yaml.safe_load(path.read_text())
    data.update(changes)
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_gold_section_says_what_is_wrong_and_where(tmp_path):
    with pytest.raises(ConfigError, match="gold.rate"):
        load_study(_with(tmp_path, gold={"rate": 0.7}))
    with pytest.raises(ConfigError, match="gold.file must name the JSONL"):
        load_study(_with(tmp_path, gold={"rate": 0.1, "source": "file"}))
    with pytest.raises(ConfigError, match=r"gold.file: .*missing.jsonl is not a file"):
        load_study(_with(tmp_path, gold={"rate": 0.1, "file": "missing.jsonl"}))
    with pytest.raises(ConfigError, match="gold.source is 'human', which a pairwise study cannot make"):
        load_study(_with(tmp_path, gold={"rate": 0.1, "source": "human"}))
    with pytest.raises(ConfigError, match="gold.qc.misses"):
        load_study(_with(tmp_path, gold={"rate": 0.1, "qc": {"misses": 0}}))
    config = load_study(_with(tmp_path, gold={"rate": 0.1, "qc": {"upper_below": 0.5}}))
    assert config.gold.source_for(("degraded", "file")) == "degraded" and config.gold.qc.level == 0.95


def test_live_chat_takes_no_gold_section_and_says_why():
    from hitkit.study.config import parse_study
    from tests.studies import REPO

    data = yaml.safe_load((REPO / "examples" / "live_chat.yaml").read_text())
    data["gold"] = {"rate": 0.2}
    with pytest.raises(ConfigError, match="gold: is not available for task 'live_chat' .*degraded QC bot"):
        parse_study(data, base_dir=REPO / "examples")


def test_a_pairwise_gold_file_gives_gold_comparisons_spread_over_the_hits(tmp_path):
    import random as rnd

    from hitkit.protocols import task_for

    lines = [
        {"id": f"g{i}", "prompt": f"Question {i}?", "better": f"A clear answer to question {i}.", "worse": "asdf"}
        for i in range(5)
    ]
    (tmp_path / "gold.jsonl").write_text("".join(__import__("json").dumps(x) + "\n" for x in lines))
    config = load_study(_with(tmp_path, gold={"rate": 0.1, "file": str(tmp_path / "gold.jsonl")}))
    task = task_for(config)
    units = task.build().units
    gold = [u for u in units if "gold" in u.payload]
    assert len(gold) == gold_total(90, 0.1) == 10  # the file's 5 items, each used twice
    assert {u.payload["responses"][0] for u in gold} == {x["better"] for x in lines}
    hits = task.pack(units, rnd.Random(config.seed))
    keys = {u.key for u in gold}
    per_hit = [sum(k in keys for k in h.unit_keys) for h in hits]
    real = [len(h.unit_keys) - g for h, g in zip(hits, per_hit)]
    assert per_hit == spread(real, 10)
    # The same file item never twice in one HIT.
    by_key = {u.key: u for u in gold}
    for h in hits:
        ids = [by_key[k].payload["gold"]["id"] for k in h.unit_keys if k in keys]
        assert len(ids) == len(set(ids))
