"""Prolific's webhooks: subscribing a study's workspace, and checking what arrives.

Sources (PLATFORMS.md, rows "webhooks: subscribe / receive / verify / delivery"; ``prolific-openapi.yml``,
tag ``webhooks``):

- subscribe: the workspace needs a signing secret (``GET /hooks/secrets/?workspace_id=`` lists it;
  ``POST /hooks/secrets/`` *replaces* it, so hitkit creates one only where none exists: another study
  of the workspace may be verifying with the current one); ``POST /hooks/subscriptions/`` with
  ``workspace_id, event_type, target_url`` answers the subscription (in a ``results`` list) and an
  ``X-Hook-Secret`` header; ``POST /hooks/subscriptions/{id}/`` with ``{"secret": that header}``
  confirms it; ``DELETE /hooks/subscriptions/{id}/`` ends it. ``target_url`` must be public ``https://``.
- verify: ``X-Prolific-Request-Signature`` is base64(HMAC-SHA256(secret, timestamp + raw body)) with
  ``X-Prolific-Request-Timestamp`` in UNIX seconds; compared in constant time, over the raw bytes
  (re-serialising the parsed body can change it), a stale timestamp refused (replay).
- delivery: retried when not answered 2xx in time, so the same ``X-Event-ID`` can come again, and in
  any order (``X-Timestamp``). A webhook is a hint: the API stays the source of truth.
- de-duplication: ``X-Event-ID`` is *not* signed, so anyone holding one genuine delivery could replay it
  within the window under fresh ids. A delivery is therefore known by what the signature covers
  (:func:`signed_key`: the timestamp and the body's digest); a retry Prolific signs anew is still one
  event when it repeats an ``X-Event-ID`` already seen *with the same body* (:func:`same_event`).

The pure functions (:func:`url_problem`, :func:`signature`, :func:`refusal`) touch nothing; the calls
take the client explicitly. Nothing here writes to the database (:mod:`hitkit.running.hooks` does).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from hitkit.providers.prolific.client import ProlificClient, ProlificError, is_prolific_id

EVENT_TYPES = ("submission.status.change", "study.status.change", "study.has_high_return_rate")
"""The events hitkit subscribes a study's workspace to (PLATFORMS.md: webhooks: subscribe)."""
REPLAY_WINDOW_S = 300.0
"""A delivery signed longer ago (or further ahead) than this is refused as a replay (five minutes)."""
SIGNATURE = "X-Prolific-Request-Signature"
TIMESTAMP = "X-Prolific-Request-Timestamp"
EVENT_ID = "X-Event-ID"
SENT_AT = "X-Timestamp"


class Headers(Protocol):
    """A delivery's headers, looked up by name: werkzeug's (case-insensitive, not a Mapping) or a plain dict."""

    def get(self, key: str, /) -> str | None: ...


def url_problem(url: str) -> str | None:
    """What stops Prolific from delivering to ``url`` (it needs a public ``https://`` address); None if nothing."""
    parts = urlsplit(url)
    if parts.scheme != "https":
        return f"'{url}' is not an https:// address; Prolific delivers webhooks to public https:// addresses only"
    host = (parts.hostname or "").lower()
    if not host:
        return f"'{url}' names no host"
    if host == "localhost" or host.endswith((".localhost", ".local", ".internal")):
        return f"'{url}' names {host}, which Prolific cannot reach; give the server's public address"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    if not ip.is_global:
        return (
            f"'{url}' names the private address {host}, which Prolific cannot reach; give the server's public address"
        )
    return None


def target_url(base: str, study: str) -> str:
    """Where the study's deliveries go: the worker-facing server's ``/hooks/prolific/STUDY``."""
    return f"{base.rstrip('/')}/hooks/prolific/{study}"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Prolific's signature of a delivery: base64(HMAC-SHA256(secret, timestamp + raw body))."""
    mac = hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256)
    return base64.b64encode(mac.digest()).decode()


