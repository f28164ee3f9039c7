"""A local fake of Prolific's REST API v1, built from PLATFORMS.md and Prolific's OpenAPI document.

Every behaviour carries a one-line comment naming its source: "API" is Prolific's API reference
(``shared/docs/prolific-openapi.yml``), "PLATFORMS" is ``shared/docs/PLATFORMS.md``. Where both are
silent the fake refuses (HTTP 400 "not documented") rather than invent success.

Every request hitkit sends and every successful answer the fake gives is validated against the
OpenAPI document (``openapi-core``); a mismatch is kept in ``violations`` (tests assert it stays
empty) and a request that breaks the schema is answered 400, as Prolific would.

Tests play the participants and the clock: ``start_session`` (a participant starts the study; Prolific
enforces places and the per-participant limit), ``complete`` (they reach the completion URL),
``return_session`` / ``time_out``, and steer faults: ``throttle`` (429), ``fail_next`` (an error
before or after the work is done) and ``hold_next`` (an answer held back past the client's timeout).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from tests.fakes.prolific_hooks import HookSender, hook_routes

TOKEN = "fake-prolific-token"
_REPO = Path(__file__).resolve().parents[2]
# Prolific's API reference as archived on 2026-10-04 (docs.prolific.com/openapi.json), kept with the tests so
# a clone validates against it with nothing beside it.
SPEC = _REPO / "tests" / "data" / "prolific-openapi.yml"
FEE_RATE = Decimal("0.333")  # PLATFORMS: fees about 33.3 % on rewards and bonuses
VAT_RATE = Decimal("0.20")  # PLATFORMS: "+ VAT" (UK rate)
MIN_HOURLY = {"GBP": Decimal(6), "USD": Decimal(8)}  # PLATFORMS: minimum £6 / $8 per hour
# PLATFORMS: RETURNED / TIMED-OUT / REJECTED free the place; (screen-outs) "the place is freed".
FREEING = ("RETURNED", "TIMED-OUT", "REJECTED", "SCREENED OUT")
UNREVIEWED = ("RESERVED", "ACTIVE", "AWAITING REVIEW")
PAGE_SIZE = 3  # small, so that every list hitkit reads spans pages (API: lists paginate, `_links.next.href`)


def new_id() -> str:
    """A Prolific-shaped id: 24 hexadecimal characters (API: ids in every example)."""
    return uuid.uuid4().hex[:24]


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z")


@lru_cache(maxsize=1)
def _openapi():
    """Prolific's OpenAPI document, loaded once; its one server is made relative so the fake's host matches."""
    import yaml
    from openapi_core import Config, OpenAPI

    spec = yaml.safe_load(SPEC.resolve().read_text())
    spec["servers"] = [{"url": "/"}]
    # The archived document breaks one naming rule of OpenAPI itself (spaces in schema names): skip that check.
    return OpenAPI.from_dict(spec, config=Config(spec_validator_cls=None))


class Refused(Exception):
    """Prolific does not let a participant start the study (no place, not eligible, limit reached)."""


@dataclass
class Stall:
    """A call the test holds (see :meth:`FakeProlific.stall_next`)."""

    pattern: str
    before: bool
    skip: int = 0
    taken: bool = False
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    authorization: str | None


@dataclass
class FakeProlific(HookSender):
    """The fake's state; ``url`` is the API root to put in ``provider.prolific.api_url``.

    Webhooks, participant groups, messages and test studies are in :mod:`tests.fakes.prolific_hooks`."""

    studies: dict[str, dict] = field(default_factory=dict)
    submissions: dict[str, dict] = field(default_factory=dict)
    bonuses: dict[str, dict] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    paid: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    workspace: dict = field(
        default_factory=lambda: {
            "id": new_id(),
            "title": "Lab",
            "currency_code": "GBP",
            "available_balance": 10_000_000,
        }
    )
    url: str = ""
    validate: bool = True
    _pending_approvals: list[str] = field(default_factory=list)
    _throttle: list[str] = field(default_factory=list)
    _fail: dict[str, list[tuple[int, bool]]] = field(default_factory=dict)
    _hold: dict[str, list[float]] = field(default_factory=dict)
    _stalls: list[Stall] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    # -- steering (the tests play participants, the clock and faults) ------------------------------

    def throttle(self, times: int, retry_after: str = "0") -> None:
        """Answer the next ``times`` calls with 429 and this Retry-After header."""
        self._throttle += [retry_after] * times

    def fail_next(self, pattern: str, status: int = 503, after: bool = False) -> None:
        """Answer the next call whose ``METHOD path`` matches the regex ``pattern`` with ``status``."""
        self._fail.setdefault(pattern, []).append((status, after))

    def hold_next(self, pattern: str, seconds: float = 3.0) -> None:
        """Do the next matching call's work, then hold its answer back ``seconds`` (the client times out)."""
        self._hold.setdefault(pattern, []).append(seconds)

    def stall_next(self, pattern: str, before: bool = False, skip: int = 0) -> Stall:
        """Stall the matching call (after ``skip`` others match) until the test releases it: ``before`` its work
        is done (then it is answered 503 and never done: the caller was killed before Prolific acted), else
        after (the work is done, the answer waits). ``reached`` is set when the call is stalled."""
        stall = Stall(pattern, before, skip)
        self._stalls.append(stall)
        return stall

    def make_group(self) -> str:
        """A participant group, as the coordinator creates it on Prolific (API: POST /participant-groups/)."""
        gid = new_id()
        self.groups[gid] = []
        return gid

    def start_session(self, participant_id: str, study_id: str, reserved: bool = False) -> str:
        """A participant starts the study: a new submission (its id is the SESSION_ID), or Refused."""
        with self._lock:
            study = self.studies[study_id]
            self._settle(study)
            if study["status"] != "ACTIVE":
                raise Refused(f"the study is {study['status']}")  # PLATFORMS: only an ACTIVE study recruits
            if participant_id in self._blocked(study):
                raise Refused("blocklisted")  # PLATFORMS: participant_group_blocklist filter
            allowed = self._allowed(study)  # tests/fakes/prolific_hooks.py
            if allowed is not None and participant_id not in allowed:
                raise Refused("not in the study's allowlist")  # PLATFORMS: "allowlist twin exists"
            if self.places_taken(study_id) >= study["total_available_places"]:
                raise Refused("no place left")  # PLATFORMS: places enforced
            cap = (study.get("submissions_config") or {}).get("max_submissions_per_participant") or 1
            mine = [
                s for s in self.submissions.values() if s["study_id"] == study_id and s["participant"] == participant_id
            ]
            if cap != -1 and len(mine) >= cap:
                # PLATFORMS: a participant may take a study once unless max_submissions_per_participant is set.
                raise Refused("already took part as often as the study allows")
            if any(s["status"] in ("RESERVED", "ACTIVE") for s in mine):
                raise Refused("already has a submission in progress")  # one live session per participant
            sid = new_id()
            # PLATFORMS: RESERVED is a place held briefly before start, then ACTIVE.
            self.submissions[sid] = {
                "id": sid,
                "participant": participant_id,
                "study_id": study_id,
                "status": "RESERVED" if reserved else "ACTIVE",
                "started_at": _now(),
                "completed_at": None,
                "entered_code": None,
                "bonus_payments": [],
                "return_requested": None,
            }
            self._settle(study)
            return sid

    def activate(self, submission_id: str) -> None:
        """A RESERVED place is started by the participant."""
        sub = self.submissions[submission_id]
        assert sub["status"] == "RESERVED"
        sub["status"] = "ACTIVE"
        self._notice()

    @staticmethod
    def _json_out(data: Any, status: int = 200, headers: dict | None = None) -> Response:
        return _json(data, status, headers)

    @staticmethod
    def _error_out(status: int, detail: Any) -> Response:
        return _error(status, detail)

    def complete(self, submission_id: str, code: str) -> None:
        """The participant reaches the completion URL with ``code`` (PLATFORMS: completion)."""
        with self._lock:
            sub = self.submissions[submission_id]
            if sub["status"] != "ACTIVE":
                raise Refused(f"submission is {sub['status']}")
            study = self.studies[sub["study_id"]]
            screen_out = self._screen_out_action(study, code)
            if screen_out is not None:
                self._screen_out(study, sub, code, screen_out)  # tests/fakes/prolific_hooks.py
                return
            sub["status"], sub["entered_code"], sub["completed_at"] = "AWAITING REVIEW", code, _now()
            self._settle(study)

    def return_session(self, submission_id: str) -> None:
        """The participant returns the study ("Stop without completing"): RETURNED frees the place."""
        self._end(submission_id, "RETURNED")

    def time_out(self, submission_id: str) -> None:
        """The participant runs past maximum_allowed_time: TIMED-OUT frees the place."""
        self._end(submission_id, "TIMED-OUT")

    def _end(self, submission_id: str, status: str) -> None:
        with self._lock:
            sub = self.submissions[submission_id]
            if sub["status"] not in ("RESERVED", "ACTIVE"):
                raise Refused(f"submission is {sub['status']}")
            sub["status"] = status
            self._settle(self.studies[sub["study_id"]])

    def places_taken(self, study_id: str) -> int:
        """Submissions holding a place: all but RETURNED / TIMED-OUT / REJECTED (PLATFORMS; API places_taken)."""
        return sum(1 for s in self.submissions.values() if s["study_id"] == study_id and s["status"] not in FREEING)

    def calls(self, method: str, path_regex: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and re.fullmatch(path_regex, r.path)]

    def _blocked(self, study: dict) -> set[str]:
        out: set[str] = set()
        for f in study.get("filters") or []:
            if f.get("filter_id") == "participant_group_blocklist":
                for gid in f.get("selected_values") or []:
                    out |= set(self.groups.get(gid, []))
        return out

    def _settle(self, study: dict) -> None:
        """Study states that follow from submissions (PLATFORMS: study states)."""
        if study["status"] == "PUBLISHING":
            study["status"] = "ACTIVE"  # PLATFORMS: PUBLISHING → ACTIVE (publishing completes by the next look)
        if study["status"] not in ("ACTIVE", "AWAITING REVIEW", "COMPLETED"):
            return
        unreviewed = any(s["study_id"] == study["id"] and s["status"] in UNREVIEWED for s in self.submissions.values())
        full = self.places_taken(study["id"]) >= study["total_available_places"]
        if study.get("_stopped") or full:
            # PLATFORMS: when all places fill, or after STOP, AWAITING REVIEW until every submission is reviewed.
            study["status"] = "AWAITING REVIEW" if unreviewed else "COMPLETED"
        else:
            study["status"] = "ACTIVE"  # a freed place (return, time-out, rejection) recruits again
        study["places_taken"] = self.places_taken(study["id"])
        self._notice()  # webhooks: every status change becomes an event (tests/fakes/prolific_hooks.py)

    # -- the wire ----------------------------------------------------------------------------------

    def __call__(self, environ, start_response):
        request = Request(environ)
        stall = self._stall_for(request)
        if stall is not None and stall.before:
            stall.reached.set()
            stall.release.wait(60)
            return _error(503, "Service unavailable.")(environ, start_response)
        with self._lock:
            response = self._answer(request)
            self._notice()  # a change made through the API (publish, pause, approve...) is an event too
            if self.validate and response.status_code < 400:
                self._check_response(request, response)
            hold = next(
                (
                    waits.pop(0)
                    for pattern, waits in self._hold.items()
                    if waits and re.fullmatch(pattern, f"{request.method} {request.path.removeprefix('/api/v1')}")
                ),
                0.0,
            )
        if hold:
            threading.Event().wait(hold)  # not time.sleep, which tests stub out for Prolific's back-off
        if stall is not None:
            stall.reached.set()
            stall.release.wait(60)
        return response(environ, start_response)

    def _stall_for(self, request: Request) -> Stall | None:
        with self._lock:
            call = f"{request.method} {request.path.removeprefix('/api/v1')}"
            for stall in self._stalls:
                if not stall.reached.is_set() and not stall.taken and re.fullmatch(stall.pattern, call):
                    if stall.skip > 0:
                        stall.skip -= 1
                        return None
                    stall.taken = True
                    return stall
        return None

    def _check_request(self, request: Request) -> str | None:
        from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest

        try:
            _openapi().validate_request(WerkzeugOpenAPIRequest(request))
        except Exception as exc:  # noqa: BLE001 - any validation failure is the finding
            return f"{request.method} {request.path}: {exc}"
        return None

    def _check_response(self, request: Request, response: Response) -> None:
        from openapi_core.contrib.werkzeug import WerkzeugOpenAPIRequest, WerkzeugOpenAPIResponse

        try:
            _openapi().validate_response(WerkzeugOpenAPIRequest(request), WerkzeugOpenAPIResponse(response))
        except Exception as exc:  # noqa: BLE001
            self.violations.append(f"answer to {request.method} {request.path}: {exc}"[:2000])

    def _answer(self, request: Request) -> Response:
        body = request.get_json(silent=True) if request.data else None
        path = request.path.removeprefix("/api/v1")
        self.requests.append(Recorded(request.method, path, body, request.headers.get("Authorization")))
        if request.headers.get("Authorization") != f"Token {TOKEN}":
            return _error(401, "Invalid token.")  # API: `Authorization: Token <token>`
        if self._throttle:
            return _error(429, "Request was throttled.", {"Retry-After": self._throttle.pop(0)})
        fault = None
        for pattern, statuses in list(self._fail.items()):
            if statuses and re.fullmatch(pattern, f"{request.method} {path}"):
                fault = statuses.pop(0)
                break
        if fault is not None and not fault[1]:
            return _error(fault[0], "Service unavailable.")
        if self.validate:
            problem = self._check_request(request)
            if problem is not None:
                self.violations.append(f"request {problem}"[:2000])
                return _error(400, f"Request does not match the API: {problem}"[:1000])
        self._apply_pending_approvals()
        for method, regex, handler in ROUTES:
            match = re.fullmatch(regex, path)
            if match and method == request.method:
                answer = handler(self, body if body is not None else {}, request, *match.groups())
                if fault is not None:  # the work is done, the answer is lost
                    return _error(fault[0], "Bad gateway.")
                return answer
        return _error(404, "Not found.")

    def _apply_pending_approvals(self) -> None:
        # API: bulk approve is asynchronous; the fake finishes it by the next call.
        for sid in self._pending_approvals:
            sub = self.submissions.get(sid)
            if sub and sub["status"] == "AWAITING REVIEW":
                sub["status"] = "APPROVED"
                self._settle(self.studies[sub["study_id"]])
        self._pending_approvals.clear()

    def _page(self, request: Request, rows: list[dict]) -> Response:
        """One page of a list and ``_links.next.href`` to the next (API: pagination)."""
        page = int(request.args.get("page", 1))
        chunk = rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        nxt = None
        if page * PAGE_SIZE < len(rows):
            nxt = f"{request.base_url}?page={page + 1}"
        return _json(
            {
                "results": chunk,
                "_links": {"next": {"href": nxt}, "previous": {"href": None}},
                "meta": {"count": len(rows)},
            }
        )

    # -- workspaces --------------------------------------------------------------------------------

    def _list_workspaces(self, body, request):
        ws = self.workspace
        return _json({"results": [{"id": ws["id"], "title": ws["title"]}]})

    def _balance(self, body, request, wid):
        if wid != self.workspace["id"]:
            return _error(404, "Workspace not found.")
        avail = self.workspace["available_balance"]
        # API: WorkspaceBalance (integers in minor units, currency_code).
        return _json(
            {
                "currency_code": self.workspace["currency_code"],
                "total_balance": avail,
                "balance_breakdown": {},
                "available_balance": avail,
                "available_balance_breakdown": {},
            }
        )

    # -- studies -----------------------------------------------------------------------------------

    def _study_view(self, study: dict) -> dict:
        self._settle(study)
        return {k: v for k, v in study.items() if not k.startswith("_")}

    def _place_cost(self, study: dict) -> int:
        reward = Decimal(study["reward"])
        return int((reward + (reward * FEE_RATE * (1 + VAT_RATE))).quantize(Decimal(1), ROUND_HALF_UP))

    def _create_study(self, body, request):
        if "currency" in body:
            # PLATFORMS: there is no currency field; the workspace's currency applies.
            return _error(400, {"currency": ["Unknown field: the workspace's currency applies."]})
        codes = body.get("completion_codes") or []
        if not codes:
            return _error(400, {"completion_codes": ["Specify at least one completion code."]})  # API
        problems = _pay_rules(body, self.workspace["currency_code"])
        for c in codes:
            for a in c.get("actions") or []:
                if a.get("action") == "FIXED_SCREEN_OUT_PAYMENT" and not (
                    0 < a.get("fixed_screen_out_reward", 0) < body.get("reward", 0)
                ):
                    # API (FixedScreenOut): "This must be less that the study reward."
                    problems["completion_codes"] = ["fixed_screen_out_reward must be below the study reward."]
        if problems:
            return _error(400, problems)
        cap = (body.get("submissions_config") or {}).get("max_submissions_per_participant")
        if cap is not None and (cap == 0 or cap < -1):
            return _error(400, {"submissions_config": ["max_submissions_per_participant must be -1 or ≥ 1."]})
        for f in body.get("filters") or []:
            if f.get("filter_id") in ("participant_group_blocklist", "participant_group_allowlist"):
                unknown = [g for g in f.get("selected_values") or [] if g not in self.groups]
                if unknown:
                    return _error(400, {"filters": [f"Unknown participant group {unknown}."]})  # PLATFORMS: groups
        sid = new_id()
        # API: the study comes back with id and status UNPUBLISHED; PLATFORMS: it returns currency_code.
        self.studies[sid] = {
            **body,
            "id": sid,
            "status": "UNPUBLISHED",
            "currency_code": self.workspace["currency_code"],
            "places_taken": 0,
            "submissions_config": body.get("submissions_config") or {},
        }
        self.studies[sid].setdefault("maximum_allowed_time", 3 * float(body["estimated_completion_time"]))
        return _json(self._study_view(self.studies[sid]), 201)

    def _list_studies(self, body, request, project=None):
        rows = [self._study_view(s) for s in self.studies.values() if project is None or s.get("project") == project]
        short = [
            {
                k: s.get(k)
                for k in ("id", "name", "internal_name", "status", "total_available_places", "reward", "places_taken")
            }
            for s in rows
        ]
        return self._page(request, short)

    def _get_study(self, body, request, sid):
        study = self.studies.get(sid)
        return _json(self._study_view(study)) if study else _error(404, "Not found.")

    def _patch_study(self, body, request, sid):
        study = self.studies.get(sid)
        if study is None:
            return _error(404, "Not found.")
        if "currency" in body:
            return _error(400, {"currency": ["Unknown field."]})  # PLATFORMS: no currency field
        self._settle(study)
        if study["status"] != "UNPUBLISHED":
            # API (update-study): after publish only internal_name and total_available_places may change.
            other = sorted(set(body) - {"internal_name", "total_available_places"})
            if other:
                return _error(400, {k: ["Cannot be changed once the study is published."] for k in other})
            places = body.get("total_available_places")
            if places is not None:
                if places < study["total_available_places"]:
                    return _error(400, {"total_available_places": ["Only increasing is allowed."]})  # API
                if study["status"] == "PAUSED" and places != study["total_available_places"]:
                    # Silent in the docs: refused rather than guessed.
                    return _error(400, "Raising the places of a paused study is not documented.")
                extra = places - study["total_available_places"]
                if extra and self.workspace["available_balance"] < extra * self._place_cost(study):
                    return _error(400, "Insufficient balance for the new places.")  # PLATFORMS: balance
                if extra and study["status"] in ("AWAITING REVIEW", "COMPLETED"):
                    study.pop("_stopped", None)  # API: "A completed study will become active again"
        else:
            merged = {**study, **body}
            problems = _pay_rules(merged, self.workspace["currency_code"])
            if problems:
                return _error(400, problems)
        study.update(body)
        return _json(self._study_view(study))

    def _transition_study(self, body, request, sid):
        study = self.studies.get(sid)
        if study is None:
            return _error(404, "Not found.")
        self._settle(study)
        action, status = body.get("action"), study["status"]
        # API (publish-study): the transition table; anything else is refused.
        table = {
            ("UNPUBLISHED", "PUBLISH"): "PUBLISHING",
            ("ACTIVE", "PAUSE"): "PAUSED",
            ("ACTIVE", "STOP"): "STOPPED",
            ("PAUSED", "START"): "ACTIVE",
            ("PAUSED", "STOP"): "STOPPED",
        }
        new = table.get((status, action))
        if new is None:
            return _error(400, f"Cannot {action} a study that is {status}.")
        if action == "PUBLISH":
            need = self._place_cost(study) * study["total_available_places"]
            if self.workspace["available_balance"] < need:
                return _error(
                    400, "Insufficient balance to publish this study."
                )  # PLATFORMS: publishing checks the balance
        if new == "STOPPED":
            study["_stopped"] = True
            study["status"] = "ACTIVE"
            self._settle(study)  # PLATFORMS: after STOP, AWAITING REVIEW until every submission is reviewed
        else:
            study["status"] = new
        return _json({k: v for k, v in study.items() if not k.startswith("_")})

    # -- submissions -------------------------------------------------------------------------------

    def _get_submission(self, body, request, sid):
        sub = self.submissions.get(sid)
        # API (SubmissionDetail): the single view names the participant `participant`.
        return _json(dict(sub)) if sub else _error(404, "Not found.")

    def _study_submissions(self, body, request, sid):
        if sid not in self.studies:
            return _error(404, "Not found.")
        # API (SubmissionShort): list items name the participant `participant_id`.
        rows = [
            {
                "id": s["id"],
                "participant_id": s["participant"],
                "status": s["status"],
                "started_at": s["started_at"],
                "completed_at": s["completed_at"],
                "has_siblings": False,
                "study_code": s["entered_code"],
                "return_requested": s["return_requested"],
            }
            for s in self.submissions.values()
            if s["study_id"] == sid
        ]
        return self._page(request, rows)

    def _transition_submission(self, body, request, sid):
        sub = self.submissions.get(sid)
        if sub is None:
            return _error(404, "Not found.")
        action, status = body.get("action"), sub["status"]
        done = {"APPROVE": "APPROVED", "REJECT": "REJECTED", "COMPLETE": "AWAITING REVIEW"}
        if action in done and status == done[action] and action != "COMPLETE":
            return _json(_short(sub))  # API: "this endpoint is idempotent ... the second request will be ignored"
        if action == "APPROVE" and status == "AWAITING REVIEW":
            sub["status"] = "APPROVED"
        elif action == "REJECT" and status == "AWAITING REVIEW":
            if len(body.get("message") or "") < 100 or not body.get("rejection_category"):
                # PLATFORMS: REJECT needs a message of ≥ 100 characters and a rejection_category.
                return _error(400, "A message of 100+ characters and a category are required.")
            sub["status"] = "REJECTED"
        elif action == "COMPLETE" and status == "ACTIVE":
            codes = [c.get("code") for c in self.studies[sub["study_id"]].get("completion_codes") or []]
            if body.get("completion_code") not in codes:
                return _error(400, "completion_code must be one of the study's codes.")  # API: COMPLETE
            sub["status"], sub["entered_code"], sub["completed_at"] = "AWAITING REVIEW", body["completion_code"], _now()
        else:
            # Other actions and states (RETURN, SCREEN_OUT, UNREJECT, COMPLETE of a timed-out one...) are refused.
            return _error(400, f"Cannot {action} a submission that is {status}.")
        self._settle(self.studies[sub["study_id"]])
        return _json(_short(sub))

    def _bulk_approve(self, body, request):
        ids = body.get("submission_ids")
        if ids is None:
            # API: the other form names the study and its participants.
            study, pids = body.get("study_id"), set(body.get("participant_ids") or [])
            ids = [s["id"] for s in self.submissions.values() if s["study_id"] == study and s["participant"] in pids]
        self._pending_approvals += list(ids)  # API: asynchronous; done by the next call
        return _json("The request to bulk approve has been made successfully.", 200)

    # -- bonuses -----------------------------------------------------------------------------------

    def _create_bonus(self, body, request):
        study = body.get("study_id")
        if study not in self.studies:
            return _error(400, "Study not found.")
        rows = []
        for line in (body.get("csv_bonuses") or "").strip().splitlines():
            who, _, amount = line.partition(",")
            try:
                value = Decimal(amount.strip())
            except ArithmeticError:
                return _error(400, f"Bad amount in {line!r}.")
            if value <= 0 or value != value.quantize(Decimal("0.01")):
                return _error(400, f"Bad amount in {line!r}.")  # PLATFORMS: amounts in major units (pounds/dollars)
            # PLATFORMS: each row names a submission or a participant of the study.
            sub = self.submissions.get(who.strip())
            if sub is None:
                sub = next(
                    (
                        s
                        for s in self.submissions.values()
                        if s["participant"] == who.strip() and s["study_id"] == study
                    ),
                    None,
                )
            if sub is None or sub["study_id"] != study:
                return _error(400, f"{who} is not a submission or participant of this study.")
            rows.append((sub["id"], value))
        if not rows:
            return _error(400, "csv_bonuses is empty.")
        bid = new_id()
        amount = sum(v for _, v in rows)
        fees = (amount * FEE_RATE).quantize(Decimal("0.01"), ROUND_HALF_UP)
        vat = (fees * VAT_RATE).quantize(Decimal("0.01"), ROUND_HALF_UP)
        self.bonuses[bid] = {
            "id": bid,
            "study": study,
            "rows": rows,
            # API: BulkBonus amount, fees, vat and total_amount are "in cents" (the request was in major units).
            "amount": float(amount * 100),
            "fees": float(fees * 100),
            "vat": float(vat * 100),
            "total_amount": float((amount + fees + vat) * 100),
        }
        # PLATFORMS: the first step returns an id, fees and VAT (API: BulkBonus).
        return _json({k: v for k, v in self.bonuses[bid].items() if k != "rows"}, 201)

    def _pay_bonus(self, body, request, bid):
        bonus = self.bonuses.get(bid)
        if bonus is None:
            return _error(404, "Not found.")
        total = int(Decimal(str(bonus["total_amount"])))  # API: BulkBonus total_amount, in cents, as the balance
        if self.workspace["available_balance"] < total:
            return _error(400, "Insufficient balance.")
        # PLATFORMS: paying is NOT idempotent: paying the same bulk bonus again pays again.
        self.paid.append(bid)
        self.workspace["available_balance"] -= total
        for sid, value in bonus["rows"]:
            # PLATFORMS / API (Submission.bonus_payments): "Bonus payments that have been paid on the submission.
            # Returned in pence / cents", one number per payment, so a 5-pence bonus shows as 5 and £5.00 as 500.
            self.submissions[sid]["bonus_payments"].append(int(value * 100))
        return _json("The bonus payments are being processed.", 202)  # API: 202, asynchronous

    # -- participant groups ------------------------------------------------------------------------

    def _add_to_group(self, body, request, gid):
        if gid not in self.groups:
            return _error(404, "Participant group not found.")  # PLATFORMS: an unknown group is an error
        for pid in body.get("participant_ids") or []:
            if pid not in self.groups[gid]:
                self.groups[gid].append(pid)
        return _json({"results": [{"participant_id": p, "datetime_created": _now()} for p in self.groups[gid]]})


