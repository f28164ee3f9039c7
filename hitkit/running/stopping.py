"""A running study's stopping rule (the study file's ``stop:``) and its adaptive design (``design: adaptive``).

The rule's statistics are :mod:`hitkit.analysis.sequential`; the protocol's ``sequential`` module
turns its export tables into the comparisons the rule watches. This module reads the study's rows and
answers three questions for the scheduler, the dashboard and the export:

* where each decision stands now (:func:`rule_state`, recomputed only when counted work grows);
* whether the rule has fired, and if it fires now, what to record (:func:`check`): the scheduler
  then withdraws the HITs it has not posted and closes the posted ones to newcomers (work already
  started may still be handed in), and on Prolific the study stops growing places and is stopped;
* in which order to post the pending HITs of an adaptive design (:func:`order_pending`): first those
  whose comparisons the open decision needs most, every HIT as packed under the protocol's
  constraints (balanced HITs with their QC slot, no worker seeing two segments of one conversation).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.analysis.sequential import RuleState, as_table, intervals, settle
from hitkit.db.models import Assignment, Event, Hit, HitUnit, Study, Unit
from hitkit.errors import ConfigError
from hitkit.events import add_event
from hitkit.protocols import PROTOCOLS
from hitkit.study.sections import StopConfig
from hitkit.study.stored import StudyContext
from hitkit.tables.schema import HANDED_IN_STATUSES

FIRED = "stop_rule_fired"
"""The event that records the rule's firing: its data say when, after how many HITs, and what was decided."""

_lock = threading.Lock()
_cache: dict[tuple[str, int], tuple[tuple[int, int], RuleState | None]] = {}
"""(database, study) -> (the counted work it was computed on, the rule's state): one server may serve
several databases, each with its own study 1."""


def sequential_module(config):
    return PROTOCOLS[config.task].module("sequential")


def watched_systems(ctx: StudyContext) -> list[str]:
    """The systems the rule compares: the study's systems, less any quality-control bot."""
    control = set(ctx.task.control_systems())
    return [s.name for s in ctx.config.systems if s.name not in control]


def unit_payloads(session: Session, study_id: int) -> list[Mapping]:
    """Every unit of the study's material (the fixed design the rule's sizes are planned on)."""
    return list(session.scalars(select(Unit.payload).where(Unit.study_id == study_id)))


def counted_hits(session: Session, study_id: int) -> int:
    """Assignments whose work is handed in and counts (submitted, approved or rejected; confirmed or not)."""
    return (
        session.scalar(
            select(func.count())
            .select_from(Assignment)
            .join(Hit)
            .where(Hit.study_id == study_id, Assignment.status.in_(HANDED_IN_STATUSES))
        )
        or 0
    )


def in_arrival_order(session: Session, study_id: int, tables: Mapping) -> dict:
    """The export's tables with ``assignments`` in the order the work was handed in (``submitted_at``, then
    id): the order in which the rule takes HITs (a HIT's observation joins when it arrives; a later HIT never
    changes an earlier look). A protocol's export has no ``assignments`` table of its own (the tidy export
    writes it apart, by HIT), so one is made here: the handed-in assignments' ids and statuses."""
    tables = dict(tables)
    rows = session.execute(
        select(Assignment.id, Assignment.provider_assignment_id, Assignment.status, Assignment.submitted_at)
        .join(Hit)
        .where(Hit.study_id == study_id)
    ).all()
    far = dt.datetime.max
    when = {(p or str(i)): (t.replace(tzinfo=None) if t is not None else far, i) for i, p, _, t in rows}
    assignments = tables.get("assignments")
    if assignments is None:
        import pandas as pd  # here: the scheduler imports this module without pandas

        handed_in = [(p or str(i), status) for i, p, status, _ in rows if status in HANDED_IN_STATUSES]
        assignments = pd.DataFrame(handed_in, columns=["assignment_id", "status"])
    if not len(assignments):
        tables["assignments"] = assignments
        return tables
    key = assignments["assignment_id"].astype(str).map(lambda a: when.get(a, (far, 0)))
    tables["assignments"] = assignments.iloc[sorted(range(len(key)), key=lambda k: key.iloc[k])].reset_index(drop=True)
    return tables


def compute(session: Session, ctx: StudyContext) -> RuleState | None:
    """The stop rule's state over the work handed in so far (None without a ``stop:`` section)."""
    stop = ctx.config.stop
    if stop is None:
        return None
    module = sequential_module(ctx.config)
    study = session.get_one(Study, ctx.study_id)
    tables = in_arrival_order(session, ctx.study_id, ctx.task.export(session, study))
    systems = watched_systems(ctx)
    plan = module.planned(unit_payloads(session, ctx.study_id), ctx.config)
    # A pair the material never compares (a system left out of generation, say) has nothing to wait for.
    comparisons = [c for c in module.comparisons(tables, systems, plan, config=ctx.config) if c.planned > 0]
    compared = {s for c in comparisons for s in (c.a, c.b)}
    systems = [s for s in systems if s in compared]
    pair = named_pair(stop)
    if pair is not None:
        comparisons = [c for c in comparisons if {c.a, c.b} == set(pair)]
    return settle(intervals(comparisons, stop.alpha), stop.decision, systems, pair)


