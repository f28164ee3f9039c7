"""Intervals that cannot look wrong: a rate's interval inside [0, 1], and an honest interval where a
sample of 0-or-1 outcomes is all one way (0 of n, n of n), whose t interval collapses to a point.

Pure functions; the win-rate tables call them after computing their usual intervals."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def wilson_interval(successes: float, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval for ``successes`` of ``n`` (Wilson 1927): never outside [0, 1],
    never of width 0, and for 0 of n it is [0, z²/(n + z²)] rather than [0, 0]. NaN for n = 0."""
    if n <= 0:
        return math.nan, math.nan
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes of {n}: successes must lie in [0, n]")
    z = stats.norm.ppf(0.5 + level / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # At 0 of n (or n of n) the closed form gives exactly 0 (1) up to rounding.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return float(low), float(high)


def clip_interval(low: float, high: float, lower: float = 0.0, upper: float = 1.0) -> tuple[float, float]:
    """``(low, high)`` clipped to the parameter's range [lower, upper]; NaN stays NaN."""
    if math.isnan(low) or math.isnan(high):
        return low, high
    return float(min(max(low, lower), upper)), float(min(max(high, lower), upper))


def rate_interval(values, low: float, high: float, level: float = 0.95) -> tuple[float, float]:
    """The interval to report for a rate estimated as the mean of ``values`` (each in [0, 1]: 1 win,
    0 loss, ½ tie) whose own interval is ``(low, high)``: clipped to [0, 1], and where every value is
    0 or every value is 1 (no spread, so a t or normal interval is the single point), the Wilson
    interval for 0 of n or n of n instead. Where the estimator gave no interval (NaN: too few values for
    one), none: an interval is never shown without its estimate."""
    if math.isnan(low) or math.isnan(high):  # no estimate (too few values): no interval either
        return math.nan, math.nan
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    n = values.size
    if n and (np.all(values == 0) or np.all(values == 1)):
        return wilson_interval(float(values.sum()), n, level)
    return clip_interval(low, high)
