"""The ``prolific`` provider: Prolific's REST API v1 (``Authorization: Token <token>``).

One hitkit study is one Prolific study (one listing); hitkit's HITs are packages inside it, so
``chooses_hit`` is true and participants arrive at ``/s/STUDY/enter`` with ``PROLIFIC_PID``,
``STUDY_ID`` and ``SESSION_ID``. The first posted HIT creates and publishes the Prolific study; each
later one raises its places. Places are *set* to the sum recorded for every posted HIT key (never
incremented, never lowered), so a post retried after a lost commit adds nothing: a study created
before the crash is found again by its ``internal_name``, and its places already cover the retry.

Arrival: Prolific has no preview, but its researcher preview and coordinators open the link without
``PROLIFIC_PID``; such a visit is a read-only preview that stores nothing and gets no token. A visit
with the ids is accepted only when Prolific confirms that the submission (``SESSION_ID``) exists,
belongs to that participant and study, and is ``ACTIVE``. Completion redirects to Prolific's
completion URL with the study's code.

State lives in the database as Event rows (``prolific_*`` kinds) and, for bonuses, the Payment
ledger. Calls made while the current thread holds a database transaction (a scheduler tick, a
worker request) write their rows into that transaction, since SQLite allows one writer and a second
connection would wait on the caller's own lock. :meth:`ProlificProvider.pay_bonus` commits its own
ledger steps and must be called outside an open write transaction.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import requests
from sqlalchemy import event as sa_event
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hitkit.db.models import Assignment, Event, Hit, Payment, Study, Worker
from hitkit.db.session import normalise_url, session_scope
from hitkit.errors import ConfigError, FlowError, HitkitError
from hitkit.money import cents, flat_fee
from hitkit.providers.base import (
    Arrival,
    BonusOutcome,
    Completion,
    CompletionKind,
    CrowdProvider,
    PendingBonus,
    PostedHit,
    ProviderWork,
    WorkStatus,
)

log = logging.getLogger(__name__)

COMPLETE_URL = "https://app.prolific.com/submissions/complete?cc={code}"
URL_PARAMS = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
REJECTION_CATEGORIES = ("TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL",
                        "FAILED_CHECK", "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA",
                        "UNSUPP_DEVICE", "OTHER")
MAX_RETRIES = 5
WORK_STATUSES = {"ACTIVE": WorkStatus.WORKING, "AWAITING REVIEW": WorkStatus.SUBMITTED,
                 "APPROVED": WorkStatus.APPROVED, "REJECTED": WorkStatus.REJECTED}
"""Prolific's submission statuses; any other (RETURNED, TIMED-OUT, SCREENED OUT…) needs no decision."""
MAX_WAIT_S = 60.0


UNCERTAIN_STATUSES = (500, 502, 504)
"""Server and gateway errors that may come after Prolific did the work: the outcome is unknown."""


class ProlificError(HitkitError):
    """Prolific refused or failed a call; the message names the call and Prolific's answer.

    ``status`` is Prolific's HTTP status, None when no answer came at all.
    """

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status

    @property
    def outcome_unknown(self) -> bool:
        """True when the call may have done its work: no answer, or a server error after the fact."""
        return self.__cause__ is not None or self.status in UNCERTAIN_STATUSES


# -- the transaction the current thread is in ------------------------------------------------------

_open = threading.local()


def _stack() -> list[weakref.ref]:
    if not hasattr(_open, "sessions"):
        _open.sessions = []
    return _open.sessions


@sa_event.listens_for(Session, "after_begin")
def _track_begin(session, transaction, connection):
    # Weak references: a session dropped without being closed must not be kept alive here.
    stack = _stack()
    stack[:] = [r for r in stack if r() is not None and r() is not session] + [weakref.ref(session)]


@sa_event.listens_for(Session, "after_transaction_end")
def _track_end(session, transaction):
    if transaction.parent is None:
        stack = _stack()
        stack[:] = [r for r in stack if r() is not None and r() is not session]


def _thread_session(url: str) -> Session | None:
    """The innermost session of this thread with an open transaction on database ``url``."""
    for ref in reversed(_stack()):
        session = ref()
        try:
            bound = session is not None and session.get_bind().url.render_as_string(hide_password=False) == url
        except Exception:  # noqa: BLE001 - an unbound session is simply not ours
            bound = False
        if bound:
            return session
    return None


