"""The ledger is the only writer of money, its one approve path guards every approval, and bonus keys
written by an older hitkit are still recognised (nothing is paid twice after an upgrade)."""

from __future__ import annotations

import ast
import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import select

from hitkit import dashboard as dash
from hitkit.db.models import Assignment, Event, Payment, utcnow
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.money import bonuses, ledger, payments
from hitkit.providers.base import ProviderWork, WorkStatus
from hitkit.providers.simulated import SimulatedProvider
from tests.test_dashboard import do_hit, make_study

ROOT = Path(__file__).resolve().parent.parent
LATER = utcnow() + dt.timedelta(days=2)


def payment_writes(path: Path) -> list[int]:
    """Lines of ``path`` that construct a Payment row or insert into its table."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        args = [a.id for a in node.args if isinstance(a, ast.Name)]
        if (
            name == "Payment"
            or (name == "insert" and "Payment" in args)
            or (name == "insert" and isinstance(func, ast.Attribute) and "payment" in ast.unparse(func.value).lower())
        ):
            lines.append(node.lineno)
    return lines


def test_no_module_but_the_ledger_writes_payment_rows():
    found = {
        str(p.relative_to(ROOT)): payment_writes(p)
        for folder in ("hitkit", "server")
        for p in sorted((ROOT / folder).rglob("*.py"))
    }
    for ledger_module in ("hitkit/money/ledger.py", "hitkit/money/bonuses.py"):  # rewards and fees; bonuses
        assert found.pop(ledger_module), f"the scan no longer sees the ledger's own writes in {ledger_module}"
    assert {path: lines for path, lines in found.items() if lines} == {}


def test_the_budget_ceiling_is_one_pure_rule():
    assert ledger.within_budget(Decimal("9.00"), Decimal("1.00"), Decimal("10.00"))
    assert not ledger.within_budget(Decimal("9.00"), Decimal("1.01"), Decimal("10.00"))
    assert ledger.hits_covered([Decimal(3)] * 4, Decimal(1), Decimal(10)) == 3
    assert ledger.hits_covered([Decimal(20), Decimal(1)], Decimal(0), Decimal(10)) == 0  # in order: none skipped


def test_bonus_keys_follow_one_scheme_and_know_their_old_names():
    assert ledger.bonus_key(3, 17) == "bonus:3:17:1"
    assert ledger.bonus_key(3, 17, "settle") == "bonus:3:17:settle"
    assert ledger.fee_key("bonus:3:17:1") == "bonus:3:17:1:fee"
    assert payments.legacy_keys("bonus:3:17:settle") == ["settle:3:17"]
    assert payments.legacy_keys("bonus:3:17:1") == []


def platform_shows(monkeypatch, worker: str | None, status: WorkStatus = WorkStatus.SUBMITTED) -> list:
    """The simulated platform lists every assignment as ``worker``'s (None: as the arriving worker's); records approvals."""
    approved = []
    monkeypatch.setattr(
        SimulatedProvider, "work_of", lambda self, pid: ProviderWork(pid, worker or pid.rsplit("-", 1)[0], status)
    )
    monkeypatch.setattr(SimulatedProvider, "approve", lambda self, pid, feedback="": approved.append(pid))
    return approved


def ledger_rows(database_url: str, assignment_id: int) -> dict[str, str]:
    with session_scope(database_url) as s:
        return {p.kind: p.status for p in s.scalars(select(Payment).where(Payment.assignment_id == assignment_id))}


def test_approval_needs_the_platform_to_show_the_work_as_this_workers(tmp_path, database_url, monkeypatch):
    ctx = make_study(tmp_path, database_url, schedule={"approve_after_s": 3600})
    a = do_hit(database_url, ctx, "W-1")
    approved = platform_shows(monkeypatch, "W-someone-else")
    assert ledger.approve(database_url, ctx, a, utcnow()) == "waiting"  # the review window first
    assert ledger.approve(database_url, ctx, a, LATER) == "refused"
    with pytest.raises(dash.ActionError, match="another worker"):
        dash.approve_assignment(database_url, ctx, a)  # the coordinator gets the same check
    platform_shows(monkeypatch, None, WorkStatus.WORKING)
    with pytest.raises(dash.ActionError, match="not handed in"):
        dash.approve_assignment(database_url, ctx, a)
    assert approved == [] and ledger_rows(database_url, a) == {}
    with session_scope(database_url) as s:
        held = [e.data for e in s.scalars(select(Event).where(Event.kind == "approve_held"))]
        assert s.get(Assignment, a).status == "submitted"
    assert held == [{"assignment": a, "reason": "the provider records another worker on this assignment"}]

    approved = platform_shows(monkeypatch, None)
    assert ledger.approve(database_url, ctx, a, LATER) == "approved"
    assert len(approved) == 1
    assert ledger_rows(database_url, a) == {"reward": "paid", "fee": "paid"}
    assert ledger.approve(database_url, ctx, a, LATER) == "gone"  # a repeat pays nothing
    assert len(approved) == 1


def test_the_dashboards_override_is_explicit_and_logged(tmp_path, database_url, monkeypatch):
    ctx = make_study(tmp_path, database_url, schedule={"approve_after_s": 3600})
    a = do_hit(database_url, ctx, "W-1")
    approved = platform_shows(monkeypatch, "W-someone-else")
    with pytest.raises(HitkitError, match="only a coordinator"):
        ledger.approve(database_url, ctx, a, LATER, override_platform="trust me")
    with pytest.raises(HitkitError, match="needs a reason"):
        dash.approve_assignment(database_url, ctx, a, override_platform="  ")
    reason = "Prolific's page shows the submission handed in by W-1; its listing lags"
    assert dash.approve_assignment(database_url, ctx, a, override_platform=reason) == f"assignment {a} approved"
    assert len(approved) == 1 and ledger_rows(database_url, a) == {"reward": "paid", "fee": "paid"}
    with session_scope(database_url) as s:
        overrides = s.scalars(select(Event).where(Event.kind == "approve_override")).all()
        decided = s.scalars(select(Event).where(Event.kind == "assignment_approved")).all()
        assert [(e.actor, e.data) for e in overrides] == [("dashboard", {"assignment": a, "reason": reason})]
        assert [e.actor for e in decided] == ["dashboard"]


def add_legacy_bonus(database_url, ctx, assignment_id: int, key: str, status: str, age_s: float = 3600) -> None:
    """A bonus and its fee as an older hitkit wrote them, under ``key``."""
    with session_scope(database_url) as s:
        a = s.get(Assignment, assignment_id)
        for kind, amount, k in (("bonus", Decimal("0.80"), key), ("bonus_fee", Decimal("0.20"), f"{key}:fee")):
            s.add(
                Payment(
                    study_id=ctx.study_id,
                    assignment_id=a.id,
                    worker_id=a.worker_id,
                    kind=kind,
                    amount=amount,
                    currency="USD",
                    idempotency_key=k,
                    status=status,
                    created_at=utcnow() - dt.timedelta(seconds=age_s),
                )
            )


def record_bonus_calls(monkeypatch) -> list:
    calls = []

    def pay(self, worker, provider_assignment_id, amount, reason, key):
        calls.append((worker, amount, key))
        return f"ref-{key}"

    monkeypatch.setattr(SimulatedProvider, "pay_bonus", pay)
    return calls


def bonus_keys(database_url) -> list[tuple[str, str]]:
    with session_scope(database_url) as s:
        return sorted(
            (p.idempotency_key, p.status)
            for p in s.scalars(select(Payment).where(Payment.kind.in_(("bonus", "bonus_fee"))))
        )


def test_a_dashboard_bonus_under_the_old_worker_key_is_not_paid_twice(tmp_path, database_url, monkeypatch):
    ctx = make_study(tmp_path, database_url, schedule={"approve_after_s": 3600})
    a = do_hit(database_url, ctx, "W-1")
    with session_scope(database_url) as s:
        worker_id = s.get(Assignment, a).worker_id
    calls = record_bonus_calls(monkeypatch)
    paid_nonce, pending_nonce = "form-nonce-paid", "form-nonce-pending"
    add_legacy_bonus(database_url, ctx, a, f"bonus:{ctx.study_id}:{worker_id}:{paid_nonce}", "paid")
    assert "already paid" in dash.bonus_worker(database_url, ctx, worker_id, Decimal("0.80"), "", paid_nonce)
    assert calls == []
    # A pending one from before the upgrade is paid once, under its own key, when the form is sent again.
    old_key = f"bonus:{ctx.study_id}:{worker_id}:{pending_nonce}"
    add_legacy_bonus(database_url, ctx, a, old_key, "pending")
    dash.bonus_worker(database_url, ctx, worker_id, Decimal("0.80"), "", pending_nonce)
    dash.bonus_worker(database_url, ctx, worker_id, Decimal("0.80"), "", pending_nonce)
    assert calls == [("W-1", Decimal("0.80"), old_key)]
    assert dict(bonus_keys(database_url))[old_key] == "paid" and len(bonus_keys(database_url)) == 4
    # A new form writes the one scheme: the assignment and the nonce.
    dash.bonus_worker(database_url, ctx, worker_id, Decimal("0.10"), "", "form-nonce-new")
    assert calls[-1][2] == ledger.bonus_key(ctx.study_id, a, "form-nonce-new")


def test_a_settlement_under_the_old_settle_key_is_not_paid_twice(tmp_path, database_url, monkeypatch):
    ctx = make_study(tmp_path, database_url, schedule={"approve_after_s": 3600})
    a = do_hit(database_url, ctx, "W-1")
    calls = record_bonus_calls(monkeypatch)
    add_legacy_bonus(database_url, ctx, a, f"settle:{ctx.study_id}:{a}", "paid")
    bonuses.grant_bonus(database_url, ctx.name, a, Decimal("0.80"), "settled", tag="settle")
    assert calls == [] and len(bonus_keys(database_url)) == 2
    with pytest.raises(HitkitError, match="already used"):
        bonuses.grant_bonus(database_url, ctx.name, a, Decimal("0.50"), "settled", tag="settle")
