"""The simulated LLM judge of ``hitkit plan`` for a pairwise study with ``judge:``: assumed, or measured
from a pilot's export.

The judge is described by two numbers. **Agreement** P: on an item whose crowd votes have a
majority (their mean score is not ½), the chance that one judge call names the majority's winner.
The simulated judge reads the item's majority verdict (a tie where the votes split evenly) with
probability 2P − 1 and otherwise tosses a coin between the two responses: P = 1 copies the crowd's
verdict, P = ½ is a coin, uncorrelated with people and useless to prediction-powered inference.
**Lean** per pair: how much higher the judge's win rate for the pair's first system (by name) is
than the crowd's, a judge's bias toward one system (e.g. the verbose one); each call is moved toward
that system with the probability that shifts the pair's mean by exactly that much. The judge is
called in both display orders and the two scores averaged, as :mod:`hitkit.judges.judging` does.

A pilot (:func:`from_pilot`) measures the same two numbers on a previous export, so an assumed and
a measured judge mean the same thing. The simulated crowd's votes on one item differ only by the
voters' noise (its items have no content that all voters see alike), so the judge's correlation
with the people's score comes from reading their verdict: a stand-in for a real judge reading the
responses, which is what the prediction-powered estimate needs, ρ between the two scores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hitkit.errors import HitkitError
from hitkit.simulation import simulated_judge

DEFAULT_AGREEMENT = 0.7
"""The judge's agreement with the crowd that ``hitkit plan`` assumes when neither --judge-agreement
nor --pilot says otherwise."""


@dataclass(frozen=True)
class SimulatedJudge:
    """A judge's agreement with the crowd, its lean per pair ((first, second) by name: the judge's win
    rate for first minus the crowd's) and where these came from, in words."""

    agreement: float
    lean: dict[tuple[str, str], float] = field(default_factory=dict)
    source: str = "assumed"
    measured_on: int = 0
    """Judge calls the agreement was measured on (0: assumed)."""

    def __post_init__(self):
        if not 0.5 <= self.agreement <= 1:
            raise HitkitError(
                f"judge agreement {self.agreement:g} is outside [0.5, 1]: 0.5 is a coin and "
                f"1 copies the crowd; a judge below a coin's agreement is no judge to plan with"
            )
        for pair, lean in self.lean.items():
            if not -1 <= lean <= 1:
                raise HitkitError(
                    f"the judge's lean on {pair[0]} vs {pair[1]} is {lean:g}; a difference of win rates lies in [-1, 1]"
                )


def assumed(agreement: float, bias: dict[str, float], systems: list[str]) -> SimulatedJudge:
    """The judge the coordinator assumes: ``agreement`` and a bias per system (its win rate against
    every other system that much higher than the crowd's; pairs take the difference of the two)."""
    unknown = sorted(set(bias) - set(systems))
    if unknown:
        raise HitkitError(
            f"--judge-bias names {', '.join(unknown)}, not a system of this study ({', '.join(sorted(systems))})"
        )
    names = sorted(systems)
    lean = {(a, b): bias.get(a, 0.0) - bias.get(b, 0.0) for i, a in enumerate(names) for b in names[i + 1 :]}
    lean = {pair: x for pair, x in lean.items() if x}
    return SimulatedJudge(agreement, lean, "assumed")


def majority(human: np.ndarray) -> np.ndarray:
    """Each item's crowd verdict from the mean of its votes' scores: 1 (first system), 0 or ½ (even split)."""
    return np.where(human > 0.5, 1.0, np.where(human < 0.5, 0.0, 0.5))


def calls(
    reference: np.ndarray,
    pair: np.ndarray,
    judge: SimulatedJudge,
    pairs: list[tuple[str, str]],
    rng: np.random.Generator,
) -> np.ndarray:
    """One judge call on every item: its score for the pair's first system (1, ½ or 0).

    ``reference``: the crowd's verdict the judge reads on each item (:func:`majority`); ``pair``: each
    item's index into ``pairs``. Vectorised; draws from ``rng`` only."""
    reads = rng.random(reference.size) < 2 * judge.agreement - 1
    score = np.where(reads, reference, (rng.random(reference.size) < 0.5).astype(float))
    for j, key in enumerate(pairs):
        lean = judge.lean.get(key, 0.0)
        on = pair == j
        if not lean or not on.any():
            continue
        # Move calls toward the favoured side: a call moves by (1 - s) up or s down; the chance is set so
        # that the pair's mean moves by the lean (capped at moving every call).
        room = (1 - score[on]) if lean > 0 else score[on]
        chance = min(1.0, abs(lean) / room.mean()) if room.mean() > 0 else 0.0
        moved = rng.random(on.sum()) < chance
        score[on] = np.where(moved, 1.0 if lean > 0 else 0.0, score[on])
    return score


