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
SHARED_TABLES = {"assignments": ASSIGNMENT_COLUMNS, "feedback": FEEDBACK_COLUMNS, "payments": PAYMENT_COLUMNS}
"""Every exported table that is not a protocol's own, by file stem."""

TEXT_COLUMNS = frozenset({*KEY_COLUMNS, "conversation_id", "item_id", "payment_id", "system", "system_a",
                          "system_b", "criterion", "label", "vote", "status", "kind", "currency", "feedback"})
"""Columns read as text whatever they hold, so that an id such as "001" or "NA" survives a round trip."""

ACTIVE_STATUSES = ("accepted", "submitted", "approved")
"""Assignment statuses that hold one of a HIT's places."""
DONE_STATUSES = ("submitted", "approved")
"""Assignment statuses whose answers count: the work a worker handed in and that was not rejected."""

UNPOSTED_HITS = ("pending", "withdrawn")
"""HIT statuses never offered to anyone: waiting to be posted, or withdrawn when the stopping rule fired."""
