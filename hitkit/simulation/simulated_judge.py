"""The simulated LLM judge of a share plan for Spot The Bot and live chat (``hitkit plan`` with
``judge:``): assumed by the coordinator or measured on a pilot export (:class:`AssumedJudge`), how a
protocol's judge is told and printed (:class:`JudgeScale`), and the plan's line on it
(:func:`describe`, :func:`judge_line`, which pairwise's judge uses too). The plan itself is
:mod:`hitkit.simulation.judge_planning`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hitkit.errors import HitkitError


@dataclass(frozen=True)
class AssumedJudge:
    """A simulated judge of Spot The Bot or live chat: how closely it follows the crowd (``measure``:
    agreement or correlation, ``value``), its bias per system, and where these came from."""

    measure: str
    value: float
    bias: dict[str, float] = field(default_factory=dict)
    source: str = "assumed"
    measured_on: int = 0
    """Labels the value was measured on (0: assumed)."""

    @property
    def agreement(self) -> float:
        """The value, by the name pairwise's judge gives it (the CLI's JSON reads it)."""
        return self.value

    def as_json(self) -> dict[str, Any]:
        return {self.measure: self.value, "source": self.source, "bias": dict(self.bias)}


@dataclass(frozen=True)
class JudgeScale:
    """How a protocol's simulated judge (:class:`AssumedJudge`) is told and printed: its measure and the
    option that sets it, the measure's range (``low_text`` as printed) and what its ends mean, and the
    range and meaning of a bias per system."""

    measure: str
    option: str
    low: float
    low_text: str
    ends: str
    meaning: str
    bias_low: float
    bias_high: float
    bias_means: str


def assume(scale: JudgeScale, value: float, bias: dict[str, float], systems: Sequence[str]) -> AssumedJudge:
    """The judge the coordinator assumes: ``value`` of the scale's measure and a bias per system, checked."""
    if not scale.low <= value <= 1:
        raise HitkitError(f"{scale.option} {value:g} is outside [{scale.low_text}, 1]: {scale.ends}")
    unknown = sorted(set(bias) - set(systems))
    if unknown:
        raise HitkitError(
            f"--judge-bias names {', '.join(unknown)}, not a system of this study ({', '.join(sorted(systems))})"
        )
    for name, b in bias.items():
        if not scale.bias_low <= b <= scale.bias_high:
            raise HitkitError(
                f"--judge-bias {name}={b:g}: the {scale.bias_means} lies in [{scale.bias_low:g}, {scale.bias_high:g}]"
            )
    return AssumedJudge(scale.measure, value, dict(bias))


def judge_line(judge, assumed: str, measured: str, bias_words: str, biases: str) -> str:
    """The plan's line on its simulated judge: ``assumed`` or ``measured`` (by where the judge came from),
    then its bias (``biases``, listed, under ``bias_words``)."""
    head = assumed if judge.source == "assumed" else measured
    return f"{head}; {bias_words}: {biases or 'none'}."


def describe(judge: AssumedJudge, scale: JudgeScale) -> str:
    """The judge as the plan states it: ASSUMED, or measured on a pilot; and its bias."""
    return judge_line(
        judge,
        f"Simulated judge: ASSUMED {judge.measure} {judge.value:.2f} ({scale.meaning}; {scale.option}; "
        f"measure it instead with --pilot EXPORT_DIR)",
        f"Simulated judge: {judge.measure} {judge.value:.3f} ({scale.meaning}) {judge.source} "
        f"({judge.measured_on} labels)",
        f"bias ({scale.bias_means})",
        ", ".join(f"{s} {b:+.3f}" for s, b in sorted(judge.bias.items())),
    )
