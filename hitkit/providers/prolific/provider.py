"""The ``prolific`` provider: one hitkit study is one Prolific study, spoken to through :mod:`.client`.

hitkit's HITs are packages inside the one Prolific study, so ``chooses_hit`` is true and participants
arrive at ``/s/STUDY/enter`` with ``PROLIFIC_PID``, ``STUDY_ID`` and ``SESSION_ID`` (the submission id).
The first posted HIT creates the Prolific study, checks its currency and the workspace balance, and
publishes it; each later HIT raises its places. Places are *set* to the sum recorded for every posted
HIT key (never incremented, never lowered: Prolific only lets a published study's places go up), so a
post retried after a crash adds nothing.

The Prolific study's ``internal_name`` carries a token drawn once per database, so only the database
that created a study ever adopts it again; a rerun with a fresh database creates a new study.

State: what it did on Prolific (the study it created, the places per HIT key, publishing) is kept as
``prolific_*`` Event rows (:mod:`.state`), each in a short transaction of its own; a bonus's steps are the
ledger row's states (:mod:`hitkit.money.payments`). Body and checks: :mod:`.posting`; bonuses: :mod:`.bonuses`;
submissions and decisions on them: :mod:`.submissions`.
Callers call it with no transaction open; it never writes ledger rows.

Arrivals are verified against the live submission (:mod:`.arrival`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from hitkit.money.amounts import flat_fee
from hitkit.providers.base import (
    Arrival,
    BonusOutcome,
    Completion,
    CompletionKind,
    CrowdProvider,
    PendingBonus,
    PostedHit,
    ProviderWork,
)
from hitkit.providers.prolific import arrival, bonuses, messages, posting, test_run
from hitkit.providers.prolific import submissions as subs
from hitkit.providers.prolific.client import ProlificClient, ProlificError, fee_rate
from hitkit.providers.prolific.state import ProlificMemory, ProlificState, created_study_id, require_posted
from hitkit.providers.prolific.statuses import PUBLISHED_STATUSES

log = logging.getLogger(__name__)

__all__ = ["COMPLETE_URL", "ProlificProvider"]

COMPLETE_URL = "https://app.prolific.com/submissions/complete?cc={code}"
REFUSE_FULL = (
    "please return this study on Prolific (\"Stop without completing\") so that your place goes "
    "to someone else; you will not be penalised for it"
)


class ProlificProvider(CrowdProvider):
    """Prolific: one study per hitkit study, participants verified against their live submission."""

    name = "prolific"
    chooses_hit = True
    confirmation = "arrival"  # the arrival is accepted only once Prolific confirms the submission
    arrival_calls_platform = True
    """Each arrival is checked against the participant's live submission (hitkit.worker.arrivals bounds it)."""
    lists_returns = True
    """:meth:`list_work` shows returned and timed-out submissions, so the scheduler frees their places."""
    timeout_s = 30.0
    """Seconds to wait for Prolific's answer to one call."""

    def __init__(self, config, secret: str):
        super().__init__(config, secret)
        self.settings = config.provider.prolific
        self.api = ProlificClient(self.settings.api_url, self.settings.token_env, on_call=self._audit)
        self.api.timeout_s = self.timeout_s
        self.memory = ProlificMemory(config.database_url, config.study)
        self._study_id: str | None = None  # cached once known: a hitkit study's Prolific study never changes

    @property
    def groups(self):
        """The workspace's participant groups, by name (:mod:`.groups`): allowlists and the QC blocklist."""
        from hitkit.providers.prolific.groups import ProlificGroups

        return ProlificGroups(
            self.api, lambda: posting.workspace_id(self.api, self.settings.workspace), self.memory.database_url
        )

    @property
    def hooks(self):
        """The study's webhooks (:mod:`.webhooks`): subscribed when the study file gives a public https address."""
        from hitkit.providers.prolific.webhooks import ProlificHooks

        return ProlificHooks(
            self.api,
            self.settings,
            self.config.study,
            self.prolific_study_id,
            lambda: posting.workspace_id(self.api, self.settings.workspace),
        )

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        return self.api.call(method, path, body)

    def _audit(self, method: str, path: str, status: int | None, attempt: int) -> None:
        """Every call that changes something on Prolific goes into the audit log (never the token).

        Reads are only logged: arrivals read, and a worker's page must never wait on a database write.
        """
        if method == "GET":
            return
        try:
            self._record("prolific_call", {"method": method, "path": path, "status": status, "attempt": attempt})
        except Exception as exc:  # noqa: BLE001 - the audit row must not turn a done call into a failed one
            log.warning("could not log Prolific call %s %s: %s", method, path, exc)

    # -- what this database remembers (short transactions of its own) ------------------------------

    def _record(self, kind: str, data: dict[str, Any]) -> None:
        self.memory.record(kind, data)

    def state(self) -> ProlificState:
        """What this database remembers doing on Prolific for this study (its ``prolific_*`` events)."""
        out = self.memory.read()
        if out.study_id:
            self._study_id = out.study_id
        return out

    def prolific_study_id(self) -> str | None:
        """The Prolific study this hitkit study posted to, or None before the first post."""
        return self._study_id or self.state().study_id

    def _arrival_study_id(self) -> tuple[str, ...] | None:
        """The Prolific studies whose participants may arrive: the study, and a test run's test study."""
        if self._study_id is None:
            self._study_id = self.memory.created_study_id()
        if self._study_id is None:
            return None
        test = created_study_id(self.memory.database_url, self.config.study, "prolific_test_study")
        return (self._study_id, test) if test else (self._study_id,)

    def _require_study(self) -> str:
        return require_posted(self.prolific_study_id(), self.config.study)

    # -- money -------------------------------------------------------------------------------------

    def fee_rate(self) -> Decimal:
        """Prolific's fee as one rate: ``provider.fee_rate`` when the study file sets one above 0, else
        ``provider.prolific.service_fee_rate`` plus ``vat_rate`` on it (Prolific charges no study without a fee)."""
        if self.config.provider.fee_rate > 0:
            return self.config.provider.fee_rate
        return fee_rate(self.settings.service_fee_rate, self.settings.vat_rate)

    def fee(self, reward: Decimal, max_assignments: int) -> Decimal:
        """Prolific's fee on one participant's reward (about 33.3 % + VAT by default)."""
        return flat_fee(reward, self.fee_rate())

    def bonus_fee(self, bonus: Decimal) -> Decimal:
        """Prolific charges the same fee on bonuses as on rewards (help centre, "Bonus payments")."""
        return flat_fee(bonus, self.fee_rate())

    # -- the study ---------------------------------------------------------------------------------

    def completion_code(self) -> str:
        """The study's completion code, derived from the server secret so every process agrees."""
        digest = hmac.new(self.secret.encode(), f"prolific-cc:{self.config.study}".encode(), hashlib.sha256)
        return digest.hexdigest()[:8].upper()

    pays_screen_outs = True
    """A screened-out participant is paid by Prolific through the FIXED_SCREEN_OUT_PAYMENT code."""

    def screen_out_code(self) -> str | None:
        """The screener's completion code (``FIXED_SCREEN_OUT_PAYMENT``), None for a study without a screener."""
        if self.config.screener is None:
            return None
        digest = hmac.new(self.secret.encode(), f"prolific-so:{self.config.study}".encode(), hashlib.sha256)
        return "SO" + digest.hexdigest()[:8].upper()

    def screen_out_completion(self) -> Completion:
        """Send a screened-out participant to Prolific with the screen-out code (Prolific pays and frees the place)."""
        code = self.screen_out_code()
        return Completion(CompletionKind.REDIRECT, url=COMPLETE_URL.format(code=code), code=code)

    def post_hit(self, hit_key, entry_url, reward, max_assignments, lifetime_s) -> PostedHit:
        """Create, check and publish the study for the first HIT; later HITs set its places to the new total."""
        state = self.state()
        study_id = state.study_id
        if study_id is not None:
            posting.check_reward(self.api, study_id, hit_key, reward)  # before this HIT's places are counted
        if hit_key not in state.places:
            self._record("prolific_places", {"hit_key": hit_key, "places": max_assignments})
            state.places[hit_key] = max_assignments
        total = sum(state.places.values())
        if study_id is None:
            study_id = self._study_id = posting.create_study(self, state, entry_url, reward, total)
        remote = self._call("GET", f"/studies/{study_id}/")
        status, places = remote.get("status"), int(remote.get("total_available_places") or 0)
        if status == "UNPUBLISHED":
            posting.check_currency(remote, self.config.provider.currency)
            if places != total:
                self._call("PATCH", f"/studies/{study_id}/", {"total_available_places": total})
            posting.check_balance(self.api, self.settings.workspace, reward, self.fee_rate(), total)
            test_run.publish_or_test(self, study_id)  # PUBLISH, or a test run's test study
        elif places < total:
            if status == "PAUSED":
                # The coordinator paused it; hitkit never restarts it, and adds no places meanwhile.
                raise ProlificError(
                    f"the Prolific study {study_id} is paused; resume it with `hitkit resume "
                    f"STUDY_FILE` (or on Prolific) to post more work",
                    permanent=False,
                )
            posting.check_balance(self.api, self.settings.workspace, reward, self.fee_rate(), total - places)
            # Only ever raise: after a crash Prolific may already hold more places than recorded.
            self._call("PATCH", f"/studies/{study_id}/", {"total_available_places": total})
        return PostedHit(provider_hit_id=f"{study_id}:{hit_key}", url=None)

    def _publish(self, study_id: str) -> None:
        """PUBLISH, recorded first; "Cannot PUBLISH a study that is ACTIVE" (an earlier call whose answer
        was lost, or a rival's, did it) is success: the study's own status, asked now, decides."""
        self._record("prolific_publishing", {"study_id": study_id})
        try:
            self._transition(study_id, "PUBLISH")
        except ProlificError as refused:
            if refused.status is None or not 400 <= refused.status < 500:
                raise
            status = self._call("GET", f"/studies/{study_id}/").get("status")
            if status not in PUBLISHED_STATUSES:
                raise
            log.info("Prolific study %s was already published (%s): %s", study_id, status, refused)

    def _transition(self, study_id: str, action: str) -> dict[str, Any]:
        return self._call("POST", f"/studies/{study_id}/transition/", {"action": action}) or {}

    def study_status(self) -> str | None:
        """The Prolific study's status (ACTIVE, PAUSED, AWAITING REVIEW, …), None before the first post."""
        study_id = self.prolific_study_id()
        return None if study_id is None else self._call("GET", f"/studies/{study_id}/").get("status")

    def _move(self, action: str, from_statuses: tuple[str, ...]) -> None:
        """``action`` on the Prolific study if its status, asked now, is one it applies to."""
        study_id = self._require_study()
        if self._call("GET", f"/studies/{study_id}/").get("status") in from_statuses:
            self._transition(study_id, action)

    def pause(self) -> None:
        """Pause the Prolific study: no new participants until it is started again."""
        self._move("PAUSE", ("ACTIVE",))

    def resume(self) -> None:
        """Start a paused Prolific study again (only ever on the coordinator's command)."""
        self._move("START", ("PAUSED",))

    def stop(self) -> None:
        """Stop the Prolific study for good; work in progress can still be submitted (then AWAITING REVIEW)."""
        self._move("STOP", ("ACTIVE", "PAUSED"))

    def close(self) -> None:
        """The stopping rule fired: no more places are added, and the study is stopped on Prolific
        (participants already at work can still submit; the study then shows AWAITING REVIEW)."""
        if self.prolific_study_id() is not None:
            self.stop()

    def expire_hit(self, provider_hit_id: str) -> None:
        """A finished package needs nothing on Prolific; when no package is left open, the study stops."""
        if self.memory.open_hits() == 0:
            self.stop()

    def extend_hit(self, provider_hit_id: str, extra_assignments: int, lifetime_s: float) -> None:
        """Prolific listings do not lapse: add any extra places (a paused study stays paused)."""
        if extra_assignments <= 0:
            return
        hit_key = provider_hit_id.split(":", 1)[1]
        state = self.state()
        n = sum(1 for k in state.places if k.startswith(f"{hit_key}+"))
        self._record("prolific_places", {"hit_key": f"{hit_key}+{n}", "places": extra_assignments})
        study_id = self._require_study()
        total = sum(state.places.values()) + extra_assignments
        if int(self._call("GET", f"/studies/{study_id}/").get("total_available_places") or 0) < total:
            self._call("PATCH", f"/studies/{study_id}/", {"total_available_places": total})

    # -- arrival and completion (read only) --------------------------------------------------------

    def arrival(self, args: Mapping[str, str]) -> Arrival:
        """Accept a participant whose submission Prolific shows ACTIVE, theirs, in this study; no database writes."""
        ids = arrival.link_ids(args)
        if ids is None:
            return Arrival(preview=True)
        return arrival.verify(
            self.api, self.memory, ids, self._arrival_study_id(), COMPLETE_URL.format(code=self.completion_code())
        )

    refusal_hint = REFUSE_FULL
    """Added to a refusal of a participant who holds a Prolific place hitkit cannot use (no HIT for them)."""

    def completion(self, provider_assignment_id, args) -> Completion:
        """Redirect to Prolific's completion URL with the study's code (the cap is the scheduler's job)."""
        code = self.completion_code()
        return Completion(CompletionKind.REDIRECT, url=COMPLETE_URL.format(code=code), code=code)

    def send_message(self, participant_ids: list[str], body: str) -> int:
        """Write to participants of the study on Prolific (:mod:`.messages`); how many were written to."""
        return messages.send(self.api, self._require_study(), participant_ids, body)

    def cap_worker(self, worker_id: str) -> None:
        """Prolific's cap across studies: the participant joins the blocklist group (``blocklist_group``)."""
        if not self.settings.blocklist_group:
            return
        self._call(
            "POST",
            f"/participant-groups/{self.settings.blocklist_group}/participants/",
            {"participant_ids": [worker_id]},
        )

    # -- decisions (:mod:`.submissions`) -----------------------------------------------------------

    def approve(self, provider_assignment_id: str, feedback: str = "") -> None:
        """APPROVE the submission (documented idempotent)."""
        subs.transition(self.api, provider_assignment_id, {"action": "APPROVE"}, "APPROVED")

    def approve_many(self, provider_assignment_ids: list[str]) -> None:
        """Approve many submissions in one bulk call; Prolific does it asynchronously."""
        self._call("POST", "/submissions/bulk-approve/", {"submission_ids": list(provider_assignment_ids)})

    def reject(self, provider_assignment_id: str, reason: str, category: str | None = None) -> None:
        """Reject with a category and the study's rejection message (:mod:`.rejection`: always 100+ characters)."""
        body = subs.reject_body(
            self.settings.rejection_message, self.config.study, reason, category or self.settings.rejection_category
        )
        subs.transition(self.api, provider_assignment_id, body, "REJECTED")

    def complete_submission(self, provider_assignment_id: str) -> None:
        """Hand in on Prolific work the participant submitted in hitkit but never brought back (COMPLETE)."""
        body = {"action": "COMPLETE", "completion_code": self.completion_code()}
        subs.transition(self.api, provider_assignment_id, body, "AWAITING REVIEW")

    def submissions(self) -> list[dict[str, Any]]:
        """Every submission of the study, as Prolific lists them (``participant_id``), all pages."""
        return subs.listed(self.api, self.prolific_study_id())

    def sync_submissions(self) -> list[tuple[str, str]]:
        """Every submission of the study on Prolific as (submission id, Prolific status), for reconciliation."""
        return [(s["id"], s["status"]) for s in self.submissions()]

    def list_work(self, provider_hit_ids: Sequence[str]) -> list[ProviderWork]:
        """The study's submissions: hitkit's HITs are packages inside one Prolific study, so one listing."""
        return subs.work(self.submissions())

    def work_of(self, provider_assignment_id: str) -> ProviderWork | None:
        """The submission as Prolific holds it."""
        return subs.work_of(self.api, provider_assignment_id)

    # -- bonuses -----------------------------------------------------------------------------------

    def pay_bonus(self, worker_id, provider_assignment_id, amount: Decimal, reason, idempotency_key) -> str:
        """Create then pay a bonus once per key, each step remembered before the next (:mod:`.bonuses`)."""
        return bonuses.pay_bonus(self.api, self.memory, provider_assignment_id, amount, idempotency_key)

    two_step_bonus = True

    def create_bonus(self, provider_assignment_id: str, amount: Decimal) -> str:
        """Set the bonus up on the submission (pays nothing); the bulk bonus id."""
        return bonuses.create(self.api, self.memory, provider_assignment_id, amount)

    def send_bonus(self, platform_id: str) -> None:
        """Pay a bonus set up before (Prolific: not idempotent, the ledger records ``sending`` first)."""
        self._call("POST", f"/bulk-bonus-payments/{platform_id}/pay/")

    def bonuses_shown(self, provider_assignment_id: str, amount: Decimal) -> int:
        """How many payments of ``amount`` the submission's ``bonus_payments`` shows."""
        return bonuses.shown(self.api, provider_assignment_id, amount)

    def recorded_bonus(self, idempotency_key: str) -> dict | None:
        return self.memory.read().bonuses.get(idempotency_key)  # an older hitkit's prolific_bonus_* events

    def settle_bonus(self, bonus: PendingBonus) -> BonusOutcome:
        """Whether a pending bonus reached the participant, from the submission's ``bonus_payments``."""
        if bonus.sent_at is not None:
            return bonuses.settle_sent(self.api, bonus, bonus.sent_at)
        return bonuses.settle_bonus(self.api, self.memory, bonus)
