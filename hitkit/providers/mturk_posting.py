"""What an MTurk HIT is made of: its ExternalQuestion, its qualification requirements (the study's cap
qualification among them), its fees, its expiry."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any
from xml.sax.saxutils import escape

from hitkit.providers.mturk_client import Call, MTurkError

LOCALE_QUALIFICATION = "00000000000000000071"
APPROVAL_RATE_QUALIFICATION = "000000000000000000L0"
APPROVED_HITS_QUALIFICATION = "00000000000000000040"
MASTERS_QUALIFICATION = {True: "2ARFPLSP75KLA8M8DH1HTEQVJT3SY6", False: "2F1QJWKUDD8XADTFD2Q0G6UTO95ALH"}

MASTERS_FEE_RATE = Decimal("0.05")
"""MTurk's extra fee on the reward of a HIT that requires Masters (PLATFORMS.md)."""


def reward_rate(max_assignments: int) -> Decimal:
    """MTurk's fee rate on rewards: 20 %, 40 % for HITs of 10 or more assignments (METHODS.md §5)."""
    return Decimal("0.40") if max_assignments >= 10 else Decimal("0.20")


EXPIRED_AT = dt.datetime(2015, 1, 1, tzinfo=dt.timezone.utc)
"""The past time an expiry is set to (any past time closes the HIT at once)."""

EXTERNAL_QUESTION_SCHEMA = (
    "http://mechanicalturk.amazonaws.com/AWSMechanicalTurkDataSchemas/2006-07-14/ExternalQuestion.xsd"
)


def external_question(url: str, frame_height: int) -> str:
    """The ExternalQuestion XML that frames ``url`` (which MTurk requires to be HTTPS)."""
    return (
        f'<ExternalQuestion xmlns="{EXTERNAL_QUESTION_SCHEMA}">'
        f"<ExternalURL>{escape(url)}</ExternalURL><FrameHeight>{frame_height}</FrameHeight>"
        f"</ExternalQuestion>"
    )


def qualification_requirements(settings, sandbox: bool, cap_qualification_id: str) -> list[dict[str, Any]]:
    """The HIT type's requirements: the configured ones, then the study's cap (must NOT be held)."""
    s = settings
    guard = {"ActionsGuarded": "DiscoverPreviewAndAccept"}
    reqs: list[dict[str, Any]] = []
    if s.locales:
        reqs.append(
            {
                "QualificationTypeId": LOCALE_QUALIFICATION,
                "Comparator": "In",
                "LocaleValues": [{"Country": c.upper()} for c in s.locales],
                **guard,
            }
        )
    if s.min_approval_rate is not None:
        reqs.append(
            {
                "QualificationTypeId": APPROVAL_RATE_QUALIFICATION,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [s.min_approval_rate],
                **guard,
            }
        )
    if s.min_approved_hits is not None:
        reqs.append(
            {
                "QualificationTypeId": APPROVED_HITS_QUALIFICATION,
                "Comparator": "GreaterThanOrEqualTo",
                "IntegerValues": [s.min_approved_hits],
                **guard,
            }
        )
    if s.masters:
        reqs.append({"QualificationTypeId": MASTERS_QUALIFICATION[sandbox], "Comparator": "Exists", **guard})
    reqs.append({"QualificationTypeId": cap_qualification_id, "Comparator": "DoesNotExist", **guard})
    return reqs


def cap_qualification(call: Call, study: str, tag: str) -> str:
    """The id of the study's private qualification for workers at the per-worker cap, named with ``tag``
    (unique to the database): made now, or found when an earlier process made it."""
    name = f"hitkit cap {study} {tag}"
    try:
        made = call(
            "CreateQualificationType",
            Name=name,
            QualificationTypeStatus="Active",
            Description=f"Workers who have done the most HITs allowed in the study '{study}'.",
        )
        return made["QualificationType"]["QualificationTypeId"]
    except MTurkError as exc:
        if exc.code != "RequestError":
            raise
        # Made by an earlier process: names are unique per account, so look it up.
        found = call("ListQualificationTypes", Query=name, MustBeRequestable=False, MustBeOwnedByCaller=True)[
            "QualificationTypes"
        ]
        match = [q for q in found if q["Name"] == name]
        if not match:
            raise
        return match[0]["QualificationTypeId"]
