"""The ChatMatch tournament: a double round-robin of bot–bot games, scored per dimension, ranked.

Every pair of systems plays two games, one started by each (:func:`double_round_robin`). In a
game each bot's turns (the starting utterance left out) are totalled per dimension
(:func:`game_totals`); the better bot on a dimension wins that dimension's game point, an equal
value gives it to neither (:func:`game_points`); the bot with more game points wins the game,
equal points draw. Systems are then ranked two ways (:func:`standings`):

- by win/tie/loss points, 3 for a win and 1 for a tie by default (football's rule; ChatMatch
  tabulates wins, ties and losses and leaves the point values open, so they are options here);
- by TrueSkill (Herbrich et al. 2006) on the games as one-versus-one matches, draws as draws,
  averaged over ``shuffles`` seeded random orders of the games, since TrueSkill depends on the order
  in which games are played.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from hitkit.analysis.trueskill_vec import DEFAULT_ENV, TrueSkillEnv, rate_sequences
from hitkit.prescreen.dimensions import TurnScores

DIMENSIONS = ("fluency", "knowledge", "proactivity", "specificity", "diversity", "consistency", "relevance")
"""The seven dimensions, in ChatMatch's order."""

LOWER_IS_BETTER = frozenset({"fluency", "diversity", "consistency"})
"""Dimensions measured as a cost: perplexity, repetition penalties, contradiction penalties."""


def double_round_robin(systems: Sequence[str]) -> list[tuple[str, str]]:
    """Every ordered pair ``(starter, opponent)``: each pair plays twice, each bot starting once."""
    if len(set(systems)) != len(systems):
        raise ValueError(f"systems must be distinct, got {list(systems)}")
    pairs = list(itertools.combinations(systems, 2))
    return pairs + [(b, a) for a, b in pairs]


def game_totals(scores: TurnScores, speakers: Sequence[int], skip_first: bool = True) -> list[dict[str, float]]:
    """Per speaker (0, 1), the seven dimension values of one game.

    As in ChatMatch's scoring, turns that Algorithm 1 penalised as repetitions are left out of
    every dimension but diversity (repeating a question must not earn proactivity). Fluency and
    specificity are means over the remaining turns; knowledge is new entities per turn (per
    exchange); proactivity, relevance and the two penalties are counts. A speaker whose every turn
    was a repetition gets the worst fluency seen in the game and specificity 0.
    """
    start = 1 if skip_first else 0
    out = []
    worst = max(scores.fluency[start:], default=0.0)
    for speaker in (0, 1):
        own = [i for i in range(start, len(speakers)) if speakers[i] == speaker]
        kept = [i for i in own if not scores.repetition[i]]
        out.append(
            {
                "fluency": float(np.mean([scores.fluency[i] for i in kept])) if kept else worst,
                "knowledge": sum(scores.knowledge[i] for i in own) / len(own) if own else 0.0,
                "proactivity": float(sum(scores.proactivity[i] for i in kept)),
                "specificity": float(np.mean([scores.specificity[i] for i in kept])) if kept else 0.0,
                "diversity": float(sum(scores.repetition[i] for i in own)),
                "consistency": float(sum(scores.contradiction[i] for i in kept)),
                "relevance": float(sum(scores.relevance[i] for i in kept)),
            }
        )
    return out


def game_points(a: dict[str, float], b: dict[str, float]) -> tuple[dict[str, int], dict[str, int]]:
    """Per dimension, 1 point to the bot with the better value, none to either on equal values."""
    pa, pb = {}, {}
    for dim in DIMENSIONS:
        x, y = (-a[dim], -b[dim]) if dim in LOWER_IS_BETTER else (a[dim], b[dim])
        pa[dim], pb[dim] = int(x > y), int(y > x)
    return pa, pb


@dataclass(frozen=True)
class GameResult:
    """One game's outcome: ``points`` are the dimensions each bot won."""

    game_id: str
    starter: str
    opponent: str
    starter_points: int
    opponent_points: int

    @property
    def outcome(self) -> str:
        """``starter``, ``opponent`` or ``draw``."""
        if self.starter_points == self.opponent_points:
            return "draw"
        return "starter" if self.starter_points > self.opponent_points else "opponent"


def trueskill_average(
    games: Sequence[GameResult], systems: Sequence[str], shuffles: int, seed: int, env: TrueSkillEnv = DEFAULT_ENV
) -> tuple[np.ndarray, np.ndarray]:
    """TrueSkill mu and sigma per system, averaged over ``shuffles`` seeded random game orders."""
    index = {s: k for k, s in enumerate(systems)}
    first, second, drawn = [], [], []
    for g in games:
        a, b = index[g.starter], index[g.opponent]
        won_by_opponent = g.outcome == "opponent"
        first.append(b if won_by_opponent else a)
        second.append(a if won_by_opponent else b)
        drawn.append(g.outcome == "draw")
    if not games:
        return np.full(len(systems), env.mu), np.full(len(systems), env.sigma)
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((shuffles, len(games))), axis=1)
    first_a, second_a, drawn_a = (np.asarray(x)[order] for x in (first, second, drawn))
    mu, sigma = rate_sequences(first_a, second_a, drawn_a, len(systems), env)
    return mu.mean(axis=0), sigma.mean(axis=0)


def standings(
    games: Sequence[GameResult],
    systems: Sequence[str],
    *,
    shuffles: int = 100,
    seed: int = 0,
    win_points: float = 3,
    tie_points: float = 1,
) -> pd.DataFrame:
    """The tournament table: one row per system, best TrueSkill first.

    Columns: system, games, wins, ties, losses, points (``win_points`` per win, ``tie_points`` per
    tie), dimension_points (game points won over all games), trueskill_mu, trueskill_sigma (means
    over the shuffles), rank_trueskill (by mu) and rank_points (by points, then dimension points);
    rank 1 = best, equal values share the lower rank.
    """
    rows: dict[str, dict[str, Any]] = {
        s: {"system": s, "games": 0, "wins": 0, "ties": 0, "losses": 0, "dimension_points": 0} for s in systems
    }
    for g in games:
        for me, mine, theirs in (
            (g.starter, g.starter_points, g.opponent_points),
            (g.opponent, g.opponent_points, g.starter_points),
        ):
            row = rows[me]
            row["games"] += 1
            row["dimension_points"] += mine
            row["wins" if mine > theirs else "losses" if mine < theirs else "ties"] += 1
    table = pd.DataFrame(list(rows.values()))
    table["points"] = table["wins"] * win_points + table["ties"] * tie_points
    mu, sigma = trueskill_average(games, systems, shuffles, seed)
    table["trueskill_mu"], table["trueskill_sigma"] = mu, sigma
    table["rank_trueskill"] = stats.rankdata(-np.round(mu, 9), method="min").astype(int)
    # Points first, dimension points break ties; rank = 1 + systems with a strictly better pair.
    keys = list(zip(table["points"], table["dimension_points"]))
    table["rank_points"] = [1 + sum(other > mine for other in keys) for mine in keys]
    columns = [
        "system",
        "games",
        "wins",
        "ties",
        "losses",
        "points",
        "dimension_points",
        "trueskill_mu",
        "trueskill_sigma",
        "rank_trueskill",
        "rank_points",
    ]
    return table[columns].sort_values(["rank_trueskill", "rank_points", "system"], ignore_index=True)
