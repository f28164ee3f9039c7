"""The crowd's share of a study with an LLM judge (``judge:``): the units people also label.

Drawn within each stratum the protocol's ``judge`` module names (pairwise: each pair of systems;
Spot The Bot: each pair of a conversation's systems, human–human material its own),
uniformly at random and seeded by the study's seed, by the sampling unit the module's optional
``cluster(unit)`` names (Spot The Bot: the conversation, whose segments are prefixes of each other
and so are labelled, and resampled in the analysis, together; absent: each unit its own): prediction-powered inference
(:mod:`hitkit.analysis.ppi`) is valid only for a uniformly random labelled subset. Only these units
become units of the study and are packed into HITs; the judge labels all of them
(:mod:`hitkit.judges.judging`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from hitkit.errors import ConfigError
from hitkit.judges.design import clusters
from hitkit.judges.panel import check_panel
from hitkit.judges.section import human_share, judge_section
from hitkit.protocols import PROTOCOLS
from hitkit.protocols.base import UnitSpec
from hitkit.study.config import StudyConfig

MIN_PER_STRATUM = 2
"""Human-labelled items each stratum needs: an interval needs at least two."""


def _strata(config: StudyConfig, units: Sequence[UnitSpec]) -> tuple[dict[str, dict[str, list[str]]], str]:
    """Each stratum's clusters (:func:`hitkit.judges.design.clusters`) with their unit keys, and what a
    cluster is called."""
    module = PROTOCOLS[config.task].module("judge")
    strata: dict[str, dict[str, list[str]]] = {}
    for key, members in clusters(config, units).items():
        strata.setdefault(module.stratum(members[0]), {})[key] = [u.key for u in members]
    return strata, getattr(module, "CLUSTER_NAME", "items")


def budgets(config: StudyConfig, units: Sequence[UnitSpec]) -> dict[str, float]:
    """Each stratum's expected number of clusters with human labels: ``judge.human_share`` of its clusters,
    or ``judge.human_items`` shared among the strata in proportion to their size (largest remainders, so
    whole numbers). ConfigError when it asks for more than there are."""
    judge = judge_section(config)
    strata, what = _strata(config, units)
    total = sum(len(clusters) for clusters in strata.values())
    if judge.human_items is None:
        share = human_share(judge)
        return {s: share * len(clusters) for s, clusters in strata.items()}
    if getattr(PROTOCOLS[config.task].module("judge"), "cluster", None) is not None:
        raise ConfigError(
            f"judge.human_items cannot size a {config.task} study's human share: it is drawn by "
            f"whole {what}; give judge.human_share instead"
        )
    if judge.human_items > total:
        raise ConfigError(
            f"judge.human_items is {judge.human_items} but the study has only {total} items "
            f"to label; lower it (or use human_share)"
        )
    exact = {s: judge.human_items * len(clusters) / total for s, clusters in strata.items()}
    sizes = {s: math.floor(x) for s, x in exact.items()}
    for s in sorted(exact, key=lambda s: (sizes[s] - exact[s], s))[: judge.human_items - sum(sizes.values())]:
        sizes[s] += 1
    return {s: float(k) for s, k in sizes.items()}


def check_select(config: StudyConfig) -> None:
    """ConfigError unless the study's protocol can draw its crowd's share where the judge is unsure: a judge
    of the material (before the crowd) and a ``selection`` that scores each sampling unit's judge confidence
    (a cluster's where the module draws by ``cluster``: :mod:`hitkit.judges.second_wave`)."""
    module = PROTOCOLS[config.task].module("judge")
    if getattr(module, "WHEN", "before") == "after":
        raise ConfigError(
            f"judge.select: uncertainty needs a judge of the material before the crowd; {config.task}'s judge "
            "labels what the crowd makes, so there is nothing to choose from: use select: uniform"
        )
    if not hasattr(module, "selection"):
        raise ConfigError(
            f"judge.select: uncertainty is not available for {config.task} in this version (its judge gives no "
            "per-item confidence): use select: uniform"
        )


def human_subset(config: StudyConfig, units: Sequence[UnitSpec]) -> list[UnitSpec]:
    """The units the crowd labels first: within each stratum, a uniformly random sample (seeded by the
    study's seed) of its clusters (the judge module's ``cluster(unit)``; each unit its own where it has
    none) of the stratum's :func:`budgets` (``judge.human_share`` of them, or its part of
    ``judge.human_items``); with ``judge.select: uncertainty`` the ``judge.pilot`` share of it, the rest
    drawn once the pilot's labels are in (:mod:`hitkit.judges.second_wave`). Every unit of a chosen
    cluster is chosen. Order kept.

    Raises :class:`~hitkit.errors.ConfigError` when the size asks for more units than there are, or
    leaves a stratum fewer than :data:`MIN_PER_STRATUM` clusters.
    """
    judge = judge_section(config)
    strata, what = _strata(config, units)
    budget = budgets(config, units)
    asked = f"judge.human_items {judge.human_items}" if judge.human_items is not None else ""
    asked = asked or f"judge.human_share {human_share(judge):g}"
    if judge.select == "uncertainty":
        check_select(config)
        budget = {s: judge.pilot * b for s, b in budget.items()}
        asked += f" with judge.pilot {judge.pilot:g}"
    sizes = {s: min(len(strata[s]), math.floor(b + 0.5)) for s, b in budget.items()}
    short = sorted(s for s, k in sizes.items() if k < MIN_PER_STRATUM)
    if short:
        s = short[0]
        raise ConfigError(
            f"{asked} sends {sizes[s]} of the {len(strata[s])} {what} of {s} to the crowd; each "
            f"needs at least {MIN_PER_STRATUM} for an interval: raise it"
        )
    rng = random.Random(f"{config.seed}:judge")
    chosen: set[str] = set()
    for s in sorted(strata):
        for c in rng.sample(sorted(strata[s]), sizes[s]):
            chosen.update(strata[s][c])
    return [u for u in units if u.key in chosen]


def rated(config: StudyConfig, key: str) -> bool:
    """Whether the crowd also labels the item made in the unit ``key``, for protocols whose items the crowd
    makes (live chat: a conversation is rated by its worker): a Bernoulli draw with probability
    ``judge.human_share``, seeded by the study's seed and the unit's key. Drawn when the unit is built,
    so it is independent of whoever takes it and of anything they do, as prediction-powered inference needs."""
    return random.Random(f"{config.seed}:judge:{key}").random() < human_share(judge_section(config))


def crowd_units(config: StudyConfig, units: Sequence[UnitSpec]) -> list[UnitSpec]:
    """The units the crowd labels: :func:`human_subset` with a judge of the material, else all of them
    (a judge that labels after the crowd has the crowd make every item; :func:`rated` draws the share)."""
    if config.judge is not None and config.judge.select == "uncertainty":
        check_select(config)
    check_panel(config)
    if config.judge is None or getattr(PROTOCOLS[config.task].module("judge"), "WHEN", "before") == "after":
        return list(units)
    return human_subset(config, units)
