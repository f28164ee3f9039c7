"""What the protocols' task types (``hitkit/protocols/NAME/task.py``) share: a layout that shows a HIT's
units in a random order, where a unit stands in it, the first keys of a unit's view, and the keys that
tie an exported answer to its study, HIT, assignment and worker."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hitkit.db.models import Assignment, Hit, Study, Unit, Worker


def shuffled_order(units: Sequence[Unit], rng: random.Random) -> dict[str, Any]:
    """A layout that shows ``units`` in a random order, recorded as ``{"order": [unit ids]}``."""
    order = [u.id for u in units]
    rng.shuffle(order)
    return {"order": order}


def position(unit: Unit, layout: Mapping[str, Any]) -> int | None:
    """Where ``unit`` stands in a :func:`shuffled_order` layout (0-based), or None outside one."""
    order = list(layout.get("order", []))
    return order.index(unit.id) if unit.id in order else None


def placed(unit: Unit, layout: Mapping[str, Any], numbered: Callable[[int], str], plain: str) -> dict[str, Any]:
    """The first keys of a unit's view: its public key, its :func:`position` and its label, ``numbered(n)``
    at place n (counted from 1), ``plain`` outside a shuffled order."""
    at = position(unit, layout)
    return {"unit_id": unit.public_key, "position": at, "label": numbered(at + 1) if at is not None else plain}


def answer_ids(study: Study, hit: Hit, assignment: Assignment, worker: Worker) -> dict[str, Any]:
    """The first columns of an exported answer: the study's name, and the platform's ids of the HIT, the
    assignment (hitkit's own where the platform gave none) and the worker."""
    return {
        "study": study.name,
        "hit_id": hit.provider_hit_id or str(hit.id),
        "assignment_id": assignment.provider_assignment_id or str(assignment.id),
        "worker_id": worker.external_id,
    }
