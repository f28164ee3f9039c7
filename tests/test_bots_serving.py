"""The llama.cpp engine's batch layout: one forward pass per decode step, whatever order chats came in.

llama.cpp splits a batch for a cache with one stream per sequence into micro-batches of consecutive,
increasing sequence ids only (``split_equal(..., sequential=true)``, src/llama-batch.cpp); each
micro-batch is a pass over all the weights. The engine hands out the lowest free id and lays each
batch out in id order, so the decoding chats of a step form one run.
"""

from __future__ import annotations

import random
import threading

import pytest

from hitkit.bots.batching import SeqIds, sequential_passes


def test_sequential_passes_follow_llamacpps_increasing_id_rule():
    assert sequential_passes([0, 1, 2, 3]) == 1
    assert sequential_passes([3, 2, 1, 0]) == 4  # each id needs the one before it first
    assert sequential_passes([0, 2, 3]) == 2  # a gap breaks the run
    assert sequential_passes([5, 3, 4, 0, 1, 2]) == 3  # {5}, {3, 4}, {0, 1, 2}
    churned = random.Random(0).sample(range(32), 32)  # admission order after chats came and went
    assert sequential_passes(churned) > 8
    assert sequential_passes(sorted(churned)) == 1
    assert sequential_passes([]) == 0


def test_seq_ids_hand_out_the_lowest_free_id_so_running_ids_stay_one_run():
    ids = SeqIds(4)
    taken = [ids.take() for _ in range(4)]
    assert taken == [0, 1, 2, 3] and not ids
    ids.give(2)
    ids.give(0)
    assert ids.take() == 0 and ids.take() == 2  # lowest first, not last freed first
    with pytest.raises(IndexError):
        ids.take()


@pytest.mark.model
def test_llamacpp_replies_stay_each_chats_own_when_chats_outnumber_slots_and_churn():
    from hitkit.bots.llamacpp import LlamaCppBackend
    from hitkit.bots.protocol import ChatCompletionRequest
    from tests.test_bots_llamacpp import smollm2_file

    backend = LlamaCppBackend("smol", smollm2_file(), max_batch=3, ctx_tokens=512, seed=0)
    prompts = [
        "Say hello.",
        "Name a fruit.",
        "What is two plus two?",
        "Name a colour.",
        "Say goodbye.",
        "What is the sky's colour?",
        "Name an animal.",
    ]
    budgets = [6, 14, 9, 4, 12, 7, 10]  # different lengths, so chats leave in another order than they came

    def ask(i: int) -> str:
        request = ChatCompletionRequest(
            model="smol", messages=[{"role": "user", "content": prompts[i]}], max_tokens=budgets[i], temperature=0
        )
        return backend.complete(request).text

    try:
        alone = [ask(i) for i in range(len(prompts))]
        together: list[str | None] = [None] * len(prompts)
        threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, ask(i))) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        stats = backend.stats()
    finally:
        backend.close()
    assert stats["max_batch_size"] >= 2 and stats["requests"] == 2 * len(prompts)
    # Each reply is its own chat's: batched kernels may round differently late in a reply, not at its start.
    assert all(t and t.split()[:2] == a.split()[:2] for t, a in zip(together, alone))
