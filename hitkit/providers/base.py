"""The CrowdProvider seam: where work is posted, and how workers arrive and leave.

State lives in the database, not in provider objects: a provider is a thin translator between
hitkit's rows and one marketplace's calls, so any process (web server, scheduler, CLI) can make a
provider and act, and a crash loses nothing the database already holds.

Arrival protocol: a worker reaches ``/s/STUDY/hit/HIT`` (or ``/s/STUDY/enter`` where the provider
lets hitkit choose the HIT) with the provider's query parameters. :meth:`arrival` reads them into
an :class:`Arrival` — preview, or a worker with the provider's ids — and refuses forged ones. After
submit, :meth:`completion` says how to hand the worker back (a redirect, an auto-posted form, or
hitkit's own page).
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import ClassVar

from hitkit.errors import FlowError
from hitkit.i18n import N_
from hitkit.study.config import StudyConfig


@dataclass(frozen=True)
class Arrival:
    """Who arrived: a preview, or a worker with the provider's ids for this visit."""

    preview: bool
    worker_id: str | None = None
    provider_assignment_id: str | None = None
    provider_hit_id: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def worker(self) -> str:
        """The worker's id on the platform; FlowError for an arrival that names none (only a preview may)."""
        if self.worker_id is None:
            raise FlowError(N_("the crowd site did not say who you are; open the task again from the crowd site"), 400)
        return self.worker_id


class CompletionKind(str, Enum):
    REDIRECT = "redirect"  # send the browser to ``url`` (Prolific's completion URL)
    POST_FORM = "post_form"  # auto-submit ``fields`` to ``url`` (MTurk's externalSubmit)
    PAGE = "page"  # hitkit's own thank-you page, showing ``code`` if any


@dataclass(frozen=True)
class Completion:
    """How a worker who submitted is handed back to the provider."""

    kind: CompletionKind
    url: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    code: str | None = None

    @property
    def target(self) -> str:
        """Where a REDIRECT or POST_FORM completion sends the worker; ValueError for one without a url."""
        if self.url is None:
            raise ValueError(f"a {self.kind.value} completion needs a url, and this one has none")
        return self.url


@dataclass(frozen=True)
class PostedHit:
    """What the provider said when a HIT was posted."""

    provider_hit_id: str
    url: str | None = None


class WorkStatus(str, Enum):
    """Where a provider says one worker's assignment stands, in hitkit's words."""

    WORKING = "working"  # accepted, not yet handed in on the provider
    SUBMITTED = "submitted"  # handed in, waiting for a decision
    APPROVED = "approved"
    REJECTED = "rejected"
    RETURNED = "returned"  # given back, timed out or screened out: no decision to make


@dataclass(frozen=True)
class ProviderWork:
    """One assignment (MTurk) or submission (Prolific) as the provider lists it."""

    provider_assignment_id: str
    worker_id: str
    status: WorkStatus
    provider_hit_id: str | None = None


@dataclass(frozen=True)
class PendingBonus:
    """A bonus the ledger holds as not (known to be) paid, with what a provider needs to settle it.

    ``paid_alike`` counts the ledger's *paid* bonuses of the same amount on the same assignment,
    so a provider that can only list amounts tells this payment from its twins.
    """

    idempotency_key: str
    worker_id: str
    provider_assignment_id: str
    amount: Decimal
    status: str
    provider_ref: str | None
    paid_alike: int = 0
    sent_at: dt.datetime | None = None
    """When the pay call went out without an answer (the row's ``sending`` state), else None."""
    sending_alike: int = 0
    """The ledger's *other* bonuses of the same amount on the same assignment whose pay call also went out
    without an answer: a payment the platform shows could be any of them."""


class BonusOutcome(str, Enum):
    """What the provider says happened to a bonus whose pay call may or may not have gone out."""

    PAID = "paid"  # the worker has it: mark the ledger paid, pay nothing
    UNPAID = "unpaid"  # the worker does not have it: paying (again, with the same key) is safe
    UNKNOWN = "unknown"  # cannot be told: a coordinator checks by hand; hitkit pays nothing
    # The platform shows a payment of this amount that could be this bonus or another one sent without an
    # answer (same amount, same assignment), and no id tells which: a coordinator decides; hitkit marks and
    # pays nothing.
    AMBIGUOUS = "ambiguous"