def named_pair(stop: StopConfig) -> tuple[str, str] | None:
    """The two systems of ``decision: pair`` (None for the other decisions). StopConfig's validator names
    exactly two for ``pair`` and none otherwise; narrowed here so that a change to it fails clearly."""
    if stop.systems is None:
        if stop.decision == "pair":
            raise ConfigError("stop: decision pair needs stop.systems, the two systems it decides between")
        return None
    if len(stop.systems) != 2:
        raise ConfigError(f"stop.systems names {len(stop.systems)} systems; it names the two of decision: pair")
    return stop.systems[0], stop.systems[1]


def rule_state(session: Session, ctx: StudyContext) -> RuleState | None:
    """:func:`compute`, cached until more work is handed in or confirmed."""
    if ctx.config.stop is None:
        return None
    counted, confirmed = session.execute(
        select(func.count(), func.count(Assignment.confirmed_at))
        .select_from(Assignment)
        .join(Hit)
        .where(Hit.study_id == ctx.study_id, Assignment.status.in_(HANDED_IN_STATUSES))
    ).one()
    done = (counted, confirmed)
    key = (session.get_bind().engine.url.render_as_string(hide_password=True), ctx.study_id)
    with _lock:
        cached = _cache.get(key)
    if cached is not None and cached[0] == done:
        return cached[1]
    state = compute(session, ctx)
    with _lock:
        _cache[key] = (done, state)
    return state


def fired_event(session: Session, study_id: int) -> Event | None:
    """The event of the rule's firing, if it has fired."""
    return session.scalar(select(Event).where(Event.study_id == study_id, Event.kind == FIRED).limit(1))


def check(session: Session, ctx: StudyContext, now: dt.datetime) -> bool:
    """True when the rule has fired (now or before). Firing now records the event and withdraws or
    closes the study's open HITs in this session; the caller tells the provider (:func:`left_open_on_provider`)."""
    stop = ctx.config.stop
    if stop is None:
        return False
    if fired_event(session, ctx.study_id) is not None:
        return True
    hits = counted_hits(session, ctx.study_id)
    if hits < stop.min_hits:
        return False
    state = rule_state(session, ctx)
    if state is None or not state.fired:
        return False
    withdrawn = closed = 0
    for hit in session.scalars(select(Hit).where(Hit.study_id == ctx.study_id, Hit.status.in_(("pending", "posted")))):
        if hit.status == "pending":
            hit.status, withdrawn = "withdrawn", withdrawn + 1
        else:
            hit.status, closed = "closed", closed + 1
    add_event(
        session,
        ctx.study_id,
        FIRED,
        "scheduler",
        {
            "decision": stop.decision,
            "outcome": state.outcome,
            "hits": hits,
            "at": now.isoformat(),
            "alpha": stop.alpha,
            "withdrawn": withdrawn,
            "closed": closed,
            "intervals": as_table(state),
        },
    )
    return True


CLOSED = "closed_on_provider"
"""The event that records a provider's acknowledgement of a closing: ``{"hit": id}`` or ``{"study": true}``."""


def left_open_on_provider(session: Session, study_id: int) -> tuple[list[tuple[int, str]], bool]:
    """What the rule closed that the provider has not acknowledged yet: (HIT id, provider id) of each
    closed HIT, and whether the study as a whole is still to be closed."""
    done = [e.data for e in session.scalars(select(Event).where(Event.study_id == study_id, Event.kind == CLOSED))]
    closed_hits = {d["hit"] for d in done if "hit" in d}
    hits = [
        (h, p)
        for h, p in session.execute(
            select(Hit.id, Hit.provider_hit_id).where(
                Hit.study_id == study_id, Hit.status == "closed", Hit.provider_hit_id.is_not(None)
            )
        )
        if h not in closed_hits and p is not None
    ]  # IS NOT NULL above; narrowed for the type checker
    return hits, not any(d.get("study") for d in done)


def order_pending(session: Session, ctx: StudyContext, pending: Sequence[Hit]) -> list[Hit]:
    """An adaptive design's posting order: the pending HITs that serve the open decision most first
    (the sum of the open pairs' needs over the pairs each HIT informs), then in their packed order."""
    state = rule_state(session, ctx)
    if state is None or not state.weights:
        return list(pending)
    module = sequential_module(ctx.config)
    ids = [h.id for h in pending]
    payloads: dict[int, list[Mapping]] = {i: [] for i in ids}
    for hit_id, payload in session.execute(
        select(HitUnit.hit_id, Unit.payload)
        .join(Unit, Unit.id == HitUnit.unit_id)
        .where(HitUnit.hit_id.in_(ids))
        .order_by(HitUnit.position)
    ):
        payloads[hit_id].append(payload)

    def need(hit: Hit) -> float:
        return sum(state.weights.get(p, 0.0) for p in set(module.hit_pairs(payloads[hit.id])))

    return sorted(pending, key=lambda h: (-need(h), h.index))


