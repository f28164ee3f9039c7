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

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import ClassVar, Mapping

from hitkit.config import StudyConfig


@dataclass(frozen=True)
class Arrival:
    """Who arrived: a preview, or a worker with the provider's ids for this visit."""

    preview: bool
    worker_id: str | None = None
    provider_assignment_id: str | None = None
    provider_hit_id: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


class CompletionKind(str, Enum):
    REDIRECT = "redirect"   # send the browser to ``url`` (Prolific's completion URL)
    POST_FORM = "post_form"  # auto-submit ``fields`` to ``url`` (MTurk's externalSubmit)
    PAGE = "page"           # hitkit's own thank-you page, showing ``code`` if any


@dataclass(frozen=True)
class Completion:
    """How a worker who submitted is handed back to the provider."""

    kind: CompletionKind
    url: str | None = None
    fields: Mapping[str, str] = field(default_factory=dict)
    code: str | None = None


@dataclass(frozen=True)
class PostedHit:
    """What the provider said when a HIT was posted."""

    provider_hit_id: str
    url: str | None = None


class CrowdProvider(ABC):
    """Base class of ``simulated``, ``local``, ``prolific`` and ``mturk``."""

    name: ClassVar[str]
    chooses_hit: ClassVar[bool] = False
    """True when workers arrive at the study, not at a HIT, and hitkit picks the HIT for them."""

    def __init__(self, config: StudyConfig, secret: str):
        self.config = config
        self.secret = secret

    @abstractmethod
    def post_hit(self, hit_key: str, entry_url: str, reward: Decimal, max_assignments: int,
                 lifetime_s: float) -> PostedHit:
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
    def pay_bonus(self, worker_id: str, provider_assignment_id: str, amount: Decimal, reason: str,
                  idempotency_key: str) -> str:
        """Pay a bonus once per ``idempotency_key``; return the provider's reference."""

    def fee(self, reward: Decimal, max_assignments: int) -> Decimal:
        """The provider's fee on one assignment's reward."""
        from hitkit.money import flat_fee

        return flat_fee(reward, self.config.provider.fee_rate)