class CrowdProvider(ABC):
    """Base class of ``simulated``, ``local``, ``prolific`` and ``mturk``."""

    name: ClassVar[str]
    chooses_hit: ClassVar[bool] = False
    """True when workers arrive at the study, not at a HIT, and hitkit picks the HIT for them."""
    confirmation: ClassVar[str] = "platform"
    """Who confirms that a worker did the work (``Assignment.confirmed_at``): ``arrival`` — the
    arrival itself is verified (signed invite, the platform's own check, hitkit's own crowd);
    ``platform`` — the platform shows the work as the worker's before it is approved (MTurk);
    ``coordinator`` — only ``hitkit confirm`` with the platform's completion list (panels).
    Unconfirmed work is never exported or analysed as valid."""
    resume_needs_proof: ClassVar[bool] = False
    """True where the arrival's ids travel unsigned in a URL that anyone can type (panels): a worker
    returning to an assignment they hold must then show the session id stored at their first arrival
    or the assignment's signed token kept in their browser (:func:`hitkit.worker.admission.enter`)."""

    study_uid: str | None = None
    """The study's random id in its database (``Study.uid``), set when the study is loaded
    (:meth:`hitkit.study.stored.StudyContext.of`): what request tokens derive from (MTurk's), so that
    several databases on one provider account never collide."""

    def __init__(self, config: StudyConfig, secret: str):
        self.config = config
        self.secret = secret

    @abstractmethod
    def post_hit(
        self, hit_key: str, entry_url: str, reward: Decimal, max_assignments: int, lifetime_s: float
    ) -> PostedHit:
        """Publish one HIT. ``hit_key`` is stable across retries so a retried post never duplicates."""

    @abstractmethod
    def expire_hit(self, provider_hit_id: str) -> None:
        """Stop new workers from taking the HIT (work in progress may still be submitted)."""

    @abstractmethod
    def extend_hit(self, provider_hit_id: str, extra_assignments: int, lifetime_s: float) -> None:
        """Re-open a HIT for returned or expired work: more places and/or more time."""

    @abstractmethod
    def arrival(self, args: Mapping[str, str]) -> Arrival:
        """Identify a visitor from the provider's query parameters; raise FlowError if forged."""

    @abstractmethod
    def completion(self, provider_assignment_id: str | None, args: Mapping[str, str]) -> Completion:
        """How to hand back a worker who has submitted."""

    @abstractmethod
    def approve(self, provider_assignment_id: str, feedback: str = "") -> None:
        """Accept submitted work; the provider pays the reward."""

    @abstractmethod
    def reject(self, provider_assignment_id: str, reason: str) -> None:
        """Refuse submitted work, with the reason shown to the worker."""

    @abstractmethod
    def pay_bonus(
        self, worker_id: str, provider_assignment_id: str, amount: Decimal, reason: str, idempotency_key: str
    ) -> str:
        """Pay a bonus once per ``idempotency_key``; return the provider's reference."""

    def check_posting(self) -> None:
        """Raise a HitkitError saying why and what to do if this provider cannot take work now."""

    def fee(self, reward: Decimal, max_assignments: int) -> Decimal:
        """The provider's fee on one assignment's reward."""
        from hitkit.money.amounts import flat_fee

        return flat_fee(reward, self.config.provider.fee_rate)

    def bonus_fee(self, bonus: Decimal) -> Decimal:
        """The provider's fee on a bonus."""
        from hitkit.money.amounts import flat_fee

        return flat_fee(bonus, self.config.provider.fee_rate)

    def cap_worker(self, worker_id: str) -> None:
        """Keep a worker at the study's per-worker cap from being offered more of its work.

        The server refuses such a worker anyway; this spares them a HIT they cannot take. The
        default does nothing, because hitkit's own pages are the marketplace.
        """

    def close(self) -> None:
        """No more work of this study will be posted (its stopping rule fired): a platform that lists
        the study as a whole stops it; work in progress can still be handed in. The default does
        nothing: each closed HIT was already expired."""

    def list_work(self, provider_hit_ids: Sequence[str]) -> list[ProviderWork] | None:
        """Every assignment the provider holds for these HITs, for ``hitkit sync``.

        None means the provider keeps no state of its own (hitkit's database is the marketplace),
        so there is nothing to reconcile.
        """
        return None

    def work_of(self, provider_assignment_id: str) -> ProviderWork | None:
        """The provider's view of one assignment before it is approved; None when it has none to give."""
        return None

    two_step_bonus: ClassVar[bool] = False
    """True where a bonus is first set up (an id, nothing paid) and then paid by a call that is not
    idempotent (Prolific): the ledger records each step before the next (:mod:`hitkit.money.payments`)."""

    def create_bonus(self, provider_assignment_id: str, amount: Decimal) -> str:
        """Set a bonus up on the platform, paying nothing; the platform's id for it (two-step platforms)."""
        raise NotImplementedError(f"{self.name} pays bonuses in one step")

    def send_bonus(self, platform_id: str) -> None:
        """Pay a bonus set up by :meth:`create_bonus` (two-step platforms; not idempotent)."""
        raise NotImplementedError(f"{self.name} pays bonuses in one step")

    def bonuses_shown(self, provider_assignment_id: str, amount: Decimal) -> int:
        """How many bonuses of ``amount`` the platform shows paid on the assignment (two-step platforms)."""
        raise NotImplementedError(f"{self.name} pays bonuses in one step")

    def recorded_bonus(self, idempotency_key: str) -> dict | None:
        """Steps an older hitkit remembered for this bonus outside the ledger (``bonus_id``, ``sent_at``, ``paid``)."""
        return None

    def settle_bonus(self, bonus: PendingBonus) -> BonusOutcome:
        """Whether a pending bonus reached the worker.

        The default answers UNPAID: a provider whose :meth:`pay_bonus` is idempotent by key can
        simply be asked to pay again. Providers whose pay call is not idempotent must override.
        """
        return BonusOutcome.UNPAID


def provider_agrees(work: ProviderWork | None, worker_external_id: str) -> bool | None:
    """Whether the provider's view lets hitkit approve: True yes, False never (another worker), None not yet.

    MTurk's arrival parameters are not signed, so a worker id in a URL proves nothing; the
    provider's own record of who holds the assignment decides. None from the provider (it keeps no
    record of its own) lets the work through.
    """
    if work is None:
        return True
    if work.worker_id and work.worker_id != worker_external_id:
        return False
    return True if work.status in (WorkStatus.SUBMITTED, WorkStatus.APPROVED) else None
