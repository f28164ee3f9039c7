"""Prolific bonuses settled only from facts in a known unit: ``bonus_payments`` is in pence / cents.

A bonus is set up in major units (``csv_bonuses``: 5.00 for £5.00), but a submission's ``bonus_payments``
lists what was paid in pence / cents (Prolific's OpenAPI document: "Returned in pence / cents"). Read in
either unit, a 5-pence payment also counted as £5.00: on one submission, pay £0.05, then book £5.00 and
let its pay call vanish, and ``hitkit sync`` settled the £5.00 as paid with no pay call behind it.

Here every pair of amounts whose minor and major readings collide (n pence and £n) is checked against
the pure rules, and against the Prolific fake with the second pay call lost (Prolific paid, the answer
never came), refused (an answer: nothing paid) or black-holed (no answer, nothing paid), in both orders,
one sync at a time and with several ``hitkit sync`` processes at once. The assertions are on money as both
books hold it: the fake's record of what it paid and the Payment ledger.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal

import pytest
from sqlalchemy import select, update

from hitkit.db.models import Event, Payment, Study, utcnow
from hitkit.db.session import session_scope
from hitkit.money.bonuses import grant_bonus
from hitkit.providers.base import BonusOutcome, PendingBonus
from hitkit.providers.prolific import bonuses as prolific_bonuses
from hitkit.providers.prolific import client as prolific_api
from hitkit.providers.prolific.bonuses import BONUS_SETTLE_S, attribute, same_amount
from hitkit.providers.prolific.client import ProlificError
from hitkit.providers.prolific.provider import ProlificProvider
from hitkit.running.scheduler import tick
from hitkit.running.sync import describe, sync_study
from hitkit.study import lease
from tests.fakes.prolific import TOKEN, FakeProlificServer
from tests.test_one_leader import assert_finished_or_stood_down, finish, syncs
from tests.test_provider_faults import REASON, TIMEOUT_S, assignment_ids, prolific_submit
from tests.test_provider_sync import on_prolific, start

PAY = r"POST /bulk-bonus-payments/.*/pay/"
COLLIDING = [(Decimal(n) / 100, Decimal(n)) for n in (1, 5, 10, 25, 50, 99, 100, 150, 999)]
"""n pence and £n: the pairs whose minor and major readings of ``bonus_payments`` collide."""


@pytest.fixture(autouse=True)
def _quick(monkeypatch):
    monkeypatch.setattr(ProlificProvider, "timeout_s", TIMEOUT_S)  # a black-holed call is given up after this
    monkeypatch.setattr(prolific_api.time, "sleep", lambda s: None)
    monkeypatch.setenv("PROLIFIC_TOKEN", TOKEN)


@pytest.fixture
def prolific():
    with FakeProlificServer() as fake:
        yield fake
        assert fake.violations == []  # every request and answer matched Prolific's OpenAPI document


# The rules, for every colliding pair ----------------------------------------------------------------
def test_a_bonus_payments_entry_is_read_in_pence_only_for_every_colliding_pair():
    for n in range(1, 100_001):
        small, large = Decimal(n) / 100, Decimal(n)
        assert same_amount(n, small) and same_amount(float(n), small)  # documented: a number, in pence
        assert not same_amount(n, large)  # n pence is never £n
        assert same_amount(n * 100, large) and not same_amount(n * 100, small)
    for junk in ("five", None, "NaN", "Infinity", [5], {"amount": 5}):
        assert not same_amount(junk, Decimal("0.05"))


def pending(amount: Decimal, paid_alike: int = 0, sending_alike: int = 0) -> PendingBonus:
    sent = utcnow() - dt.timedelta(seconds=10)
    return PendingBonus("k", "w", "s", amount, "sending", "b", paid_alike, sent, sending_alike)


def shown_of(entries: list[int], amount: Decimal) -> int:
    return sum(1 for e in entries if same_amount(e, amount))


@pytest.mark.parametrize("small, large", COLLIDING)
def test_a_payment_of_the_colliding_amount_never_settles_a_bonus_sent_without_an_answer(small, large):
    for paid, vanished in ((small, large), (large, small)):
        entries = [int(paid * 100)]  # the first bonus, paid and shown
        bonus = pending(vanished)
        within = attribute(shown_of(entries, vanished), bonus, bonus.sent_at)
        later = attribute(shown_of(entries, vanished), bonus, bonus.sent_at, utcnow() + dt.timedelta(hours=2))
        assert (within, later) == (BonusOutcome.UNKNOWN, BonusOutcome.UNPAID)
        # Once Prolific shows it (the call was lost, not black-holed), it is paid.
        entries.append(int(vanished * 100))
        assert attribute(shown_of(entries, vanished), bonus, bonus.sent_at) is BonusOutcome.PAID


def test_a_payment_that_could_be_either_of_two_bonuses_sent_without_an_answer_is_left_for_review():
    amount = Decimal("0.40")
    both_waiting = pending(amount, paid_alike=0, sending_alike=1)
    assert attribute(1, both_waiting, both_waiting.sent_at) is BonusOutcome.AMBIGUOUS  # this one or its twin
    assert attribute(2, both_waiting, both_waiting.sent_at) is BonusOutcome.PAID  # both were paid
    # A twin the ledger already holds paid accounts for one payment.
    one_paid = pending(amount, paid_alike=1, sending_alike=0)
    assert attribute(1, one_paid, one_paid.sent_at) is BonusOutcome.UNKNOWN
    assert attribute(2, one_paid, one_paid.sent_at) is BonusOutcome.PAID
    late = utcnow() + dt.timedelta(seconds=BONUS_SETTLE_S + 60)
    assert attribute(1, both_waiting, both_waiting.sent_at, late) is BonusOutcome.AMBIGUOUS  # never guessed


# Against the fake, one sync at a time -------------------------------------------------------------
def one_submission(tmp_path, database_url, prolific) -> tuple[str, int]:
    web, config, secret = start(tmp_path, database_url, on_prolific(prolific))
    try:
        tick(database_url, "ab-demo", web.url)
        [session_id] = prolific_submit(web.url, prolific, ["P1"], config, secret)
        tick(database_url, "ab-demo", web.url)
    finally:
        web.stop()
    [a] = assignment_ids(database_url)
    return session_id, a


def break_next_pay(prolific, fault: str):
    """The next pay call ``lost`` (Prolific pays, the answer is a 502), ``refused`` (answered 400, nothing
    paid) or ``black-holed`` (no answer before the client gives up, nothing paid); the stall to release."""
    if fault == "lost":
        prolific.fail_next(PAY, 502, after=True)
    elif fault == "refused":
        prolific.fail_next(PAY, 400)
    else:
        return prolific.stall_next(PAY, before=True)
    return None


def grant_then_break(database_url: str, prolific, assignment: int, first: Decimal, second: Decimal, fault: str):
    """Grant ``first`` (paid), then ``second``, whose pay call meets ``fault`` (:func:`break_next_pay`)."""
    grant_bonus(database_url, "ab-demo", assignment, first, REASON, tag=1)
    stall = break_next_pay(prolific, fault)
    try:
        with pytest.raises(ProlificError):
            grant_bonus(database_url, "ab-demo", assignment, second, REASON, tag=2)
    finally:
        if stall is not None:
            stall.release.set()


def bonus_rows(database_url: str) -> list[Payment]:
    with session_scope(database_url) as s:
        rows = s.scalars(select(Payment).where(Payment.kind == "bonus").order_by(Payment.id)).all()
        s.expunge_all()
        return list(rows)


def assert_books_agree(database_url: str, prolific, amounts: dict[str, list[Decimal]]) -> None:
    """Each amount paid exactly once on Prolific, on its own submission (``amounts`` by session id), and the
    ledger marks paid exactly what Prolific paid."""
    for session_id, paid in amounts.items():
        assert sorted(prolific.submissions[session_id]["bonus_payments"]) == sorted(int(a * 100) for a in paid)
    everything = Counter(a for paid in amounts.values() for a in paid)
    paid_on_prolific = Counter(v for b in prolific.paid for _, v in prolific.bonuses[b]["rows"])
    assert paid_on_prolific == everything
    rows = bonus_rows(database_url)
    assert {r.state for r in rows} <= {"paid", "confirmed"}
    assert sorted(r.provider_ref for r in rows) == sorted(prolific.paid)  # every row names a payment made
    assert Counter(Decimal(r.amount) for r in rows) == everything


FAULTS = ["lost", "refused", "black-holed"]
ORDERS = ["small first", "large first"]


def test_colliding_amounts_on_one_submission_are_each_paid_once_whatever_the_pay_call_met(
    tmp_path, database_url, prolific, monkeypatch
):
    """Every fault in both orders, each on a submission of its own in one study (one set-up, and a sync that
    settles them all must attribute each payment to its own submission): 5p and £5.00, or £5.00 and 5p, the
    second's pay call lost, refused or black-holed."""
    small, large = Decimal("0.05"), Decimal("5.00")
    cases = [(fault, order) for fault in FAULTS for order in ORDERS]
    web, config, secret = start(tmp_path, database_url, on_prolific(prolific))
    try:
        tick(database_url, "ab-demo", web.url)
        sessions = prolific_submit(web.url, prolific, [f"P{i}" for i in range(len(cases))], config, secret)
        tick(database_url, "ab-demo", web.url)
    finally:
        web.stop()
    amounts, keys = {}, {fault: [] for fault in FAULTS}
    for (fault, order), session_id, a in zip(cases, sessions, assignment_ids(database_url), strict=True):
        first, second = (small, large) if order == "small first" else (large, small)
        paid_before = len(prolific.paid)
        grant_then_break(database_url, prolific, a, first, second, fault)
        shown = [int(first * 100), int(second * 100)] if fault == "lost" else [int(first * 100)]
        assert prolific.submissions[session_id]["bonus_payments"] == shown
        assert len(prolific.paid) - paid_before == (2 if fault == "lost" else 1)
        keys[fault].append(bonus_rows(database_url)[-1].idempotency_key)
        amounts[session_id] = [first, second]

    report = sync_study(database_url, "ab-demo", bonus_min_age_s=0)  # also confirms each first, shown paid
    # Lost: Prolific shows it, confirmed, nothing paid again. Refused: an answer said nothing was paid, paid now,
    # once. Black-holed: no answer and not shown, neither paid nor marked paid, left for review within the window.
    assert set(keys["lost"]) <= set(report.bonuses_confirmed)
    assert sorted(report.bonuses_paid) == sorted(keys["refused"])
    assert sorted(report.needs_review) == sorted(keys["black-holed"])
    assert not set(keys["black-holed"]) & set(report.bonuses_confirmed)
    assert {r.state for r in bonus_rows(database_url) if r.idempotency_key in keys["black-holed"]} == {"sending"}
    assert len(prolific.paid) == sum(1 if fault == "black-holed" else 2 for fault, _ in cases)
    assert "provider cannot say whether it was paid" in describe(report)
    monkeypatch.setattr(prolific_bonuses, "BONUS_SETTLE_S", 0)  # past the window: they were never made
    assert sorted(sync_study(database_url, "ab-demo", bonus_min_age_s=0).bonuses_paid) == sorted(keys["black-holed"])
    for _ in range(2):  # nothing further, however often sync runs
        again = sync_study(database_url, "ab-demo", bonus_min_age_s=0)
        assert again.bonuses_paid == [] and again.needs_review == []
    assert_books_agree(database_url, prolific, amounts)


