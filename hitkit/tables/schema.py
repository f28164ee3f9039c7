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
JUDGE_ESTIMATE_COLUMNS = (
    "n_human",
    "n_judge",
    "human",
    "human_low",
    "human_high",
    "judge",
    "judge_low",
    "judge_high",
    "ppi",
    "ppi_low",
    "ppi_high",
    "lam",
    "n_effective",
    "fallback",
)
"""The columns every judge table ends with: how many human and judge labels, and the estimate with its
interval three ways (humans only, judge only, prediction-powered), PPI's λ, its effective size and
whether it fell back to the humans alone (docs/COLUMNS.md)."""
FEEDBACK_COLUMNS = (*KEY_COLUMNS, "feedback")
PAYMENT_COLUMNS = (
    "study",
    "payment_id",
    "assignment_id",
    "worker_id",
    "kind",
    "amount",
    "currency",
    "status",
    "created_at",
)
SIGNAL_COLUMNS = (
    "keys",
    "typed_chars",
    "composed_chars",
    "pasted_chars",
    "pastes",
    "deletes",
    "iki_median_ms",
    "iki_iqr_ms",
    "compose_ms",
    "blurs",
)
"""How an answer was typed, as the page counted it (:data:`hitkit.worker.authenticity.SIGNALS`, the same names)."""
AUTHENTICITY_COLUMNS = (
    *KEY_COLUMNS,
    "status",
    "unit_id",
    "conversation_id",
    "kind",
    "turn",
    "question",
    "chars",
    *SIGNAL_COLUMNS,
    "score",
    "reason",
    "flagged",
)
AUTHENTICITY_WORKER_COLUMNS = ("study", "worker_id", "answers", "flagged", "share_flagged", "flag", "reasons")
SHARED_TABLES = {
    "assignments": ASSIGNMENT_COLUMNS,
    "feedback": FEEDBACK_COLUMNS,
    "payments": PAYMENT_COLUMNS,
    "authenticity": AUTHENTICITY_COLUMNS,
    "authenticity_workers": AUTHENTICITY_WORKER_COLUMNS,
}
"""Every exported table that is not a protocol's own, by file stem."""

TEXT_COLUMNS = frozenset(
    {
        *KEY_COLUMNS,
        "conversation_id",
        "item_id",
        "payment_id",
        "system",
        "system_a",
        "system_b",
        "criterion",
        "label",
        "vote",
        "status",
        "kind",
        "currency",
        "feedback",
        "unit_id",
        "question",
        "reason",
        "reasons",
    }
)
"""Columns read as text whatever they hold, so that an id such as "001" or "NA" survives a round trip."""

ACTIVE_STATUSES = ("accepted", "submitted", "approved")
"""Assignment statuses that hold one of a HIT's places."""
CAP_STATUSES = ACTIVE_STATUSES + ("rejected",)
"""Assignments that count against a worker's cap (returned or expired ones do not)."""
DONE_STATUSES = ("submitted", "approved")
"""Assignment statuses of work handed in and not rejected: what is paid, or still to be decided."""
HANDED_IN_STATUSES = ("submitted", "approved", "rejected")
"""Assignment statuses whose answers count in quality control and every analysis: all work a platform
confirmed as handed in, rejected work included. A rejection is an outcome of QC, never an input to it:
leaving rejected work out would change QC's own result once its verdict is acted on (METHODS §2b).
Work excluded for another reason is excluded explicitly, with the reason (``exclusions.csv``)."""

EXCLUDED = "excluded"
"""The status the analysis gives an assignment listed in ``exclusions.csv`` (it does not count)."""
EXCLUSION_COLUMNS = ("study", "assignment_id", "worker_id", "reason")
"""``exclusions.csv``: work left out of the analysis on purpose, each row with its reason (a coordinator's
rejection for another reason than QC); written by the export only when there is some."""

UNPOSTED_HITS = ("pending", "withdrawn")
"""HIT statuses never offered to anyone: waiting to be posted, or withdrawn when the stopping rule fired."""


def exported_status(a) -> str:
    """An assignment's status as exported: finished work that no platform has confirmed is ``unconfirmed``.

    Analyses count ``submitted``, ``approved`` and ``rejected`` (:data:`HANDED_IN_STATUSES`), so unconfirmed work — a
    panel's before ``hitkit confirm``, MTurk's before MTurk showed it as the worker's — is listed
    but never counted, by hitkit or by anyone reading the CSV with the same rule.
    """
    if a.status in DONE_STATUSES and a.confirmed_at is None:
        return "unconfirmed"
    return a.status