def _pending_outcome(state: RuleState | None) -> str:
    """Where an unfired rule stands, in words (a decision the data already make but the scheduler has not
    acted on yet is said to be so)."""
    if state is None:
        return ""
    if state.fired:
        return (
            f"{state.outcome}, by the data so far; not acted on yet (fewer counted assignments than min_hits, "
            f"or the study is not running)"
        )
    return state.outcome


def summary(session: Session, ctx: StudyContext) -> dict | None:
    """The rule, where it stands (or when it fired and what it decided) and what was spent against the
    fixed design: the dashboard shows it, the export writes it into ``study.json`` and the report and
    its methods paragraph state it. None without a ``stop:`` section."""
    from hitkit.analysis.sequential import BOUNDED_REFERENCE, DECISIONS
    from hitkit.money.amounts import cents
    from hitkit.money.ledger import committed_spend, worst_case

    stop = ctx.config.stop
    if stop is None:
        return None
    event = fired_event(session, ctx.study_id)
    state = rule_state(session, ctx)
    hits = session.scalars(select(Hit).where(Hit.study_id == ctx.study_id)).all()
    fixed = sum((worst_case(ctx, h) for h in hits), cents(Decimal(0)))
    module = sequential_module(ctx.config)
    return {
        "decision": stop.decision,
        "meaning": DECISIONS[stop.decision],
        "systems": stop.systems,
        "alpha": stop.alpha,
        "min_hits": stop.min_hits,
        "design": ctx.config.design,
        "method": getattr(module, "METHOD", None)
        or BOUNDED_REFERENCE + ", one observation per " + module.UNIT.rstrip("s"),
        "guarantee": _guarantee(module, adaptive=ctx.config.design == "adaptive"),
        "unit": module.UNIT,
        "bounds": getattr(module, "BOUNDS", None),
        "correction": "Bonferroni over the watched pairs",
        "fired": event is not None,
        "fired_at": event.data["at"] if event else None,
        "fired_after_hits": event.data["hits"] if event else None,
        "outcome": event.data["outcome"] if event else _pending_outcome(state),
        "study_status": session.get_one(Study, ctx.study_id).status,
        "counted_hits": counted_hits(session, ctx.study_id),
        "intervals": event.data["intervals"] if event else (as_table(state) if state else []),
        "now": as_table(state) if state else [],
        "fixed_design": {"hits": len(hits), "assignments": sum(h.max_assignments for h in hits), "cost": str(fixed)},
        "committed": str(cents(committed_spend(session, ctx))),
        "currency": ctx.config.provider.currency,
    }


def _guarantee(module, *, adaptive: bool) -> str:
    """The protocol's own statement of its rule's guarantee (Spot The Bot's test), else the per-worker
    sequence's; an adaptive design makes either approximate."""
    from hitkit.analysis.contributions import ADAPTIVE_CAVEAT, guarantee

    own = getattr(module, "GUARANTEE", None)
    if own is None:
        return guarantee(adaptive=adaptive)
    return own + (f" {ADAPTIVE_CAVEAT[0].upper()}{ADAPTIVE_CAVEAT[1:]}." if adaptive else "")


def outcome_line(
    *, fired: bool, counted: int, assignments: int, hits: int, outcome: str, spent: str, budget: str, currency: str
) -> str:
    """The stopping rule's outcome in one sentence, as ``launch`` and ``status`` print it. A HIT is a unit of
    work posted with its places; an assignment is one worker's take of a HIT, and the rule counts assignments
    handed in and not rejected (``stop.min_hits`` counts those too)."""
    if fired:
        return (
            f"Stopped after {counted} of {assignments} assignments ({hits} HITs in the fixed design): {outcome}; "
            f"spent {spent} of {budget} {currency}."
        )
    return (
        f"The stopping rule did not fire: the whole design ran ({assignments} assignments, {hits} HITs)"
        f"{'; ' + outcome if outcome else ''}; spent {spent} of {budget} {currency}."
    )


def outcome_of(session: Session, study_id: int, has_rule: bool = True) -> str | None:
    """:func:`outcome_line` for a study, read from its database; None for a study without a rule (``has_rule``
    False) whose rule has not fired."""
    from hitkit.db.models import Payment

    event = fired_event(session, study_id)
    if event is None and not has_rule:
        return None
    study = session.get_one(Study, study_id)
    hits, assignments = session.execute(
        select(func.count(Hit.id), func.coalesce(func.sum(Hit.max_assignments), 0)).where(Hit.study_id == study_id)
    ).one()
    spent = session.execute(
        select(func.coalesce(func.sum(Payment.amount), 0)).where(Payment.study_id == study_id, Payment.status == "paid")
    ).scalar_one()
    return outcome_line(
        fired=event is not None,
        counted=event.data["hits"] if event else counted_hits(session, study_id),
        assignments=int(assignments),
        hits=int(hits),
        outcome=event.data["outcome"] if event else "",
        spent=f"{Decimal(spent):.2f}",
        budget=str(study.budget),
        currency=study.currency,
    )
