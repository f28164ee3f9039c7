"""The tidy tables' shared columns and the assignment statuses, in one place (METHODS.md §4,
docs/COLUMNS.md). Each protocol's own table lists its columns in its vocabulary module
(:attr:`hitkit.protocols.base.Protocol.columns`).

Plain tuples, no dependencies: the export writes these tables, the analysis and :func:`hitkit.load`
read them, and the MTurk import produces them, all from these names.
"""
from __future__ import annotations

KEY_COLUMNS = ("study", "hit_id", "assignment_id", "worker_id")
"""The columns that open every per-assignment table: which study, HIT, assignment and worker."""
ASSIGNMENT_COLUMNS = (*KEY_COLUMNS, "status", "work_time_s")
FEEDBACK_COLUMNS = (*KEY_COLUMNS, "feedback")
PAYMENT_COLUMNS = ("study", "payment_id", "assignment_id", "worker_id", "kind", "amount", "currency", "status",
                   "created_at")
SIGNAL_COLUMNS = ("keys", "typed_chars", "composed_chars", "pasted_chars", "pastes", "deletes", "iki_median_ms",
                  "iki_iqr_ms", "compose_ms", "blurs")
"""How an answer was typed, as the page counted it (:data:`hitkit.worker.authenticity.SIGNALS`, the same names)."""
AUTHENTICITY_COLUMNS = (*KEY_COLUMNS, "status", "unit_id", "conversation_id", "kind", "turn", "question", "chars",
                        *SIGNAL_COLUMNS, "score", "reason", "flagged")
AUTHENTICITY_WORKER_COLUMNS = ("study", "worker_id", "answers", "flagged", "share_flagged", "flag", "reasons")
SHARED_TABLES = {"assignments": ASSIGNMENT_COLUMNS, "feedback": FEEDBACK_COLUMNS, "payments": PAYMENT_COLUMNS,
                 "authenticity": AUTHENTICITY_COLUMNS, "authenticity_workers": AUTHENTICITY_WORKER_COLUMNS}
"""Every exported table that is not a protocol's own, by file stem."""

TEXT_COLUMNS = frozenset({*KEY_COLUMNS, "conversation_id", "item_id", "payment_id", "system", "system_a",
                          "system_b", "criterion", "label", "vote", "status", "kind", "currency", "feedback",
                          "unit_id", "question", "reason", "reasons"})
"""Columns read as text whatever they hold, so that an id such as "001" or "NA" survives a round trip."""

ACTIVE_STATUSES = ("accepted", "submitted", "approved")
"""Assignment statuses that hold one of a HIT's places."""
DONE_STATUSES = ("submitted", "approved")
"""Assignment statuses whose answers count: the work a worker handed in and that was not rejected."""

UNPOSTED_HITS = ("pending", "withdrawn")
"""HIT statuses never offered to anyone: waiting to be posted, or withdrawn when the stopping rule fired."""


def exported_status(a) -> str:
    """An assignment's status as exported: finished work that no platform has confirmed is ``unconfirmed``.

    Analyses count only ``submitted`` and ``approved`` (METHODS.md §4), so unconfirmed work — a
    panel's before ``hitkit confirm``, MTurk's before MTurk showed it as the worker's — is listed
    but never counted, by hitkit or by anyone reading the CSV with the same rule.
    """
    if a.status in DONE_STATUSES and a.confirmed_at is None:
        return "unconfirmed"
    return a.status
