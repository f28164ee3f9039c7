"""The ``local`` provider: in-house annotators with signed personal invite links.

Annotators arrive at ``/s/STUDY/enter?invite=TOKEN``; hitkit picks each next HIT for them.
"""

from __future__ import annotations

from collections.abc import Mapping

from hitkit.errors import FlowError
from hitkit.i18n import N_
from hitkit.providers.base import Arrival
from hitkit.providers.internal import InternalProvider
from hitkit.worker import tokens


class LocalProvider(InternalProvider):
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
            raise FlowError(N_("this link has no invite; ask the study's coordinator for your personal link"), 403)
        annotator = tokens.verify(self.secret, f"invite:{self.config.study}", token)
        if annotator is None:
            raise FlowError(N_("this invite link is not valid for this study; ask the coordinator for a new one"), 403)
        return Arrival(preview=False, worker_id=annotator)
