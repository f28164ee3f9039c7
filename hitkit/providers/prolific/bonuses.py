"""Prolific bonuses: created, then paid, each step remembered before the next, so none is paid twice.

Prolific's pay call is not idempotent and pays asynchronously. A pay call that got no answer is
settled from the submission's ``bonus_payments`` (:func:`settle_bonus`), never simply sent again.

Units: a bonus is *set up* in major units (``csv_bonuses``: "1.50 for £1.50") but ``bonus_payments``
lists what was paid **in pence / cents** (the OpenAPI document: "Returned in pence / cents";
PLATFORMS.md). Entries are compared in that unit only (:func:`same_amount`): read in either unit, a
5-pence payment would also count as £5.00 and settle an unpaid £5.00 bonus as paid.

Which entry is which: ``bonus_payments`` lists amounts with no bulk bonus id, and the API has no call
that reads a bulk bonus back by its id (only set up and pay). So a payment is attributed by counting
(:func:`attribute`): payments of the amount beyond the ledger's paid bonuses of that amount on the
submission. When fewer such payments are shown than bonuses of that amount await an answer, the
payment could be any of them: AMBIGUOUS, left for a coordinator (``bonus_needs_review``), never marked.
These functions only call Prolific and remember the steps as ``prolific_bonus_*`` events; the ledger
(:mod:`hitkit.money.ledger`) alone writes the money.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from hitkit.db.models import utcnow
from hitkit.money.amounts import cents
from hitkit.providers.base import BonusOutcome, PendingBonus
from hitkit.providers.prolific.client import ProlificClient, ProlificError
from hitkit.providers.prolific.state import ProlificMemory, require_posted

BONUS_SETTLE_S = 3600.0
"""A bonus pay call without an answer that the submission still does not show this long after is unpaid.

Prolific pays bulk bonuses asynchronously; an hour is far beyond its processing time, so a payment not
shown by then was never made and paying it again cannot pay twice."""


def pay_bonus(
    api: ProlificClient, memory: ProlificMemory, provider_assignment_id: str, amount: Decimal, idempotency_key: str
) -> str:
    """Create then pay a bonus once per key; the Prolific bonus id."""
    amount = cents(amount)
    state = memory.read()
    mine = state.bonuses.get(idempotency_key)
    if mine is not None and Decimal(mine["amount"]) != amount:
        raise ProlificError(
            f"bonus key {idempotency_key} was already used for {mine['amount']}; give every "
            f"distinct bonus its own idempotency key",
            permanent=True,
        )
    if mine is not None and mine.get("paid"):
        return mine["bonus_id"]
    if mine is not None and mine.get("sent_at") is not None:
        raise ProlificError(
            f"the bonus {idempotency_key} ({mine['bonus_id']}) was sent to Prolific's pay call "
            f"without an answer; `hitkit sync` settles it from the submission's bonus payments "
            f"— hitkit will not risk paying twice",
            permanent=False,
        )
    if mine is None:
        # Keyed by submission id (PLATFORMS.md: "<submission or participant id>,<amount>").
        created = api.call(
            "POST",
            "/submissions/bonus-payments/",
            {
                "study_id": require_posted(state.study_id, memory.study_name),
                "csv_bonuses": f"{provider_assignment_id},{amount}\n",
            },
        )
        mine = {
            "key": idempotency_key,
            "bonus_id": created["id"],
            "submission": provider_assignment_id,
            "amount": str(amount),
            "fees": created.get("fees"),
            "vat": created.get("vat"),
        }
        memory.record("prolific_bonus_created", mine)
    memory.record("prolific_bonus_sent", {"key": idempotency_key, "bonus_id": mine["bonus_id"]})
    try:
        api.call("POST", f"/bulk-bonus-payments/{mine['bonus_id']}/pay/")
    except ProlificError as exc:
        if not exc.outcome_unknown:  # refused with an answer: nothing was paid
            memory.record("prolific_bonus_unpaid", {"key": idempotency_key, "why": str(exc)[:300]})
        raise
    memory.record("prolific_bonus_paid", {"key": idempotency_key, "bonus_id": mine["bonus_id"]})
    return mine["bonus_id"]


def settle_bonus(api: ProlificClient, memory: ProlificMemory, bonus: PendingBonus) -> BonusOutcome:
    """Whether a pending bonus reached the participant, from the submission's ``bonus_payments``.

    A bonus whose pay call was never sent (or was refused) is UNPAID. One sent without an answer
    is PAID when the submission shows more payments of its amount than the ledger already counts
    as paid; UNPAID when it still does not after :data:`BONUS_SETTLE_S`; UNKNOWN before then.
    """
    mine = memory.read().bonuses.get(bonus.idempotency_key)
    if mine is None or (mine.get("sent_at") is None and not mine.get("paid")):
        return BonusOutcome.UNPAID
    if mine.get("paid"):
        return BonusOutcome.PAID
    outcome = attribute(shown(api, bonus.provider_assignment_id, bonus.amount), bonus, mine["sent_at"])
    if outcome is BonusOutcome.PAID:
        memory.record(
            "prolific_bonus_paid",
            {"key": bonus.idempotency_key, "bonus_id": mine["bonus_id"], "settled_from": "bonus_payments"},
        )
    elif outcome is BonusOutcome.UNPAID:
        memory.record("prolific_bonus_unpaid", {"key": bonus.idempotency_key, "why": "not in bonus_payments"})
    return outcome


def create(api: ProlificClient, memory: ProlificMemory, provider_assignment_id: str, amount: Decimal) -> str:
    """Set up a bonus on the submission (pays nothing); its bulk bonus id."""
    created = api.call(
        "POST",
        "/submissions/bonus-payments/",
        {
            "study_id": require_posted(memory.read().study_id, memory.study_name),
            "csv_bonuses": f"{provider_assignment_id},{cents(amount)}\n",
        },
    )
    return created["id"]


def shown(api: ProlificClient, provider_assignment_id: str, amount: Decimal) -> int:
    """How many payments of ``amount`` the submission's ``bonus_payments`` shows."""
    sub = api.call("GET", f"/submissions/{provider_assignment_id}/") or {}
    return sum(1 for paid in sub.get("bonus_payments") or [] if same_amount(paid, amount))


