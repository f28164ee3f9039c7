"""The crowd's share where the judge is unsure (``judge.select: uncertainty``): a uniform pilot first, then a
second wave drawn from the judge's confidence once the pilot's labels are in.

Everything is drawn by the sampling unit, the cluster (:func:`hitkit.judges.design.clusters`: Spot The
Bot's conversation, whose segments go to the crowd together; a unit its own elsewhere). The study is created
with the pilot only (:func:`hitkit.judges.human_subset.human_subset`: ``judge.pilot`` of each stratum's
budget of clusters, uniformly at random). When the pilot's work is all in and decided — the moment a
uniform study would complete — the scheduler calls :func:`draw_if_due`: each cluster's judge score, human
score and confidence come from the protocol's judge module (``selection(units, tables, judge)``, indexed by
cluster key; pairwise's confidence is the judge's own from its logprobs where its labels carry one,
``judge.confidence``, else its agreement across display orders: the event records which), the pilot's
squared judge errors (Y − f)² from its human labels, and :func:`hitkit.analysis.ppi_active.second_wave` gives
every cluster its probability π of going to people, cross-fitted over two seeded halves of the clusters so
that no cluster's π depends on its own pilot label. Each cluster is then drawn once (a seeded Bernoulli(π₂)
per cluster key); the units of the drawn clusters not already labelled become units and HITs of the study,
in the same transaction as the ``judge_second_wave`` event that records every unit's π (its cluster's). The
export's ``judge`` table carries π as ``human_probability`` (:func:`hitkit.judges.design.probabilities`), and
the analysis weights by it (:mod:`hitkit.analysis.ppi_active`; by conversation,
:mod:`hitkit.analysis.ppi_weighted_ratio`). A study drawn once is never drawn again (resume, a second
scheduler).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from sqlalchemy import select
from sqlalchemy.orm import Session

from hitkit.db.models import Conversation, Hit, Study, Unit
from hitkit.events import add_event
from hitkit.judges.design import EVENT, clusters, half, judged_units, recorded, uncertain
from hitkit.protocols import PROTOCOLS, task_for
from hitkit.protocols.base import UnitSpec
from hitkit.study.config import StudyConfig


def wave(
    config: StudyConfig, units: Sequence[UnitSpec], scores: pd.DataFrame, pilot: set[str]
) -> tuple[dict[str, list[UnitSpec]], np.ndarray, np.ndarray]:
    """The second wave of a study whose pilot (unit keys) is in, pure: its clusters
    (:func:`hitkit.judges.design.clusters`), each cluster's seeded draw (Bernoulli(π₂), keyed by the study's seed
    and the cluster's key) and its probability π of going to people, both in the clusters' order. ``scores``:
    the judge module's ``selection`` (judge, confidence and human per cluster key). Also what ``hitkit plan``
    runs to simulate the wave."""
    from hitkit.analysis.ppi_active import second_wave
    from hitkit.judges.human_subset import budgets

    assert config.judge is not None
    module = PROTOCOLS[config.task].module("judge")
    groups = clusters(config, units)
    keys = list(groups)
    scores = scores.reindex(keys)
    first = np.array([any(u.key in pilot for u in groups[k]) for k in keys])
    sq = ((scores["human"] - scores["judge"]) ** 2).to_numpy(float)
    pi2, pi = second_wave(
        scores["confidence"].to_numpy(float),
        np.where(first, sq, np.nan),
        first,
        np.array([half(config.seed, k) for k in keys]),
        np.array([module.stratum(groups[k][0]) for k in keys]),
        budgets(config, units),
        pi_min=config.judge.pi_min,
    )
    draw = np.array([random.Random(f"{config.seed}:judge:second:{k}").random() for k in keys]) < pi2
    return groups, first | draw, pi


def draw_if_due(session: Session, study: Study, config: StudyConfig, store_work: Callable[..., object]) -> int:
    """Draw the second wave if the study has one and has not drawn it (call once the pilot's work is all in
    and decided): add the drawn units and their HITs with ``store_work`` (the study room's
    :func:`hitkit.study.stored.store_work`, handed in by the scheduler: the judges sit below the stored
    study, which asks them for the crowd's share) and record every π; the number of units added."""
    if not uncertain(config) or recorded(session, study.id) is not None:
        return 0
    from hitkit.judges.judging import confidence_source, judge_table

    judge, task = config.judge, task_for(config)
    assert judge is not None  # uncertain(config)
    module = PROTOCOLS[config.task].module("judge")
    units = judged_units(session, study, config)
    pilot = set(session.scalars(select(Unit.key).where(Unit.study_id == study.id)))
    scores = module.selection(
        units, task.export(session, study), judge_table(session, study, config, weights=False, every_judge=True)
    )
    groups, drawn, pi = wave(config, units, scores, pilot)
    new = [u for k, d in zip(groups, drawn) for u in groups[k] if d and u.key not in pilot]
    if new:
        last = session.scalar(select(Hit.index).where(Hit.study_id == study.id).order_by(Hit.index.desc()).limit(1))
        conversations = dict(
            session.execute(select(Conversation.key, Conversation.id).where(Conversation.study_id == study.id)).all()
        )
        hits = task.pack(new, random.Random(f"{config.seed}:judge:second"))
        store_work(session, study.id, config, new, hits, conversations, first_index=(last or 0) + 1)
    add_event(
        session,
        study.id,
        EVENT,
        "scheduler",
        {
            "pi": {u.key: round(float(p), 12) for k, p in zip(groups, pi) for u in groups[k]},
            "pilot": sorted(pilot),
            "drawn": [u.key for u in new],
            "expected_labels": float(pi.sum()),
            "cluster": getattr(module, "CLUSTER_NAME", "items"),
            "pi_min": judge.pi_min,
            "confidence": confidence_source(session, study),
        },
    )
    session.flush()
    return len(new)
