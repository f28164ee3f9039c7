"""Money: costs, fees and the budget ceiling. ``Decimal`` throughout, rounded to cents.

MTurk's fees (METHODS.md §5): 20 % on rewards and bonuses, another 20 % on the reward when a HIT
has 10 or more assignments, at least $0.01 per assignment. Other providers take a flat configurable
rate on rewards and bonuses; Prolific's is its service fee plus VAT on that fee
(:func:`hitkit.providers.prolific.client.fee_rate`, about 33.3 % + 20 % of it by default).
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def cents(amount: Decimal) -> Decimal:
    """``amount`` rounded half-up to whole cents."""
    return Decimal(amount).quantize(CENT, rounding=ROUND_HALF_UP)


def mturk_reward_fee(reward: Decimal, max_assignments: int) -> Decimal:
    """MTurk's fee on one assignment's reward."""
    rate = Decimal("0.20") + (Decimal("0.20") if max_assignments >= 10 else Decimal("0"))
    return max(cents(reward * rate), CENT)


def mturk_bonus_fee(bonus: Decimal) -> Decimal:
    """MTurk's fee on a bonus (20 %, at least a cent)."""
    return max(cents(bonus * Decimal("0.20")), CENT)


def flat_fee(amount: Decimal, rate: Decimal) -> Decimal:
    """A flat-rate fee, as Prolific and in-house payment schemes charge."""
    return cents(amount * rate)


def hit_cost(reward: Decimal, max_assignments: int, fee_per_assignment: Decimal) -> Decimal:
    """The most a HIT can cost: every assignment paid and charged its fee."""
    return cents((reward + fee_per_assignment) * max_assignments)
