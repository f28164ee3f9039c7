"""Amazon Mechanical Turk's requester API through boto3: the client, bounded retries, MTurk's errors.

MTurk closed permanently on 2026-09-30; the provider makes a client only for a service that speaks
MTurk's API (``provider.mturk.endpoint_url``) and refuses every other call with
:class:`MTurkClosedError`. Calls are retried twice over: botocore's *standard* retry mode handles
throttling, and :func:`call` retries MTurk's ``ServiceFault`` a bounded number of times.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hitkit.errors import ConfigError, HitkitError
from hitkit.money.amounts import cents

log = logging.getLogger(__name__)

ENDPOINTS = {
    True: "https://mturk-requester-sandbox.us-east-1.amazonaws.com",
    False: "https://mturk-requester.us-east-1.amazonaws.com",
}
CLOSED_ON = dt.date(2026, 9, 30)
"""The day Amazon Mechanical Turk closed permanently (PLATFORMS.md)."""
ID_PATTERN = re.compile(r"[A-Z0-9]{1,64}")
"""botocore's pattern of MTurk's HIT and assignment ids (``fullmatch``: ``$`` passes a final newline)."""


class MTurkError(HitkitError):
    """An MTurk call that failed for good; ``code`` is MTurk's error type (RequestError, ServiceFault…)."""

    def __init__(self, operation: str, code: str, message: str):
        self.operation, self.code, self.mturk_message = operation, code, message
        super().__init__(f"MTurk {operation} failed: {code}: {message}")

    @property
    def already_processed(self) -> bool:
        """MTurk saw this UniqueRequestToken before: the earlier request already did the work."""
        text = self.mturk_message.lower()
        return self.code == "RequestError" and "idempotency token" in text and "already been processed" in text


class MTurkClosedError(ConfigError):
    """A call to Amazon Mechanical Turk's own endpoints, which closed on 2026-09-30."""

    def __init__(self, sandbox: bool):
        where = "sandbox" if sandbox else "production"
        super().__init__(
            f"Amazon Mechanical Turk closed permanently on {CLOSED_ON:%Y-%m-%d}, so hitkit cannot post to or call "
            f"its {where} endpoint ({ENDPOINTS[sandbox]}). Run the study on Prolific (provider.kind: prolific) "
            f"or on a panel such as CloudResearch Connect or SONA (provider.kind: panel; see docs/howto/panels.md), "
            f"and bring old MTurk batch results in with `hitkit import mturk BATCH.csv --mapping MAPPING.yaml "
            f"--study NAME`. provider.mturk.endpoint_url is only for services that speak MTurk's API."
        )


@dataclass(frozen=True)
class SubmittedWork:
    """One assignment as MTurk lists it (:meth:`MTurkProvider.sync_submissions`)."""

    provider_assignment_id: str
    worker_id: str
    status: str  # Submitted, Approved, Rejected
    accepted_at: dt.datetime | None
    submitted_at: dt.datetime | None
    answer: str | None


_CREDENTIALS_FROM = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
)
_clients: dict[tuple, Any] = {}
_clients_lock = threading.Lock()
_MAX_CLIENTS = 16


def make_client(settings, read_timeout_s: float):
    """boto3's ``mturk`` client for ``settings.endpoint_url``, on a boto3 session of its own.

    One client per endpoint, region, timeout and credentials in the environment, made once per process and
    shared (boto3 clients are thread-safe once made): a provider is made afresh for each scheduler tick and
    each command, and making a client reads botocore's service model again, which took a fifth of the CPU
    of a whole simulated MTurk study.
    """
    credentials = tuple(os.environ.get(name) for name in _CREDENTIALS_FROM)
    key = (os.getpid(), settings.endpoint_url, settings.region, read_timeout_s, credentials)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            import boto3
            from botocore.config import Config

            client = boto3.session.Session().client(
                "mturk",
                region_name=settings.region,
                endpoint_url=settings.endpoint_url,
                config=Config(
                    retries={"mode": "standard", "max_attempts": 5}, read_timeout=read_timeout_s, connect_timeout=10
                ),
            )
            if len(_clients) >= _MAX_CLIENTS:
                _clients.pop(next(iter(_clients)))  # the oldest
            _clients[key] = client
        return client


def call(client, operation: str, attempts: int, backoff_s: float, **params) -> dict[str, Any]:
    """Call ``operation`` (MTurk's name, e.g. ``CreateHITType``), retrying ServiceFault up to ``attempts`` times."""
    from botocore.exceptions import BotoCoreError, ClientError

    method = getattr(client, snake(operation))
    for attempt in range(attempts):
        try:
            return method(**params)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = error.get("Code", "Unknown"), error.get("Message", str(exc))
            if code == "ServiceFault" and attempt + 1 < attempts:
                log.warning("MTurk %s: ServiceFault (attempt %d), retrying", operation, attempt + 1)
                time.sleep(backoff_s * 2**attempt)
                continue
            raise MTurkError(operation, code, message) from None
        except BotoCoreError as exc:
            # No credentials, no connection after botocore's own retries: say so, plainly.
            raise MTurkError(
                operation, type(exc).__name__, f"{exc} (check the AWS credentials and provider.mturk.endpoint_url)"
            ) from None
    raise AssertionError("unreachable")


def snake(operation: str) -> str:
    """boto3's method name of an MTurk operation: ``CreateHITType`` → ``create_hit_type``."""
    from botocore import xform_name

    return xform_name(operation)


# Reads that follow every page (``call`` is the provider's bound call, with its retries) -----------
Call = Callable[..., dict[str, Any]]


def find_hit(call: Call, token: str) -> dict[str, Any] | None:
    """The account's HIT whose annotation ends with ``token`` (the one a lost create made)."""
    params: dict[str, Any] = {"MaxResults": 100}
    while True:
        page = call("ListHITs", **params)
        for hit in page.get("HITs", []):
            if hit.get("RequesterAnnotation", "").endswith(token):
                return hit
        if not page.get("NextToken"):
            return None
        params["NextToken"] = page["NextToken"]


def submitted_work(call: Call, provider_hit_id: str) -> list[SubmittedWork]:
    """Every submitted, approved or rejected assignment MTurk holds for the HIT."""
    params: dict[str, Any] = {
        "HITId": provider_hit_id,
        "MaxResults": 100,
        "AssignmentStatuses": ["Submitted", "Approved", "Rejected"],
    }
    out: list[SubmittedWork] = []
    while True:
        page = call("ListAssignmentsForHIT", **params)
        for a in page.get("Assignments", []):
            out.append(
                SubmittedWork(
                    a["AssignmentId"],
                    a["WorkerId"],
                    a["AssignmentStatus"],
                    a.get("AcceptTime"),
                    a.get("SubmitTime"),
                    a.get("Answer"),
                )
            )
        if not page.get("NextToken"):
            return out
        params["NextToken"] = page["NextToken"]


def bonuses_alike(call: Call, provider_assignment_id: str, worker_id: str, amount: Decimal) -> int:
    """How many bonuses of ``amount`` MTurk lists as paid to ``worker_id`` on the assignment."""
    params: dict[str, Any] = {"AssignmentId": provider_assignment_id, "MaxResults": 100}
    alike = 0
    while True:
        page = call("ListBonusPayments", **params)
        alike += sum(
            1
            for b in page.get("BonusPayments", [])
            if b.get("WorkerId") == worker_id and Decimal(b["BonusAmount"]) == cents(amount)
        )
        if not page.get("NextToken"):
            return alike
        params["NextToken"] = page["NextToken"]
