"""A participant's arrival from Prolific, accepted only once Prolific confirms their live submission.

A visit without ``PROLIFIC_PID`` and ``SESSION_ID`` is a read-only preview (Prolific's
researcher preview). A visit with them is accepted only when Prolific's single-submission view
(``GET /submissions/{id}/``, whose participant field is ``participant``) shows that submission ACTIVE,
of that participant, in this study.

Nothing here writes to the database: a worker's page must never wait on a write.
"""

from __future__ import annotations

from collections.abc import Mapping

from hitkit.errors import FlowError
from hitkit.providers.base import Arrival
from hitkit.providers.prolific.client import ProlificClient, ProlificError, is_prolific_id
from hitkit.providers.prolific.state import ProlificMemory
from hitkit.tables.schema import DONE_STATUSES


def link_ids(args: Mapping[str, str]) -> tuple[str, str, str] | None:
    """The link's (participant, study, submission) ids; None for a preview, FlowError for a broken link."""
    pid, study, session_id = args.get("PROLIFIC_PID"), args.get("STUDY_ID"), args.get("SESSION_ID")
    if not pid and not session_id:
        return None
    if not (pid and study and session_id):
        raise FlowError(
            "this link is missing Prolific's PROLIFIC_PID, STUDY_ID or SESSION_ID; "
            "please open the study from Prolific again",
            403,
        )
    # Checked before any id reaches a URL path: Prolific ids are 24 hexadecimal characters.
    if not all(is_prolific_id(x) for x in (pid, study, session_id)):
        raise FlowError(
            "this link's PROLIFIC_PID, STUDY_ID or SESSION_ID is not a Prolific id; please open the "
            "study from Prolific again",
            400,
        )
    return pid, study, session_id


def verify(
    api: ProlificClient, memory: ProlificMemory, ids: tuple[str, str, str], ours: tuple[str, ...] | None, done_url: str
) -> Arrival:
    """The arrival of ``ids`` when Prolific shows the submission ACTIVE, theirs, in one of the studies ``ours``
    (the study, and a test run's test study); else FlowError."""
    pid, study, session_id = ids
    if ours is None or study not in ours:
        raise FlowError("this Prolific study is not the one this link belongs to", 403)
    try:
        sub = api.call("GET", f"/submissions/{session_id}/")
    except ProlificError as exc:
        if exc.status in (400, 403, 404):
            sub = None
        else:  # Prolific is slow or down: the participant may simply try again
            raise FlowError(
                "Prolific could not confirm your session just now; please reload this page in a moment", 503
            ) from exc
    # The single-submission view names the participant ``participant`` (API reference, SubmissionDetail).
    if not sub or sub.get("participant") != pid or sub.get("study_id") != study:
        raise FlowError(
            "Prolific has no session of yours for this study; please open the study from Prolific again", 403
        )
    held = memory.held_status(session_id)  # one Prolific session is one HIT
    if held in DONE_STATUSES or sub.get("status") in ("AWAITING REVIEW", "APPROVED"):
        raise FlowError(
            f"the work of this Prolific session is already handed in; to finish on Prolific go to {done_url}", 409
        )
    if sub.get("status") != "ACTIVE":
        raise FlowError(
            f"Prolific shows this session as {sub.get('status')}; please open the study from Prolific again", 403
        )
    return Arrival(preview=False, worker_id=pid, provider_assignment_id=session_id, extra={"study_id": study})