def from_pilot(directory: str | Path, systems: list[str]) -> SimulatedJudge:
    """The judge measured on a previous export (``votes.csv`` and ``judge.csv`` in ``directory``):
    agreement, every judge call on an item whose votes have a majority against that majority's winner
    (a judge's tie disagrees); lean per pair, the mean of judge minus human score on the items people
    voted on. Both from :func:`hitkit.protocols.pairwise.judge.items`. Pairs this study does not
    compare are left out; an agreement below a coin's is taken as a coin's."""
    from hitkit.protocols.pairwise.judge import SCORE, items, read_judge
    from hitkit.protocols.pairwise.reading import read_votes

    directory = Path(directory)
    if not directory.is_dir():
        raise HitkitError(
            f"--pilot {directory}: not a folder; give the export folder of a previous study with "
            f"judge: (it holds votes.csv and judge.csv)"
        )
    for name in ("votes.csv", "judge.csv"):
        if not (directory / name).is_file() and not (directory / name).with_suffix(".parquet").is_file():
            raise HitkitError(
                f"--pilot {directory}: no {name}; give the export folder of a previous study with "
                f"judge: (it holds votes.csv and judge.csv)"
            )
    votes, judged = read_votes(directory), read_judge(directory / "judge.csv")
    per_item = items(votes, judged)
    labelled = per_item[per_item["human"].notna()]
    if labelled.empty:
        raise HitkitError(
            f"--pilot {directory}: no item has both crowd votes and a judge label; the two files "
            f"must come from the same study"
        )
    keys = [k for k in ("study", "item_id") if k in labelled.columns] + ["system_a", "system_b"]
    verdict = labelled.assign(verdict=majority(labelled["human"].to_numpy(float)))
    flip = (judged["system_a"] > judged["system_b"]).to_numpy()
    score = judged["vote"].map(SCORE).to_numpy(float)
    machine = judged.assign(
        system_a=np.where(flip, judged["system_b"], judged["system_a"]),
        system_b=np.where(flip, judged["system_a"], judged["system_b"]),
        call=np.where(flip, 1 - score, score),
    )
    for k in keys:
        machine[k] = machine[k].astype(str)
    both = verdict[verdict["verdict"] != 0.5].merge(machine[keys + ["call"]], on=keys)
    if both.empty:
        raise HitkitError(
            f"--pilot {directory}: no item people voted on has a majority verdict to compare the "
            f"judge with (every one split evenly)"
        )
    agreement = max(0.5, float((both["call"] == both["verdict"]).mean()))
    lean = labelled.assign(d=labelled["judge"] - labelled["human"]).groupby(["system_a", "system_b"])["d"].mean()
    ours = set(systems)
    lean = {(a, b): float(x) for (a, b), x in lean.items() if {a, b} <= ours and not math.isnan(x)}
    return SimulatedJudge(agreement, lean, f"measured on the pilot {directory}", len(both))


def describe(judge: SimulatedJudge) -> str:
    """The judge as the plan states it: its agreement, its lean and where they came from."""
    return simulated_judge.judge_line(
        judge,
        f"Simulated judge: ASSUMED agreement {judge.agreement:.0%} with the crowd (--judge-agreement; "
        f"measure it instead with --pilot EXPORT_DIR)",
        f"Simulated judge: agreement {judge.agreement:.1%} with the crowd {judge.source} "
        f"({judge.measured_on} judge calls on items with a majority)",
        "lean (judge's win rate minus the crowd's)",
        ", ".join(f"{a} vs {b} {x:+.3f}" for (a, b), x in sorted(judge.lean.items())),
    )
