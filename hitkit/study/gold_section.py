"""The study file's ``gold:`` section: items with a known answer mixed into the HITs, and how a worker's
answers to them count in quality control.

Gold items look exactly like the study's other items (same markup, same random order and sides), so a
worker cannot tell them apart; each protocol says which kinds it can make (its registry entry's
``gold_sources``, the first being the default): ``degraded`` (a response and a degraded copy of it, or
a degraded copy alone), ``file`` (the coordinator's own items with a known answer, JSONL) or ``human``
(human–human conversations). ``rate`` is the share of each HIT's items that are gold.

``qc`` turns a worker's gold answers into a QC verdict (:func:`hitkit.analysis.gold.gold_verdicts`):
a worker fails when the upper end of their exact interval of gold accuracy is below ``upper_below``, or
when they have answered ``misses`` gold items wrong. That verdict joins the protocol's own check, and
``schedule.qc_failures`` (hold, pay, reject) decides what happens to a failing worker's work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from pydantic import Field, model_validator

from hitkit.study.sections import Model

GoldSource = Literal["degraded", "file", "human"]

SOURCE_TEXT = {
    "degraded": "a response against a degraded copy of it (a phrase replaced by one of another response)",
    "file": "the coordinator's items with a known answer (gold.file)",
    "human": "human–human conversations, whose speakers are both human",
}
"""What each source of gold items is, as errors and reports say it."""


class GoldQcConfig(Model):
    """When a worker's gold answers fail quality control (either rule; none set: gold is only reported)."""

    upper_below: Optional[float] = Field(
        None,
        gt=0,
        le=1,
        description=(
            "fail a worker whose gold accuracy is surely below this: the upper end of its exact "
            "(Clopper–Pearson) interval at 'level' lies below it (e.g. 0.5)"
        ),
    )
    misses: Optional[int] = Field(
        None, ge=1, le=1000, description="fail a worker once this many of their gold answers are wrong (e.g. 3)"
    )
    level: float = Field(0.95, gt=0.5, lt=1, description="confidence level of the exact interval")


class GoldConfig(Model):
    """Gold items: items with a known answer, mixed into every HIT at ``rate``, unseen by workers as such.

    Pairwise: ``degraded`` (a response against a degraded copy of itself; right: the original) or ``file``
    (JSONL ``{"id", "prompt", "better", "worse"}``; right: ``better``). Rating: ``degraded`` (its degraded
    copies; right: rated below the worker's intact responses). Arena: ``degraded`` (battles against the
    QC bot, ``arena.control``; right: the real system wins). Spot The Bot: ``human`` (human–human
    conversations; right: a speaker labelled human). Gold answers never enter a ranking or win rate; the
    exports keep them with ``is_gold`` and ``gold_answer``.
    """

    rate: float = Field(
        gt=0,
        le=0.5,
        description="share of each HIT's items that are gold (at most half: more and workers notice)",
    )
    source: Optional[GoldSource] = Field(
        None, description="what the gold items are: degraded, file or human (default: the protocol's first)"
    )
    file: Optional[Path] = Field(None, description="JSONL of gold items with source: file, relative to the study file")
    qc: GoldQcConfig = Field(default_factory=GoldQcConfig, description="when gold answers fail a worker's QC")

    @model_validator(mode="after")
    def _file_with_file_source(self) -> GoldConfig:
        if self.source == "file" and self.file is None:
            raise ValueError("gold.source is 'file', so gold.file must name the JSONL of gold items; add it")
        if self.file is not None and self.source not in (None, "file"):
            raise ValueError(f"gold.file is given but gold.source is '{self.source}'; remove one of them")
        return self

    def source_for(self, sources: tuple[str, ...]) -> str:
        """The source in force for a protocol that can make ``sources`` (the first is its default)."""
        if self.source is not None:
            return self.source
        return "file" if self.file is not None else sources[0]


def check_gold(config, proto) -> None:
    """Raise ValueError (what and where) unless ``config.gold`` suits the study's protocol ``proto``."""
    gold: GoldConfig | None = config.gold
    if gold is None:
        return
    sources = tuple(proto.gold_sources)
    if not sources:
        raise ValueError(
            f"gold: is not available for task '{config.task}'"
            + (f" ({proto.gold_note})" if proto.gold_note else "")
            + "; remove the gold: section"
        )
    source = gold.source_for(sources)
    if source not in sources:
        raise ValueError(
            f"gold.source is '{source}', which a {config.task} study cannot make; use "
            + " or ".join(f"'{s}' ({SOURCE_TEXT[s]})" for s in sources)
        )
    if source == "file" and not config.path(gold.file).is_file():
        raise ValueError(f"gold.file: {config.path(gold.file)} is not a file; give the JSONL of gold items")
