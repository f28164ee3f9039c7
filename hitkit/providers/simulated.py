"""The ``simulated`` provider: the marketplace of the synthetic crowd in :mod:`hitkit.simulation.crowd`.

It speaks MTurk's arrival parameters (``workerId``, ``assignmentId``, ``hitId``, with
``ASSIGNMENT_ID_NOT_AVAILABLE`` for a preview), so a dry run goes through the same entry path a
real crowd takes.
"""

from __future__ import annotations

from collections.abc import Mapping

from hitkit.providers.base import Arrival
from hitkit.providers.internal import InternalProvider

PREVIEW_ASSIGNMENT = "ASSIGNMENT_ID_NOT_AVAILABLE"


class SimulatedProvider(InternalProvider):
    """A synthetic crowd's marketplace; the crowd itself is :mod:`hitkit.simulation.crowd`."""

    name = "simulated"
    lists_work = True

    def arrival(self, args: Mapping[str, str]) -> Arrival:
        assignment = args.get("assignmentId")
        if assignment in (None, "", PREVIEW_ASSIGNMENT) or not args.get("workerId"):
            return Arrival(preview=True, provider_hit_id=args.get("hitId"))
        return Arrival(
            preview=False,
            worker_id=args["workerId"],
            provider_assignment_id=assignment,
            provider_hit_id=args.get("hitId"),
        )