def settle_sent(api: ProlificClient, bonus: PendingBonus, sent_at: dt.datetime) -> BonusOutcome:
    """A bonus whose pay call went out at ``sent_at`` (``bonus.sent_at``) without an answer, settled from
    ``bonus_payments`` (:func:`attribute`)."""
    return attribute(shown(api, bonus.provider_assignment_id, bonus.amount), bonus, sent_at)


def attribute(shown: int, bonus: PendingBonus, sent_at: dt.datetime, now: dt.datetime | None = None) -> BonusOutcome:
    """What ``shown`` payments of the bonus's amount on its submission say about a bonus sent without an answer.

    The ledger's paid bonuses of that amount (``paid_alike``) account for that many payments; the rest
    (``unexplained``) were made by pay calls that got no answer: this one and its ``sending_alike`` twins.

    - none unexplained: UNPAID once :data:`BONUS_SETTLE_S` has passed since the call (Prolific pays within
      minutes), else UNKNOWN;
    - at least one per bonus awaiting an answer: PAID (every one of them was paid; nothing to tell apart);
    - fewer than that: AMBIGUOUS (this payment or a twin's; no id in ``bonus_payments`` says which).
    """
    unexplained = shown - bonus.paid_alike
    if unexplained >= 1 + bonus.sending_alike:
        return BonusOutcome.PAID
    if unexplained > 0:
        return BonusOutcome.AMBIGUOUS
    if sent_at.tzinfo is None:
        sent_at = sent_at.replace(tzinfo=dt.timezone.utc)
    if (now or utcnow()) - sent_at > dt.timedelta(seconds=BONUS_SETTLE_S):
        return BonusOutcome.UNPAID
    return BonusOutcome.UNKNOWN


def same_amount(shown: Any, amount: Decimal) -> bool:
    """Whether a ``bonus_payments`` entry is a payment of ``amount`` (major units, e.g. 0.05 for 5 pence).

    Entries are in pence / cents (API: "Returned in pence / cents"), so only ``amount`` × 100 matches:
    ``5`` is a 5-pence payment and never £5.00. An entry that is not a number matches nothing."""
    try:
        value = Decimal(str(shown))
    except ArithmeticError:
        return False
    if not value.is_finite():
        return False
    return value == cents(amount) * 100