REFUSAL_CAUSES = ("unsigned", "bad timestamp", "stale", "bad signature", "malformed")
"""Why deliveries are refused, as counted for the dashboard and ``hitkit status``: no signature or timestamp
header; a timestamp that is not a UNIX time; one outside the replay window; a signature that matches no
known secret (a forgery, or a rotated secret); a signed body that is not an event hitkit takes."""


def check(
    secrets: Iterable[str], headers: Headers, body: bytes, now: float, window_s: float = REPLAY_WINDOW_S
) -> tuple[str, str] | None:
    """(cause, why) a delivery must be refused, the cause one of :data:`REFUSAL_CAUSES`; None to accept.

    Every known secret is tried in constant time (a workspace's secret may have been replaced while
    deliveries signed with the old one are still being retried).
    """
    given, stamp = headers.get(SIGNATURE), headers.get(TIMESTAMP)
    if not given or not stamp:
        return "unsigned", f"no {SIGNATURE} or {TIMESTAMP} header"
    try:
        at = float(stamp)
    except ValueError:
        return "bad timestamp", f"{TIMESTAMP} is not a UNIX time"
    if not abs(now - at) <= window_s:  # also refuses nan
        return "stale", f"{TIMESTAMP} is more than {window_s:g} s from now (a replay or a clock far off)"
    matched = False
    for secret in secrets:
        # compare_digest on every secret, not stopping at the first match: the time says nothing.
        matched |= hmac.compare_digest(signature(secret, stamp, body).encode(), given.encode())
    return None if matched else ("bad signature", "the signature does not match the body")


def refusal(
    secrets: Iterable[str], headers: Headers, body: bytes, now: float, window_s: float = REPLAY_WINDOW_S
) -> str | None:
    """Why a delivery must be refused (:func:`check`, without the cause); None to accept."""
    found = check(secrets, headers, body, now, window_s)
    return None if found is None else found[1]


def body_digest(body: bytes) -> str:
    """The SHA-256 of a delivery's raw body, hex."""
    return hashlib.sha256(body).hexdigest()


def signed_key(headers: Headers, body: bytes) -> str:
    """What a delivery is known by: a digest of exactly what its signature covers (timestamp + raw body).

    Replaying a genuine delivery reproduces it whatever ``X-Event-ID`` it carries; making another key
    needs another timestamp or body, and so the secret."""
    stamp = (headers.get(TIMESTAMP) or "").encode()
    return "sig:" + hashlib.sha256(stamp + b"\n" + body_digest(body).encode()).hexdigest()


def same_event(stored: dict[str, Any] | None, event_id: str, digest: str) -> bool:
    """Whether a queued delivery's ``stored`` body is this event again: Prolific's retry, signed anew, with
    the same ``X-Event-ID`` and the same body. (The id alone proves nothing: it is not signed.)"""
    meta = (stored or {}).get("delivery") or {}
    return meta.get("event_id") == event_id and meta.get("body_sha256") == digest


@dataclass(frozen=True)
class Delivery:
    """A delivery that passed :func:`refusal`, as hitkit queues it."""

    event_id: str
    event_type: str
    resource_id: str
    sent_at: str | None
    body: dict[str, Any]


def parse(headers: Headers, body: Any) -> Delivery | str:
    """The delivery's event (PLATFORMS.md: webhooks: receive), or what is wrong with it."""
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    event_id = headers.get(EVENT_ID) or ""
    if not (0 < len(event_id) <= 128):
        return f"no {EVENT_ID} header"
    event_type, resource = body.get("event_type"), body.get("resource_id")
    if event_type not in EVENT_TYPES and event_type != "study.progress.change":
        return f"event_type {event_type!r} is not one hitkit subscribes to"
    if not isinstance(resource, str) or not is_prolific_id(resource):
        return "resource_id is not a Prolific id"
    return Delivery(
        event_id,
        event_type,
        resource,
        (headers.get(SENT_AT) or "")[:64] or None,
        {k: body[k] for k in ("event_type", "resource_id", "status", "participant_id") if k in body},
    )


