"""Prolific's study and submission statuses (API reference: StudyStatus, SubmissionStatus) in hitkit's words."""

from __future__ import annotations

import logging

from hitkit.providers.base import WorkStatus

log = logging.getLogger("hitkit.providers.prolific.provider")

WORK_STATUSES = {
    "RESERVED": WorkStatus.WORKING,
    "ACTIVE": WorkStatus.WORKING,
    "AWAITING REVIEW": WorkStatus.SUBMITTED,
    "APPROVED": WorkStatus.APPROVED,
    "REJECTED": WorkStatus.REJECTED,
    "PARTIALLY APPROVED": WorkStatus.APPROVED,
}
"""Prolific's submission statuses in hitkit's words (API reference, SubmissionStatus); RETURNED, TIMED-OUT and
SCREENED OUT gave their place back and need no decision. A partial approval was paid, so it counts as approved."""
PUBLISHED_STATUSES = ("PUBLISHING", "ACTIVE", "PAUSED", "AWAITING REVIEW", "COMPLETED")
"""A study in one of these was published already (API reference, StudyStatus)."""
RELEASED_STATUSES = ("RETURNED", "TIMED-OUT", "SCREENED OUT", "SCREENED_OUT")


def work_status(status: str | None) -> WorkStatus:
    """hitkit's word for a Prolific submission status; an unknown one is logged and treated as given back."""
    if status in WORK_STATUSES:
        return WORK_STATUSES[status]
    if status not in RELEASED_STATUSES:
        log.warning("Prolific sent a submission status hitkit does not know: %r (treated as returned)", status)
    return WorkStatus.RETURNED
