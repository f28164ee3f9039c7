"""Krippendorff's alpha for every protocol: the point estimate, a bootstrap over workers and units, and
each worker's agreement with the rest of the crowd.

Alpha (Krippendorff 2011, "Computing Krippendorff's alpha-reliability") compares the disagreement
observed between values coded for the same unit with the disagreement expected by chance:
``alpha = 1 - (n - 1) * sum(o_ck * d_ck) / sum(n_c * n_k * d_ck)``, where ``o`` is the coincidence
matrix (each unit with m >= 2 values contributes every ordered pair of its values from different
coders with weight 1 / (m - 1)), ``n_c`` its margins, ``n`` the pairable values and ``d`` the level's
distance: nominal ``c != k``; ordinal ``(sum_{g=c..k} n_g - (n_c + n_k) / 2)^2``; interval
``(c - k)^2``. This is the ``krippendorff`` package's definition (a test holds the two equal to 1e-9);
hitkit computes it here, from the pairs, without the package.

The coincidence matrix is built from a list of within-unit pairs made once; a bootstrap replicate only
reweights the pairs, so all replicates cost one ``bincount`` each. Replicates resample workers
(coders) and units with replacement, as a two-way clustered bootstrap: a worker drawn twice is two
coders whose values are never paired with each other (pairing a worker with their own copy would
count self-agreement as agreement), and each copy's pairs are weighted by 1 / (m - its copies) so
every pairable value still contributes one unit of coincidence. The interval is the percentile
interval of the replicates, widened to contain the estimate when the replicates' skew leaves it
outside (a rare case with few units, stated in docs/METHODS.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import pandas as pd

Level = Literal["nominal", "ordinal", "interval"]
LEVELS: tuple[str, ...] = ("nominal", "ordinal", "interval")

AGREEMENT_COLUMNS = ("measure", "level", "scope", "alpha", "lower", "upper", "units", "coders")
"""``agreement.csv``: what was coded, its level, which units (all / system:X / criterion:Y), alpha with
its bootstrap interval, the pairable units and the coders who coded them."""

WORKER_COLUMNS = ("worker_id", "agreement_alpha", "agreement_units")
"""Per worker: alpha of the worker's values against the other coders' values of the same units (the
whole data's expected disagreement), and how many of the worker's units someone else coded too."""

CONFIDENCE = 0.95
"""The bootstrap interval's coverage."""
_CHUNK = 4_000_000
"""Replicate × pair weights held in memory at once (32 MB of floats)."""


@dataclass(frozen=True)
class Codings:
    """Values coded for units by coders, as integer indices: one entry per (unit, coder) value.

    ``domain`` holds the distinct values in order (the interval distance uses them); ``coders`` and
    ``units`` name the indices' labels."""

    coder: np.ndarray
    unit: np.ndarray
    value: np.ndarray
    domain: np.ndarray
    coders: np.ndarray
    units: np.ndarray

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Every ordered pair (i, j) of entries of one unit from different coders."""
        order = np.argsort(self.unit, kind="stable")
        unit = self.unit[order]
        starts = np.flatnonzero(np.r_[True, unit[1:] != unit[:-1]])
        sizes = np.diff(np.r_[starts, len(unit)])
        size_of = np.repeat(sizes, sizes)
        start_of = np.repeat(starts, sizes)
        first = np.repeat(np.arange(len(unit)), size_of)
        offset = np.arange(len(first)) - np.repeat(np.cumsum(size_of) - size_of, size_of)
        second = np.repeat(start_of, size_of) + offset
        i, j = order[first], order[second]
        keep = self.coder[i] != self.coder[j]
        return i[keep], j[keep]


def codings(frame: pd.DataFrame, unit: Sequence[str], coder: str, value: str) -> Codings:
    """The :class:`Codings` of a long table: ``unit`` columns name a unit, ``coder`` a coder, ``value`` the
    coded value (missing values dropped). A coder's repeated value for one unit keeps the first: a unit
    is coded once per coder."""
    rows = frame.dropna(subset=[value]).drop_duplicates([*unit, coder], keep="first")
    unit_codes, units = pd.factorize(pd.MultiIndex.from_frame(rows[list(unit)].astype(str)), sort=True)
    coder_codes, coders = pd.factorize(rows[coder].astype(str), sort=True)
    value_codes, domain = pd.factorize(rows[value], sort=True)
    return Codings(
        coder=np.asarray(coder_codes, dtype=np.int64),
        unit=np.asarray(unit_codes, dtype=np.int64),
        value=np.asarray(value_codes, dtype=np.int64),
        domain=np.asarray(domain),
        coders=np.asarray(coders),
        units=np.asarray(units),
    )


def from_matrix(matrix: np.ndarray) -> Codings:
    """The :class:`Codings` of a coders × units matrix with NaN for a missing value (the layout of the
    ``krippendorff`` package's ``reliability_data``)."""
    data = np.asarray(matrix, dtype=float)
    coder, unit = np.nonzero(~np.isnan(data))
    frame = pd.DataFrame({"coder": coder, "unit": unit, "value": data[coder, unit]})
    return codings(frame, ["unit"], "coder", "value")


def distances(level: str, domain: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The level's K × K distance between the domain's values; ``counts`` (the pairable values of each,
    possibly a batch × K array) enter the ordinal distance, which is then a batch × K × K array."""
    if level == "nominal":
        return 1.0 - np.eye(len(domain))
    if level == "interval":
        x = domain.astype(float)
        return (x[:, None] - x[None, :]) ** 2
    if level == "ordinal":
        cum = np.cumsum(counts, axis=-1)
        below = cum - counts  # the values strictly before each category
        index = np.arange(len(domain))
        # sum_{g=c..k} n_g, taking c the lower category of the two.
        span = cum[..., np.maximum.outer(index, index)] - below[..., np.minimum.outer(index, index)]
        return (span - (counts[..., :, None] + counts[..., None, :]) / 2) ** 2
    raise ValueError(f"level {level!r} is not one of {', '.join(LEVELS)}")


def _weighted_alphas(
    data: Codings,
    level: str,
    coder_w: np.ndarray,
    unit_w: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray] | None,
    *,
    moments: bool = True,
) -> np.ndarray:
    """Alpha for each row of coder weights (B × coders) and unit weights (B × units). With ``pairs`` the
    coincidences are summed over pairs of values (cheap when units have few coders); without, over
    units as ``A^T N`` of per-unit value counts (cheap when units have many coders and values are few);
    interval alpha from moments unless ``moments`` is False (the tests compare the three)."""
    k = len(data.domain)
    n_units = len(data.units)
    batch = coder_w.shape[0]
    entry_w = coder_w[:, data.coder]  # B × entries: copies of each value
    copies = np.stack([np.bincount(data.unit, weights=entry_w[b], minlength=n_units) for b in range(batch)])
    others = copies[:, data.unit] - entry_w  # copies of other coders' values beside each value
    # Each copy's pairs weigh 1 / (copies of other coders' values), so that it adds one coincidence.
    share = np.divide(entry_w, others, out=np.zeros_like(entry_w), where=others > 0) * unit_w[:, data.unit]
    value_w = np.where(others > 0, unit_w[:, data.unit] * entry_w, 0.0)
    if level == "interval" and moments:
        return _interval_alphas(data, entry_w, share, value_w)
    if pairs is not None:
        i, j = pairs
        pair_w = share[:, i] * entry_w[:, j]
        cell = data.value[i] * k + data.value[j]
        coincide = np.stack([np.bincount(cell, weights=pair_w[b], minlength=k * k) for b in range(batch)])
        coincide = coincide.reshape(batch, k, k)
    else:
        slot = data.unit * k + data.value
        per_unit = np.stack([np.bincount(slot, weights=entry_w[b], minlength=n_units * k) for b in range(batch)])
        shared = np.stack([np.bincount(slot, weights=share[b], minlength=n_units * k) for b in range(batch)])
        coincide = np.einsum("buk,bul->bkl", shared.reshape(batch, n_units, k), per_unit.reshape(batch, n_units, k))
        own = np.stack([np.bincount(data.value, weights=share[b] * entry_w[b], minlength=k) for b in range(batch)])
        coincide[:, np.arange(k), np.arange(k)] -= own  # a coder's copies are never paired with each other
    counts = np.stack([np.bincount(data.value, weights=value_w[b], minlength=k) for b in range(batch)])
    total = counts.sum(axis=1)
    delta = distances(level, data.domain, counts)
    if delta.ndim == 2:
        delta = np.broadcast_to(delta, (batch, k, k))
    observed = (coincide * delta).sum(axis=(1, 2))
    expected = (counts[:, :, None] * counts[:, None, :] * delta).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (total - 1.0) * observed / expected
    return np.where((expected > 0) & (total > 1), alpha, np.nan)


def _interval_alphas(data: Codings, entry_w: np.ndarray, share: np.ndarray, value_w: np.ndarray) -> np.ndarray:
    """Interval alpha from moments, without a coincidence matrix: a value x's pairs in its unit add
    ``share * sum_j w_j (x - x_j)^2 = share * (x^2 S0 - 2 x S1 + S2)`` (the unit's weighted power sums;
    a coder's own copies add 0), and the expected term is ``2 (n sum n x^2 - (sum n x)^2)``."""
    x = data.domain.astype(float)[data.value]
    n_units = len(data.units)
    sums = [
        np.stack([np.bincount(data.unit, weights=entry_w[b] * x**p, minlength=n_units) for b in range(len(entry_w))])
        for p in (0, 1, 2)
    ]
    s0, s1, s2 = (s[:, data.unit] for s in sums)
    observed = (share * (x**2 * s0 - 2 * x * s1 + s2)).sum(axis=1)
    total = value_w.sum(axis=1)
    expected = 2 * (total * (value_w * x**2).sum(axis=1) - (value_w * x).sum(axis=1) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (total - 1.0) * observed / expected
    return np.where((expected > 1e-12 * np.maximum(1.0, total**2)) & (total > 1), alpha, np.nan)


def _by_pairs(data: Codings, pairs: tuple[np.ndarray, np.ndarray]) -> bool:
    """True when summing over pairs costs less than the per-unit product."""
    return len(pairs[0]) <= len(data.units) * len(data.domain) ** 2


def alpha(data: Codings, level: str) -> float:
    """Krippendorff's alpha of ``data`` at ``level``; NaN when no unit has two coders' values or every
    pairable value is the same (no disagreement to expect)."""
    ones_c, ones_u = np.ones((1, len(data.coders))), np.ones((1, len(data.units)))
    pairs = data.pairs
    return float(_weighted_alphas(data, level, ones_c, ones_u, pairs if _by_pairs(data, pairs) else None)[0])


def bootstrap(data: Codings, level: str, *, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """``n_boot`` alphas of replicates that resample coders and units with replacement (seeded)."""
    rng = np.random.default_rng(seed)
    n_c, n_u = len(data.coders), len(data.units)
    every_pair = data.pairs
    by_pairs = _by_pairs(data, every_pair)
    pairs = every_pair if by_pairs else None
    cost = len(every_pair[0]) if by_pairs else n_u * len(data.domain) ** 2
    per_chunk = max(1, _CHUNK // max(1, cost + len(data.unit)))
    out = []
    for start in range(0, n_boot, per_chunk):
        size = min(per_chunk, n_boot - start)
        coder_w = rng.multinomial(n_c, np.full(n_c, 1.0 / n_c), size=size).astype(float)
        unit_w = rng.multinomial(n_u, np.full(n_u, 1.0 / n_u), size=size).astype(float)
        out.append(_weighted_alphas(data, level, coder_w, unit_w, pairs))
    return np.concatenate(out) if out else np.empty(0)


def interval(estimate: float, replicates: np.ndarray) -> tuple[float, float]:
    """The percentile interval of the finite replicates, widened to contain ``estimate``."""
    finite = replicates[np.isfinite(replicates)]
    if not np.isfinite(estimate) or len(finite) == 0:
        return (np.nan, np.nan)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return (float(min(low, estimate)), float(max(high, estimate)))


def pairable(data: Codings) -> tuple[int, int]:
    """(units with values from two or more coders, coders with a value in one of them)."""
    i, _ = data.pairs
    return int(len(np.unique(data.unit[i]))), int(len(np.unique(data.coder[i])))


def scopes(
    frame: pd.DataFrame, columns: Sequence[str] = (), *, exploded: pd.DataFrame | None = None
) -> list[tuple[str, pd.DataFrame]]:
    """``frame`` as ("all", frame), then one part per value of each column (``system:X``, ``criterion:Y``).
    ``exploded`` (optional) holds the rows once per system a unit involves (a column ``system``): the
    parts per system come from it, so that a pair of systems counts for both."""
    parts: list[tuple[str, pd.DataFrame]] = [("all", frame)]
    if exploded is not None:
        parts += [(f"system:{name}", rows) for name, rows in exploded.groupby("system", sort=True)]
    for column in columns:
        parts += [(f"{column}:{name}", rows) for name, rows in frame.groupby(column, sort=True)]
    return parts


def agreement_rows(
    parts: Sequence[tuple[str, pd.DataFrame]],
    *,
    measure: str,
    level: str,
    unit: Sequence[str],
    coder: str,
    value: str,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """:data:`AGREEMENT_COLUMNS` rows, one per part of :func:`scopes` that has a pairable unit: alpha
    with its bootstrap interval (none with ``n_boot`` 0)."""
    out = []
    for scope, rows in parts:
        data = codings(rows, unit, coder, value)
        units, coders = pairable(data)
        if units == 0:
            continue
        estimate = alpha(data, level)
        low, high = (
            interval(estimate, bootstrap(data, level, n_boot=n_boot, seed=seed)) if n_boot > 0 else (np.nan, np.nan)
        )
        out.append((measure, level, scope, estimate, low, high, units, coders))
    return pd.DataFrame(out, columns=list(AGREEMENT_COLUMNS))


def worker_agreement(frame: pd.DataFrame, *, level: str, unit: Sequence[str], coder: str, value: str) -> pd.DataFrame:
    """:data:`WORKER_COLUMNS` per coder of ``frame``: 1 - (the mean distance of the coder's values from
    other coders' values of the same units, each unit's pairs weighted as in alpha) / (the whole data's
    expected distance). 1 is perfect agreement with the crowd, 0 chance; NaN for a worker nobody
    else's values can be paired with."""
    data = codings(frame, unit, coder, value)
    i, j = data.pairs
    k = len(data.domain)
    size = np.bincount(data.unit, minlength=len(data.units)).astype(float)
    weight = 1.0 / np.maximum(size[data.unit[i]] - 1.0, 1.0)
    counts = np.bincount(data.value[np.unique(i)], minlength=k).astype(float)
    delta = distances(level, data.domain, counts)
    n = counts.sum()
    expected = (counts[:, None] * counts[None, :] * delta).sum() / max(n * (n - 1), 1.0)
    pair_d = delta[data.value[i], data.value[j]] * weight
    n_coders = len(data.coders)
    observed = np.bincount(data.coder[i], weights=pair_d, minlength=n_coders)
    weights = np.bincount(data.coder[i], weights=weight, minlength=n_coders)
    units = np.array([len(np.unique(data.unit[i][data.coder[i] == c])) for c in range(n_coders)], dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where((weights > 0) & (expected > 0), 1.0 - observed / weights / expected, np.nan)
    return pd.DataFrame({"worker_id": data.coders, "agreement_alpha": score, "agreement_units": units})