def test_two_bonuses_of_one_amount_sent_without_an_answer_and_one_payment_shown_wait_for_a_coordinator(
    tmp_path, database_url, prolific, monkeypatch
):
    """Two 40p bonuses on one submission, both pay calls unanswered, Prolific shows one 40p payment: it
    could be either, so neither is marked paid and nothing is paid; the review event names the cause."""
    session_id, a = one_submission(tmp_path, database_url, prolific)
    prolific.fail_next(PAY, 502, after=True)  # the first is paid, its answer lost
    with pytest.raises(ProlificError):
        grant_bonus(database_url, "ab-demo", a, Decimal("0.40"), REASON, tag=1)
    stall = prolific.stall_next(PAY, before=True)  # the second never reaches Prolific
    try:
        with pytest.raises(ProlificError):
            grant_bonus(database_url, "ab-demo", a, Decimal("0.40"), REASON, tag=2)
    finally:
        stall.release.set()
    monkeypatch.setattr(prolific_bonuses, "BONUS_SETTLE_S", 0)  # even past the window: never guessed
    for _ in range(2):
        report = sync_study(database_url, "ab-demo", bonus_min_age_s=0)
        assert report.bonuses_paid == report.bonuses_confirmed == []
        assert len(report.needs_review) == 2 and report.ambiguous == report.needs_review
    assert "could be this bonus or another one" in describe(report)
    assert len(prolific.paid) == 1 and prolific.submissions[session_id]["bonus_payments"] == [40]
    assert {r.state for r in bonus_rows(database_url)} == {"sending"}
    with session_scope(database_url) as s:
        why = [e.data["why"] for e in s.scalars(select(Event).where(Event.kind == "bonus_needs_review"))]
    assert why == ["ambiguous", "ambiguous"]


