"""The fake Prolific's webhooks, participant groups, messages and test studies, each from its documentation.

Sources, as in :mod:`tests.fakes.prolific`: "API" is Prolific's API reference
(``tests/data/prolific-openapi.yml``, tag ``webhooks``, ``participant-groups``, ``messages``), "PLATFORMS"
is ``shared/docs/PLATFORMS.md`` (rows "webhooks: subscribe / receive / verify / delivery", "groups",
"messages", "screen-outs", "more"). Where both are silent the fake refuses rather than invents.

The sender is steered by the tests, who play the network: events wait in ``outbox`` until
:meth:`HookSender.deliver` sends them (each once, or twice, in order or shuffled, or lost), and
``hook_network`` maps a subscription's public https address to the test server that stands for it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
import secrets
import time
import uuid
from typing import Any, Callable

import requests
from werkzeug.wrappers import Request

MAX_ATTEMPTS = 12  # PLATFORMS (delivery): "up to 12 attempts over about 24 h"
EVENT_TYPES = (
    "submission.status.change",
    "study.status.change",
    "study.progress.change",
    "study.has_high_return_rate",
)  # PLATFORMS (subscribe): the event types


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """PLATFORMS (verify): signature = base64(HMAC-SHA256(secret, timestamp + body))."""
    return base64.b64encode(hmac.new(secret.encode(), timestamp.encode() + body, hashlib.sha256).digest()).decode()


class HookSender:
    """Mixed into :class:`tests.fakes.prolific.FakeProlific`: webhooks, groups, messages, test studies."""

    # -- state, created on first use (FakeProlific is a dataclass; these stay out of its fields) ----

    @property
    def hooks(self) -> dict[str, Any]:
        return self.__dict__.setdefault(
            "_hooks",
            {
                "secrets": {},
                "subscriptions": {},
                "outbox": [],
                "sent": [],
                "seen": {},
                "network": lambda url: url,
                "groups": {},
                "messages": [],
                "test_studies": [],
            },
        )

    @property
    def outbox(self) -> list[dict]:
        return self.hooks["outbox"]

    @property
    def messages(self) -> list[dict]:
        return self.hooks["messages"]

    def route_hooks(self, network: Callable[[str], str]) -> None:
        """Where a public https target is reached from here (the tests stand a local server in for it)."""
        self.hooks["network"] = network

    # -- events ----------------------------------------------------------------------------------------

    def _notice(self) -> None:
        """Emit an event for every submission or study whose status changed since the last look."""
        seen = self.hooks["seen"]
        for sub in self.submissions.values():
            if seen.get(sub["id"]) != sub["status"]:
                seen[sub["id"]] = sub["status"]
                # API (Receiving): submission.status.change → {resource_id, event_type, participant_id, status}
                self._emit(
                    "submission.status.change",
                    {"resource_id": sub["id"], "participant_id": sub["participant"], "status": sub["status"]},
                )
        for study in self.studies.values():
            if seen.get(study["id"]) != study["status"]:
                seen[study["id"]] = study["status"]
                # API (Receiving): study.status.change → {resource_id, event_type, metadata, status}; the
                # reference names metadata without its content, so the fake sends an empty object.
                self._emit(
                    "study.status.change", {"resource_id": study["id"], "metadata": {}, "status": study["status"]}
                )

    def high_return_rate(self, study_id: str) -> None:
        """Prolific notices many returns: study.has_high_return_rate → {resource_id, event_type, metadata}."""
        self._emit("study.has_high_return_rate", {"resource_id": study_id, "metadata": {}})

    def _emit(self, event_type: str, body: dict) -> None:
        for sub in self.hooks["subscriptions"].values():
            # API (create-subscription): only a confirmed, enabled subscription of that event type is notified.
            if sub["event_type"] == event_type and sub["confirmed"] and sub["is_enabled"]:
                event = {"event_type": event_type, **body}
                self.outbox.append(
                    {
                        "event_id": uuid.uuid4().hex,
                        "target": sub["target_url"],
                        "workspace": sub["workspace_id"],
                        "sent_at": time.time(),
                        "body": json.dumps(event).encode(),
                        "subscription": sub["id"],
                    }
                )

    def deliver(self, twice: bool = False, shuffle: int | None = None, lose: bool = False) -> list[int]:
        """Send what waits in the outbox: the answers' statuses. ``twice``: every event is delivered again
        (PLATFORMS, delivery: "the same event can arrive more than once"); ``shuffle``: in an order drawn with
        this seed ("and out of order"); ``lose``: nothing arrives (a target that cannot be reached)."""
        batch, self.hooks["outbox"] = list(self.outbox), []
        if lose:
            return []
        sends = batch + (batch if twice else [])
        if shuffle is not None:
            random.Random(shuffle).shuffle(sends)
        return [self._send(d) for d in sends]

    def _send(self, d: dict) -> int:
        status = 0
        for _attempt in range(MAX_ATTEMPTS):  # PLATFORMS (delivery): a non-2xx or slow answer is retried
            secret = self.hooks["secrets"].get(d["workspace"], {}).get("value", "")
            stamp = str(int(time.time()))
            headers = {
                "Content-Type": "application/json",
                "X-Prolific-Request-Timestamp": stamp,
                "X-Prolific-Request-Signature": sign(secret, stamp, d["body"]),
                # PLATFORMS (delivery): X-Event-ID is the same on every delivery of one event; X-Timestamp
                # is when it happened.
                "X-Event-ID": d["event_id"],
                "X-Timestamp": f"{d['sent_at']:.6f}",
            }
            try:
                status = requests.post(
                    self.hooks["network"](d["target"]), data=d["body"], headers=headers, timeout=10
                ).status_code
            except requests.RequestException:
                status = 0
            self.hooks["sent"].append({**d, "status": status})
            if 200 <= status < 300:
                break
        return status

    # -- screen-outs (PLATFORMS "screen-outs"; API FixedScreenOut) --------------------------------------

    @staticmethod
    def _screen_out_action(study: dict, code: str) -> dict | None:
        for c in study.get("completion_codes") or []:
            if c.get("code") == code:
                return next((a for a in c.get("actions") or [] if a.get("action") == "FIXED_SCREEN_OUT_PAYMENT"), None)
        return None

    def _screen_out(self, study: dict, sub: dict, code: str, action: dict) -> None:
        """The participant entered the screen-out code: screened out, paid the fixed amount, place freed."""
        sub["status"], sub["entered_code"], sub["completed_at"] = "SCREENED OUT", code, "2026-11-27T00:00:00Z"
        self.hooks.setdefault("screen_out_paid", []).append((sub["id"], action["fixed_screen_out_reward"]))
        self.workspace["available_balance"] -= action["fixed_screen_out_reward"]
        out = sum(
            1 for s in self.submissions.values() if s["study_id"] == study["id"] and s["status"] == "SCREENED OUT"
        )
        self._settle(study)
        if out >= action["slots"] and study["status"] == "ACTIVE":
            # API (FixedScreenOut, slots): "your study will pause after [slots] participants are screened out".
            study["status"] = "PAUSED"
            self._notice()

    # -- the webhook endpoints -------------------------------------------------------------------------

    def _event_types(self, body, request):
        return self._json_out({"results": [{"event_type": t, "description": t} for t in EVENT_TYPES]})

    def _list_secrets(self, body, request: Request):
        ws = request.args.get("workspace_id")
        row = self.hooks["secrets"].get(ws)
        return self._json_out({"results": [row] if row else []})

    def _create_secret(self, body, request):
        ws = body.get("workspace_id")
        if ws != self.workspace["id"]:
            return self._error_out(400, "Unknown workspace.")
        # API (create-secret): "If a secret already exists, this call will delete the old secret and create a new one."
        self.hooks["secrets"][ws] = {
            "id": uuid.uuid4().hex[:24],
            "value": secrets.token_urlsafe(32),
            "workspace_id": ws,
        }
        return self._json_out(self.hooks["secrets"][ws], 201)

    def _create_subscription(self, body, request):
        ws, target, kind = body.get("workspace_id"), body.get("target_url") or "", body.get("event_type")
        if ws not in self.hooks["secrets"]:
            # API (create-subscription): "you must ensure that you have created a secret for your workspace".
            return self._error_out(400, "Create a secret for the workspace first.")
        if kind not in EVENT_TYPES:
            return self._error_out(400, "Unknown event type.")
        if not target.startswith("https://"):
            return self._error_out(400, "target_url must be https.")  # PLATFORMS (subscribe): public https://
        sid = uuid.uuid4().hex[:24]
        self.hooks["subscriptions"][sid] = {
            "id": sid,
            "event_type": kind,
            "target_url": target,
            "is_enabled": True,
            "workspace_id": ws,
            "confirmed": False,
            "hook_secret": secrets.token_hex(16),
        }
        # PLATFORMS (subscribe): answers an id and an X-Hook-Secret header; API: 201 with a SubscriptionList.
        return self._json_out(
            {"results": [self._sub_view(sid)]}, 201, {"X-Hook-Secret": self.hooks["subscriptions"][sid]["hook_secret"]}
        )

    def _confirm_subscription(self, body, request, sid):
        sub = self.hooks["subscriptions"].get(sid)
        if sub is None:
            return self._error_out(404, "Not found.")
        if body.get("secret") != sub["hook_secret"]:
            return self._error_out(400, "The secret does not match.")  # API (SubscriptionConfirmation)
        sub["confirmed"] = True
        return self._json_out(self._sub_view(sid))

    def _get_subscription(self, body, request, sid):
        return (
            self._json_out(self._sub_view(sid))
            if sid in self.hooks["subscriptions"]
            else self._error_out(404, "Not found.")
        )

    def _delete_subscription(self, body, request, sid):
        if self.hooks["subscriptions"].pop(sid, None) is None:
            return self._error_out(404, "Not found.")
        return self._json_out({}, 204)  # API (delete-subscription): 204

    def _list_subscriptions(self, body, request):
        return self._json_out({"results": [self._sub_view(s) for s in self.hooks["subscriptions"]]})

    def _sub_view(self, sid: str) -> dict:
        sub = self.hooks["subscriptions"][sid]
        return {k: sub[k] for k in ("id", "event_type", "target_url", "is_enabled", "workspace_id")}

    # -- participant groups (API: participant-groups) ---------------------------------------------------

    def _allowed(self, study: dict) -> set[str] | None:
        """The members of the study's allowlist groups (PLATFORMS: the blocklist's allowlist twin); None: anyone."""
        groups = [
            gid
            for f in study.get("filters") or []
            if f.get("filter_id") == "participant_group_allowlist"
            for gid in f.get("selected_values") or []
        ]
        if not groups:
            return None
        return {p for gid in groups for p in self.groups.get(gid, [])}

    def _create_group(self, body, request):
        if body.get("workspace_id") != self.workspace["id"]:
            return self._error_out(400, "A workspace or organisation id must be given.")  # API (create)
        gid = uuid.uuid4().hex[:24]
        self.groups[gid] = list(dict.fromkeys(body.get("participant_ids") or []))
        self.hooks["groups"][gid] = {
            "name": body["name"],
            "workspace_id": body["workspace_id"],
            "description": body.get("description"),
        }
        return self._json_out(self._group_view(gid), 201)

    def _group_view(self, gid: str) -> dict:
        meta = self.hooks["groups"].get(gid, {})
        return {
            "id": gid,
            "name": meta.get("name", ""),
            "project_id": None,
            "workspace_id": meta.get("workspace_id"),
            "organisation_id": None,
            "description": meta.get("description"),
            "participant_count": len(self.groups[gid]),
            "is_deleted": False,
            "feeder_studies": [],
        }

    def _group_members(self, body, request, gid):
        if gid not in self.groups:
            return self._error_out(404, "Participant group not found.")
        return self._json_out(
            {"results": [{"participant_id": p, "datetime_created": "2026-11-27T00:00:00Z"} for p in self.groups[gid]]}
        )

    # -- messages (API: messages) -----------------------------------------------------------------------

    def _send_message(self, body, request):
        if body.get("study_id") not in self.studies:
            return self._error_out(400, "Unknown study.")
        self.messages.append({"to": body["recipient_id"], "body": body["body"], "study_id": body["study_id"]})
        return self._json_out({}, 204)  # API (POST /messages/): 204

    def _send_bulk(self, body, request):
        if body.get("study_id") not in self.studies:
            return self._error_out(400, "Unknown study.")
        for pid in body.get("ids") or []:
            self.messages.append({"to": pid, "body": body["body"], "study_id": body["study_id"]})
        return self._json_out({}, 204)  # API (POST /messages/bulk/): 204

    # -- test study (PLATFORMS "more"; API create-test-study) -------------------------------------------

    def _test_study(self, body, request, sid):
        study = self.studies.get(sid)
        if study is None:
            return self._error_out(404, "Not found.")
        if study["status"] != "UNPUBLISHED":
            return self._error_out(400, "Only an unpublished study can be tested.")  # silent in the docs: refused
        tid = uuid.uuid4().hex[:24]
        self.hooks["test_studies"].append({"study_id": tid, "of": sid})
        # The docs say only that a study is created for the test; the fake makes it a one-place copy that
        # recruits at once, so a test can play the coordinator taking it.
        self.studies[tid] = {
            **study,
            "id": tid,
            "status": "ACTIVE",
            "total_available_places": 1,
            "internal_name": f"test of {study.get('internal_name')}",
            "_test_of": sid,
        }
        # API (TestStudySetUpResponse): the id and the URL of the study created for the test.
        return self._json_out({"study_id": tid, "study_url": f"https://app.prolific.com/studies/{tid}"})


def hook_routes(cls) -> list[tuple[str, str, Callable]]:
    """The endpoints above, as (method, path regex, handler) rows for the fake's route table."""
    return [
        ("GET", r"/hooks/event-types/", cls._event_types),
        ("GET", r"/hooks/secrets/", cls._list_secrets),
        ("POST", r"/hooks/secrets/", cls._create_secret),
        ("GET", r"/hooks/subscriptions/", cls._list_subscriptions),
        ("POST", r"/hooks/subscriptions/", cls._create_subscription),
        ("GET", r"/hooks/subscriptions/([^/]+)/", cls._get_subscription),
        ("POST", r"/hooks/subscriptions/([^/]+)/", cls._confirm_subscription),
        ("DELETE", r"/hooks/subscriptions/([^/]+)/", cls._delete_subscription),
        ("POST", r"/participant-groups/", cls._create_group),
        ("GET", r"/participant-groups/([^/]+)/participants/", cls._group_members),
        ("POST", r"/messages/", cls._send_message),
        ("POST", r"/messages/bulk/", cls._send_bulk),
        ("POST", r"/studies/([^/]+)/test-study", cls._test_study),
    ]
