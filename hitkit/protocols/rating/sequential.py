"""The rating protocol's comparisons for a stopping rule (:mod:`hitkit.analysis.sequential`).

Live chat's statistic (:mod:`hitkit.protocols.live_chat.sequential`, whose docstring gives the choice,
what it covers and its references) on this protocol's own table: ``da_ratings`` in live chat's shape
(:func:`hitkit.protocols.rating.analysis.as_chat_ratings`), the degraded copies as the control of the
QC test, a rated response (one worker's criterion ratings of one text) in a conversation's place.
For the pair (x, y), each counted assignment that passes its own QC test and rated both systems gives
a value in [−1, 1]: its mean oriented slider score of x's responses minus y's, / 100 (null 0). A worker
may take many blocks (HITs), so the sequence takes one observation per worker, their first such
assignment (:func:`hitkit.analysis.contributions.worker_contributions`, which states the exact guarantee),
watched with the bounded (nonasymptotic) confidence sequence; n counts those workers. A block's texts are
rated by ``ratings_per_item`` workers and taken as fixed material, as the default analysis takes them: the
guarantee is exact when the crowd is even on every block's texts, approximate when only on average.

Free of scipy at import, like live chat's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations

import pandas as pd

from hitkit.analysis.sequential import Comparison
from hitkit.protocols.live_chat.criteria import Criterion
from hitkit.protocols.live_chat.sequential import Pair, hit_pairs, rated_comparisons
from hitkit.protocols.rating.scores import DEFAULT_CRITERIA, TABLE

__all__ = ["UNIT", "planned", "hit_pairs", "comparisons"]

UNIT = "workers"
"""What a comparison's n counts: workers, each one observation (their first counted assignment on a fresh block)."""


def planned(payloads: Sequence[Mapping], config) -> dict[Pair, float]:
    """Assignments in the fixed design that rate both systems of each pair: the HITs the responses pack
    into (blocks of ``items_per_hit``) × the workers who take each HIT × the chance that a block of
    ``items_per_hit`` responses from S systems holds a given two (k(k − 1)/(S(S − 1)), at most 1)."""
    cfg = config.rating
    responses = [p for p in payloads if not p["is_control"]]
    assignments = float(math.ceil(len(responses) / cfg.items_per_hit) * cfg.ratings_per_item)
    systems = sorted({p["system"] for p in responses})
    k = min(cfg.items_per_hit, len(responses))
    share = min(1.0, k * (k - 1) / (len(systems) * (len(systems) - 1))) if len(systems) > 1 else 0.0
    return {pair: assignments * share for pair in combinations(systems, 2)}


def comparisons(
    tables: Mapping[str, pd.DataFrame],
    systems: Sequence[str],
    plan: Mapping[Pair, float],
    *,
    config=None,
    criteria: Sequence[Criterion] | None = None,
) -> list[Comparison]:
    """One comparison per pair of systems from the export's ``assignments`` and ``da_ratings`` so far, on the
    study file's criteria (``config``), else ``criteria``, else the defaults."""
    if criteria is None:
        criteria = config.rating.criterion_list() if config is not None and config.rating else DEFAULT_CRITERIA
    from hitkit.protocols.rating.analysis import as_chat_ratings  # scipy: imported only when used

    ratings = tables.get(TABLE)
    if ratings is not None and not ratings.empty:
        ratings = as_chat_ratings(ratings)
    return rated_comparisons(tables.get("assignments"), ratings, systems, plan, criteria)