# Several `hitkit sync` processes at once -----------------------------------------------------------
@pytest.mark.slow
def test_concurrent_syncs_settle_colliding_amounts_each_paid_once(tmp_path, database_url, prolific):
    """Four submissions, each paid n pence, then £n booked with its pay call lost, refused or black-holed
    (a fourth: £n first, then n pence black-holed); four ``hitkit sync`` processes at once, past the settling
    window: each amount paid exactly once, and nothing marked paid that Prolific did not pay."""
    web, config, secret = start(tmp_path, database_url, on_prolific(prolific))
    try:
        tick(database_url, "ab-demo", web.url)
        sessions = prolific_submit(web.url, prolific, ["P1", "P2", "P3", "P4"], config, secret)
        tick(database_url, "ab-demo", web.url)
    finally:
        web.stop()
    plan = [
        (Decimal("0.05"), Decimal("5.00"), "lost"),
        (Decimal("0.05"), Decimal("5.00"), "refused"),
        (Decimal("0.05"), Decimal("5.00"), "black-holed"),
        (Decimal("1.00"), Decimal("0.01"), "black-holed"),
    ]
    for a, (first, second, fault) in zip(assignment_ids(database_url), plan):
        grant_then_break(database_url, prolific, a, first, second, fault)
    with session_scope(database_url) as s:
        # Recorded and sent two hours ago: past sync's guard for fresh bonuses and Prolific's settling window.
        long_ago = utcnow() - dt.timedelta(hours=2)
        s.execute(update(Payment).values(created_at=long_ago))
        s.execute(update(Payment).where(Payment.state == "sending").values(state_at=long_ago))
        study_id = s.scalar(select(Study.id))
    lease.release(database_url, study_id)
    procs = syncs(tmp_path / "study.yaml", 4, lease_s=10.0)
    assert_finished_or_stood_down(procs, finish(procs))
    for session_id, (first, second, _fault) in zip(sessions, plan):
        assert sorted(prolific.submissions[session_id]["bonus_payments"]) == sorted(
            [int(first * 100), int(second * 100)]
        )
    assert len(prolific.paid) == 8
    rows = bonus_rows(database_url)
    assert {r.state for r in rows} <= {"paid", "confirmed"}
    assert sorted(r.provider_ref for r in rows) == sorted(prolific.paid)