ROUTES = [
    ("GET", r"/workspaces/", FakeProlific._list_workspaces),
    ("GET", r"/workspaces/([^/]+)/balance/", FakeProlific._balance),
    ("POST", r"/studies/", FakeProlific._create_study),
    ("GET", r"/studies/", FakeProlific._list_studies),
    (
        "GET",
        r"/projects/([^/]+)/studies/",
        lambda self, body, request, project: FakeProlific._list_studies(self, body, request, project),
    ),
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
    *hook_routes(FakeProlific),
]


def _pay_rules(study: dict, currency: str) -> dict[str, list[str]]:
    """Prolific's pay rules on a study body (PLATFORMS: pay rules; API: maximum_allowed_time)."""
    import math

    problems: dict[str, list[str]] = {}
    x = float(study.get("estimated_completion_time") or 0)
    if x <= 0:
        return {"estimated_completion_time": ["Must be positive."]}
    hourly = Decimal(str(study.get("reward", 0))) / 100 * 60 / Decimal(str(x))
    if hourly < MIN_HOURLY[currency]:
        problems["reward"] = [f"Below the minimum of {MIN_HOURLY[currency]} {currency} per hour."]
    allowed = study.get("maximum_allowed_time")
    if allowed is not None and float(allowed) < 2 + 2 * x + 2 * math.sqrt(x) - 1e-9:
        # API: "two minutes plus two times the estimated time plus two times the square root of the estimated time".
        problems["maximum_allowed_time"] = ["Below the minimum for the estimated completion time."]
    return problems


