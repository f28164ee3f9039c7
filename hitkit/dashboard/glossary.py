"""The dashboard in a coordinator's words: what each event and each event detail is called on its pages.

Events are stored under short machine names (``assignment_accepted``, ``worker_capped``); the dashboard shows
the words below, with the machine name kept in the cell's ``title`` for searching the logs. A name not listed
is shown with its underscores turned into spaces, never raw; ``tests/test_dashboard_glossary.py`` checks that
every event the code writes has words here.
"""

from __future__ import annotations

EVENT_LABELS = {
    "approve_failed": "approval failed on the platform (retried)",
    "approve_held": "approval held: the worker fails QC",
    "closed_on_provider": "closed to newcomers on the platform",
    "high_return_rate": "the platform reports a high return rate",
    "provider_refused_post": "the platform refused to post the work",
    "screened_out": "a worker was screened out",
    "sync_mismatch": "the platform and hitkit disagree (see details)",
    "approve_override": "approved by the coordinator",
    "assignment_accepted": "a worker accepted work",
    "assignment_expired": "work timed out",
    "assignment_rejected": "work rejected",
    "assignment_returned": "a worker returned work unfinished",
    "assignment_settled": "work settled by the coordinator",
    "assignment_submitted": "a worker submitted work",
    "assignment_approved": "work approved",
    "bonus": "bonus",
    "bonus_confirmed": "bonus confirmed by the platform",
    "bonus_failed": "bonus failed on the platform",
    "bonus_fee": "platform fee on a bonus",
    "bonus_needs_review": "bonus left for your review",
    "bonus_paid": "bonus paid",
    "bonus_recorded": "bonus booked",
    "bonus_state": "bonus moved to a new state",
    "budget_exhausted": "budget used up: no more work posted",
    "cap_failed": "per-worker cap could not be set on the platform",
    "expire_failed": "closing work on the platform failed (retried)",
    "hit_posted": "work posted",
    "hit_reopened": "work offered again",
    "judge_run": "LLM judge labelled the material",
    "message_sent": "message sent to a worker",
    "paused_for_high_return_rate": "paused: the platform reports a high return rate",
    "posting_resumed": "posting resumed",
    "qc_held": "work held for your QC review",
    "qc_rejected": "work rejected for failing QC",
    "screen_out_slots_used": "screen-out places used",
    "served": "worker pages served",
    "stop_rule_fired": "stopping rule made its decision",
    "study_completed": "study completed",
    "study_config_changed": "study file changed",
    "study_created": "study created",
    "study_judged": "LLM judge finished",
    "study_launched": "study launched",
    "study_paused": "study paused",
    "study_resumed": "study resumed",
    "study_stopped": "study stopped",
    "sync": "synchronised with the platform",
    "sync_failed": "synchronising with the platform failed (retried)",
    "work_confirmed": "work confirmed by the panel",
    "worker_blocked": "worker blocked",
    "worker_blocklisted": "worker added to the blocklist group",
    "worker_capped": "worker reached the per-worker cap",
    "worker_unblocked": "worker unblocked",
    "workers_to_group": "workers added to a participant group",
}
"""Each event's name on the dashboard."""

DETAIL_LABELS = {
    "assignment": "assignment",
    "assignment_id": "assignment",
    "hit": "HIT",
    "hit_id": "HIT",
    "provider_hit_id": "platform's id of the work",
    "provider_assignment_id": "platform's id of the submission",
    "worker": "worker",
    "worker_id": "worker",
    "external_id": "worker's platform id",
    "amount": "amount",
    "reason": "reason",
    "status": "status",
    "key": "ledger key",
    "ref": "platform reference",
    "hits": "HITs counted",
    "at": "at",
    "why": "why",
}
"""Each event detail's name on the dashboard."""


def words(name: str) -> str:
    """A machine name as words: underscores to spaces."""
    return str(name).replace("_", " ").strip()


def event_label(kind: str) -> str:
    """What the dashboard calls the event ``kind``."""
    return EVENT_LABELS.get(kind) or words(kind)


def detail_label(key: str) -> str:
    """What the dashboard calls an event's detail ``key``."""
    return DETAIL_LABELS.get(key) or words(key)
