"""A Prolific study's submissions: listing them, and moving one on (approve, reject, complete).

Each move is safe to repeat: a submission Prolific already shows in the status the move leads to (a retry
after a lost answer) counts as moved. The provider (:mod:`.provider`) decides when to move; this module
only says it to Prolific and reads the answers.
"""

from __future__ import annotations

from typing import Any

from hitkit.providers.base import ProviderWork
from hitkit.providers.prolific import rejection
from hitkit.providers.prolific.client import ProlificClient, ProlificError
from hitkit.providers.prolific.statuses import work_status


def transition(api: ProlificClient, submission_id: str, body: dict[str, Any], done: str) -> None:
    """Move a submission on; one already in ``done`` (a retry after a lost answer) is left as it is."""
    try:
        api.call("POST", f"/submissions/{submission_id}/transition/", body)
    except ProlificError as refused:
        if refused.status is None:  # no answer at all: the outcome is unknown
            raise
        try:
            status = api.call("GET", f"/submissions/{submission_id}/").get("status")
        except ProlificError:
            raise refused from None
        if status != done:
            raise ProlificError(f"{refused} (the submission is {status})", refused.status) from None


def reject_body(template: str | None, study: str, reason: str, category: str) -> dict[str, Any]:
    """The REJECT transition's body: the study's message (:mod:`.rejection`, 100+ characters) and a category.

    Raises a permanent :class:`ProlificError` naming the fix when Prolific would refuse either.
    """
    message = rejection.render(template, study, reason)
    if category not in rejection.CATEGORIES or len(message) < rejection.MIN_CHARS:
        raise ProlificError(
            "; ".join(rejection.problems(message, category)) or "the rejection is refused", permanent=True
        )
    return {"action": "REJECT", "message": message, "rejection_category": category}


def listed(api: ProlificClient, study_id: str | None) -> list[dict[str, Any]]:
    """Every submission of the study, as Prolific lists them (``participant_id``), all pages; none before a post."""
    if study_id is None:
        return []
    return list(api.pages(f"/studies/{study_id}/submissions/"))


def work(submissions: list[dict[str, Any]]) -> list[ProviderWork]:
    """Listed submissions in hitkit's words (the listing names the participant ``participant_id``)."""
    return [ProviderWork(s["id"], s.get("participant_id", ""), work_status(s["status"])) for s in submissions]


def work_of(api: ProlificClient, submission_id: str) -> ProviderWork:
    """One submission as Prolific holds it (the single view names the participant ``participant``)."""
    sub = api.call("GET", f"/submissions/{submission_id}/")
    return ProviderWork(sub["id"], sub.get("participant", ""), work_status(sub.get("status")))
