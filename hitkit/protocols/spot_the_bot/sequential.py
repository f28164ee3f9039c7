"""Spot The Bot's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`).

Each annotation of a segment in which bots x and y (x before y by name) converse is an x-over-y score
by METHODS §2's win function: 1 when x's label ranks above y's (human > unsure > bot), 0 when below,
½ when equal. Two things make annotations depend on each other: the conversation (the segments of one
conversation share its bots' fortunes, and go to several annotators) and the annotator (one worker's
labels share their taste, over however many HITs). So each observation is a fresh annotator on fresh
conversations (:func:`hitkit.analysis.contributions.worker_contributions`): a worker's first HIT that
holds the pair, the mean score of its segments from the conversations in it that no earlier observation
used; the worker's later HITs, and later annotations of a used conversation, add nothing. (Taking only
the HIT's first fresh conversation left the rest to later workers but made each observation one noisy
conversation: on simulated data with clear differences the whole fresh HIT settles more pairs.) HITs come in the
order of the ``assignments`` table (:mod:`hitkit.running.stopping` sorts it by submission); the
observations in [0, 1] are watched with the bounded (hedged betting) confidence sequence.

Guaranteed, exactly (finite samples, every look): the sequence covers the expected score of an
annotation by a worker drawn from the crowd of a segment of a conversation drawn from the material,
whatever the conversations' and annotators' effects and however many HITs each annotator does, when
workers and conversations are independent draws and who annotates which segments when does not depend
on the labels (a fixed design). The sequence before it took each conversation's mean over its
annotations so far and revised it as more came in, after it had already bet on it: approximate, and
blind to annotators who return. Exactness costs data: a conversation counts once, in the first HIT
that reaches it. Self-chat and human–human segments inform no comparison.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from hitkit.analysis.per_worker import worker_comparisons
from hitkit.analysis.sequential import Comparison
from hitkit.protocols.spot_the_bot.annotations import HUMAN

FRESH_ITEMS = "conversations"
"""The items an observation must not share with an earlier one (:func:`hitkit.analysis.contributions.guarantee`)."""
UNIT = "workers"
"""What a comparison's n counts: annotators, each one observation (their first HIT on the pair, fresh
conversations only)."""


def _pair(payload: Mapping) -> tuple[str, str] | None:
    x, y = payload["systems"]
    return None if x == y or HUMAN in (x, y) else tuple(sorted((x, y)))


def planned(payloads: Sequence[Mapping], config) -> dict[tuple[str, str], float]:
    """Conversations each pair of bots has in the fixed design (the sequence's observations)."""
    out: dict[tuple[str, str], set] = {}
    for payload in payloads:
        pair = _pair(payload)
        if pair is not None:
            out.setdefault(pair, set()).add(str(payload["conversation"]))
    return {pair: float(len(conversations)) for pair, conversations in out.items()}


def hit_pairs(payloads: Sequence[Mapping]) -> list[tuple[str, str]]:
    """The pairs a HIT's segments inform."""
    return sorted({p for p in map(_pair, payloads) if p is not None})


def comparisons(
    tables: Mapping[str, pd.DataFrame], systems: Sequence[str], plan: Mapping[tuple[str, str], float], *, config=None
) -> list[Comparison]:
    """One comparison per pair of bots from the segment annotations so far (one observation per annotator:
    their first HIT's segments of conversations no earlier observation used). ``plan`` counts the pair's
    conversations (:func:`planned`): the HITs that can reach a fresh one."""
    from hitkit.protocols.spot_the_bot.reading import segment_annotations

    annotations = tables.get("annotations")
    assignments = tables.get("assignments")
    order = list(assignments["assignment_id"].astype(str)) if assignments is not None and len(assignments) else None
    answers = None
    if annotations is not None and len(annotations):
        seg = segment_annotations(annotations)
        seg = seg[(seg["system_0"] != seg["system_1"]) & (seg["system_0"] != HUMAN) & (seg["system_1"] != HUMAN)]
        first = seg["system_0"] < seg["system_1"]
        outcome = np.where(first, seg["outcome"], -seg["outcome"])
        answers = pd.DataFrame(
            {
                "x": np.where(first, seg["system_0"], seg["system_1"]),
                "y": np.where(first, seg["system_1"], seg["system_0"]),
                "score": (outcome + 1) / 2,
                "hit": seg["assignment_id"].astype(str).to_numpy(),
                "worker": seg["worker_id"].to_numpy(),
                "item": seg["conversation_id"].astype(str).to_numpy(),
            }
        )
    # the plan counts conversations, each in one observation at most: what a pair has spent is those it has seen
    return worker_comparisons(answers, systems, plan, null=0.5, bounds=(0.0, 1.0), order=order, spent_on_items=True)