# -- the calls ------------------------------------------------------------------------------------------


def workspace_secret(api: ProlificClient, workspace: str) -> str:
    """The workspace's signing secret: the existing one, else a new one (creating replaces: never done twice)."""
    found = api.call("GET", f"/hooks/secrets/?workspace_id={workspace}") or {}
    for row in found.get("results") or []:
        if row.get("value"):
            return row["value"]
    made = api.call("POST", "/hooks/secrets/", {"workspace_id": workspace}) or {}
    if not made.get("value"):
        raise ProlificError("Prolific created no webhook secret for the workspace", permanent=False)
    return made["value"]


def subscribe(api: ProlificClient, workspace: str, event_type: str, target: str) -> str:
    """Subscribe and confirm one event type for ``target``; the subscription's id."""
    created, headers = api.call_with_headers(
        "POST", "/hooks/subscriptions/", {"workspace_id": workspace, "event_type": event_type, "target_url": target}
    )
    rows = (created or {}).get("results") or [created or {}]
    sub_id = rows[0].get("id")
    hook_secret = headers.get("X-Hook-Secret")
    if not sub_id or not hook_secret:
        raise ProlificError(
            f"Prolific's answer to a {event_type} subscription lacks its id or X-Hook-Secret header", permanent=False
        )
    api.call("POST", f"/hooks/subscriptions/{sub_id}/", {"secret": hook_secret})
    return sub_id


def unsubscribe(api: ProlificClient, subscription_id: str) -> None:
    """End a subscription; one Prolific no longer knows is gone already."""
    try:
        api.call("DELETE", f"/hooks/subscriptions/{subscription_id}/")
    except ProlificError as exc:
        if exc.status != 404:
            raise


@dataclass(frozen=True)
class Facts:
    """What Prolific shows now about an event's resource: whether it is this study's, and its status."""

    ours: bool
    status: str | None = None
    participant: str | None = None


class ProlificHooks:
    """The Prolific provider's webhooks for one study (``ProlificProvider.hooks``)."""

    provider = "prolific"

    def __init__(self, api: ProlificClient, settings, study_name: str, study_id, workspace):
        self.api, self.settings, self.study_name = api, settings, study_name
        self._study_id = study_id  # a callable: the Prolific study, None before the first post
        self._workspace = workspace  # a callable: the workspace that pays (posting.workspace_id)

    @property
    def wanted(self) -> bool:
        """Whether the study file gives a public https address for webhooks (else: polling only)."""
        return bool(self.settings.webhook_url)

    def posted(self) -> bool:
        """Whether the Prolific study exists yet (subscriptions wait for it: events name its resources)."""
        return self._study_id() is not None

    def target(self) -> str:
        return target_url(self.settings.webhook_url, self.study_name)

    def subscribe(self, event_type: str) -> tuple[str, str]:
        """Subscribe the workspace to ``event_type`` at this study's address: (subscription id, signing secret)."""
        workspace = self._workspace()
        secret = workspace_secret(self.api, workspace)
        return subscribe(self.api, workspace, event_type, self.target()), secret

    def unsubscribe(self, remote_id: str) -> None:
        unsubscribe(self.api, remote_id)

    def current(self, event_type: str, resource_id: str) -> Facts:
        """Prolific's current state of the event's resource, read from the API (the event is only a hint)."""
        study_id = self._study_id()
        if study_id is None:
            return Facts(False)
        if event_type == "submission.status.change":
            try:
                sub = self.api.call("GET", f"/submissions/{resource_id}/") or {}
            except ProlificError as exc:
                if exc.status in (400, 403, 404):
                    return Facts(False)  # not a submission this account can see: not ours
                raise
            return Facts(sub.get("study_id") == study_id, sub.get("status"), sub.get("participant"))
        if resource_id != study_id:
            return Facts(False)
        study = self.api.call("GET", f"/studies/{study_id}/") or {}
        return Facts(True, study.get("status"))
