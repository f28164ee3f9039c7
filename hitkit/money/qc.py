"""Quality control of a running study: which workers pass their protocol's check over the work counted
so far (``worker_qc`` of the protocol's analysis) and, with the study file's ``gold.qc`` rule, their
answers to gold items (``answers`` of the protocol's ``gold`` module; a worker fails if either check
fails). The dashboard shows it, the approval step's QC policy (:mod:`hitkit.money.qc_policy`) acts on
it, and the launch ends with its one-line summary."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Hit, Study
from hitkit.protocols import PROTOCOLS
from hitkit.study.stored import StudyContext
from hitkit.tables.schema import HANDED_IN_STATUSES


@dataclass
class QcSummary:
    """How many of the workers with counted work pass the task's quality check so far: ``workers`` and
    ``passed`` count the judged ones; ``by_worker`` maps a worker not judged yet (too little work for the
    check to tell) to None, and ``not_judged`` counts them."""

    method: str
    workers: int
    passed: int
    by_worker: dict[str, bool | None] = field(default_factory=dict)
    not_judged: int = 0

    @property
    def rate(self) -> float | None:
        return self.passed / self.workers if self.workers else None


# Quality control as it develops ------------------------------------------------------------------
_lock = threading.Lock()
_qc_cache: dict[tuple[str, int], tuple[tuple[int, int], QcSummary | None]] = {}


def qc_summary(session: Session, ctx: StudyContext, cache_key: str = "") -> QcSummary | None:
    """The task's quality check over the work counted so far, recomputed only when that work grows
    or more of it is confirmed (``hitkit confirm`` changes what counts without finishing anything)."""
    counted, confirmed = session.execute(
        select(func.count(), func.count(Assignment.confirmed_at))
        .select_from(Assignment)
        .join(Hit)
        .where(Hit.study_id == ctx.study_id, Assignment.status.in_(HANDED_IN_STATUSES))
    ).one()
    done = (counted, confirmed)
    with _lock:
        cached = _qc_cache.get((cache_key, ctx.study_id))
    if cached is not None and cached[0] == done:
        return cached[1]
    result = _compute_qc(session, ctx) if done[0] else None
    with _lock:
        _qc_cache[(cache_key, ctx.study_id)] = (done, result)
    return result


def _compute_qc(session: Session, ctx: StudyContext) -> QcSummary | None:
    study = session.get_one(Study, ctx.study_id)
    tables = ctx.task.export(session, study)
    proto = PROTOCOLS[ctx.config.task]
    checked = proto.module("analysis").worker_qc(tables, ctx.config)
    gold = ctx.config.gold
    if gold is not None and (gold.qc.upper_below is not None or gold.qc.misses is not None):
        from hitkit.analysis.gold import combine_verdicts, gold_accuracy, gold_verdicts, verdict_rule

        answered = gold_accuracy(proto.module("gold").answers(tables, ctx.config))
        verdicts = gold_verdicts(answered, upper_below=gold.qc.upper_below, misses=gold.qc.misses, level=gold.qc.level)
        rule = verdict_rule(gold.qc.upper_below, gold.qc.misses, gold.qc.level)
        if checked is None and not verdicts:
            return None
        method, own = checked if checked is not None else ("", {})
        checked = ("; ".join(filter(None, (method, rule))), combine_verdicts(own, verdicts))
    if checked is None:
        return None
    method, by_worker = checked
    judged = [ok for ok in by_worker.values() if ok is not None]
    return QcSummary(method, len(judged), sum(judged), dict(by_worker), len(by_worker) - len(judged))
