"""The ``mturk`` provider: Amazon Mechanical Turk through boto3's ``mturk`` client.

**Amazon Mechanical Turk closed permanently on 2026-09-30** (AWS's MTurk API reference says so on
every page). Every call to MTurk's own requester endpoints (sandbox or production) is refused
before it is made, with :class:`MTurkClosedError` saying where to go instead: Prolific
(``provider.kind: prolific``), a panel (``provider.kind: panel``), and ``hitkit import mturk`` for
the batch-results archives coordinators keep. ``provider.mturk.endpoint_url`` still points the
provider at a service that speaks MTurk's API (and at the tests' fake), so the code below stays
correct for those: request tokens unique per database, expiry safe to repeat, MTurk's fees.

Posting: one HIT type per study (title, reward, time limits, qualification requirements — the
configured locale / approval rate / approved HITs / Masters, plus the study's private *cap*
qualification, which workers must NOT hold), then each HIT with that type and an ExternalQuestion
that frames hitkit's entry URL. Every create carries a ``UniqueRequestToken`` derived from the
study's random ``uid`` (stored in the database, so unique across every database sharing one
requester account) and the key of the HIT, so a retried post (after a timeout or a crash) finds
the HIT it already made instead of making a second one, and no other database's post is mistaken
for it. Posting refuses (BudgetError) when the account balance cannot
cover the HIT's worst case.

The client, its retries and errors are in :mod:`hitkit.providers.mturk_client`; the HIT's parts
(question, qualification requirements, fee rates) in :mod:`hitkit.providers.mturk_posting`; a worker's
arrival and the form that hands the work in, in :mod:`hitkit.providers.mturk_arrival`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from hitkit.errors import BudgetError, ConfigError, HitkitError
from hitkit.money.amounts import cents, hit_cost, mturk_bonus_fee, mturk_reward_fee
from hitkit.providers import mturk_arrival
from hitkit.providers.base import (
    Arrival,
    BonusOutcome,
    Completion,
    CrowdProvider,
    PendingBonus,
    PostedHit,
    ProviderWork,
    WorkStatus,
)
from hitkit.providers.mturk_client import (
    ID_PATTERN,
    MTurkClosedError,
    MTurkError,
    SubmittedWork,
    bonuses_alike,
    call,
    find_hit,
    make_client,
    submitted_work,
)
from hitkit.providers.mturk_posting import (
    EXPIRED_AT,
    MASTERS_FEE_RATE,
    cap_qualification,
    external_question,
    qualification_requirements,
    reward_rate,
)
from hitkit.study.config import StudyConfig

WORK_STATUSES = {"Submitted": WorkStatus.SUBMITTED, "Approved": WorkStatus.APPROVED, "Rejected": WorkStatus.REJECTED}


class MTurkProvider(CrowdProvider):
    """Amazon Mechanical Turk, sandbox or production (``provider.mturk.sandbox``)."""

    name = "mturk"
    service_fault_attempts = 4
    """Attempts at a call MTurk answers with ServiceFault (its transient internal error)."""
    service_fault_backoff_s = 0.5
    read_timeout_s = 60.0
    """Seconds to wait for MTurk's answer before botocore retries the call (with the same request token)."""

    study_uid: str | None = None
    """The study's random id from the database (:attr:`hitkit.db.models.Study.uid`); set by
    :meth:`hitkit.study.stored.StudyContext.of`. Request tokens and the cap qualification's name derive
    from it, so two databases on one requester account never share a token."""

    def __init__(self, config: StudyConfig, secret: str):
        super().__init__(config, secret)
        self.settings = config.provider.mturk
        self.sandbox = self.settings.sandbox
        self._client = None
        self._client_lock = threading.Lock()
        self._hit_type_ids: dict[Decimal, str] = {}
        self._cap_qualification_id: str | None = None

    # The client and its calls ---------------------------------------------------------------
    @property
    def client(self):
        """boto3's ``mturk`` client for the configured endpoint (made on first use)."""
        # One provider serves all of a web process's threads; boto3 clients are thread-safe once
        # made, but making one from the shared default session is not, hence a session of our own.
        if not self.settings.endpoint_url:
            raise MTurkClosedError(self.sandbox)  # refused before botocore is even loaded
        with self._client_lock:
            if self._client is None:
                self._client = make_client(self.settings, self.read_timeout_s)
            return self._client

    def _call(self, operation: str, **params) -> dict[str, Any]:
        """Call ``operation`` (MTurk's name, e.g. ``CreateHITType``), retrying ServiceFault a few times."""
        return call(self.client, operation, self.service_fault_attempts, self.service_fault_backoff_s, **params)

    def token(self, purpose: str, key: str) -> str:
        """A UniqueRequestToken for ``key``: the same in every process of this database, ≤ 64 characters.

        MTurk keeps tokens per requester account for 24 hours, and several databases (a re-run, a
        colleague's install, a test database) may share one account and produce the same study
        name, HIT keys and ledger keys. The study's random ``uid``, stored in its database, makes
        the token unique to that database; the server secret is not enough (one deployment may
        hold many databases, and a secret from the environment is shared by all of them).
        """
        if not self.study_uid:
            raise HitkitError(
                "the MTurk provider has no study uid, so its request tokens would not be unique to "
                "this database; load the study with StudyContext (hitkit.study.stored) before posting"
            )
        digest = hashlib.sha256(f"{self.study_uid}:{purpose}:{key}".encode()).hexdigest()
        return f"hk-{digest[:48]}"

    # Money ----------------------------------------------------------------------------------
    def fee(self, reward: Decimal, max_assignments: int) -> Decimal:
        """MTurk's fee on one assignment's reward (METHODS.md §5), plus 5 % of it when Masters are required."""
        fee = mturk_reward_fee(reward, max_assignments)
        if self.settings.masters:
            fee = max(cents(reward * (reward_rate(max_assignments) + MASTERS_FEE_RATE)), fee)
        return fee

    def bonus_fee(self, bonus: Decimal) -> Decimal:
        """MTurk's fee on a bonus (METHODS.md §5)."""
        return mturk_bonus_fee(bonus)

    def balance(self) -> Decimal:
        """The account's available balance (the sandbox always reports 10,000.00)."""
        return Decimal(self._call("GetAccountBalance")["AvailableBalance"])

    # Posting --------------------------------------------------------------------------------
    def qualification_requirements(self) -> list[dict[str, Any]]:
        """The HIT type's requirements: the configured ones, then the study's cap (must NOT be held)."""
        return qualification_requirements(self.settings, self.sandbox, self.cap_qualification_id())

    def cap_qualification_id(self) -> str:
        """The study's private qualification for workers at the per-worker cap (created once)."""
        if self._cap_qualification_id is None:
            tag = self.token("cap", self.config.study)[3:15]
            self._cap_qualification_id = cap_qualification(self._call, self.config.study, tag)
        return self._cap_qualification_id

    def hit_type_id(self, reward: Decimal) -> str:
        """The study's HIT type at this reward (MTurk gives the same properties the same id, so no duplicates)."""
        reward = cents(reward)
        if reward not in self._hit_type_ids:
            hit = self.config.hit
            made = self._call(
                "CreateHITType",
                Title=hit.title,
                Description=hit.description,
                Keywords=hit.keywords,
                Reward=f"{reward:.2f}",
                AssignmentDurationInSeconds=int(hit.assignment_minutes * 60),
                AutoApprovalDelayInSeconds=self.settings.auto_approval_delay_s,
                QualificationRequirements=self.qualification_requirements(),
            )
            self._hit_type_ids[reward] = made["HITTypeId"]
        return self._hit_type_ids[reward]

    def post_hit(
        self, hit_key: str, entry_url: str, reward: Decimal, max_assignments: int, lifetime_s: float
    ) -> PostedHit:
        """Create the HIT once per ``hit_key``; BudgetError if the balance cannot cover its worst case.

        MTurkClosedError, before any call, when no ``endpoint_url`` names a compatible service.
        """
        self.check_posting()
        if not entry_url.startswith("https://"):
            raise ConfigError(
                f"MTurk frames only HTTPS pages, and the entry URL is {entry_url}; set "
                f"server.public_url to the https:// address workers reach this server at"
            )
        worst = hit_cost(reward, max_assignments, self.fee(reward, max_assignments))
        available = self.balance()
        if worst > available:
            raise BudgetError(
                f"the MTurk account balance is ${available}, but HIT {hit_key} may cost ${worst} "
                f"({max_assignments} × (${reward} + ${self.fee(reward, max_assignments)} fee)); "
                f"add funds to the requester account, then resume the study"
            )
        token = self.token("hit", hit_key)
        try:
            hit = self._call(
                "CreateHITWithHITType",
                HITTypeId=self.hit_type_id(reward),
                MaxAssignments=max_assignments,
                LifetimeInSeconds=max(30, int(lifetime_s)),
                Question=external_question(entry_url, self.settings.frame_height),
                RequesterAnnotation=f"{hit_key} {token}"[:255],
                UniqueRequestToken=token,
            )["HIT"]
        except MTurkError as exc:
            if not exc.already_processed:
                raise
            hit = find_hit(self._call, token)
            if hit is None:
                raise MTurkError(
                    "CreateHITWithHITType",
                    exc.code,
                    f"MTurk says HIT {hit_key} was created already, but no HIT of this account "
                    f"carries its annotation; look for it in the requester site",
                ) from None
        return PostedHit(provider_hit_id=hit["HITId"], url=mturk_arrival.preview_url(self.sandbox, hit["HITGroupId"]))

    def check_posting(self) -> None:
        """Refuse, before any call, to post to MTurk's own endpoints: MTurk closed on 2026-09-30."""
        if not self.settings.endpoint_url:
            raise MTurkClosedError(self.sandbox)

    def expire_hit(self, provider_hit_id: str) -> None:
        """Expire now: an expiry in the past closes the HIT to new workers at once. Safe to repeat.

        MTurk keys UpdateExpirationForHIT by HIT and time (a repeat is refused as "idempotency
        token ... already been processed"), so a second expiry — a retried tick, ``hitkit sync``
        after the scheduler — finds the HIT expired already, which is what was asked.
        """
        self._update_expiration(provider_hit_id, EXPIRED_AT)

    def _update_expiration(self, provider_hit_id: str, expire_at: dt.datetime) -> None:
        try:
            self._call("UpdateExpirationForHIT", HITId=provider_hit_id, ExpireAt=expire_at)
        except MTurkError as exc:
            if not exc.already_processed:
                raise

    def extend_hit(
        self, provider_hit_id: str, extra_assignments: int, lifetime_s: float, request_key: str | None = None
    ) -> None:
        """More places (once per ``request_key``) and a fresh lifetime from now.

        Without ``request_key`` the token is keyed by the HIT and the number of places, so a retry
        never adds places twice; a caller that means to add the same number again within MTurk's
        24-hour token window passes a new ``request_key``.
        """
        if extra_assignments > 0:
            token = self.token("extend", f"{provider_hit_id}:{request_key or extra_assignments}")
            try:
                self._call(
                    "CreateAdditionalAssignmentsForHIT",
                    HITId=provider_hit_id,
                    NumberOfAdditionalAssignments=extra_assignments,
                    UniqueRequestToken=token,
                )
            except MTurkError as exc:
                if not exc.already_processed:
                    raise
        # Whole seconds: MTurk's duplicate key is the time as it prints it, to the second.
        self._update_expiration(
            provider_hit_id, dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(seconds=lifetime_s)
        )

    # Arrival and completion -----------------------------------------------------------------
    def arrival(self, args: Mapping[str, str]) -> Arrival:
        """A preview, or the worker MTurk names (:mod:`hitkit.providers.mturk_arrival`)."""
        return mturk_arrival.arrival(args, self.sandbox)

    def completion(self, provider_assignment_id: str | None, args: Mapping[str, str]) -> Completion:
        """Post ``assignmentId`` back to the marketplace the HIT lives on (MTurk needs one more field)."""
        return mturk_arrival.completion(provider_assignment_id, self.sandbox)

    # Deciding and paying --------------------------------------------------------------------
    def _decide(self, operation: str, provider_assignment_id: str, status: str, feedback: str) -> None:
        params: dict[str, Any] = {"AssignmentId": provider_assignment_id}
        if feedback:
            params["RequesterFeedback"] = feedback[:1024]
        try:
            self._call(operation, **params)
        except MTurkError as exc:
            # A retry after a lost answer finds the work already decided; that is success.
            if exc.code != "RequestError":
                raise
            current = self._call("GetAssignment", AssignmentId=provider_assignment_id)["Assignment"]
            if current["AssignmentStatus"] != status:
                raise

    def approve(self, provider_assignment_id: str, feedback: str = "") -> None:
        self._decide("ApproveAssignment", provider_assignment_id, "Approved", feedback)

    def reject(self, provider_assignment_id: str, reason: str) -> None:
        if not reason.strip():
            raise ValueError("MTurk shows the worker why their work was rejected; give a reason")
        self._decide("RejectAssignment", provider_assignment_id, "Rejected", reason)

    def pay_bonus(
        self, worker_id: str, provider_assignment_id: str, amount: Decimal, reason: str, idempotency_key: str
    ) -> str:
        """SendBonus with a token made from the ledger key, so a retried payment pays once.

        The ledger key holds only this database's row ids; the token adds the study's ``uid`` so a
        bonus of another database with the same key is never taken for this one.
        """
        token = self.token("bonus", idempotency_key)
        try:
            self._call(
                "SendBonus",
                WorkerId=worker_id,
                AssignmentId=provider_assignment_id,
                BonusAmount=f"{cents(amount):.2f}",
                Reason=reason,
                UniqueRequestToken=token,
            )
        except MTurkError as exc:
            if not exc.already_processed:
                raise
        return f"mturk-bonus-{token}"

    # Keeping in step ------------------------------------------------------------------------
    def sync_submissions(self, provider_hit_id: str) -> list[SubmittedWork]:
        """Every submitted, approved or rejected assignment MTurk holds for the HIT."""
        return submitted_work(self._call, provider_hit_id)

    def list_work(self, provider_hit_ids: Sequence[str]) -> list[ProviderWork]:
        """ListAssignmentsForHIT, every page, for each HIT: what ``hitkit sync`` compares with the database."""
        return [
            ProviderWork(w.provider_assignment_id, w.worker_id, WORK_STATUSES[w.status], hit_id)
            for hit_id in provider_hit_ids
            for w in self.sync_submissions(hit_id)
        ]

    def work_of(self, provider_assignment_id: str) -> ProviderWork | None:
        """GetAssignment: MTurk's arrival parameters are unsigned, so who did the work is checked here.

        MTurk lists only Submitted, Approved and Rejected assignments (botocore's AssignmentStatus),
        so work accepted but not yet handed in is not shown to anyone, and an id that is not
        MTurk's shape is never sent.
        """
        if not ID_PATTERN.fullmatch(provider_assignment_id or ""):
            return ProviderWork(provider_assignment_id or "", "", WorkStatus.RETURNED)
        try:
            a = self._call("GetAssignment", AssignmentId=provider_assignment_id)["Assignment"]
        except MTurkError as exc:
            if exc.code != "RequestError":
                raise
            return ProviderWork(provider_assignment_id, "", WorkStatus.RETURNED)  # MTurk has no such assignment
        return ProviderWork(a["AssignmentId"], a["WorkerId"], WORK_STATUSES[a["AssignmentStatus"]], a.get("HITId"))

    def settle_bonus(self, bonus: PendingBonus) -> BonusOutcome:
        """PAID when MTurk lists more bonuses of this amount on the assignment than the ledger has paid.

        SendBonus's UniqueRequestToken stops a second payment only for 24 hours, so a late retry
        looks first at what MTurk actually paid.
        """
        alike = bonuses_alike(self._call, bonus.provider_assignment_id, bonus.worker_id, bonus.amount)
        return BonusOutcome.PAID if alike > bonus.paid_alike else BonusOutcome.UNPAID

    def cap_worker(self, worker_id: str) -> None:
        """Give the worker the study's cap qualification (silently), so no more of its HITs reach them."""
        self._call(
            "AssociateQualificationWithWorker",
            QualificationTypeId=self.cap_qualification_id(),
            WorkerId=worker_id,
            IntegerValue=1,
            SendNotification=False,
        )
