"""An MTurk worker's way in and out: the arrival's parameters, and the form that hands the work in.

Arrival: MTurk opens the entry URL with ``workerId``, ``assignmentId``, ``hitId`` and
``turkSubmitTo``; ``assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE`` is a preview.

Completion: the worker's browser posts ``assignmentId`` to ``{turkSubmitTo}/mturk/externalSubmit``.
hitkit does not store ``turkSubmitTo``: a HIT lives on exactly one marketplace, the one
``provider.mturk.sandbox`` chose when it was posted, so the submit host is derived from that flag
(``workersandbox.mturk.com`` or ``www.mturk.com``). An arrival whose ``turkSubmitTo`` names any other
host is refused, so a forged parameter can never send the worker's form elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from hitkit.errors import FlowError
from hitkit.providers.base import Arrival, Completion, CompletionKind

SUBMIT_HOSTS = {True: "https://workersandbox.mturk.com", False: "https://www.mturk.com"}
PREVIEW_HOSTS = {True: "https://workersandbox.mturk.com", False: "https://worker.mturk.com"}
PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"


def preview_url(sandbox: bool, hit_group_id: str) -> str:
    """Where a worker previews the HITs of one group on the marketplace ``sandbox`` names."""
    return f"{PREVIEW_HOSTS[sandbox]}/mturk/preview?groupId={hit_group_id}"


def arrival(args: Mapping[str, str], sandbox: bool) -> Arrival:
    """A preview, or the worker MTurk names; FlowError for another marketplace's host or missing ids."""
    submit_to = args.get("turkSubmitTo")
    if submit_to and submit_to.rstrip("/") != SUBMIT_HOSTS[sandbox]:
        raise FlowError(
            f"this HIT belongs to {SUBMIT_HOSTS[sandbox]}, not {submit_to}; open it from that MTurk site", 400
        )
    assignment = args.get("assignmentId")
    if assignment in (None, "", PREVIEW_ASSIGNMENT):
        return Arrival(preview=True, provider_hit_id=args.get("hitId"))
    if not args.get("workerId") or not args.get("hitId"):
        raise FlowError(
            "MTurk did not say who you are (workerId and hitId are missing); open the HIT again from MTurk", 400
        )
    return Arrival(
        preview=False,
        worker_id=args["workerId"],
        provider_assignment_id=assignment,
        provider_hit_id=args["hitId"],
        extra={"turkSubmitTo": SUBMIT_HOSTS[sandbox]},
    )


def completion(provider_assignment_id: str | None, sandbox: bool) -> Completion:
    """Post ``assignmentId`` back to the marketplace the HIT lives on (MTurk needs one more field)."""
    return Completion(
        CompletionKind.POST_FORM,
        url=f"{SUBMIT_HOSTS[sandbox]}/mturk/externalSubmit",
        fields={"assignmentId": provider_assignment_id or "", "submitted": "hitkit"},
    )