def _short(sub: dict) -> dict:
    """A submission as the transition endpoint answers it (API: Submission)."""
    return {
        k: sub[k] for k in ("id", "completed_at", "entered_code", "participant", "started_at", "status", "study_id")
    }


def _json(data: Any, status: int = 200, headers: dict | None = None) -> Response:
    return Response(json.dumps(data), status=status, headers=headers, content_type="application/json")


def _error(status: int, detail: Any, headers: dict | None = None) -> Response:
    """Prolific's error shape (API: Error wraps ErrorDetail)."""
    return _json(
        {"error": {"status": status, "error_code": status * 100, "title": "Error", "detail": detail}}, status, headers
    )


class FakeProlificServer:
    """The fake served on 127.0.0.1 in a background thread (``with FakeProlificServer() as fake``)."""

    def __init__(self, validate: bool = True):
        self.fake = FakeProlific(validate=validate)
        self._server = make_server("127.0.0.1", 0, self.fake, threaded=True)
        self.fake.url = f"http://127.0.0.1:{self._server.server_port}/api/v1"
        # Polled every 0.05 s, not every 0.5 s: shutdown() waits for the next look, once per test.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> FakeProlific:
        if self.fake.validate:
            _openapi()  # load the document before the first request, outside any client timeout
        self._thread.start()
        return self.fake

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._thread.join(5)