# -- the provider ----------------------------------------------------------------------------------

_PROLIFIC_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""Prolific's participant and session ids: 24 hex characters today; here letters, digits, - and _ (no path)."""


class ProlificProvider(CrowdProvider):
    """Prolific: one study per hitkit study, participants verified against their live submission."""

    name = "prolific"
    chooses_hit = True
    confirmation = "arrival"  # the arrival is accepted only once Prolific confirms the submission
    arrival_calls_platform = True
    """Each arrival is checked against the participant's live submission (hitkit.arrivals bounds it)."""
    timeout_s = 30.0
    """Seconds to wait for Prolific's answer to one call."""

    def __init__(self, config, secret: str):
        super().__init__(config, secret)
        self.settings = config.provider.prolific
        self._http = requests.Session()

    # database plumbing

    @contextmanager
    def _session(self) -> Iterator[Session]:
        url = normalise_url(self.config.database_url)
        session = _thread_session(url)
        if session is not None:
            yield session
            return
        with session_scope(url) as own:
            yield own

    def _study_row_id(self, session: Session) -> int | None:
        return session.scalar(select(Study.id).where(Study.name == self.config.study))

    def _record(self, session: Session, kind: str, data: dict[str, Any]) -> None:
        session.add(Event(study_id=self._study_row_id(session), kind=kind, actor="provider", data=data))
        session.flush()

    def _events(self, session: Session, kind: str) -> list[dict[str, Any]]:
        study_id = self._study_row_id(session)
        return list(session.scalars(select(Event.data).where(Event.study_id == study_id, Event.kind == kind)
                                    .order_by(Event.id)))

    # HTTP

    def _token(self) -> str:
        token = os.environ.get(self.settings.token_env)
        if not token:
            raise ConfigError(f"the Prolific API token is read from the environment variable "
                              f"{self.settings.token_env}, which is not set; export it (or set "
                              f"provider.prolific.token_env to the variable that holds the token)")
        return token

    def _call(self, method: str, path: str, body: Any = None, session: Session | None = None) -> Any:
        """One API call with bounded back-off on 429, logged as an Event (never with the token)."""
        url = path if path.startswith(("http://", "https://")) else self.settings.api_url.rstrip("/") + path
        headers = {"Authorization": f"Token {self._token()}"}
        for attempt in range(MAX_RETRIES + 1):
            try:
                resp = self._http.request(method, url, json=body, headers=headers, timeout=self.timeout_s)
            except requests.RequestException as exc:
                self._log_call(session, method, path, body, None, attempt, str(exc))
                raise ProlificError(f"Prolific did not answer {method} {path}: {exc}") from exc
            if resp.status_code == 429 and attempt < MAX_RETRIES:
                wait = _retry_after(resp.headers.get("Retry-After"), attempt)
                self._log_call(session, method, path, body, 429, attempt, f"throttled; waiting {wait:.1f}s")
                time.sleep(wait)
                continue
            break
        self._log_call(session, method, path, body, resp.status_code, attempt, None)
        if resp.status_code >= 400:
            raise ProlificError(f"Prolific refused {method} {path} with HTTP {resp.status_code}: "
                                f"{resp.text[:500]}", resp.status_code) from None
        if not resp.content:
            return None
        return resp.json()

    def _log_call(self, session, method, path, body, status, attempt, note) -> None:
        data = {"method": method, "path": path, "status": status, "attempt": attempt}
        if isinstance(body, dict):
            data["fields"] = sorted(body)
        if note:
            data["note"] = note
        if session is not None:
            self._record(session, "prolific_call", data)
        else:
            with self._session() as s:
                self._record(s, "prolific_call", data)

    # the study

    def completion_code(self) -> str:
        """The study's completion code, derived from the server secret so every process agrees."""
        digest = hmac.new(self.secret.encode(), f"prolific-cc:{self.config.study}".encode(), hashlib.sha256)
        return digest.hexdigest()[:8].upper()

    def _internal_name(self) -> str:
        return f"hitkit:{self.config.study}"

    def prolific_study_id(self, session: Session | None = None) -> str | None:
        """The Prolific study this hitkit study posted to, or None before the first post."""
        if session is None:
            with self._session() as s:
                return self.prolific_study_id(s)
        created = self._events(session, "prolific_study_created")
        return created[0]["study_id"] if created else None

    def _study_body(self, entry_url: str, reward: Decimal, places: int) -> dict[str, Any]:
        s, hit = self.settings, self.config.hit
        filters = list(s.filters)
        if s.blocklist_group:
            filters.append({"filter_id": "participant_group_blocklist", "selected_values": [s.blocklist_group]})
        sep = "&" if "?" in entry_url else "?"
        body = {
            "name": hit.title,
            "internal_name": self._internal_name(),
            "description": hit.description,
            "external_study_url": f"{entry_url}{sep}{URL_PARAMS}",
            "prolific_id_option": "url_parameters",
            "completion_codes": [{"code": self.completion_code(), "code_type": "COMPLETED",
                                  "actions": [{"action": "MANUALLY_REVIEW"}]}],
            "total_available_places": places,
            "estimated_completion_time": s.estimated_minutes,
            "maximum_allowed_time": int(hit.assignment_minutes),
            "reward": int(cents(reward) * 100),
            "currency": self.config.provider.currency,
            "device_compatibility": list(s.device_compatibility),
            "filters": filters,
        }
        if s.project:
            body["project"] = s.project
        return body

    def _find_remote_study(self, session: Session) -> str | None:
        """A study created before a crash lost its Event row, found by its internal name."""
        path = f"/projects/{self.settings.project}/studies/" if self.settings.project else "/studies/"
        listing = self._call("GET", path, session=session) or {}
        for study in listing.get("results", []):
            if study.get("internal_name") == self._internal_name():
                return study["id"]
        return None

    def post_hit(self, hit_key, entry_url, reward, max_assignments, lifetime_s) -> PostedHit:
        """Create and publish the study for the first HIT; later HITs set its places to the new total."""
        with self._session() as session:
            places = {e["hit_key"]: e["places"] for e in self._events(session, "prolific_places")}
            study_id = self.prolific_study_id(session)
            if hit_key not in places:
                self._record(session, "prolific_places", {"hit_key": hit_key, "places": max_assignments})
                places[hit_key] = max_assignments
            total = sum(places.values())
            if study_id is None:
                study_id = self._find_remote_study(session)
                if study_id is None:
                    # hitkit's worker entry is per study; the scheduler hands over the HIT's own URL.
                    study_entry = entry_url.rsplit("/hit/", 1)[0] + "/enter"
                    created = self._call("POST", "/studies/", self._study_body(study_entry, reward, total),
                                         session=session)
                    study_id = created["id"]
                self._record(session, "prolific_study_created", {"study_id": study_id})
            remote = self._call("GET", f"/studies/{study_id}/", session=session)
            if remote.get("reward") not in (None, int(cents(reward) * 100)):
                raise ProlificError(f"a Prolific study pays every participant one reward ({remote['reward']} minor "
                                    f"units); HIT {hit_key} asks {reward}: give every HIT of the study the same "
                                    f"hit.reward")
            # Only ever raise: after a lost commit Prolific may already hold more places than recorded.
            if remote.get("total_available_places", 0) < total:
                self._call("PATCH", f"/studies/{study_id}/", {"total_available_places": total}, session=session)
            if remote.get("status") == "UNPUBLISHED":
                self._transition(session, study_id, "PUBLISH")
            elif remote.get("status") == "PAUSED":
                self._transition(session, study_id, "START")
        return PostedHit(provider_hit_id=f"{study_id}:{hit_key}", url=None)

    def _transition(self, session: Session, study_id: str, action: str) -> None:
        self._call("POST", f"/studies/{study_id}/transition/", {"action": action}, session=session)

    def pause(self) -> None:
        """Pause the Prolific study: no new participants until it is started again."""
        with self._session() as session:
            self._transition(session, self._require_study(session), "PAUSE")

    def stop(self) -> None:
        """Stop the Prolific study for good (work in progress can still be submitted)."""
        with self._session() as session:
            self._transition(session, self._require_study(session), "STOP")

    def _require_study(self, session: Session) -> str:
        study_id = self.prolific_study_id(session)
        if study_id is None:
            raise ProlificError(f"study '{self.config.study}' has not been posted to Prolific yet")
        return study_id

    def expire_hit(self, provider_hit_id: str) -> None:
        """A finished package needs nothing on Prolific; when no package is left open, the study stops."""
        with self._session() as session:
            study_row = self._study_row_id(session)
            left = session.scalar(select(func.count()).select_from(Hit).where(
                Hit.study_id == study_row, Hit.status.in_(("pending", "posted"))))
            if left == 0:
                study_id = self._require_study(session)
                if self._call("GET", f"/studies/{study_id}/", session=session).get("status") != "COMPLETED":
                    self._transition(session, study_id, "STOP")

    def extend_hit(self, provider_hit_id: str, extra_assignments: int, lifetime_s: float) -> None:
        """Prolific listings do not lapse: restart a paused study and add any extra places."""
        with self._session() as session:
            study_id = self._require_study(session)
            if extra_assignments > 0:
                hit_key = provider_hit_id.split(":", 1)[1]
                n = len(self._events(session, "prolific_places"))
                self._record(session, "prolific_places", {"hit_key": f"{hit_key}+{n}", "places": extra_assignments})
                total = sum(e["places"] for e in self._events(session, "prolific_places"))
                self._call("PATCH", f"/studies/{study_id}/", {"total_available_places": total}, session=session)
            if self._call("GET", f"/studies/{study_id}/", session=session).get("status") == "PAUSED":
                self._transition(session, study_id, "START")

    # arrival and completion

    def arrival(self, args: Mapping[str, str]) -> Arrival:
        pid, study, session_id = args.get("PROLIFIC_PID"), args.get("STUDY_ID"), args.get("SESSION_ID")
        if not pid and not session_id:
            return Arrival(preview=True)
        if not (pid and study and session_id):
            raise FlowError("this link is missing Prolific's PROLIFIC_PID, STUDY_ID or SESSION_ID; "
                            "please open the study from Prolific again", 403)
        if not (_PROLIFIC_ID.fullmatch(pid) and _PROLIFIC_ID.fullmatch(session_id)):
            # Checked before either reaches a URL: SESSION_ID=../../studies/x/ must not name another resource.
            raise FlowError("this link's PROLIFIC_PID or SESSION_ID is not a Prolific id; please open the study "
                            "from Prolific again", 403)
        with self._session() as session:
            ours = self.prolific_study_id(session)
            # One Prolific session is one HIT: a session whose work is done cannot open another HIT.
            held = session.scalar(select(Assignment.status).where(Assignment.provider_assignment_id == session_id))
        if ours is None or study != ours:
            raise FlowError("this Prolific study is not the one this link belongs to", 403)
        try:
            # Asked once the session above is closed: no transaction (on SQLite, the write lock) is
            # held while Prolific answers.
            sub = self._call("GET", f"/submissions/{session_id}/")
        except ProlificError:
            sub = None
        if (not sub or sub.get("participant_id") != pid or sub.get("study_id") != study
                or sub.get("status") != "ACTIVE"):
            raise FlowError("Prolific has no active session of yours for this study; please open the study "
                            "from Prolific again", 403)
        if held is not None and held != "accepted":
            raise FlowError(f"the work of this Prolific session is already {held}; to finish on Prolific go to "
                            f"{COMPLETE_URL.format(code=self.completion_code())}", 409)
        return Arrival(preview=False, worker_id=pid, provider_assignment_id=session_id,
                       extra={"study_id": study})

    def completion(self, provider_assignment_id, args) -> Completion:
        """Redirect to Prolific's completion URL; a participant now at the cap joins the blocklist."""
        if provider_assignment_id:
            self._block_if_capped(provider_assignment_id)
        code = self.completion_code()
        return Completion(CompletionKind.REDIRECT, url=COMPLETE_URL.format(code=code), code=code)

    # the cap across studies

    def _block_if_capped(self, provider_assignment_id: str) -> None:
        from hitkit.flow import CAP_STATUSES

        if not self.settings.blocklist_group:
            return
        with self._session() as session:
            worker = session.scalar(select(Worker).join(Assignment, Assignment.worker_id == Worker.id).where(
                Worker.provider == self.name, Assignment.provider_assignment_id == provider_assignment_id))
            if worker is None:
                return
            taken = session.scalar(select(func.count()).select_from(Assignment).where(
                Assignment.worker_id == worker.id, Assignment.status.in_(CAP_STATUSES)))
            if taken < self.config.schedule.per_worker_cap:
                return
            try:
                self._blocklist(session, worker.external_id, taken)
            except ProlificError as exc:
                # The participant's hand-back must not fail on it: the scheduler's cap step retries.
                log.warning("Prolific blocklist for %s failed (the scheduler retries): %s", worker.external_id, exc)

    def _blocklist(self, session: Session, participant_id: str, taken: int | None = None) -> None:
        """Add the participant to the blocklist group once (the Event row remembers it across processes)."""
        group = self.settings.blocklist_group
        done = session.scalar(select(func.count()).select_from(Event).where(
            Event.kind == "prolific_blocklisted", Event.data["participant_id"].as_string() == participant_id))
        if done:
            return
        self._call("POST", f"/participant-groups/{group}/participants/",
                   {"participant_ids": [participant_id]}, session=session)
        self._record(session, "prolific_blocklisted", {"participant_id": participant_id, "group": group,
                                                       "taken": taken})

    def cap_worker(self, worker_id: str) -> None:
        """Prolific's cap: the participant joins the blocklist group (``provider.prolific.blocklist_group``)."""
        if not self.settings.blocklist_group:
            return
        with self._session() as session:
            self._blocklist(session, worker_id)

    # decisions

    def _decide(self, submission_id: str, body: dict[str, Any], done: str) -> None:
        """Move a submission on; one already in ``done`` (a retry after a lost commit) is left as it is."""
        try:
            self._call("POST", f"/submissions/{submission_id}/transition/", body)
        except ProlificError as refused:
            if refused.__cause__ is not None:  # no answer at all: the outcome is unknown
                raise
            try:
                status = self._call("GET", f"/submissions/{submission_id}/").get("status")
            except ProlificError:
                raise refused from None
            if status != done:
                raise ProlificError(f"{refused} (the submission is {status})") from None

    def approve(self, provider_assignment_id: str, feedback: str = "") -> None:
        self._decide(provider_assignment_id, {"action": "APPROVE"}, "APPROVED")

    def approve_many(self, provider_assignment_ids: list[str]) -> None:
        """Approve many submissions of the study in one bulk call."""
        with self._session() as session:
            self._call("POST", "/submissions/bulk-approve/",
                       {"study_id": self._require_study(session), "submission_ids": list(provider_assignment_ids)},
                       session=session)

    def reject(self, provider_assignment_id: str, reason: str, category: str = "LOW_EFFORT") -> None:
        """Reject with Prolific's category; Prolific requires a message of at least 100 characters."""
        if category not in REJECTION_CATEGORIES:
            raise ProlificError(f"rejection category '{category}' is not one of Prolific's: "
                                f"{', '.join(REJECTION_CATEGORIES)}")
        if len(reason) < 100:
            raise ProlificError(f"Prolific needs a rejection message of at least 100 characters to show the "
                                f"participant; this one has {len(reason)}: explain what was wrong in more detail")
        self._decide(provider_assignment_id, {"action": "REJECT", "message": reason, "rejection_category": category},
                     "REJECTED")

    def _submissions(self) -> list[dict[str, Any]]:
        with self._session() as session:
            path = f"/studies/{self._require_study(session)}/submissions/"
            out: list[dict[str, Any]] = []
            while path:
                page = self._call("GET", path, session=session) or {}
                out += page.get("results", [])
                nxt = (page.get("_links") or {}).get("next") or {}
                path = nxt.get("href") if isinstance(nxt, dict) else None
            return out

    def sync_submissions(self) -> list[tuple[str, str]]:
        """Every submission of the study on Prolific as (submission id, Prolific status), for reconciliation."""
        return [(s["id"], s["status"]) for s in self._submissions()]

    def list_work(self, provider_hit_ids: Sequence[str]) -> list[ProviderWork]:
        """The study's submissions: hitkit's HITs are packages inside one Prolific study, so one listing."""
        if self.prolific_study_id() is None:
            return []
        return [ProviderWork(s["id"], s.get("participant_id", ""), WORK_STATUSES.get(s["status"], WorkStatus.RETURNED))
                for s in self._submissions()]

    def work_of(self, provider_assignment_id: str) -> ProviderWork | None:
        """The submission as Prolific holds it: work is approved only once it is AWAITING REVIEW there."""
        sub = self._call("GET", f"/submissions/{provider_assignment_id}/")
        return ProviderWork(sub["id"], sub.get("participant_id", ""),
                            WORK_STATUSES.get(sub.get("status"), WorkStatus.RETURNED))

    def settle_bonus(self, bonus: PendingBonus) -> BonusOutcome:
        """A bonus whose pay call went out without an answer cannot be told apart, so it is UNKNOWN.

        Prolific's pay call is not idempotent and its API shows no bulk bonus's payment state, so
        only a ``pending`` row (pay never sent, or refused with an answer) is safe to pay.
        """
        return BonusOutcome.UNKNOWN if bonus.status == "paying" else BonusOutcome.UNPAID

    # bonuses

    def pay_bonus(self, worker_id, provider_assignment_id, amount: Decimal, reason, idempotency_key) -> str:
        """Create-then-pay a bulk bonus once per key, each step committed to the ledger before the next.

        Prolific's pay call is not idempotent, so a bonus whose pay call got no answer (or a server
        error that may have come after paying) is left ``paying`` and a retry refuses rather than risk
        paying twice.
        """
        amount = cents(amount)
        url = normalise_url(self.config.database_url)
        with session_scope(url) as session:
            row = self._bonus_row(session, worker_id, provider_assignment_id, amount, idempotency_key)
            if row.amount != amount or row.worker_id is not None and row.worker_id != self._worker_row_id(
                    session, worker_id):
                raise ProlificError(f"bonus key {idempotency_key} was already used for {row.amount} to another "
                                    f"payment; give every distinct bonus its own idempotency key")
            if row.status == "paid":
                return row.provider_ref
            if row.status == "paying":
                raise ProlificError(f"the bonus {idempotency_key} ({row.provider_ref}) was sent to Prolific's pay "
                                    f"call without an answer; check it on Prolific, then mark the ledger row "
                                    f"paid or pending by hand — hitkit will not risk paying twice")
            ref, study_id = row.provider_ref, self._require_study(session)
        if ref is None:
            with session_scope(url) as session:
                created = self._call("POST", "/submissions/bonus-payments/",
                                     {"study_id": study_id, "csv_bonuses": f"{worker_id},{amount}\n"},
                                     session=session)
                ref = created["id"]
                self._ledger(session, idempotency_key).provider_ref = ref
        with session_scope(url) as session:
            self._ledger(session, idempotency_key).status = "paying"
        try:
            with session_scope(url) as session:
                self._call("POST", f"/bulk-bonus-payments/{ref}/pay/", session=session)
        except ProlificError as exc:
            # A refusal means Prolific did not pay; no answer, or a 500/502/504, leaves it unknown.
            with session_scope(url) as session:
                self._ledger(session, idempotency_key).status = "paying" if exc.outcome_unknown else "pending"
            raise
        with session_scope(url) as session:
            for key in (idempotency_key, f"{idempotency_key}:fee"):
                self._ledger(session, key).status = "paid"
        return ref

    def _worker_row_id(self, session: Session, worker_id: str) -> int | None:
        return session.scalar(select(Worker.id).where(Worker.provider == self.name, Worker.external_id == worker_id))

    def _ledger(self, session: Session, key: str) -> Payment:
        return session.scalar(select(Payment).where(Payment.idempotency_key == key))

    def _bonus_row(self, session, worker_id, provider_assignment_id, amount, key) -> Payment:
        row = self._ledger(session, key)
        if row is not None:
            return row
        study_id = self._study_row_id(session)
        assignment = session.scalar(select(Assignment).where(Assignment.provider_assignment_id == provider_assignment_id))
        common = {"study_id": study_id, "assignment_id": assignment.id if assignment else None,
                  "worker_id": self._worker_row_id(session, worker_id), "currency": self.config.provider.currency,
                  "status": "pending"}
        row = Payment(kind="bonus", amount=amount, idempotency_key=key, **common)
        session.add(row)
        session.add(Payment(kind="bonus_fee", amount=flat_fee(amount, self.config.provider.fee_rate),
                            idempotency_key=f"{key}:fee", **common))
        session.flush()
        return row


def _retry_after(header: str | None, attempt: int) -> float:
    """Seconds to wait after a 429: Prolific's Retry-After when given, else exponential, capped."""
    try:
        wait = float(header) if header is not None else 2.0 ** attempt
    except ValueError:
        wait = 2.0 ** attempt
    return max(0.0, min(wait, MAX_WAIT_S))
