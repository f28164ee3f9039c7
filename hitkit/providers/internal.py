"""The two providers whose marketplace is hitkit's own database: ``simulated`` and ``local``.

Posting a HIT only marks it open; approving and paying are recorded in the ledger by the caller.
``simulated`` speaks MTurk's arrival parameters (``workerId``, ``assignmentId``, ``hitId``, with
``ASSIGNMENT_ID_NOT_AVAILABLE`` for a preview) so that a dry run exercises the same entry path a
real crowd takes. ``local`` gives a coordinator signed invite links for in-house annotators.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Mapping

from hitkit import tokens
from hitkit.errors import FlowError
from hitkit.providers.base import Arrival, Completion, CompletionKind, CrowdProvider, PostedHit

PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"


class _InternalProvider(CrowdProvider):
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


class SimulatedProvider(_InternalProvider):
    """A synthetic crowd's marketplace; the crowd itself is :mod:`hitkit.crowd`."""

    name = "simulated"

    def arrival(self, args: Mapping[str, str]) -> Arrival:
        assignment = args.get("assignmentId")
        if assignment in (None, "", PREVIEW_ASSIGNMENT) or not args.get("workerId"):
            return Arrival(preview=True, provider_hit_id=args.get("hitId"))
        return Arrival(preview=False, worker_id=args["workerId"], provider_assignment_id=assignment,
                       provider_hit_id=args.get("hitId"))


class LocalProvider(_InternalProvider):
    """In-house annotators with signed invite links; hitkit picks each next HIT for them."""

    name = "local"
    chooses_hit = True

    def invite_token(self, annotator: str) -> str:
        """The signed token of one invite link."""
        return tokens.sign(self.secret, f"invite:{self.config.study}", annotator)

    def arrival(self, args: Mapping[str, str]) -> Arrival:
        token = args.get("invite")
        if not token:
            if args.get("preview"):
                return Arrival(preview=True)
            raise FlowError("this link has no invite; ask the study's coordinator for your personal link", 403)
        annotator = tokens.verify(self.secret, f"invite:{self.config.study}", token)
        if annotator is None:
            raise FlowError("this invite link is not valid for this study; ask the coordinator for a new one", 403)
        return Arrival(preview=False, worker_id=annotator)

