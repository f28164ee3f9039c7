"""The shared base of the providers whose marketplace is hitkit's own database (simulated, local).

Posting a HIT only marks it open (the HIT row's status and ``expires_at`` are the listing);
approving and paying are recorded in hitkit's ledger by the scheduler, with nothing to call.
"""

from __future__ import annotations

from decimal import Decimal

from hitkit.providers.base import Completion, CompletionKind, CrowdProvider, PostedHit


class InternalProvider(CrowdProvider):
    """Provider calls that are no-ops because hitkit's own tables are the marketplace."""

    confirmation = "arrival"  # hitkit's own crowd, or annotators with signed invites

    def post_hit(self, hit_key, entry_url, reward, max_assignments, lifetime_s) -> PostedHit:
        return PostedHit(provider_hit_id=f"{self.name}-{hit_key}", url=entry_url)

    def expire_hit(self, provider_hit_id: str) -> None:
        return None  # the database's expires_at is the marketplace

    def extend_hit(self, provider_hit_id: str, extra_assignments: int, lifetime_s: float) -> None:
        return None

    def approve(self, provider_assignment_id: str, feedback: str = "") -> None:
        return None

    def reject(self, provider_assignment_id: str, reason: str) -> None:
        return None

    def pay_bonus(self, worker_id, provider_assignment_id, amount: Decimal, reason, idempotency_key) -> str:
        return f"{self.name}-bonus-{idempotency_key}"

    def completion(self, provider_assignment_id, args) -> Completion:
        return Completion(CompletionKind.PAGE, code=None)
