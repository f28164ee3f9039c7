"""A local fake of Prolific's REST API v1: studies, submissions, bonuses and participant groups.

It answers like Prolific (JSON bodies, 201/202/204/400/401/404/429) from state kept in memory, and
records every request so tests can assert on what hitkit sent. Tests steer it: ``start_session``
is a participant starting the study, ``throttle`` answers the next calls with 429, ``fail_next``
answers one call to a path with an error (with ``after=True`` once the call has done its work, as an
answer lost on the way back), and ``hold_next`` holds one answer back longer than the client waits
(a timeout; the call's work is done).
"""
from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

TOKEN = "fake-prolific-token"


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    authorization: str | None


@dataclass
class FakeProlific:
    """The fake's state; ``url`` is the API root to put in ``provider.prolific.api_url``."""

    studies: dict[str, dict] = field(default_factory=dict)
    submissions: dict[str, dict] = field(default_factory=dict)
    bonuses: dict[str, dict] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    paid: list[str] = field(default_factory=list)
    url: str = ""
    _throttle: list[str] = field(default_factory=list)
    _fail: dict[str, list[tuple[int, bool]]] = field(default_factory=dict)
    _hold: dict[str, list[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # steering

    def throttle(self, times: int, retry_after: str = "0") -> None:
        """Answer the next ``times`` calls with 429 and this Retry-After header."""
        self._throttle += [retry_after] * times

    def fail_next(self, pattern: str, status: int = 503, after: bool = False) -> None:
        """Answer the next call whose ``METHOD path`` matches the regex ``pattern`` with ``status``."""
        self._fail.setdefault(pattern, []).append((status, after))

    def hold_next(self, pattern: str, seconds: float = 3.0) -> None:
        """Do the next matching call's work, then hold its answer back ``seconds`` (the client times out)."""
        self._hold.setdefault(pattern, []).append(seconds)

    def start_session(self, participant_id: str, study_id: str) -> str:
        """A participant starts the study on Prolific: a new ACTIVE submission (the SESSION_ID)."""
        sid = uuid.uuid4().hex[:24]
        self.submissions[sid] = {"id": sid, "participant_id": participant_id, "study_id": study_id,
                                 "status": "ACTIVE", "study_code": None}
        return sid

    def complete(self, submission_id: str, code: str) -> None:
        """The participant reaches the completion URL with ``code``."""
        sub = self.submissions[submission_id]
        sub["status"], sub["study_code"] = "AWAITING REVIEW", code

    def calls(self, method: str, path_regex: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and re.fullmatch(path_regex, r.path)]

    # the wire

    def __call__(self, environ, start_response):
        request = Request(environ)
        with self._lock:
            response = self._answer(request)
            hold = next((waits.pop(0) for pattern, waits in self._hold.items()
                         if waits and re.fullmatch(pattern, f"{request.method} {request.path.removeprefix('/api/v1')}")),
                        0.0)
        if hold:
            threading.Event().wait(hold)  # not time.sleep, which tests stub out for Prolific's back-off
        return response(environ, start_response)

    def _answer(self, request: Request) -> Response:
        body = request.get_json(silent=True) if request.data else None
        path = request.path.removeprefix("/api/v1")
        self.requests.append(Recorded(request.method, path, body, request.headers.get("Authorization")))
        if request.headers.get("Authorization") != f"Token {TOKEN}":
            return _json({"error": {"detail": "Invalid token."}}, 401)
        if self._throttle:
            return _json({"error": {"detail": "Request was throttled."}}, 429,
                         {"Retry-After": self._throttle.pop(0)})
        fault = None
        for pattern, statuses in list(self._fail.items()):
            if statuses and re.fullmatch(pattern, f"{request.method} {path}"):
                fault = statuses.pop(0)
                break
        if fault is not None and not fault[1]:
            return _json({"error": {"detail": "Service unavailable."}}, fault[0])
        for method, regex, handler in ROUTES:
            match = re.fullmatch(regex, path)
            if match and method == request.method:
                answer = handler(self, body or {}, *match.groups())
                if fault is not None:  # the work is done, the answer is lost
                    return _json({"error": {"detail": "Bad gateway."}}, fault[0])
                return answer
        return _json({"error": {"detail": "Not found."}}, 404)

    # handlers

    def _create_study(self, body):
        missing = [k for k in ("name", "description", "external_study_url", "total_available_places", "reward",
                               "estimated_completion_time", "completion_codes") if k not in body]
        if missing:
            return _json({"error": {"detail": {k: ["This field is required."] for k in missing}}}, 400)
        sid = uuid.uuid4().hex[:24]
        self.studies[sid] = {**body, "id": sid, "status": "UNPUBLISHED"}
        return _json(self.studies[sid], 201)

    def _list_studies(self, body, project=None):
        rows = [s for s in self.studies.values() if project is None or s.get("project") == project]
        return _json({"results": rows})

    def _get_study(self, body, sid):
        return _json(self.studies[sid]) if sid in self.studies else _json({"error": {"detail": "Not found."}}, 404)

    def _patch_study(self, body, sid):
        study = self.studies.get(sid)
        if study is None:
            return _json({"error": {"detail": "Not found."}}, 404)
        places = body.get("total_available_places")
        if places is not None and study["status"] != "UNPUBLISHED" and places < study["total_available_places"]:
            return _json({"error": {"detail": "Places can only be increased on a published study."}}, 400)
        study.update(body)
        return _json(study)

    def _transition_study(self, body, sid):
        study = self.studies.get(sid)
        allowed = {"PUBLISH": ("UNPUBLISHED",), "PAUSE": ("ACTIVE",), "START": ("PAUSED",),
                   "STOP": ("ACTIVE", "PAUSED")}
        new = {"PUBLISH": "ACTIVE", "PAUSE": "PAUSED", "START": "ACTIVE", "STOP": "COMPLETED"}
        action = body.get("action")
        if study is None:
            return _json({"error": {"detail": "Not found."}}, 404)
        if action not in allowed or study["status"] not in allowed[action]:
            return _json({"error": {"detail": f"Cannot {action} a study that is {study['status']}."}}, 400)
        study["status"] = new[action]
        return _json(study)

    def _get_submission(self, body, sid):
        sub = self.submissions.get(sid)
        return _json(sub) if sub else _json({"error": {"detail": "Not found."}}, 404)

    def _study_submissions(self, body, sid):
        return _json({"results": [s for s in self.submissions.values() if s["study_id"] == sid],
                      "_links": {"next": {"href": None}}})

    def _transition_submission(self, body, sid):
        sub = self.submissions.get(sid)
        if sub is None:
            return _json({"error": {"detail": "Not found."}}, 404)
        if sub["status"] != "AWAITING REVIEW":
            return _json({"error": {"detail": f"Submission is {sub['status']}."}}, 400)
        if body.get("action") == "APPROVE":
            sub["status"] = "APPROVED"
        elif body.get("action") == "REJECT":
            if len(body.get("message", "")) < 100 or not body.get("rejection_category"):
                return _json({"error": {"detail": "A message of 100+ characters and a category are required."}},
                             400)
            sub["status"] = "REJECTED"
        else:
            return _json({"error": {"detail": "Unknown action."}}, 400)
        return _json(sub)

    def _bulk_approve(self, body):
        for sid in body.get("submission_ids", []):
            if self.submissions.get(sid, {}).get("status") == "AWAITING REVIEW":
                self.submissions[sid]["status"] = "APPROVED"
        return _json("The request to bulk approve has been made successfully.", 200)

    def _create_bonus(self, body):
        study = body.get("study_id")
        if study not in self.studies:
            return _json({"error": {"detail": "Study not found."}}, 400)
        rows = [line.split(",") for line in body.get("csv_bonuses", "").strip().splitlines()]
        bid = uuid.uuid4().hex[:24]
        amount = sum(round(float(a) * 100) for _, a in rows)
        self.bonuses[bid] = {"id": bid, "study": study, "rows": rows, "amount": amount, "fees": 0,
                             "total_amount": amount, "paid": False}
        return _json({k: v for k, v in self.bonuses[bid].items() if k not in ("rows", "paid")}, 201)

    def _pay_bonus(self, body, bid):
        bonus = self.bonuses.get(bid)
        if bonus is None:
            return _json({"error": {"detail": "Not found."}}, 404)
        # Like Prolific, paying the same bulk bonus again pays again: the fake counts every payment.
        self.paid.append(bid)
        bonus["paid"] = True
        return Response(status=202)

    def _add_to_group(self, body, gid):
        self.groups.setdefault(gid, [])
        for pid in body.get("participant_ids", []):
            if pid not in self.groups[gid]:
                self.groups[gid].append(pid)
        return _json({"results": [{"participant_id": p} for p in self.groups[gid]]})


ROUTES = [
    ("POST", r"/studies/", FakeProlific._create_study),
    ("GET", r"/studies/", FakeProlific._list_studies),
    ("GET", r"/projects/([^/]+)/studies/", FakeProlific._list_studies),
    ("GET", r"/studies/([^/]+)/", FakeProlific._get_study),
    ("PATCH", r"/studies/([^/]+)/", FakeProlific._patch_study),
    ("POST", r"/studies/([^/]+)/transition/", FakeProlific._transition_study),
    ("GET", r"/studies/([^/]+)/submissions/", FakeProlific._study_submissions),
    ("POST", r"/submissions/bulk-approve/", FakeProlific._bulk_approve),
    ("POST", r"/submissions/bonus-payments/", FakeProlific._create_bonus),
    ("GET", r"/submissions/([^/]+)/", FakeProlific._get_submission),
    ("POST", r"/submissions/([^/]+)/transition/", FakeProlific._transition_submission),
    ("POST", r"/bulk-bonus-payments/([^/]+)/pay/", FakeProlific._pay_bonus),
    ("POST", r"/participant-groups/([^/]+)/participants/", FakeProlific._add_to_group),
]


def _json(data: Any, status: int = 200, headers: dict | None = None) -> Response:
    return Response(json.dumps(data), status=status, headers=headers, content_type="application/json")


class FakeProlificServer:
    """The fake served on 127.0.0.1 in a background thread (``with FakeProlificServer() as fake``)."""

    def __init__(self):
        self.fake = FakeProlific()
        self._server = make_server("127.0.0.1", 0, self.fake, threaded=True)
        self.fake.url = f"http://127.0.0.1:{self._server.server_port}/api/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeProlific:
        self._thread.start()
        return self.fake

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._thread.join(5)
