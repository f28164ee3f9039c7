"""A local fake of MTurk's requester API, speaking its JSON 1.1 wire protocol on 127.0.0.1.

boto3 is pointed at it with ``endpoint_url`` and dummy credentials, so the real client serialises
every call and parses every answer. The fake reads ``X-Amz-Target:
MTurkRequesterServiceV20170117.<Operation>``, keeps its marketplace in memory, answers JSON as
MTurk does, and reports errors as ``{"__type": ..., "Message": ...}`` with HTTP 400.

Faithful to botocore's service model (``botocore/data/mturk/2017-01-17/service-2.json``), which
PLATFORMS.md names as the contract: every request is checked against the operation's input shape
(required members, string lengths and patterns, integer ranges, enums) and refused with
``ValidationException`` as the service would; assignment statuses are only the model's
Submitted / Approved / Rejected, so work accepted but not submitted is invisible.

What tests steer: :meth:`FakeMTurk.inject` makes the next calls of an operation fail (before the
operation runs, or — with ``after=True`` — after it ran, as a response lost on the way back). A
fault is an MTurk error type (``ServiceFault``, ``ThrottlingException``…) answered with ``status``
(400 by default, 500 for a server error), or ``"Timeout"``: the answer is held back ``hold_s``
seconds, longer than the client waits. ``page_limit`` caps every listing's page size, so clients
must follow ``NextToken``;
:meth:`FakeMTurk.submit_assignment` plays a worker who accepted and submitted. ``requests`` records
every call as ``(operation, body)``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import threading
import time
import uuid
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TARGET_PREFIX = "MTurkRequesterServiceV20170117."
TOKEN_LIFETIME_S = 24 * 3600
"""UniqueRequestToken: "valid for 24 hours" (service-2.json, CreateHITWithHITType.UniqueRequestToken)."""


def _service_model():
    import botocore.session

    return botocore.session.get_session().get_service_model("mturk")


def validate(shape, value, where: str) -> None:
    """Raise _Fault(ValidationException) where ``value`` breaks ``shape`` (botocore's service model)."""
    meta = shape.metadata
    if shape.type_name == "structure":
        if not isinstance(value, dict):
            raise _Fault("ValidationException", f"{where} must be a structure")
        for name in shape.required_members:  # service-2.json "required"
            if name not in value:
                raise _Fault("ValidationException", f"{where}.{name} is required")
        for name, item in value.items():
            if name not in shape.members:
                raise _Fault("ValidationException", f"{where}.{name} is not a member of {shape.name}")
            validate(shape.members[name], item, f"{where}.{name}")
    elif shape.type_name == "list":
        for i, item in enumerate(value):
            validate(shape.member, item, f"{where}[{i}]")
    elif shape.type_name == "string":
        if not isinstance(value, str):
            raise _Fault("ValidationException", f"{where} must be a string")
        if not meta.get("min", 0) <= len(value) <= meta.get("max", 1 << 30):  # service-2.json "min"/"max"
            raise _Fault(
                "ValidationException", f"{where} must be {meta.get('min', 0)} to {meta.get('max')} characters long"
            )
        if "pattern" in meta and not re.search(meta["pattern"], value):  # service-2.json "pattern"
            raise _Fault("ValidationException", f"{where} {value!r} does not match {meta['pattern']}")
        if shape.enum and value not in shape.enum:  # service-2.json "enum"
            raise _Fault("ValidationException", f"{where} {value!r} is not one of {shape.enum}")
    elif shape.type_name in ("integer", "long"):
        if not meta.get("min", -(1 << 63)) <= value <= meta.get("max", 1 << 63):
            raise _Fault("ValidationException", f"{where} {value} is out of range")


def dummy_aws(monkeypatch, tmp_path) -> None:
    """Dummy credentials, and no AWS config of the machine running the tests."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


class _Fault(Exception):
    def __init__(self, kind: str, message: str):
        self.kind, self.message = kind, message
        super().__init__(message)


def _now() -> float:
    return dt.datetime.now(dt.timezone.utc).timestamp()


class FakeMTurk:
    """MTurk's requester API in memory, served over HTTP until :meth:`stop`."""

    def __init__(self, balance: str = "10000.00"):
        self.balance = Decimal(balance)
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.hit_types: dict[str, dict[str, Any]] = {}
        self.hits: dict[str, dict[str, Any]] = {}
        self.assignments: dict[str, dict[str, Any]] = {}
        self.bonuses: list[dict[str, Any]] = []
        self.qualification_types: dict[str, dict[str, Any]] = {}
        self.worker_qualifications: list[dict[str, Any]] = []
        self._tokens: dict[tuple[str, str], float] = {}
        self.model = _service_model()
        self._faults: dict[str, list[tuple[str, bool, int]]] = {}
        self.page_limit = 100
        self.hold_s = 3.0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        # Polled every 0.05 s, not every 0.5 s: stop() waits for the next look, once per test.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    # Running ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeMTurk:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # Steering -----------------------------------------------------------------------------
    def inject(
        self, operation: str, kind: str = "ServiceFault", times: int = 1, after: bool = False, status: int = 400
    ) -> None:
        """Fail the next ``times`` calls of ``operation`` with error ``kind``; ``after``: once it has run."""
        with self._lock:
            self._faults.setdefault(operation, []).extend([(kind, after, status)] * times)

    def calls(self, operation: str) -> list[dict[str, Any]]:
        """The bodies of every ``operation`` call received, in order."""
        return [body for op, body in self.requests if op == operation]

    def submit_assignment(self, hit_id: str, worker_id: str, answer: str = "<QuestionFormAnswers/>") -> str:
        """A worker accepts and submits one assignment of ``hit_id``; return its id."""
        with self._lock:
            hit = self.hits[hit_id]
            assignment_id = self._new_id("A")
            now = _now()
            self.assignments[assignment_id] = {
                "AssignmentId": assignment_id,
                "WorkerId": worker_id,
                "HITId": hit_id,
                "AssignmentStatus": "Submitted",
                "AcceptTime": now - 60,
                "SubmitTime": now,
                "AutoApprovalTime": now + 3 * 86400,
                "Answer": answer,
            }
            hit["NumberOfAssignmentsCompleted"] += 1
            hit["NumberOfAssignmentsAvailable"] -= 1
            return assignment_id

    def accept_assignment(self, hit_id: str, worker_id: str) -> str:
        """A worker accepts one assignment of ``hit_id`` on MTurk (not yet submitted); return its id."""
        with self._lock:
            hit = self.hits[hit_id]
            if hit["NumberOfAssignmentsAvailable"] <= 0:
                raise ValueError(f"HIT {hit_id} has no place left")
            held = {q["QualificationTypeId"] for q in self.worker_qualifications if q["WorkerId"] == worker_id}
            for req in hit["QualificationRequirements"]:
                if req["Comparator"] == "DoesNotExist" and req["QualificationTypeId"] in held:
                    raise PermissionError(f"worker {worker_id} holds {req['QualificationTypeId']}; MTurk hides the HIT")
            assignment_id = self._new_id("A")
            # Not a status of botocore's AssignmentStatus enum: the requester API never shows it.
            self.assignments[assignment_id] = {
                "AssignmentId": assignment_id,
                "WorkerId": worker_id,
                "HITId": hit_id,
                "AssignmentStatus": "Accepted",
                "AcceptTime": _now(),
            }
            hit["NumberOfAssignmentsAvailable"] -= 1
            hit["NumberOfAssignmentsPending"] += 1
            return assignment_id

    def external_submit(self, assignment_id: str) -> None:
        """The worker's browser posts the hand-back form: the assignment is Submitted."""
        with self._lock:
            a = self.assignments[assignment_id]
            a.update(
                AssignmentStatus="Submitted",
                SubmitTime=_now(),
                AutoApprovalTime=_now() + 3 * 86400,
                Answer="<QuestionFormAnswers/>",
            )
            hit = self.hits[a["HITId"]]
            hit["NumberOfAssignmentsPending"] -= 1
            hit["NumberOfAssignmentsCompleted"] += 1

    # The protocol -------------------------------------------------------------------------
    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                target = self.headers.get("X-Amz-Target", "")
                status, payload = fake._dispatch(target, body, self.headers.get("Content-Type", ""))
                if status == 0:  # a timeout: the client gives up before the answer comes
                    time.sleep(fake.hold_s)
                    self.close_connection = True
                    return
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.1")
                self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def _dispatch(self, target: str, body: dict[str, Any], content_type: str) -> tuple[int, dict[str, Any]]:
        if not target.startswith(TARGET_PREFIX) or not content_type.startswith("application/x-amz-json-1.1"):
            return 400, {"__type": "UnknownOperationException", "Message": f"bad target {target!r}"}
        operation = target[len(TARGET_PREFIX) :]
        with self._lock:
            self.requests.append((operation, body))
            pending = self._faults.get(operation) or []
            fault = pending.pop(0) if pending else None
            if fault is not None and not fault[1]:
                return self._fault_answer(fault)
            method = getattr(self, "_op_" + operation, None)
            if method is None or operation not in self.model.operation_names:
                return 400, {"__type": "UnknownOperationException", "Message": operation}
            try:
                validate(self.model.operation_model(operation).input_shape, body, operation)
                result = method(body)
            except _Fault as exc:
                return 400, {"__type": exc.kind, "Message": exc.message}
            if fault is not None:  # the work is done, but the answer never arrives
                return self._fault_answer(fault)
            return 200, result

    @staticmethod
    def _fault_answer(fault: tuple[str, bool, int]) -> tuple[int, dict[str, Any]]:
        kind, _, status = fault
        if kind == "Timeout":
            return 0, {}
        return status, {"__type": kind, "Message": f"injected {kind}"}

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):029d}"

    def _once(self, operation: str, body: dict[str, Any], token: str | None = None) -> None:
        """A second request with the same token within 24 hours is refused (service-2.json,
        UniqueRequestToken); tokens are per requester account, i.e. per fake."""
        token = token if token is not None else body.get("UniqueRequestToken")
        if token is None:
            return
        seen = self._tokens.get((operation, token))
        if seen is not None and _now() - seen < TOKEN_LIFETIME_S:
            raise _Fault(
                "RequestError", f'The idempotency token "{token}" has already been processed. ({int(_now() * 1000)})'
            )
        self._tokens[(operation, token)] = _now()

    def _hit(self, hit_id: str) -> dict[str, Any]:
        if hit_id not in self.hits:
            raise _Fault("RequestError", f"Hit {hit_id} does not exist. ({int(_now() * 1000)})")
        return self.hits[hit_id]

    def _assignment(self, assignment_id: str) -> dict[str, Any]:
        # Accepted but unsubmitted work is not the requester's to see (AssignmentStatus enum).
        if assignment_id not in self.assignments or self.assignments[assignment_id]["AssignmentStatus"] == "Accepted":
            raise _Fault("RequestError", f"Assignment {assignment_id} does not exist.")
        return self.assignments[assignment_id]

    # Operations ---------------------------------------------------------------------------
    def _op_GetAccountBalance(self, body):  # service-2.json GetAccountBalance: AvailableBalance as text
        return {"AvailableBalance": f"{self.balance:.2f}"}

    def _op_CreateHITType(self, body):
        for key in ("Title", "Description", "Reward", "AssignmentDurationInSeconds"):
            if key not in body:
                raise _Fault("ValidationException", f"{key} is required")
        # service-2.json CreateHITType: "If you register a HIT type with values that match an existing HIT
        # type, the HIT type ID of the existing type will be returned."
        signature = json.dumps(body, sort_keys=True)
        if signature not in self.hit_types:
            self.hit_types[signature] = {"HITTypeId": self._new_id("T"), **body}
        return {"HITTypeId": self.hit_types[signature]["HITTypeId"]}

    def _op_CreateHITWithHITType(self, body):
        types = {t["HITTypeId"]: t for t in self.hit_types.values()}
        if body.get("HITTypeId") not in types:
            raise _Fault("RequestError", f"HIT type {body.get('HITTypeId')} does not exist.")
        self._once("CreateHITWithHITType", body)  # service-2.json: UniqueRequestToken, no duplicate HITs
        hit_type = types[body["HITTypeId"]]
        hit_id = self._new_id("H")
        now = _now()
        self.hits[hit_id] = {
            "HITId": hit_id,
            "HITTypeId": body["HITTypeId"],
            "HITGroupId": "G" + body["HITTypeId"][1:],
            "CreationTime": now,
            "Title": hit_type["Title"],
            "Description": hit_type["Description"],
            "Question": body["Question"],
            "HITStatus": "Assignable",
            "MaxAssignments": body["MaxAssignments"],
            "Reward": hit_type["Reward"],
            "Expiration": now + body["LifetimeInSeconds"],
            "RequesterAnnotation": body.get("RequesterAnnotation", ""),
            "QualificationRequirements": hit_type.get("QualificationRequirements", []),
            "NumberOfAssignmentsPending": 0,
            "NumberOfAssignmentsAvailable": body["MaxAssignments"],
            "NumberOfAssignmentsCompleted": 0,
        }
        return {"HIT": self.hits[hit_id]}

    def _op_GetHIT(self, body):
        return {"HIT": self._hit(body["HITId"])}

    def _op_ListHITs(self, body):
        hits = sorted(self.hits.values(), key=lambda h: h["HITId"])
        start = int(body.get("NextToken") or 0)
        size = int(body.get("MaxResults") or 10)
        page = hits[start : start + size]
        out: dict[str, Any] = {"NumResults": len(page), "HITs": page}
        if start + size < len(hits):
            out["NextToken"] = str(start + size)
        return out

    def _op_UpdateExpirationForHIT(self, body):
        hit = self._hit(body["HITId"])
        # MTurk keys this call by HIT and time: the same pair again is "already been processed"
        # (the token in the error is HITId + the time; Dallinger/Dallinger#3109).
        self._once("UpdateExpirationForHIT", body, f"{body['HITId']}{body['ExpireAt']}")
        hit["Expiration"] = body["ExpireAt"]
        hit["HITStatus"] = "Unassignable" if body["ExpireAt"] <= _now() else "Assignable"
        return {}

    def _op_CreateAdditionalAssignmentsForHIT(self, body):
        hit = self._hit(body["HITId"])
        extra = body["NumberOfAdditionalAssignments"]
        # service-2.json CreateAdditionalAssignmentsForHIT: fewer than 10 may not be extended to 10 or more.
        if hit["MaxAssignments"] < 10 <= hit["MaxAssignments"] + extra:
            raise _Fault(
                "RequestError",
                "HITs created with fewer than 10 assignments cannot be extended to have 10 or more assignments.",
            )
        self._once("CreateAdditionalAssignmentsForHIT", body)
        hit["MaxAssignments"] += extra
        hit["NumberOfAssignmentsAvailable"] += extra
        return {}

    def _op_ListAssignmentsForHIT(self, body):
        self._hit(body["HITId"])
        statuses = body.get("AssignmentStatuses") or ["Submitted", "Approved", "Rejected"]
        rows = sorted(
            (a for a in self.assignments.values() if a["HITId"] == body["HITId"] and a["AssignmentStatus"] in statuses),
            key=lambda a: a["AssignmentId"],
        )
        start = int(body.get("NextToken") or 0)
        size = min(int(body.get("MaxResults") or 10), self.page_limit)
        page = rows[start : start + size]
        out: dict[str, Any] = {"NumResults": len(page), "Assignments": page}
        if start + size < len(rows):
            out["NextToken"] = str(start + size)
        return out

    def _op_GetAssignment(self, body):
        a = self._assignment(body["AssignmentId"])
        return {"Assignment": a, "HIT": self.hits[a["HITId"]]}

    def _decide(self, body, status: str):
        a = self._assignment(body["AssignmentId"])
        # service-2.json ApproveAssignment: a rejected assignment is approved only with OverrideRejection.
        overriding = status == "Approved" and a["AssignmentStatus"] == "Rejected" and body.get("OverrideRejection")
        if a["AssignmentStatus"] != "Submitted" and not overriding:
            raise _Fault(
                "RequestError",
                f"This operation can be called with a status of: Submitted "
                f"(assignment {a['AssignmentId']} is {a['AssignmentStatus']})",
            )
        if status == "Approved":
            # service-2.json ApproveAssignment: without funds for the reward and fees, "the call ...
            # returns an exception, and the approval is not processed".
            reward = Decimal(self.hits[a["HITId"]]["Reward"])
            if self.balance < reward:
                raise _Fault("RequestError", "Your account balance is insufficient to approve this assignment.")
            self.balance -= reward
        a["AssignmentStatus"] = status
        if body.get("RequesterFeedback"):
            a["RequesterFeedback"] = body["RequesterFeedback"]
        return {}

    def _op_ApproveAssignment(self, body):
        return self._decide(body, "Approved")

    def _op_RejectAssignment(self, body):
        # service-2.json RejectAssignment: RequesterFeedback is a required member.
        if not body.get("RequesterFeedback"):
            raise _Fault("ValidationException", "RequesterFeedback is required")
        return self._decide(body, "Rejected")

    def _op_SendBonus(self, body):
        a = self._assignment(body["AssignmentId"])
        # service-2.json SendBonus: "requires the Worker's ID and the assignment ID" of their work.
        if a["WorkerId"] != body["WorkerId"]:
            raise _Fault("RequestError", "the worker did not work on this assignment")
        if not body.get("Reason"):
            raise _Fault("ValidationException", "Reason is required")
        # service-2.json SendBonus: "fails if your account does not have enough funds".
        if self.balance < Decimal(body["BonusAmount"]):
            raise _Fault("RequestError", "Your account balance is insufficient to send this bonus.")
        self._once("SendBonus", body)  # service-2.json: UniqueRequestToken, no duplicate bonuses
        self.bonuses.append({**body, "GrantTime": _now()})
        self.balance -= Decimal(body["BonusAmount"])
        return {}

    def _op_ListBonusPayments(self, body):
        # service-2.json ListBonusPayments.HITId: "Either the HITId parameter or the AssignmentId
        # parameter must be specified".
        if bool(body.get("HITId")) == bool(body.get("AssignmentId")):
            raise _Fault("ValidationException", "Either the HITId or the AssignmentId parameter must be specified")
        rows = [
            {
                "WorkerId": b["WorkerId"],
                "BonusAmount": b["BonusAmount"],
                "AssignmentId": b["AssignmentId"],
                "Reason": b["Reason"],
                "GrantTime": b["GrantTime"],
            }
            for b in self.bonuses
            if b["AssignmentId"] == body.get("AssignmentId")
            or self.assignments[b["AssignmentId"]]["HITId"] == body.get("HITId")
        ]
        start = int(body.get("NextToken") or 0)
        size = min(int(body.get("MaxResults") or 10), self.page_limit)
        out: dict[str, Any] = {
            "NumResults": len(rows[start : start + size]),
            "BonusPayments": rows[start : start + size],
        }
        if start + size < len(rows):
            out["NextToken"] = str(start + size)
        return out

    def _op_CreateQualificationType(self, body):
        # A requester's Qualification type names are unique (MTurk answers RequestError on a repeat).
        if any(q["Name"] == body["Name"] for q in self.qualification_types.values()):
            raise _Fault("RequestError", f"You have already created a QualificationType with this name: {body['Name']}")
        qid = self._new_id("Q")
        self.qualification_types[qid] = {"QualificationTypeId": qid, "CreationTime": _now(), **body}
        return {"QualificationType": self.qualification_types[qid]}

    def _op_ListQualificationTypes(self, body):
        query = (body.get("Query") or "").lower()
        found = [q for q in self.qualification_types.values() if query in q["Name"].lower()]
        return {"NumResults": len(found), "QualificationTypes": found}

    def _op_AssociateQualificationWithWorker(self, body):
        # service-2.json: "You can only assign a Qualification of a Qualification type that you created".
        if body["QualificationTypeId"] not in self.qualification_types:
            raise _Fault("RequestError", f"QualificationType {body['QualificationTypeId']} does not exist.")
        self.worker_qualifications.append(dict(body))
        return {}
