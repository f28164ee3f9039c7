"""Spot The Bot packing and the refusal rule as pure functions, over random studies and crowds.

Workers arrive in random orders — new ones, returning ones, some giving HITs back or letting them
expire — and take HITs under the flow's rules (free place, not taken before, cap of 3) plus the
refusal rule. Every packing constraint must hold, and every segment must end with exactly its
required annotations from distinct workers.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hitkit.errors import ConfigError
from hitkit.protocols.spot_the_bot.packing import Segment, SourceConversation, conflicts, pack_segments

CAP = 3


@st.composite
def studies(draw):
    lengths = sorted(draw(st.sets(st.integers(1, 8), min_size=1, max_size=4)))
    per_hit = draw(st.integers(2, 24))
    bots = draw(st.integers(1, 90))
    humans = draw(st.integers(1, 30))
    annotations = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    conversations = [SourceConversation(f"bb:{i}", False) for i in range(bots)] + [
        SourceConversation(f"hh:{i}", True) for i in range(humans)
    ]
    random.Random(seed).shuffle(conversations)
    return conversations, lengths, per_hit, annotations, seed


def feasible(conversations, lengths, per_hit) -> bool:
    humans = sum(c.human_human for c in conversations)
    bots = len(conversations) - humans
    groups = math.ceil(len(conversations) / per_hit)
    return humans >= groups and bots >= groups and humans // groups + bots // groups >= max(len(lengths), 2)


def check_packing(hits, conversations, lengths, per_hit):
    kind = {c.key: c.human_human for c in conversations}
    for hit in hits:
        convs = [s.conversation for s in hit]
        assert len(hit) <= per_hit
        assert len(set(convs)) == len(convs), "two segments of one conversation share a HIT"
        assert {s.k for s in hit} == set(lengths), "a HIT lacks a segment length"
        assert {kind[c] for c in convs} == {True, False}, "a HIT lacks human–human or bot–bot material"
    placed = Counter(s for hit in hits for s in hit)
    assert placed == Counter(Segment(c.key, k) for c in conversations for k in lengths)
    assert len(hits) == math.ceil(len(conversations) / per_hit) * len(lengths)
    # HITs are as even as the material allows.
    assert max(map(len, hits)) - min(map(len, hits)) <= 1


def run_crowd(hits, annotations, rng: random.Random):
    """Workers come and go until every place holds submitted work; return the assignments."""
    hit_convs = [{s.conversation for s in hit} for hit in hits]
    assignments = []  # dicts: worker, hit, status (accepted / submitted / returned / expired)
    seen: dict[int, set[str]] = defaultdict(set)
    workers: list[int] = []
    holding: dict[int, dict] = {}

    def counted(w):
        return sum(1 for a in assignments if a["worker"] == w and a["status"] in ("accepted", "submitted"))

    def open_for(w):
        taken = {a["hit"] for a in assignments if a["worker"] == w}
        out = []
        for h in range(len(hits)):
            active = sum(1 for a in assignments if a["hit"] == h and a["status"] in ("accepted", "submitted"))
            if active < annotations and h not in taken and not conflicts(hit_convs[h], seen[w]):
                out.append(h)
        return out

    def done():
        return all(
            sum(1 for a in assignments if a["hit"] == h and a["status"] == "submitted") == annotations
            for h in range(len(hits))
        )

    for _ in range(100_000):
        if done():
            return assignments
        # Finish (submit, return or let expire) some held assignment, now and then.
        if holding and rng.random() < 0.5:
            w = rng.choice(sorted(holding))
            a = holding.pop(w)
            a["status"] = rng.choices(["submitted", "returned", "expired"], [0.8, 0.1, 0.1])[0]
            continue
        idle = [w for w in workers if w not in holding and counted(w) < CAP and open_for(w)]
        if idle and rng.random() < 0.7:
            w = rng.choice(idle)
        else:
            w = len(workers)  # a new worker arrives (an open crowd always has one more)
            workers.append(w)
        choices = open_for(w)
        if not choices or counted(w) >= CAP:
            continue
        h = rng.choice(choices)
        a = {"worker": w, "hit": h, "status": "accepted"}
        assignments.append(a)
        seen[w] |= hit_convs[h]  # shown, whatever happens to the assignment next
        holding[w] = a
    raise AssertionError("the crowd did not finish the study")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(studies(), st.integers(0, 2**32 - 1))
def test_every_packing_constraint_holds_and_every_segment_gets_its_annotations(study, crowd_seed):
    conversations, lengths, per_hit, annotations, seed = study
    if not feasible(conversations, lengths, per_hit):
        with pytest.raises(ConfigError):
            pack_segments(conversations, lengths, per_hit, random.Random(seed))
        return
    hits = pack_segments(conversations, lengths, per_hit, random.Random(seed))
    check_packing(hits, conversations, lengths, per_hit)

    assignments = run_crowd(hits, annotations, random.Random(crowd_seed))
    # Every segment: exactly the required annotations, by distinct workers.
    annotators = defaultdict(list)
    for a in assignments:
        if a["status"] == "submitted":
            for segment in hits[a["hit"]]:
                annotators[segment].append(a["worker"])
    for hit in hits:
        for segment in hit:
            assert len(annotators[segment]) == annotations
            assert len(set(annotators[segment])) == annotations
    # No worker is ever shown two segments of one conversation, in any assignment they held.
    shown = defaultdict(list)
    for a in assignments:
        shown[a["worker"]].extend(s.conversation for s in hits[a["hit"]])
    for worker, convs in shown.items():
        assert len(convs) == len(set(convs)), f"worker {worker} saw a conversation twice"
    # Each segment of a conversation is rated by different workers.
    by_conversation = defaultdict(list)
    for segment, workers in annotators.items():
        by_conversation[segment.conversation].extend(workers)
    assert all(len(w) == len(set(w)) for w in by_conversation.values())
    # At most CAP HITs per worker (returned and expired ones do not count, as in the flow).
    per_worker = Counter(a["worker"] for a in assignments if a["status"] == "submitted")
    assert max(per_worker.values()) <= CAP


def test_the_paper_design_gives_hits_of_twenty_mixed_segments():
    # 3 systems with self-chat: 6 pairs × 10 conversations, plus 20 human–human ones → 80 conversations.
    conversations = [SourceConversation(f"bb:{i}", False) for i in range(60)] + [
        SourceConversation(f"hh:{i}", True) for i in range(20)
    ]
    hits = pack_segments(conversations, [2, 3, 5], 20, random.Random(0))
    assert len(hits) == 12 and {len(h) for h in hits} == {20}
    check_packing(hits, conversations, [2, 3, 5], 20)
    for hit in hits:
        assert sorted(Counter(s.k for s in hit).values()) == [6, 7, 7]
        assert Counter(s.conversation.startswith("hh:") for s in hit)[True] == 5
    # Seeded: the same seed packs the same HITs.
    assert hits == pack_segments(conversations, [2, 3, 5], 20, random.Random(0))


def test_too_little_human_material_is_refused_with_the_fix():
    conversations = [SourceConversation(f"bb:{i}", False) for i in range(50)] + [SourceConversation("hh:0", True)]
    with pytest.raises(ConfigError, match="human_count"):
        pack_segments(conversations, [2, 3, 5], 20, random.Random(0))


def test_conflicts_names_the_conversations_already_seen():
    assert conflicts({"a", "b", "c"}, {"c", "d"}) == {"c"}
    assert conflicts({"a"}, set()) == set()
