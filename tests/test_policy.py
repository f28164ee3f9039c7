"""Pure policy: wave planning within budget and cap, fees, tokens, packing."""

from __future__ import annotations

import random
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from hitkit.money.amounts import hit_cost, mturk_bonus_fee, mturk_reward_fee
from hitkit.protocols.pairwise.task import PairwiseTask
from hitkit.running.posting import hits_to_post
from hitkit.study.loading import load_study
from hitkit.worker import tokens
from tests.studies import EXAMPLE

D = Decimal


def test_waves_respect_wave_size_concurrency_and_budget():
    costs = [D("1.50")] * 10
    assert hits_to_post(costs, D("0"), D("100"), open_hits=0, max_concurrent=6, wave_size=4) == 4
    assert hits_to_post(costs, D("0"), D("100"), open_hits=5, max_concurrent=6, wave_size=4) == 1
    assert hits_to_post(costs, D("0"), D("100"), open_hits=7, max_concurrent=6, wave_size=4) == 0
    assert hits_to_post(costs, D("1.50"), D("4.00"), open_hits=0, max_concurrent=6, wave_size=4) == 1
    assert hits_to_post(costs, D("3.00"), D("4.50"), open_hits=0, max_concurrent=6, wave_size=4) == 1


@given(
    st.lists(st.decimals(min_value=D("0.01"), max_value=D("50"), places=2), max_size=20),
    st.decimals(min_value=D("0"), max_value=D("100"), places=2),
    st.decimals(min_value=D("0"), max_value=D("200"), places=2),
    st.integers(0, 30),
    st.integers(1, 30),
    st.integers(1, 30),
)
def test_posting_never_commits_more_than_the_budget(costs, committed, budget, open_hits, cap, wave):
    n = hits_to_post(costs, committed, budget, open_hits, cap, wave)
    assert 0 <= n <= wave and open_hits + n <= max(cap, open_hits)
    if n:
        assert committed + sum(costs[:n]) <= budget


def test_mturk_fees_follow_the_published_schedule():
    assert mturk_reward_fee(D("1.00"), 9) == D("0.20")
    assert mturk_reward_fee(D("1.00"), 10) == D("0.40")
    assert mturk_reward_fee(D("0.02"), 3) == D("0.01")  # at least a cent
    assert mturk_bonus_fee(D("2.50")) == D("0.50")
    assert hit_cost(D("0.50"), 3, D("0.10")) == D("1.80")


def test_tokens_reject_forgery_and_reuse_for_another_purpose():
    t = tokens.assignment_token("s3cret", 42, "abcd")
    assert tokens.read_assignment_token("s3cret", t) == (42, "abcd")
    assert tokens.read_assignment_token("other", t) is None
    invite = tokens.sign("s3cret", "invite:x", "42:abcd")
    assert tokens.read_assignment_token("s3cret", invite) is None


def test_pairwise_packing_fills_blocks_without_repeating_a_prompt():
    config = load_study(EXAMPLE)
    task = PairwiseTask(config)
    units = task.build().units
    hits = task.pack(units, random.Random(1))
    assert sorted(k for h in hits for k in h.unit_keys) == sorted(u.key for u in units)
    for h in hits:
        assert len(h.unit_keys) <= 10 and h.max_assignments == 3
        prompts = [k.split(":")[0] for k in h.unit_keys]
        assert len(prompts) == len(set(prompts))
    assert hits == task.pack(units, random.Random(1))
